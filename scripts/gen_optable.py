#!/usr/bin/env python3
"""gen_optable.py: the one command that writes every file restating the op table outside C, from the
table itself (core/ops.def and core/ops.c, rendered by segops_optable_json, core/optable_json.c: the
same function that renders GET /v1/info's "ops", printed with its internals by the build's
segops_optable_dump), or checks that the committed files agree with it:

  proto/optable.json                    the table as JSON (read by tests/segref.py, the tests' op lists
                                        and shape tables, and proto/examples/make_examples.py)
  proto/API.md                          the per-function request/response tables (the generated
                                        section; every function must also have its row in Formulas)
  proto/openapi.yaml                    the op, pass and model-name enums (their generated sections)
  proto/examples/<op>.<pass>.json/.msgpack   one example body per function (make_examples.py)
  clients/python/src/segops/_table.py   the Python client's table (its generated section)
  clients/c/include/segops.h, clients/c/src/typed.c   libsegops' function ids and typed functions
                                        (clients/c/gen_typed.py)
  clients/python/src/segops/errors.py   the Python client's exception classes, from the error table
                                        (proto/segops_types.h, SEGOPS_ERRNO_MAP)

--write then runs clients/python/gen_functions.py, which writes the Python client's typed functions
from its table (checked by its own CTest, python_functions_current).

  python3 scripts/gen_optable.py [--exe build/core/segops_optable_dump] --write   # after a table change
  cmake --build build --target generate                                          # the same
  python3 scripts/gen_optable.py [--exe ...] --check    # CTest optable_generated_files: exit 1 on a difference

Other generators reuse it: `table = gen_optable.load(exe)` (or json.load of the committed
proto/optable.json, which this script keeps equal to the C table) gives the parsed table: "ops" and
"passes" (wire names, in order) and "functions", one per function in ops.def's order: id, op, pass,
c_name, vec3_only, elem_reads, n_acc, n_segval, inputs [{name, shape, shape_text, use}], outputs
[{name, shape, shape_text}] (shape: the kind, E E3 G G1 M; shape_text as /v1/info says it). Needs
numpy and msgpack (the example bodies); exits 77 (skipped) without them."""
import argparse
import difflib
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GEN = "scripts/gen_optable.py"


def load(exe=None):
    """The op table (a dict, as proto/optable.json holds it) from the built dumper."""
    exe = exe or os.path.join(ROOT, "build", "core", "segops_optable_dump")
    return from_rendered(json.loads(subprocess.run([exe], check=True, capture_output=True, text=True).stdout))


def from_rendered(ops):
    """proto/optable.json's form of segops_optable_json(internals): the functions as a list in id
    order, each with every field the renderer gives (a field added there flows through), and its own
    arguments only (idx and num_segments, the same in every function, carry no kind): shape is the
    kind, shape_text what /v1/info calls shape."""
    def arg(a):
        rest = {k: v for k, v in a.items() if k not in ("name", "kind", "shape", "optional")}
        return {"name": a["name"], "shape": a["kind"], "shape_text": a["shape"], **rest}

    fns = []
    for op, by_pass in ops.items():
        for pas, f in by_pass.items():
            rest = {k: v for k, v in f.items() if k not in ("id", "c_name", "inputs", "outputs")}
            fns.append({"id": f["id"], "op": op, "pass": pas, "c_name": f["c_name"], **rest,
                        "inputs": [arg(i) for i in f["inputs"] if "kind" in i],
                        "outputs": [arg(o) for o in f["outputs"]]})
    return {"ops": list(ops), "passes": list(next(iter(ops.values()))), "functions": sorted(fns, key=lambda f: f["id"])}


def table_json(table):
    """proto/optable.json's text: one line per top-level list, one line per function."""
    lines = ["{", f'  "ops": {json.dumps(table["ops"])},', f'  "passes": {json.dumps(table["passes"])},', '  "functions": [']
    fns = table["functions"]
    for k, fn in enumerate(fns):
        lines.append("    " + json.dumps(fn) + ("," if k + 1 < len(fns) else ""))
    lines += ["  ]", "}"]
    return "\n".join(lines) + "\n"


def replace_section(text, name, body, comment="#"):
    """text with the lines between `<comment> BEGIN generated: name` and `<comment> END generated:
    name` replaced by body's lines, indented like the BEGIN line."""
    lines = text.split("\n")
    begin = [i for i, l in enumerate(lines) if l.strip().startswith(f"{comment} BEGIN generated: {name}")]
    end = [i for i, l in enumerate(lines) if l.strip().startswith(f"{comment} END generated: {name}")]
    if len(begin) != 1 or len(end) != 1 or end[0] < begin[0]:
        raise SystemExit(f"{GEN}: no single generated section '{name}' in the file")
    indent = lines[begin[0]][: len(lines[begin[0]]) - len(lines[begin[0]].lstrip())]
    new = [indent + l if l else l for l in body.rstrip("\n").split("\n")]
    return "\n".join(lines[: begin[0] + 1] + new + lines[end[0] :])


USE_CONST = {"required": "REQ", "cotangent": "COT", "unread": "UNR"}


def _forward(table, op):
    return next(f for f in table["functions"] if f["op"] == op and f["pass"] == table["passes"][0])


def py_tuple(items):
    """A Python tuple of already-written items: (a, b) or (a,)."""
    return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"


def client_table(table):
    """The generated section of clients/python/src/segops/_table.py."""
    lead = {"E": "N", "E3": "N", "G": "S", "G1": "S", "G1F": "S", "M": "S"}
    trailing = {"E": "w", "G": "w", "E3": "3", "G1": "", "G1F": "", "M": "3x3"}
    q = json.dumps
    out = [f"PASSES = {py_tuple([q(p) for p in table['passes']])}", "", "# op -> (forward input names, vec3_only)"]
    out.append("OPS = {")
    for op in table["ops"]:
        fwd = _forward(table, op)
        out.append(f'    {q(op)}: ({py_tuple([q(i["name"]) for i in fwd["inputs"]])}, {fwd["vec3_only"]}),')
    out += ["}", "", "# (op, pass) -> (((input name, use), ...), (output name, ...))", "FUNCS = {"]
    for fn in table["functions"]:
        ins = py_tuple([f'({q(i["name"])}, {USE_CONST[i["use"]]})' for i in fn["inputs"]])
        outs = py_tuple([q(o["name"]) for o in fn["outputs"]])
        line = f'    ({q(fn["op"])}, {q(fn["pass"])}): ({ins}, {outs}),'
        if len(line) > 110:
            line = f'    ({q(fn["op"])}, {q(fn["pass"])}): (\n        {ins},\n        {outs},\n    ),'
        out.append(line)
    out += ["}", "", "# Shapes, as segops.torch's fake (meta) implementations and vmap rules need them.",
            '# op -> {forward input: its leading dimension, "N" (elements) or "S" (segments)}', "LEADS = {"]
    for op in table["ops"]:
        fwd = _forward(table, op)
        leads = ", ".join(f'{q(i["name"])}: "{lead[i["shape"]]}"' for i in fwd["inputs"])
        out.append(f"    {q(op)}: {{{leads}}},")
    out += ["}", "# op -> (leading dimension of the forward's `out`, the forward input whose trailing",
            "# dimensions `out` has, or None for none): e.g. sum's out is (S,) + x.shape[1:].", "OUT_SHAPE = {"]
    for op in table["ops"]:
        fwd = _forward(table, op)
        o = fwd["outputs"][0]["shape"]
        src = next((i["name"] for i in fwd["inputs"] if trailing[o] and trailing[i["shape"]] == trailing[o]), None)
        out.append(f'    {q(op)}: ("{lead[o]}", {q(src) if src else None}),')
    out.append("}")
    return "\n".join(out) + "\n"


def openapi_sections(table):
    models = [f"{f['op']}_{f['pass']}" for f in table["functions"]]
    return {
        "ops": "enum: [" + ", ".join(table["ops"]) + "]",
        "passes": "enum: [" + ", ".join(table["passes"]) + "]",
        "models": "enum:\n" + "\n".join(f"  - {m}" for m in models),
    }


API_BEGIN = "<!-- BEGIN generated op table: python3 scripts/gen_optable.py --write -->\n"
API_END = "<!-- END generated op table -->\n"
API_USE = {"required": "required", "cotangent": "optional: zeros when omitted",
           "unread": "optional: not read, validated when given"}


def api_tables(table):
    """proto/API.md's generated section: per op, per pass, the request and response table."""
    fns = {(f["op"], f["pass"]): f for f in table["functions"]}
    out = [API_BEGIN]
    for op in table["ops"]:
        out.append(f"\n### {op}\n")
        for pas in table["passes"]:
            fn = fns[(op, pas)]
            out.append(f"\n`POST /v1/{op}/{pas}`\n\n| | name | shape | dtype | |\n|---|---|---|---|---|\n")
            out += [f"| in | `{i['name']}` | {i['shape_text']} | float32 or float64 | {API_USE[i['use']]} |\n"
                    for i in fn["inputs"]]
            out.append("| in | `idx` | (N,) | int32 or int64 | required |\n")
            out.append("| in | `num_segments` | integer | | required: S >= 0 |\n")
            out += [f"| out | `{o['name']}` | {o['shape_text']} | the inputs' | returned unless `outputs` leaves "
                    "it out |\n" for o in fn["outputs"]]
    out.append("\n" + API_END)
    return "".join(out)


def api_doc(text, table):
    """proto/API.md with its generated section from the table (the text between the markers,
    markers included, whatever their first line said before)."""
    b = text.find("<!-- BEGIN generated op table")
    e = text.find(API_END, b)
    if b < 0 or e < 0:
        raise SystemExit(f"{GEN}: proto/API.md: the generated op table's markers are not found")
    return text[:b] + api_tables(table) + text[e + len(API_END):]


def missing_formulas(text, table):
    """The functions without their row "| `op/pass` | ..." in proto/API.md's "## Formulas" section."""
    sec = text.find("\n## Formulas\n")
    end = text.find("\n## ", sec + 1)
    if sec < 0:
        return ["the section \"## Formulas\""]
    body = text[sec:end if end >= 0 else len(text)]
    return [f"{f['op']}/{f['pass']}" for f in table["functions"] if f"\n| `{f['op']}/{f['pass']}` | " not in body]


# The error table's wire codes whose Python class is not their camel case (which would shadow or
# read as a builtin), and the builtin exception each client-side failure also is.
ERROR_NAMES = {"connection_error": "SegopsConnectionError", "timeout": "SegopsTimeout",
               "not_implemented": "Unimplemented"}
ERROR_BASES = {"connection_error": "ConnectionError", "timeout": "TimeoutError"}


def error_rows():
    """[(wire code, HTTP status, generic message)] of proto/segops_types.h's SEGOPS_ERRNO_MAP, in its
    order (a wire code shared by several values: its first row)."""
    import re

    macro = read("proto/segops_types.h").split("SEGOPS_ERRNO_MAP(X)", 1)[1].split("\n\n")[0]
    rows = re.findall(r'X\(\w+, -\d+, "(\w+)", (\d+), "([^"]*)"\)', macro)
    if not rows:
        raise SystemExit(f"{GEN}: no SEGOPS_ERRNO_MAP rows in proto/segops_types.h")
    seen = {}
    for code, status, msg in rows:
        seen.setdefault(code, (code, int(status), msg))
    return list(seen.values())


def errors_section():
    """The generated section of clients/python/src/segops/errors.py: one class per wire code, and the
    maps error_for reads."""
    out, names = [], []
    for code, status, msg in error_rows():
        name = ERROR_NAMES.get(code) or "".join(w.capitalize() for w in code.split("_"))
        bases = ", ".join(["SegopsError"] + ([ERROR_BASES[code]] if code in ERROR_BASES else []))
        where = f"HTTP {status}" if status else "status 0: the client's own, no answer"
        out += [f"class {name}({bases}):", f'    """{code} ({where}): {msg}."""', "",
                f'    code_name = "{code}"', "", ""]
        names.append((code, status, name))
    out.append("# the daemon's wire codes -> class (another code, or a client-side one, in an answer: SegopsError)")
    out += ["_BY_CODE = {"] + [f'    "{c}": {n},' for c, s, n in names if s] + ["}"]
    out.append("# HTTP status -> the wire code of its first row, for an error answer that names none (a proxy's page)")
    by_status = {}
    for c, s, n in names:
        if s:
            by_status.setdefault(s, c)
    out += ["_BY_STATUS = {"] + [f'    {s}: "{c}",' for s, c in sorted(by_status.items())] + ["}"]
    return "\n".join(out) + "\n"


def targets(table):
    """{path relative to the root: the bytes it must hold}."""
    t = {"proto/optable.json": table_json(table).encode()}
    p = "clients/python/src/segops/_table.py"
    t[p] = replace_section(read(p), "client table", client_table(table)).encode()
    p, text = "proto/openapi.yaml", read("proto/openapi.yaml")
    for name, body in openapi_sections(table).items():
        text = replace_section(text, name, body)
    t[p] = text.encode()
    t["proto/API.md"] = api_doc(read("proto/API.md"), table).encode()
    p = "clients/python/src/segops/errors.py"
    t[p] = replace_section(read(p), "error table", errors_section()).encode()
    sys.path.insert(0, os.path.join(ROOT, "clients", "c"))
    import gen_typed  # noqa: E402 (clients/c: libsegops' function ids and typed functions)

    for rel, text in gen_typed.texts(table).items():
        t[rel] = text.encode()
    sys.path.insert(0, os.path.join(ROOT, "proto", "examples"))
    import make_examples  # noqa: E402 (proto/examples: the cases, and the bodies' encoding)

    for name, data in make_examples.bodies_of(table).items():
        t[f"proto/examples/{name}"] = data
    return t


def read(rel):
    with open(os.path.join(ROOT, rel), encoding="utf-8") as f:
        return f.read()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--exe", help="segops_optable_dump (default build/core/segops_optable_dump)")
    mode = ap.add_mutually_exclusive_group(required=True)
    mode.add_argument("--write", action="store_true", help="rewrite the files that differ")
    mode.add_argument("--check", action="store_true", help="exit 1 when a committed file differs")
    mode.add_argument("--json", action="store_true", help="print the table as proto/optable.json holds it")
    args = ap.parse_args()
    table = load(args.exe)
    if args.json:
        sys.stdout.write(table_json(table))
        return 0
    try:
        import msgpack  # noqa: F401
        import numpy  # noqa: F401
    except ImportError as e:
        print(f"{GEN}: {e}: skipped (the example bodies need numpy and msgpack)")
        return 77
    differ = []
    for rel, data in sorted(targets(table).items()):
        path = os.path.join(ROOT, rel)
        old = open(path, "rb").read() if os.path.exists(path) else None
        if old == data:
            continue
        differ.append(rel)
        if args.write:
            with open(path, "wb") as f:
                f.write(data)
        elif old is not None and not rel.endswith(".msgpack"):
            sys.stdout.writelines(difflib.unified_diff(old.decode().splitlines(True), data.decode().splitlines(True),
                                                       f"{rel} (committed)", f"{rel} (from the table)", n=1))
    for rel in differ:
        print(f"{'rewrote' if args.write else 'differs from the op table'}: {rel}")
    wanted = targets(table)
    for name in sorted(os.listdir(os.path.join(ROOT, "proto", "examples"))):
        rel = f"proto/examples/{name}"
        if name.endswith((".json", ".msgpack")) and rel not in wanted:
            differ.append(rel)
            print(f"an example of no function of the table (remove it): {rel}")
    missing = missing_formulas(read("proto/API.md"), table)
    for name in missing:
        print(f"proto/API.md: the Formulas section has no row for {name} (written by hand, not generated)")
    gen_functions = os.path.join(ROOT, "clients", "python", "gen_functions.py")
    if args.write and os.path.exists(gen_functions):
        subprocess.run([sys.executable, gen_functions], check=True)
    if args.check and differ:
        print(f"{len(differ)} file(s) disagree with core/ops.def, core/ops.c and proto/segops_types.h: run python3 {GEN} --write")
    if missing or (args.check and differ):
        return 1
    print(f"{GEN}: {'wrote ' + str(len(differ)) if args.write else 'checked'} files, the op table's "
          f"{len(table['functions'])} functions")
    return 0


if __name__ == "__main__":
    sys.exit(main())

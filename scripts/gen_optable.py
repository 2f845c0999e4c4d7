#!/usr/bin/env python3
"""gen_optable.py: writes what restates the op table outside C from the table itself (core/ops.def
and core/ops.c, printed as JSON by the build's segops_optable_json), or checks that the committed
files agree with it:

  proto/optable.json                    the table as JSON (read by tests/segref.py, the tests' shape
                                        tables, and proto/examples/make_examples.py)
  clients/python/src/segops/_table.py   the client's table (its generated section)
  proto/openapi.yaml                    the op, pass and model-name enums (their generated sections)
  proto/examples/<op>.<pass>.json/.msgpack   one example body per function (make_examples.py)

--write then runs clients/python/gen_functions.py, which writes the client's typed functions from
its table (checked by its own CTest, python_functions_current).

  python3 scripts/gen_optable.py [--exe build/core/segops_optable_json] --write   # after a table change
  python3 scripts/gen_optable.py [--exe ...] --check    # CTest optable_generated_files: exit 1 on a difference

Other generators reuse it: `table = gen_optable.load(exe)` (or json.load of the committed
proto/optable.json, which this script keeps equal to the C table) gives the parsed table; see
segops_optable_json (core/optable_json.c) for its fields. Needs numpy and msgpack (the example
bodies); exits 77 (skipped) without them."""
import argparse
import difflib
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GEN = "scripts/gen_optable.py"


def load(exe=None):
    """The op table (a dict, as segops_optable_json prints it) from the built dumper."""
    exe = exe or os.path.join(ROOT, "build", "core", "segops_optable_json")
    return json.loads(subprocess.run([exe], check=True, capture_output=True, text=True).stdout)


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


def targets(table):
    """{path relative to the root: the bytes it must hold}."""
    t = {"proto/optable.json": table_json(table).encode()}
    p = "clients/python/src/segops/_table.py"
    t[p] = replace_section(read(p), "client table", client_table(table)).encode()
    p, text = "proto/openapi.yaml", read("proto/openapi.yaml")
    for name, body in openapi_sections(table).items():
        text = replace_section(text, name, body)
    t[p] = text.encode()
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
    ap.add_argument("--exe", help="segops_optable_json (default build/core/segops_optable_json)")
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
    gen_functions = os.path.join(ROOT, "clients", "python", "gen_functions.py")
    if args.write and os.path.exists(gen_functions):
        subprocess.run([sys.executable, gen_functions], check=True)
    if args.check and differ:
        print(f"{len(differ)} file(s) disagree with core/ops.def and core/ops.c: run python3 {GEN} --write")
        return 1
    print(f"{GEN}: {'wrote ' + str(len(differ)) if args.write else 'checked'} files, the op table's "
          f"{len(table['functions'])} functions")
    return 0


if __name__ == "__main__":
    sys.exit(main())

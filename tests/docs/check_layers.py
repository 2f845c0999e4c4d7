#!/usr/bin/env python3
"""check_layers.py: the include graph of the C sources against the layer order of STYLE.md.

Every `#include "..."` of a C, CUDA or .def file in the tree is resolved as the compiler finds it
here: relative to the including file's folder, else the one file of the tree with that name (a
name two files share is an error: includes find headers by name). An edge joins the two files'
folders. It fails on:
  - an include upward in the layer order: proto/ includes only proto/; core/ only proto/ and
    core/; backends/ only those and backends/;
  - an include between the two sides: server/ into clients/ or clients/ into server/;
  - a cycle between folders: folder A includes a header of B while B (or a folder B reaches)
    includes one of A. tests/, bench/ and examples/ sit on top and may include any layer;
  - the native channel's mechanics written outside proto/: futex calls and SCM_RIGHTS in the code
    (not the comments) of server/ or clients/, which take them from proto/segops_chan.h, the one
    copy both ends share (tests/ keep their own: an independent reading of the contract).

  tests/docs/check_layers.py [--selftest] [ROOT]     exit 1 with each violation listed
"""
import argparse
import os
import pathlib
import re
import sys
import tempfile

SUFFIXES = {".c", ".h", ".cu", ".cuh", ".def", ".cc", ".cpp"}
SKIP = {".git", ".venv", "build", "node_modules"}
INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.M)
# What each bottom layer may include (layers are a folder's first component).
BELOW = {"proto": ("proto",), "core": ("proto", "core"), "backends": ("proto", "core", "backends")}
SIDES = ("server", "clients")
MECHANICS = re.compile(r"\b(SYS_futex|FUTEX_WAIT|FUTEX_WAKE|SCM_RIGHTS)\b")
COMMENT = re.compile(r"/\*.*?\*/|//[^\n]*", re.S)


def sources(root):
    """The C sources under root, relative to it; hidden folders and build trees are not walked."""
    for d, dirs, files in os.walk(root):
        dirs[:] = sorted(x for x in dirs if x not in SKIP and not x.startswith((".", "build")))
        for f in sorted(files):
            if os.path.splitext(f)[1] in SUFFIXES:
                yield (pathlib.Path(d) / f).relative_to(root)


def edges(root):
    """(from_file, to_file) for every quoted include that resolves; errors for those that are ambiguous."""
    files = list(sources(root))
    by_name = {}
    for f in files:
        by_name.setdefault(f.name, []).append(f)
    out, errors = [], []
    for f in files:
        for name in INCLUDE.findall((root / f).read_text(errors="replace")):
            near = f.parent / name
            if (root / near).is_file():
                out.append((f, pathlib.Path(*pathlib.PurePath(near).parts)))
                continue
            hits = by_name.get(pathlib.PurePath(name).name, [])
            if len(hits) > 1:
                errors.append(f'{f}: #include "{name}" names {len(hits)} files: {", ".join(map(str, hits))}')
            elif hits:
                out.append((f, hits[0]))
    return out, errors


def top(folder):
    return folder.parts[0] if folder.parts else ""


def layer_errors(pairs):
    errors = []
    for src, dst in pairs:
        a, b = top(src.parent), top(dst.parent)
        if a in BELOW and b not in BELOW[a]:
            errors.append(f'{src} includes {dst}: {a}/ may include only {", ".join(x + "/" for x in BELOW[a])}')
        if a in SIDES and b in SIDES and a != b:
            errors.append(f"{src} includes {dst}: server/ and clients/ share only proto/ and the layers below")
    return errors


def cycle_errors(pairs):
    """Each strongly connected set of folders (Tarjan), with the includes that close it."""
    graph, why = {}, {}
    for src, dst in pairs:
        a, b = src.parent, dst.parent
        if a != b:
            graph.setdefault(a, set()).add(b)
            graph.setdefault(b, set())
            why.setdefault((a, b), (src, dst))
    index, low, stack, on, comps = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                comps.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    errors = []
    for comp in comps:
        inside = sorted((a, b) for (a, b) in why if a in comp and b in comp)
        lines = [f"  {why[e][0]} -> {why[e][1]}" for e in inside]
        errors.append(f"folders that include each other: {', '.join(str(c) + '/' for c in comp)}\n" + "\n".join(lines))
    return errors


def mechanics_errors(root):
    """Futex and descriptor-passing code in server/ or clients/ (proto/segops_chan.h has the one copy)."""
    errors = []
    for f in sources(root):
        if top(f) not in SIDES:
            continue
        code = COMMENT.sub(" ", (root / f).read_text(errors="replace"))
        for name in sorted(set(MECHANICS.findall(code))):
            errors.append(f"{f} uses {name}: the channel's mechanics are proto/segops_chan.h's (segops_chan_*)")
    return errors


def check(root):
    pairs, errors = edges(root)
    return errors + layer_errors(pairs) + cycle_errors(pairs) + mechanics_errors(root), len(pairs)


SAMPLE = {  # a made-up tree: each rule broken once, and includes that are fine
    "proto/p.h": "",
    "core/c.h": '#include "p.h"\n#include "cl.h"\n',
    "backends/cpu/b.c": '#include "c.h"\n#include "p.h"\n',
    "server/a/a.h": '#include "b.h"\n#include "c.h"\n',
    "server/b/b.h": '#include "x.h"\n',
    "server/x/x.h": '#include "a.h"\n',
    "server/s.c": '#include "cl.h"\n',
    "clients/cl.h": '#include "p.h"\n',
    "tests/t.c": '#include "a.h"\n#include "cl.h"\n#define W FUTEX_WAKE\n',
    "clients/w.c": '/* SCM_RIGHTS, in a comment */\nint w(int *u) { return syscall(SYS_futex, u); }\n',
}


def selftest():
    with tempfile.TemporaryDirectory() as tmp:
        for rel, text in SAMPLE.items():
            p = pathlib.Path(tmp) / rel
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(text)
        errors, n = check(pathlib.Path(tmp))
    text = "\n".join(errors)
    want = ["core/c.h includes clients/cl.h", "server/s.c includes clients/cl.h",
            "folders that include each other: server/a/, server/b/, server/x/", "clients/w.c uses SYS_futex"]
    ok = n == 12 and len(errors) == 4 and all(w in text for w in want)
    if not ok:
        print(f"selftest failed: {n} includes, errors:\n{text}")
    return ok


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("root", nargs="?", default=str(pathlib.Path(__file__).resolve().parents[2]))
    ap.add_argument("--selftest", action="store_true")
    args = ap.parse_args()
    if args.selftest and not selftest():
        return 1
    errors, n = check(pathlib.Path(args.root))
    for e in errors:
        print(e)
    print(f"{len(errors)} layer violation(s) in {n} includes" if errors else
          f"no layer violation in {n} includes")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())

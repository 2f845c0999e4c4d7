#!/usr/bin/env python3
"""function_lengths.py: lists the C and CUDA functions over a line limit in the daemon, the core, the backends and
the clients (libsegops and the Python extension).

A brace-counting scan (comments, strings, character literals and preprocessor lines are blanked
first): a top-level `{` right after a `)` opens a function, its matching `}` closes it, and its
length is the lines from the first line of its signature to that `}` (CUDA's __launch_bounds__(...)
is an attribute, not the function's name). A function may be longer
when a comment in the three lines above its signature says why, starting with
`long-function:` (STYLE: functions that read top to bottom; each exception named with its reason).

  scripts/function_lengths.py [--limit N] [--check] [--all] [ROOT]

--check exits 1 when a function is over the limit without a reason (the CTest style_function_length).
--all lists every function, longest first (to find the next ones to split).
--selftest first scans a made-up file (braces in comments, strings, macros; a long function with and
without a reason) and exits 1 unless the scan measures it right.
"""
import argparse
import pathlib
import re
import sys

AREAS = ("server", "core", "backends/cpu", "backends/cuda", "clients")
MARK = "long-function:"
ATTRIBUTES = {"__launch_bounds__", "__attribute__"}  # name( ... ) before a function's name


def blank(text):
    """text with comments, string and char literals and preprocessor lines replaced by spaces (newlines kept)."""
    out, i, n = [], 0, len(text)
    line_start = True
    while i < n:
        c = text[i]
        if line_start and c in " \t":
            out.append(c)
            i += 1
            continue
        if line_start and c == "#":  # a directive, with its continuation lines
            while i < n and text[i] != "\n":
                if text[i] == "\\" and i + 1 < n and text[i + 1] == "\n":
                    out.append(" \n")
                    i += 2
                    continue
                out.append(" ")
                i += 1
            continue
        line_start = False
        if text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
            continue
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
            continue
        if c in "\"'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
            out.append(c + re.sub(r"[^\n]", " ", text[i + 1:j - 1]) + c)
            i = j
            continue
        if c == "\n":
            line_start = True
        out.append(c)
        i += 1
    return "".join(out)


def unparen(s):
    """s without its parenthesised groups."""
    while True:
        t = re.sub(r"\([^()]*\)", "", s)
        if t == s:
            return s
        s = t


def functions(path):
    """Yields (name, first line, last line, reason or None) for each function defined in path."""
    raw = path.read_text(errors="replace")
    lines = raw.split("\n")
    text = blank(raw)
    depth, start = 0, 0  # start: offset after the last top-level ';' or '}'
    i = 0
    while i < len(text):
        c = text[i]
        if c == "{" and depth == 0:
            head = text[start:i]
            stripped = head.rstrip()
            m = None
            for m in re.finditer(r"([A-Za-z_]\w*)\s*\(", head) if stripped.endswith(")") else ():
                if m.group(1) not in ATTRIBUTES:
                    break
            depth, j = 1, i + 1
            while j < len(text) and depth:
                depth += {"{": 1, "}": -1}.get(text[j], 0)
                j += 1
            if m and "=" not in unparen(head[: m.start()]):  # not an initializer (an attribute's arguments aside)
                first = text.count("\n", 0, start + len(head) - len(head.lstrip())) + 1
                last = text.count("\n", 0, j - 1) + 1
                above = "\n".join(lines[max(0, first - 4) : first - 1] + [lines[first - 1]])
                k = above.find(MARK)
                reason = above[k + len(MARK) :].strip().split("*/")[0].strip() if k >= 0 else None
                yield m.group(1), first, last, reason
            i, start = j, j
            continue
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
        elif c == ";" and depth == 0:
            start = i + 1
        i += 1


SAMPLE = """/* a { comment */
#define BODY(x) { x; }
struct s { int a; };
static const int T[] = {1, 2};
static int short_one(int a) { return a; }
__global__ void __launch_bounds__(256, A == 2 ? 1 : 2) long_one(int a)
{
  const char *s = "}}}";
  char c = '{';
%s  return a + s[0] + c;
}
/* long-function: a made-up reason */
static int excused(void) {
%s  return 0;
}
"""


def selftest(limit):
    """The scan on SAMPLE: every function found, the long ones measured and the reason read."""
    import tempfile
    body = "  a++;\n" * limit
    with tempfile.NamedTemporaryFile("w", suffix=".c", delete=False) as f:
        f.write(SAMPLE % (body, body))
    got = {name: (last - first + 1, reason) for name, first, last, reason in functions(pathlib.Path(f.name))}
    pathlib.Path(f.name).unlink()
    want = {"short_one": (1, None), "long_one": (limit + 6, None), "excused": (limit + 3, "a made-up reason")}
    if got != want:
        print(f"selftest failed: scanned {got}, expected {want}")
        return False
    return True


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("root", nargs="?", default=str(pathlib.Path(__file__).resolve().parent.parent))
    ap.add_argument("--limit", type=int, default=100)
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--all", action="store_true")
    ap.add_argument("--selftest", action="store_true")
    args = ap.parse_args()
    if args.selftest and not selftest(args.limit):
        return 1
    root = pathlib.Path(args.root)
    found = []
    for area in AREAS:
        for p in sorted((root / area).rglob("*")):
            if p.suffix in (".c", ".h", ".cu", ".cuh") and p.is_file():
                for name, first, last, reason in functions(p):
                    found.append((last - first + 1, str(p.relative_to(root)), first, name, reason))
    found.sort(key=lambda f: (-f[0], f[1], f[2]))
    bad = 0
    for n, rel, first, name, reason in found:
        over = n > args.limit
        if not (over or args.all):
            continue
        if over and not reason:
            bad += 1
        tag = "" if not over else f"  (exception: {reason})" if reason else "  OVER THE LIMIT"
        print(f"{n:5d}  {rel}:{first}  {name}{tag}")
    if args.check:
        print(f"{bad} function(s) over {args.limit} lines without a reason" if bad else
              f"no function over {args.limit} lines without a reason ({len(found)} functions)")
    return 1 if args.check and bad else 0


if __name__ == "__main__":
    sys.exit(main())

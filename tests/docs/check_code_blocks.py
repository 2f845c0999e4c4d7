#!/usr/bin/env python3
"""check_code_blocks.py: every fenced code block of a Markdown document either runs, and prints what
it says it prints, or says why it does not run.

    check_code_blocks.py SEGOPSD PYTHON REPO_ROOT DOC.md [DOC.md ...]

A block's first line `# not run: REASON` exempts it (the reason must say something). Every other
block must be `sh` or `python` and runs: against a real segopsd this script starts on a free port
(`localhost:8080`, `127.0.0.1:8080` and any other `:8080` in the block are rewritten to that port;
blocks that start daemons of their own get the same free port), in a scratch directory, with
`build/server/segopsd` meaning SEGOPSD, `clients/`, `proto/` and `scripts/` the repository's
folders, `python3` and `$PY` meaning PYTHON, and the client importable from the source tree. A
whole-line comment `# TEXT` after the first line is output the block must print (compared with
runs of spaces collapsed). A Python block that needs a module PYTHON lacks (torch) is skipped, and
the whole check then exits 77 (SKIP) after running everything else; any failure exits 1."""
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from segopsd_proc import Daemon  # noqa: E402

FENCE = re.compile(r"^```(\S*)\s*$")


def blocks(path):
    """(line number, language, text) of each fenced block."""
    out, lang, start, buf = [], None, 0, []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            m = FENCE.match(line.rstrip("\n"))
            if m and lang is None:
                lang, start, buf = m.group(1) or "(none)", n, []
            elif m and line.strip() == "```":
                out.append((start, lang, "".join(buf)))
                lang = None
            elif lang is not None:
                buf.append(line)
    return out


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def normal(text):
    return " ".join(text.split())


def expected_lines(text):
    """Whole-line comments after the first line: output the block promises."""
    return [normal(l.strip()[2:]) for l in text.splitlines()[1:] if l.strip().startswith("# ")]


def rewrite(text, root, segopsd, python, port):
    text = re.sub(r"(localhost|127\.0\.0\.1):8080", f"127.0.0.1:{port}", text)
    text = text.replace(":8080", f":{port}")
    text = text.replace("build/server/segopsd", segopsd)
    text = re.sub(r"(?<![\w/.])(clients|proto|scripts)/", root + r"/\1/", text)
    return re.sub(r"(?<![\w/.])python3(?=\s)", python, text)


def run_block(lang, text, env, cwd):
    if lang == "sh":
        argv = ["bash", "-e", "-o", "pipefail", "-c", text]
    else:
        argv = [env["PY"], "-c", text]
    p = subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         start_new_session=True)
    try:
        out, err = p.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        out, err = "", "timed out after 120 s"
    finally:
        try:
            os.killpg(p.pid, signal.SIGKILL)  # daemons a block started and left behind
        except ProcessLookupError:
            pass
        p.wait()
    return p.returncode, out, err


def main():
    segopsd, python, root = (os.path.abspath(a) for a in sys.argv[1:4])
    docs = sys.argv[4:]
    failures, skipped, ran = [], [], 0
    # (SEGOPS_NATIVE_LIB: the build's Python extension, which the Python blocks use)
    env = {k: v for k, v in os.environ.items() if not k.startswith("SEGOPS_") or k == "SEGOPS_NATIVE_LIB"}
    env.update(PY=python, PYTHONPATH=os.path.join(root, "clients", "python", "src"))
    daemon = Daemon(segopsd)
    try:
        for doc in docs:
            for line, lang, text in blocks(os.path.join(root, doc)):
                where = f"{doc}:{line}"
                first = text.splitlines()[0] if text.strip() else ""
                if first.startswith("# not run:"):
                    if len(first[len("# not run:"):].strip()) < 10:
                        failures.append(f"{where}: `not run:` without a reason")
                    continue
                if lang not in ("sh", "python"):
                    failures.append(f"{where}: a ```{lang} block neither runs nor says `# not run: REASON`")
                    continue
                if lang == "python" and re.search(r"^import torch|^import .*\btorch\b", text, re.M):
                    if subprocess.run([python, "-c", "import torch"], capture_output=True).returncode:
                        skipped.append(f"{where}: no torch in {python}")
                        continue
                port = daemon.port if re.search(r"(localhost|127\.0\.0\.1):8080", text) and \
                    "build/server/segopsd" not in text else free_port()
                with tempfile.TemporaryDirectory() as cwd:
                    rc, out, err = run_block(lang, rewrite(text, root, segopsd, python, port), env, cwd)
                ran += 1
                printed = [normal(l) for l in out.splitlines()]
                missing = [e for e in expected_lines(text) if not any(e in p for p in printed)]
                if rc != 0 or missing:
                    failures.append(f"{where}: exit {rc}; missing output {missing}\n--- stdout:\n{out[-2000:]}"
                                    f"\n--- stderr:\n{err[-2000:]}")
                else:
                    print(f"ok: {where} ({lang}, {len(expected_lines(text))} promised line(s) printed)")
    finally:
        daemon.stop_and_check()
    for f in failures:
        print("FAIL:", f)
    for s in skipped:
        print("SKIP:", s)
    print(f"{ran} block(s) run, {len(failures)} failure(s), {len(skipped)} skipped")
    if failures:
        return 1
    return 77 if skipped else 0


if __name__ == "__main__":
    if not shutil.which("curl"):
        print("SKIP: no curl")
        sys.exit(77)
    sys.exit(main())

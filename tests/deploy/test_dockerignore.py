#!/usr/bin/env python3
"""test_dockerignore.py: the image's build context leaves local build trees out.

`docker build -f deploy/Dockerfile -t segops .` sends the repository root as its context and the
build stage copies it whole (COPY . /src), then configures with CMake. A build/ made by the README's
quick start carries a CMakeCache.txt of another path, and CMake stops on it ("CMakeCache.txt
directory ... is different"). There is no Docker engine in CI, so this copies the tree as the
context would, applying .dockerignore with a small matcher (*, ?, ** and a leading or trailing /;
anything else it does not know fails the test rather than being guessed), with a build/ and a .venv/
planted as a user's tree has them, checks they stayed out, and runs the image's CMake configure
(scripts/build.sh's, with the Dockerfile's options; CUDA off, which the context does not change) in
the copy.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def pattern_regex(pat):
    """A .dockerignore pattern as a regex over '/'-separated paths relative to the context (Docker
    cleans a pattern as a path: a leading or trailing / means nothing)."""
    if pat.startswith("!"):
        fail(f".dockerignore: '{pat}': exceptions (!) are not supported by this test's matcher")
    bad = set(pat) & set("[]\\{}")
    if bad:
        fail(f".dockerignore: '{pat}': {''.join(sorted(bad))} is not supported by this test's matcher")
    parts = [p for p in pat.strip("/").split("/") if p not in ("", ".")]
    if not parts or ".." in parts:
        fail(f".dockerignore: '{pat}' is not a pattern this test's matcher knows")
    out = []
    for i, part in enumerate(parts):
        if part == "**":
            out.append("(?:[^/]+/)*" if i < len(parts) - 1 else ".*")
            continue
        if "**" in part:
            fail(f".dockerignore: '{pat}': ** inside a name is not supported by this test's matcher")
        rx = "".join("[^/]*" if ch == "*" else "[^/]" if ch == "?" else re.escape(ch) for ch in part)
        out.append(rx + ("/" if i < len(parts) - 1 else ""))
    return re.compile("".join(out) + r"\Z")


def load(path):
    pats = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line and not line.startswith("#"):
                pats.append(pattern_regex(line))
    return pats


def ignored(rel, pats):
    """Docker leaves out a path that a pattern matches, or whose folder one matches."""
    parts = rel.split("/")
    for k in range(1, len(parts) + 1):
        prefix = "/".join(parts[:k])
        if any(p.match(prefix) for p in pats):
            return True
    return False


def copy_context(roots, dest, pats):
    """The union of roots (later ones planted over earlier ones) into dest, without what pats
    leave out; returns how many files were copied."""
    n = 0
    for root in roots:
        for dirpath, dirnames, filenames in os.walk(root):
            rel_dir = os.path.relpath(dirpath, root)
            rel_dir = "" if rel_dir == "." else rel_dir.replace(os.sep, "/")
            dirnames[:] = [d for d in dirnames if not ignored(f"{rel_dir}/{d}".lstrip("/"), pats)]
            for name in filenames:
                rel = f"{rel_dir}/{name}".lstrip("/")
                if ignored(rel, pats):
                    continue
                src = os.path.join(dirpath, name)
                dst = os.path.join(dest, rel)
                os.makedirs(os.path.dirname(dst), exist_ok=True)
                if os.path.islink(src):
                    os.symlink(os.readlink(src), dst)
                elif os.path.isfile(src):
                    shutil.copy2(src, dst)
                    n += 1
    return n


def self_check():
    """The matcher on cases whose Docker answers are known."""
    cases = [
        ("build*/", "build/CMakeCache.txt", True),
        ("build*/", "build-asan", True),
        ("build*/", "scripts/build.sh", False),
        ("**/__pycache__/", "clients/python/src/segops/__pycache__/x.pyc", True),
        ("**/__pycache__/", "__pycache__", True),
        ("bench/out/", "bench/out/run.txt", True),
        ("bench/out/", "bench/outside.py", False),
        ("/.venv", ".venv/bin/python", True),
        ("a/?.c", "a/b.c", True),
        ("a/?.c", "a/bc.c", False),
        ("*.so", "lib/x.so", False),
    ]
    for pat, path, want in cases:
        if ignored(path, [pattern_regex(pat)]) != want:
            fail(f"matcher: '{pat}' on '{path}' should be {'ignored' if want else 'kept'}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", required=True)
    a = ap.parse_args()
    self_check()
    path = os.path.join(a.root, ".dockerignore")
    if not os.path.isfile(path):
        fail("no .dockerignore at the root of the image's build context (the repository root): COPY . takes "
             "build/ and .venv/, and the image's CMake configure stops on build/CMakeCache.txt")
    pats = load(path)
    with tempfile.TemporaryDirectory(prefix="segops-context-") as tmp:
        # What a user's tree has after the README's quick start: a build tree and a venv.
        planted = os.path.join(tmp, "planted")
        old_build = os.path.join(tmp, "elsewhere", "build")
        os.makedirs(os.path.join(planted, "build"))
        os.makedirs(os.path.join(planted, ".venv", "bin"))
        with open(os.path.join(planted, "build", "CMakeCache.txt"), "w") as f:
            f.write(f"CMAKE_CACHEFILE_DIR:INTERNAL={old_build}\nCMAKE_HOME_DIRECTORY:INTERNAL={a.root}\n")
        with open(os.path.join(planted, ".venv", "pyvenv.cfg"), "w") as f:
            f.write("home = /usr/bin\n")
        ctx = os.path.join(tmp, "src")  # the image's WORKDIR after COPY . /src
        n = copy_context([a.root, planted], ctx, pats)
        for left_out in ("build", ".venv"):
            if os.path.exists(os.path.join(ctx, left_out)):
                fail(f"the build context keeps {left_out}/: .dockerignore does not leave it out")
        for needed in ("CMakeLists.txt", "scripts/build.sh", "scripts/setup.sh", "server", "clients/c/include/segops.h"):
            if not os.path.exists(os.path.join(ctx, needed)):
                fail(f"the build context lacks {needed}: .dockerignore leaves out what the image builds from")
        # The image's configure: scripts/build.sh's cmake line with the Dockerfile's options.
        cmd = ["cmake", "-S", ctx, "-B", os.path.join(ctx, "build"), "-DCMAKE_BUILD_TYPE=Release",
               "-DSEGOPS_BUILD_TESTS=OFF", "-DSEGOPS_BUILD_BENCH=OFF", "-DSEGOPS_CUDA=OFF"]
        r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=240)
        if r.returncode != 0:
            fail("the image's CMake configure fails in the build context:\n" + r.stdout[-3000:])
    print(f"ok: the build context has {n} files, leaves out build/ and .venv/, and configures")


if __name__ == "__main__":
    main()

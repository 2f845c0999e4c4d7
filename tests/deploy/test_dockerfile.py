#!/usr/bin/env python3
"""test_dockerfile.py: the image builds with the README's scripts and runs as the Dockerfile says.

There is no Docker engine in CI, so this checks the Dockerfile's structure and then runs the real
segopsd with the image's ENV/ENTRYPOINT/CMD (port 0 instead of 8080) and the HEALTHCHECK command:
without a token it must refuse to start (the image listens on 0.0.0.0); with the token file the
header documents, it starts and the health check (readiness) passes.
"""
import argparse
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def logical_lines(text):
    out, cur = [], ""
    for raw in text.splitlines():
        line = raw.rstrip()
        if not cur and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if line.endswith("\\"):
            cur += line[:-1] + " "
            continue
        out.append((cur + line).strip())
        cur = ""
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", required=True)
    ap.add_argument("--segopsd", required=True)
    a = ap.parse_args()
    df = open(os.path.join(a.root, "deploy", "Dockerfile")).read()
    lines = logical_lines(df)
    froms = [l for l in lines if l.upper().startswith("FROM ")]
    if len(froms) != 2:
        fail(f"expected a two-stage build, found {len(froms)} FROM lines")
    if "-devel-" not in froms[0] or " AS build" not in froms[0]:
        fail("first stage must be the CUDA devel image named 'build': " + froms[0])
    if "-runtime-" not in froms[1]:
        fail("second stage must be the CUDA runtime image: " + froms[1])
    stage2 = lines[lines.index(froms[1]):]
    build_runs = " ".join(l for l in lines[: lines.index(froms[1])] if l.startswith("RUN "))

    # The build uses the same scripts as the README's quick start.
    readme = open(os.path.join(a.root, "README.md")).read()
    run_sh = open(os.path.join(a.root, "scripts", "run.sh")).read()
    for script in ("scripts/setup.sh", "scripts/build.sh"):
        if script not in build_runs:
            fail(f"the build stage does not run {script}")
        if script not in run_sh:
            fail(f"scripts/run.sh (the README's run command) does not run {script}")
    for cmd in ("scripts/run.sh", "scripts/test.sh"):
        if cmd not in readme:
            fail(f"README.md does not mention {cmd}")

    users = [l.split()[1] for l in stage2 if l.startswith("USER ")]
    if not users or users[-1] in ("root", "0"):
        fail("the runtime stage must switch to a non-root USER")
    if not any(l.startswith("EXPOSE ") and "8080" in l for l in stage2):
        fail("EXPOSE 8080 missing")
    hc = [l for l in stage2 if l.startswith("HEALTHCHECK ")]
    if not hc or "/readyz" not in hc[0]:
        fail("HEALTHCHECK on /readyz (readiness: 503 after a device fault) missing")
    header = df.split("ARG ", 1)[0]
    for needed in ("SEGOPS_TOKEN_FILE=", "-p 127.0.0.1:8080:8080", "SEGOPS_ALLOW_UNAUTHENTICATED"):
        if needed not in header:
            fail(f"the Dockerfile's header does not document {needed!r} (passing a token, a safe publish)")
    env = {}
    for l in stage2:
        if l.startswith("ENV "):
            for kv in shlex.split(l[4:]):
                k, _, v = kv.partition("=")
                env[k] = v
    if not env.get("SEGOPS_LISTEN", "").startswith("0.0.0.0:"):
        fail("the image must listen on 0.0.0.0 (ENV SEGOPS_LISTEN=0.0.0.0:PORT)")
    cmd = [l for l in stage2 if l.startswith("CMD ")]
    args = json.loads(cmd[-1][4:]) if cmd else []

    # Run the daemon the way the image does, on a free port, and run the HEALTHCHECK command.
    run_env = dict(os.environ)
    run_env.update(env)
    run_env["SEGOPS_LISTEN"] = "0.0.0.0:0"
    for k in ("SEGOPS_TOKEN", "SEGOPS_TOKEN_FILE", "SEGOPS_ALLOW_UNAUTHENTICATED"):
        run_env.pop(k, None)
    r = subprocess.run([a.segopsd] + args, env=run_env, capture_output=True, text=True, timeout=10)
    if r.returncode == 0 or "without a token" not in r.stderr:
        fail(f"the image's settings without a token must refuse to start: rc={r.returncode} {r.stderr!r}")
    tok = tempfile.NamedTemporaryFile("w", suffix=".token", delete=False)
    tok.write("image-test-token\n")
    tok.close()
    run_env["SEGOPS_TOKEN_FILE"] = tok.name
    p = subprocess.Popen([a.segopsd] + args, env=run_env, stdout=subprocess.PIPE, text=True)
    try:
        line = p.stdout.readline()
        m = re.match(r"segopsd listening on http://([^:]+):(\d+)", line)
        if not m:
            fail(f"segopsd did not print its address; got {line!r}")
        if m.group(1) != "0.0.0.0":
            fail(f"segopsd reports {m.group(1)}, expected 0.0.0.0")
        port = m.group(2)
        check = hc[0].split(" CMD ", 1)[1].replace("8080", port)
        r = subprocess.run(check, shell=True, capture_output=True, text=True, timeout=10)
        if r.returncode != 0 or '"ready"' not in r.stdout:
            fail(f"HEALTHCHECK command failed: rc={r.returncode} out={r.stdout!r} err={r.stderr!r}")
    finally:
        os.unlink(tok.name)
        p.terminate()
        try:
            rc = p.wait(timeout=20)
        except subprocess.TimeoutExpired:
            p.kill()
            fail("segopsd did not exit on SIGTERM")
    if rc != 0:
        fail(f"segopsd exited {rc} on SIGTERM")
    print("deploy_dockerfile: ok")


if __name__ == "__main__":
    main()

"""run_load_smoke.py SEGOPSD LOAD_SH: runs scripts/load.sh briefly against a real segopsd and checks
its report (all requests answered 200, a positive rate), and that it counts failures (a daemon
with a token, queried without one, makes every request an error and the exit status 1)."""
import os
import re
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from conftest import Daemon  # noqa: E402


def run(load, url, *args):
    p = subprocess.run(["bash", load, url, *args], capture_output=True, text=True, timeout=60)
    m = re.search(r"requests: (\d+)\s+concurrency: (\d+)\s+ok: (\d+)\s+errors: (\d+)\s+seconds: (\S+)\s+"
                  r"requests/s: (\S+)", p.stdout)
    assert m, (p.stdout, p.stderr)
    lat = re.search(r"latency ms: p50 (\S+)\s+p90 (\S+)\s+p99 (\S+)\s+max (\S+)", p.stdout)
    assert lat, p.stdout
    p50, p90, p99, mx = (float(x) for x in lat.groups())
    assert 0 < p50 <= p90 <= p99 <= mx, lat.group(0)
    return p.returncode, [float(x) for x in m.groups()]


def main():
    segopsd, load = sys.argv[1], sys.argv[2]
    if not shutil.which("curl"):
        print("curl not found: skipped")
        return 77
    d = Daemon(segopsd)
    try:
        rc, (n, c, ok, err, secs, rps) = run(load, d.url, "-n", "300", "-c", "8")
        assert rc == 0 and n == 300 and ok == 300 and err == 0 and rps > 0, (rc, n, ok, err, rps)
        rc, (n, c, ok, err, secs, rps) = run(load, d.url, "-n", "40", "-c", "4", "--op", "segmented_matvec/forward")
        assert rc == 0 and ok == 40, (rc, ok)
        # Example bodies (msgpack too) and generated ones of a chosen size, for every op.
        rc, (n, c, ok, err, secs, rps) = run(load, d.url, "-n", "10", "-c", "2", "--op",
                                             "segmented_dot/double_backward", "--example", "msgpack")
        assert rc == 0 and ok == 10, (rc, ok)
        for op in ("sum", "dot", "mul", "mean", "rms_norm", "matvec"):
            rc, (n, c, ok, err, secs, rps) = run(load, d.url, "-n", "4", "-c", "2", "--op",
                                                 f"segmented_{op}/forward", "--size", "5000", "--segments", "9")
            assert rc == 0 and ok == 4, (op, rc, ok)
    finally:
        d.kill()
    d = Daemon(segopsd, (), {"SEGOPS_TOKEN": "load-smoke-tok"})
    try:
        rc, (n, c, ok, err, secs, rps) = run(load, d.url, "-n", "20", "-c", "4")
        assert rc == 1 and ok == 0 and err == 20, (rc, ok, err)
        rc, (n, c, ok, err, secs, rps) = run(load, d.url, "-n", "20", "-c", "4", "--token", "load-smoke-tok")
        assert rc == 0 and ok == 20, (rc, ok, err)
    finally:
        d.kill()
    print("load.sh smoke: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())

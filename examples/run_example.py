"""run_example.py: CTest's runner for examples/: starts the real segopsd on 127.0.0.1:0, runs
one example with SEGOPS_URL set to it, stops the daemon (which must exit 0) and exits with the
example's status (77: the example skipped, e.g. a missing optional package).

usage: run_example.py SEGOPSD -- COMMAND..."""

import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests"))

from segopsd_proc import Daemon  # noqa: E402


def main(argv):
    if len(argv) < 3 or argv[1] != "--":
        print(__doc__, file=sys.stderr)
        return 2
    d = Daemon(argv[0])
    try:
        env = dict(os.environ, SEGOPS_URL=d.url)
        rc = subprocess.run(argv[2:], env=env, timeout=600).returncode
    finally:
        status = d.stop()
    if status != 0:
        print(f"run_example.py: segopsd exited with {status}: {d.stderr_text()[-2000:]}", file=sys.stderr)
        return 1
    return rc


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

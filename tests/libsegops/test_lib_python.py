"""test_lib_python.py: libsegops and the Python client give the same bytes. test_lib_bits --dump
writes every call it made through libsegops over HTTP with the daemon's answers; each call is
sent again here through segops.Client over HTTP to a daemon of the same build, and every output
must match in dtype, shape and bytes.

usage: test_lib_python.py TEST_LIB_BITS SEGOPSD   (exit 77 without numpy or msgpack)"""

import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))

try:
    import msgpack
    import numpy as np
except ImportError as e:
    print(f"SKIPPED: {e}")
    sys.exit(77)

import segops  # noqa: E402
from segopsd_proc import Daemon  # noqa: E402


def array(t):
    return np.frombuffer(t["data"], dtype=t["dtype"]).reshape(t["shape"])


def main(test_lib_bits, segopsd):
    with tempfile.TemporaryDirectory() as tmp:
        dump = os.path.join(tmp, "calls.msgpack")
        env = dict(os.environ, SEGOPSD=segopsd)
        subprocess.run([test_lib_bits, "--dump", dump], env=env, check=True, timeout=300)
        with open(dump, "rb") as f:
            calls = list(msgpack.Unpacker(f, raw=False))
    d = Daemon(segopsd, ["--backend", "cpu", "--threads", "2"])
    failures = 0
    try:
        client = segops.Client(d.url, transport="http")
        for c in calls:
            args = {k: array(v) for k, v in c["args"].items()}
            args["num_segments"] = c["num_segments"]
            got = client.call(c["op"], c["pass"], args)
            for name, want in c["outputs"].items():
                mine = got[name]
                same = (mine.dtype == np.dtype(want["dtype"]) and list(mine.shape) == want["shape"]
                        and mine.tobytes() == want["data"])
                if not same:
                    failures += 1
                    print(f"FAIL {c['op']} {c['pass']} {name}: the Python client's answer differs from libsegops'")
        client.close()
    finally:
        status = d.stop()
    print(f"test_lib_python: {len(calls)} calls compared, {failures} failures")
    return 0 if failures == 0 and status == 0 and len(calls) > 300 else 1


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))

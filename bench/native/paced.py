"""paced.py: the native channel's cost to the daemon for a client that calls at a fixed pace and
sleeps in between (the spin policy, proto/native.md "Doorbells"): one segops.Client calls the empty
segmented_sum every PERIOD, for each daemon given; prints per daemon and period the round trip's
p50/p99 and the daemon's CPU against the client's (both from /proc, in the same run).
  python bench/native/paced.py --segopsd PATH [--segopsd OTHER] [--seconds 3] [--periods 100e-6,1e-3]
Needs the C extension (SEGOPS_NATIVE_LIB or a built tree). Output to stdout (bench/out/ by hand)."""
import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests"))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "clients", "python", "src"))
from segopsd_proc import Daemon  # noqa: E402

import segops  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")


def cpu_of(pid):
    with open(f"/proc/{pid}/stat") as f:
        parts = f.read().rsplit(")", 1)[1].split()
    return (int(parts[11]) + int(parts[12])) / TICK


def run(binary, period, seconds):
    d = Daemon(binary, [])
    try:
        c = segops.Client(d.url, transport="native", timeout=10)
        x, idx = np.empty(0), np.empty(0, np.int32)
        for _ in range(200):
            c.segmented_sum(x, idx, 0)
        lat = []
        d0, s0 = cpu_of(d.proc.pid), time.process_time()
        end = time.perf_counter() + seconds
        nxt = time.perf_counter()
        while True:
            now = time.perf_counter()
            if now >= end:
                break
            if now < nxt:
                time.sleep(max(0.0, nxt - now - 50e-6))  # sleeps in between, as a paced client does
                continue
            t = time.perf_counter()
            c.segmented_sum(x, idx, 0)
            lat.append(time.perf_counter() - t)
            nxt += period
        dd, ds = cpu_of(d.proc.pid) - d0, time.process_time() - s0
        c.close()
        lat = np.array(lat) * 1e6
        return len(lat), np.percentile(lat, 50), np.percentile(lat, 99), dd, ds
    finally:
        d.stop()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--segopsd", action="append", required=True)
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--periods", default="100e-6,1e-3")
    a = ap.parse_args()
    if not segops.native_available():
        sys.exit("paced.py: needs segops' C extension")
    for period in [float(p) for p in a.periods.split(",")]:
        for b in a.segopsd:
            n, p50, p99, dd, ds = run(b, period, a.seconds)
            print(f"{b}: period {period * 1e6:.0f} us: {n} calls, p50 {p50:.1f} us, p99 {p99:.1f} us, "
                  f"daemon CPU {dd:.2f} s, client CPU {ds:.2f} s, daemon/client {dd / ds if ds else float('inf'):.2f}")


if __name__ == "__main__":
    main()

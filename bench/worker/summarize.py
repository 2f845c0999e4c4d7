#!/usr/bin/env python3
"""summarize.py: one compact markdown table from worker_bench.py --json files (each cell's op and N
in one row, every transport side by side), plus the CPU-bound ceiling of each transport:

    python3 bench/worker/summarize.py bench/out/w16_all.json [more.json ...]

(--skip-missing: a missing file is a CTest skip, exit 77: the smoke test that writes it skipped.)

Columns: one worker's median step latency local (plain torch) / through the first transport present
(native, then the others); W workers' steps/s locally, then per transport steps/s and
**remote/local**; CPU µs per step locally and client + daemon through that first transport; and the
ceiling local CPU / (client + daemon CPU) per step through it: the ratio that W busy cores would give
if the remote step cost only its measured CPU and every core were as busy as locally. A measured ratio well under the ceiling points at
idle cores (waiting) rather than at work. With several files, each cell is the median over them.
"""

import json
import os
import statistics
import sys

from worker_bench import fmt_rate

# The first one present gives the latency and CPU columns ("shm": the native channel's name in runs
# of earlier versions).
TRANSPORTS = ("native", "shm", "unix", "http", "local")


def load(paths):
    cells = {}
    meta = None
    for p in paths:
        with open(p) as f:
            d = json.load(f)
        meta = meta or d
        for r in d["rows"]:
            cells.setdefault((r["op"], r["log2n"], r["transport"]), []).append(r)
    return meta, cells


def med(rows, key):
    vals = [r[key] for r in rows if r.get(key) is not None]
    return statistics.median(vals) if vals else float("nan")


def main(argv):
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__)
        return 0 if argv else 2
    if argv[0] == "--skip-missing":
        argv = argv[1:]
        gone = [p for p in argv if not os.path.exists(p)]
        if gone:
            print(f"SKIP: no {', '.join(gone)} (the run that writes it did not run)")
            return 77
    meta, cells = load(argv)
    w = meta["workers"]
    have = [t for t in TRANSPORTS if any(k[2] == t for k in cells)]
    keys = dict.fromkeys((op, n) for op, n, _ in cells)  # in the run's order: op by op, sizes rising
    head = ["op", "N", "1 worker ms: local / " + have[0], f"{w} workers local steps/s"]
    head += [f"{t} steps/s (**ratio**)" for t in have]
    head += ["CPU µs/step local / client + daemon (" + have[0] + ")", "ceiling (" + have[0] + ")"]
    print(f"backend {meta['backend']}, W = {w}, {meta['cores']} cores, window {meta['window_s']} s, "
          f"{len(argv)} run(s)\n")
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for op, n in keys:
        first = cells.get((op, n, have[0]), [])
        line = [op.replace("segmented_", ""), f"2^{n}",
                f"{med(first, 'local_ms'):.3f} / {med(first, 'remote_ms'):.3f}", fmt_rate(med(first, "local_sps"))]
        for t in have:
            rows = cells.get((op, n, t), [])
            line.append(f"{fmt_rate(med(rows, 'remote_sps'))} (**{med(rows, 'throughput_ratio'):.2f}**)" if rows else "-")
        lc, cc, dc = med(first, "local_cpu_us"), med(first, "client_cpu_us"), med(first, "daemon_cpu_us")
        line += [f"{lc:,.0f} / {cc:,.0f} + {dc:,.0f}", f"{lc / (cc + dc):.2f}"]
        print("| " + " | ".join(line) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

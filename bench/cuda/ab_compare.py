#!/usr/bin/env python3
"""ab_compare.py: the verdict of bench/gpu.sh compare: a baseline tree against this one on one GPU.

    ab_compare.py --work DIR [--sizes "12 17 25"] [--tolerance 0.03] [--digest-max 25]

Reads, in DIR, for each size k: cmp_base1_n{k}.tsv, cmp_base2_n{k}.tsv (the baseline run twice) and
cmp_new1_n{k}.tsv [, cmp_new2_n{k}.tsv] (bench_cuda --tsv, the runs alternating), and the output
digests cmp_base_n{k}.dig, cmp_new_n{k}.dig (bench_cuda --digest, sizes up to 2^--digest-max) and cmp_base_conformance.dig,
cmp_new_conformance.dig (conformance --digest). Prints per function (row: function, dtype, layout)
the warm medians side by side: the baseline's two runs, this tree's mean, their ratio, the row's
tolerance (the larger of --tolerance and the baseline's own spread, |b1 - b2| / mean) and the
verdict: ok, faster, or SLOWER when this tree's mean is above the baseline's by more than the
tolerance; then whether every digest is identical. Exit status 1 on a SLOWER row, a differing or
missing digest or a missing run; 0 otherwise."""
import argparse
import csv
import os
import sys


def load(path):
    with open(path) as f:
        return {(r["fn"], r["dtype"], r["layout"]): float(r["warm_ms"]) for r in csv.DictReader(f, delimiter="\t")}


def verdict(base_runs, new_runs, tolerance):
    """(base mean, new mean, ratio, tolerance of the row, verdict)."""
    base = sum(base_runs) / len(base_runs)
    new = sum(new_runs) / len(new_runs)
    spread = (max(base_runs) - min(base_runs)) / base if base > 0 else 0.0
    tol = max(tolerance, spread)
    ratio = new / base if base > 0 else float("inf")
    return base, new, ratio, tol, "SLOWER" if ratio > 1 + tol else "faster" if ratio < 1 - tol else "ok"


def compare_size(work, k, tolerance):
    """Prints the table of one size; returns the number of problems."""
    paths = {side: [os.path.join(work, f"cmp_{side}{r}_n{k}.tsv") for r in (1, 2)] for side in ("base", "new")}
    runs = {side: [load(p) for p in ps if os.path.exists(p)] for side, ps in paths.items()}
    if len(runs["base"]) < 2 or not runs["new"]:
        print(f"2^{k}: missing runs (need two of the baseline and one of this tree)")
        return 1
    rows = sorted(set.intersection(*(set(r) for r in runs["base"] + runs["new"])))
    print(f"\n## 2^{k}: warm medians, ms (baseline twice; this tree, mean of {len(runs['new'])})")
    print(f"{'function':34} {'dtype':8} {'layout':15} {'base 1':>9} {'base 2':>9} {'new':>9} {'new/base':>8} {'tol':>6}  verdict")
    counts = {"ok": 0, "faster": 0, "SLOWER": 0}
    worst = (0.0, None)
    for row in rows:
        b = [r[row] for r in runs["base"]]
        n = [r[row] for r in runs["new"]]
        _, new, ratio, tol, v = verdict(b, n, tolerance)
        counts[v] += 1
        if ratio > worst[0]:
            worst = (ratio, row)
        print(f"{row[0]:34} {row[1]:8} {row[2]:15} {b[0]:9.4f} {b[1]:9.4f} {new:9.4f} {ratio:8.3f} {tol * 100:5.1f}%  {v}")
    missing = set.union(*(set(r) for r in runs["base"] + runs["new"])) - set(rows)
    print(f"2^{k}: {len(rows)} rows: {counts['ok']} ok, {counts['faster']} faster, {counts['SLOWER']} SLOWER; "
          f"worst new/base {worst[0]:.3f} ({' '.join(worst[1]) if worst[1] else '-'})"
          + (f"; {len(missing)} rows not in every run" if missing else ""))
    return counts["SLOWER"] + (1 if missing else 0)


def compare_digests(work, name):
    a, b = (os.path.join(work, f"cmp_{side}_{name}.dig") for side in ("base", "new"))
    if not (os.path.exists(a) and os.path.exists(b)):
        print(f"digest {name}: missing")
        return 1
    da, db = open(a).read().splitlines(), open(b).read().splitlines()
    if not da:
        print(f"digest {name}: empty")
        return 1
    if da == db:
        print(f"digest {name}: identical ({len(da)} outputs)")
        return 0
    diff = [x for x, y in zip(da, db) if x != y]
    print(f"digest {name}: DIFFERENT ({len(diff)} of {len(da)} outputs; {len(db)} lines against {len(da)})")
    for line in diff[:10]:
        print("  baseline:", line)
    return 1


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--work", required=True)
    ap.add_argument("--sizes", default="12 17 25")
    ap.add_argument("--tolerance", type=float, default=0.03)
    ap.add_argument("--digest-max", type=int, default=25, help="sizes with bench_cuda digests: log2 up to this")
    args = ap.parse_args()
    problems = 0
    for k in args.sizes.split():
        problems += compare_size(args.work, k, args.tolerance)
    print()
    for k in args.sizes.split():
        if int(k) <= args.digest_max:
            problems += compare_digests(args.work, f"n{k}")
    problems += compare_digests(args.work, "conformance")
    print(f"compare: {'every function within its tolerance, every output bit-identical' if not problems else str(problems) + ' problem(s)'}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())

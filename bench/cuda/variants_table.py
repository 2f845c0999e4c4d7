#!/usr/bin/env python3
"""variants_table.py: per-row comparison of gpu_variants.sh runs.

    python3 bench/cuda/variants_table.py v.tgz [--base NAME] [--rows 10]

Reads the TSVs of a gpu_variants.sh archive (vNAME-LOG2N-rROUND.tsv), takes each row's best warm
time over the rounds, and prints per size and variant: the sum of the rows, base / variant time
(> 1: the variant is faster) min / median / max over the rows, the rows over the small-N targets
(10 µs at 2^12, 15 µs at 2^17), and the rows that moved most. Base: the first variant on the
command line of gpu_variants.sh is not recorded in the archive, so --base names it (default
"base").
"""
import argparse
import csv
import io
import math
import re
import statistics
import sys
import tarfile

TARGET_US = {12: 10.0, 17: 15.0}


def load(path):
    """{(variant, log2n): {(fn, dtype, layout): best warm ms over rounds}}"""
    runs = {}
    with tarfile.open(path) as tf:
        for m in tf.getmembers():
            hit = re.fullmatch(r"v(.+)-(\d+)-r(\d+)\.tsv", m.name.split("/")[-1])
            if not hit:
                continue
            var, k = hit.group(1), int(hit.group(2))
            text = tf.extractfile(m).read().decode()
            cell = runs.setdefault((var, k), {})
            for r in csv.DictReader(io.StringIO(text), delimiter="\t"):
                key = (r["fn"], r["dtype"], r["layout"])
                ms = float(r["warm_ms"])
                cell[key] = min(ms, cell.get(key, ms))
    return runs


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("archive", help="gpu_variants.sh's v.tgz")
    ap.add_argument("--base", default="base", help="the variant the others are compared with")
    ap.add_argument("--rows", type=int, default=6, help="rows that moved most, per variant and size (0: none)")
    a = ap.parse_args(argv)
    runs = load(a.archive)
    sizes = sorted({k for _, k in runs}, reverse=True)
    variants = sorted({v for v, _ in runs}, key=lambda v: (v != a.base, v))
    if a.base not in variants:
        sys.exit(f"variants_table: no variant named {a.base!r} in {a.archive} (have {', '.join(variants)})")
    for k in sizes:
        base = runs.get((a.base, k), {})
        print(f"## 2^{k} ({len(base)} rows)")
        print("| variant | sum of rows (ms) | base / variant min / median / max | rows over target |")
        print("|---|---|---|---|")
        for v in variants:
            cur = runs.get((v, k))
            if not cur:
                continue
            keys = [key for key in base if key in cur]
            ratios = [base[key] / cur[key] for key in keys]
            over = sum(1 for key in keys if k in TARGET_US and cur[key] * 1e3 > TARGET_US[k])
            rs = (f"{min(ratios):.2f} / {statistics.median(ratios):.2f} / {max(ratios):.2f}"
                  if v != a.base and ratios else "")
            print(f"| {v} | {math.fsum(cur[key] for key in keys):.4f} | {rs} | {over if k in TARGET_US else ''} |")
        for v in variants if a.rows > 0 else ():
            cur = runs.get((v, k))
            if v == a.base or not cur:
                continue
            moved = sorted((base[key] / cur[key], key) for key in base if key in cur)
            pick = moved[: a.rows // 2] + moved[len(moved) - (a.rows - a.rows // 2):] if len(moved) > a.rows else moved
            print(f"{v}: rows that moved most (base -> {v}, µs):")
            for ratio, (fn, dt, lay) in pick:
                print(f"  {ratio:5.2f}  {fn} {dt} {lay}  {base[(fn, dt, lay)] * 1e3:.2f} -> {cur[(fn, dt, lay)] * 1e3:.2f}")
        print()
    return 0


if __name__ == "__main__":
    sys.exit(main())

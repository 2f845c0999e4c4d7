#!/usr/bin/env python3
"""compare_tsv.py: summarises bench_cuda TSV files (--tsv), optionally against an earlier run.

    compare_tsv.py NEW.tsv [OLD.tsv] [--theirs NAME=LOG ...]

Per layout: min / median / max over the rows of the % of copy bandwidth (cold and warm layout) and
of the device time in µs; with OLD, the per-row time ratio old/new (> 1: NEW is faster), its
min / median / max, and the five rows that changed most each way. Copy bandwidth is each file's
own (measured in that run), so % of copy compares runs fairly; times compare only on one GPU.
--theirs NAME=LOG: another implementation's times from a nvalchemi_compare.py or torch_compare.py
log (its "theirs ms" or "torch ms" column, timed alone), divided by NEW's cold and warm times:
min / median / max per layout, how many rows it is faster in (warm, and cold in brackets), our
worst row warm, and each row where it is faster warm.
"""
import csv
import statistics
import sys


def load(path):
    with open(path) as f:
        return {(r["fn"], r["dtype"], r["layout"]): r for r in csv.DictReader(f, delimiter="\t")}


def mmm(v):
    v = sorted(v)
    f = "{:.2f}" if v[-1] < 100 else "{:.1f}"
    return " / ".join(f.format(x) for x in (v[0], statistics.median(v), v[-1]))


def load_theirs(path):
    """{(fn, dtype, layout): ms} from a compare log (fixed columns, a header naming them)."""
    out, col = {}, None
    with open(path) as f:
        for line in f:
            w = line.split()
            if w and w[0] == "function":
                names = line.replace(" ms", "_ms").split()
                col = names.index("theirs_ms") if "theirs_ms" in names else names.index("torch_ms")
                continue
            if col is None or len(w) <= col or "/" not in w[0]:
                continue
            try:
                out[(w[0], w[1], w[2])] = float(w[col])
            except ValueError:
                pass
    return out


def main():
    args = sys.argv[1:]
    if not args or args[0] in ("-h", "--help"):
        print(__doc__.strip())
        return 0 if args else 2
    theirs = []
    while "--theirs" in args:
        i = args.index("--theirs")
        name, _, path = args[i + 1].partition("=")
        theirs.append((name, load_theirs(path)))
        del args[i:i + 2]
    new = load(args[0])
    old = load(args[1]) if len(args) > 1 else None
    layouts = sorted({k[2] for k in new}, key=lambda s: ["seg32", "powerlaw", "S=1", "seg32-unsorted"].index(s)
                     if s in ["seg32", "powerlaw", "S=1", "seg32-unsorted"] else 9)
    n = next(iter(new.values()))["n"]
    print(f"N = {n}, copy {next(iter(new.values()))['copy_gbps']} GB/s" +
          (f" (old run: {next(iter(old.values()))['copy_gbps']} GB/s)" if old else ""))
    hdr = "| layout | rows | cold µs | warm µs | cold % copy | warm % copy |"
    if old:
        hdr += " old/new cold | old/new warm | old cold % copy | old warm % copy |"
    print(hdr)
    print("|" + "---|" * (hdr.count("|") - 1))
    for lay in layouts:
        rows = [r for k, r in new.items() if k[2] == lay]
        cp = float(rows[0]["copy_gbps"])
        cold = [float(r["median_ms"]) * 1e3 for r in rows]
        warm = [float(r["warm_ms"]) * 1e3 for r in rows]
        pc = [100 * float(r["gbps"]) / cp for r in rows]
        pw = [100 * float(r["warm_gbps"]) / cp for r in rows]
        line = f"| {lay} | {len(rows)} | {mmm(cold)} | {mmm(warm)} | {mmm(pc)} | {mmm(pw)} |"
        if old:
            both = [(k, r, old[k]) for k, r in new.items() if k[2] == lay and k in old]
            rc = [float(o["median_ms"]) / float(r["median_ms"]) for _, r, o in both]
            rw = [float(o["warm_ms"]) / float(r["warm_ms"]) for _, r, o in both]
            ocp = float(both[0][2]["copy_gbps"])
            opc = [100 * float(o["gbps"]) / ocp for _, _, o in both]
            opw = [100 * float(o["warm_gbps"]) / ocp for _, _, o in both]
            line += f" {mmm(rc)} | {mmm(rw)} | {mmm(opc)} | {mmm(opw)} |"
        print(line)
    if old:
        both = sorted(((float(old[k]["warm_ms"]) / float(r["warm_ms"]), k) for k, r in new.items() if k in old))
        print("\nslower (old/new warm < 1 first):")
        for ratio, k in both[:5]:
            print(f"  {ratio:5.2f}  {' '.join(k)}")
        print("faster:")
        for ratio, k in both[-5:]:
            print(f"  {ratio:5.2f}  {' '.join(k)}")
    for name, t in theirs:
        print(f"\nvs {name} (theirs / ours; > 1: segops faster)")
        print("| layout | rows | cold | warm | rows < 1 warm (cold) | worst |")
        print("|---|---|---|---|---|---|")
        behind = []
        for lay in layouts:
            rows = [(t[k] / (float(r["median_ms"])), t[k] / float(r["warm_ms"]), k) for k, r in new.items()
                    if k[2] == lay and k in t]
            if not rows:
                continue
            worst = min(rows, key=lambda x: x[1])
            behind += sorted((x[1], x[2]) for x in rows if x[1] < 1)
            print(f"| {lay} | {len(rows)} | {mmm([x[0] for x in rows])} | {mmm([x[1] for x in rows])} | "
                  f"{sum(1 for x in rows if x[1] < 1)} ({sum(1 for x in rows if x[0] < 1)}) | {worst[2][0]} {worst[2][1]} |")
        if behind:
            print(f"rows where {name} is faster, warm (theirs / ours):")
            for ratio, k in behind:
                print(f"  {ratio:5.2f}  {' '.join(k)}  {t[k] * 1e3:.1f} vs {float(new[k]['warm_ms']) * 1e3:.1f} µs")
    print("\nworst rows by warm % of copy:")
    worst = sorted((100 * float(r["warm_gbps"]) / float(r["copy_gbps"]), k) for k, r in new.items())
    for pcv, k in worst[:8]:
        print(f"  {pcv:5.1f} %  {' '.join(k)}  {float(new[k]['warm_ms']) * 1e3:.1f} µs")
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""plot.py: figures from the benchmarks' machine-readable output, for docs/figures/.

    python3 bench/plot.py worker RUN.json [RUN.json ...] -o docs/figures/worker_ratio.png
    python3 bench/plot.py cuda N12.tsv N17.tsv ... -o docs/figures/kernels_copy_share.png

worker: bench/worker/worker_bench.py --json files. One panel per transport, one line per op: the
W workers' steps/s through segopsd over the same workers' steps/s done locally, against N (above 1
the daemon wins). Where the JSON has the --alternatives columns (vs_offload, vs_gpu), a second and
third row of panels plot segopsd against those. Several files: the median per cell.

cuda: bench/cuda/bench_cuda --tsv files (one per N). The device's share of the copy bandwidth
measured in the same run that each function reaches with its layout cached (warm_gbps over
copy_gbps), per idx layout: the median over the functions and dtypes, with the range shaded.

Each figure's caption (--caption, default: the command line) is written under it. Needs
matplotlib (a benchmark-only dependency: scripts/setup.sh --bench). Prints one line per figure
saying what it plotted.
"""
import argparse
import csv
import json
import math
import os
import statistics
import sys
import textwrap
from collections import defaultdict

RATIOS = (("throughput_ratio", "against the step on each worker's own core"),
          ("vs_offload", "against each worker offloading the same ops to the GPU itself"),
          ("vs_gpu", "against each worker moving its whole step to the GPU"))
OPS = ("sum", "dot", "mul", "mean", "rms_norm", "matvec")
TRANSPORTS = ("shm", "unix", "http")


def need_matplotlib():
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        return plt
    except ImportError:
        print("plot.py needs matplotlib: scripts/setup.sh --bench (or pip install matplotlib)", file=sys.stderr)
        sys.exit(77)


def short(op):
    return op[len("segmented_"):] if op.startswith("segmented_") else op


def worker_cells(paths):
    """{(ratio key, transport, op, log2n): median ratio}, and the runs' descriptions."""
    cells, about = defaultdict(list), []
    for p in paths:
        with open(p, encoding="utf-8") as f:
            run = json.load(f)
        about.append(f"{run.get('workers', '?')} workers, {run.get('cores', '?')} cores, backend "
                     f"{run.get('backend', '?')}")
        for r in run["rows"]:
            for key, _ in RATIOS:
                v = r.get(key)
                if isinstance(v, (int, float)) and math.isfinite(v) and v > 0:
                    cells[(key, r["transport"], short(r["op"]), int(r["log2n"]))].append(v)
    return {k: statistics.median(v) for k, v in cells.items()}, sorted(set(about))


def plot_worker(plt, args):
    cells, about = worker_cells(args.inputs)
    if not cells:
        sys.exit("plot.py worker: no rows with ratios in " + ", ".join(args.inputs))
    keys = [k for k, _ in RATIOS if any(c[0] == k for c in cells)]
    transports = [t for t in TRANSPORTS if any(c[1] == t for c in cells)]
    transports += sorted({c[1] for c in cells} - set(transports))
    ops = [o for o in OPS if any(c[2] == o for c in cells)] + sorted({c[2] for c in cells} - set(OPS))
    fig, axes = plt.subplots(len(keys), len(transports), figsize=(4.2 * len(transports), 3.4 * len(keys) + 0.6),
                             squeeze=False, sharey="row")
    for i, key in enumerate(keys):
        for j, t in enumerate(transports):
            ax = axes[i][j]
            for op in ops:
                pts = sorted((n, v) for (k, tt, o, n), v in cells.items() if k == key and tt == t and o == op)
                if pts:
                    ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=op)
            ax.axhline(1.0, color="black", linewidth=0.8, linestyle="--")
            ax.set_yscale("log")
            ax.set_title(f"{t}: {dict(RATIOS)[key]}" if len(keys) > 1 else t, fontsize=9)
            size_ticks(ax, sorted({c[3] for c in cells}))
            ax.grid(True, which="both", alpha=0.3)
            if j == 0:
                ax.set_ylabel("segopsd / alternative\n(steps/s)")
    axes[0][-1].legend(fontsize=8, loc="upper left")
    what = dict(RATIOS)[keys[0]] if len(keys) == 1 else "against each alternative"
    caption(fig, args, f"A training step's throughput through segopsd {what} ({'; '.join(about)})")
    fig.savefig(args.output, dpi=110, metadata={"Software": None})
    print(f"plot.py: {args.output}: {len(keys)} ratio(s) x {len(transports)} transport(s), {len(ops)} op(s), "
          f"{len({c[3] for c in cells})} size(s)")


def plot_cuda(plt, args):
    share = defaultdict(list)  # (layout, log2n) -> [% of copy]
    for p in args.inputs:
        with open(p, encoding="utf-8", newline="") as f:
            for r in csv.DictReader(f, delimiter="\t"):
                warm, copy = float(r["warm_gbps"]), float(r["copy_gbps"])
                if copy > 0:
                    share[(r["layout"], round(math.log2(int(r["n"]))))].append(100.0 * warm / copy)
    if not share:
        sys.exit("plot.py cuda: no rows in " + ", ".join(args.inputs))
    layouts = list(dict.fromkeys(k[0] for k in share))
    fig, ax = plt.subplots(figsize=(8.0, 4.8))
    for lay in layouts:
        pts = sorted((n, v) for (l, n), v in share.items() if l == lay)
        xs = [p[0] for p in pts]
        ax.plot(xs, [statistics.median(p[1]) for p in pts], marker="o", label=f"{lay} (median)")
        ax.fill_between(xs, [min(p[1]) for p in pts], [max(p[1]) for p in pts], alpha=0.15)
    ax.axhline(100.0, color="black", linewidth=0.8, linestyle="--")
    size_ticks(ax, sorted({k[1] for k in share}))
    ax.set_ylabel("% of the device's copy bandwidth")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    caption(fig, args, "CUDA kernels (layout cached): bytes they must move, as a share of the copy bandwidth\n"
                       "measured in the same run; line: median, band: every function and dtype")
    fig.savefig(args.output, dpi=110, metadata={"Software": None})
    print(f"plot.py: {args.output}: {len(layouts)} layout(s), {len({k[1] for k in share})} size(s), "
          f"{sum(len(v) for v in share.values())} rows")


def size_ticks(ax, log2ns):
    ax.set_xticks(log2ns)
    ax.set_xticklabels([f"$2^{{{n}}}$" for n in log2ns])
    ax.set_xlabel("N (elements)")


def caption(fig, args, title):
    """The title above, and under the figure how it was made, wrapped to the figure's width."""
    fig.suptitle(title, fontsize=11)
    text = args.caption or "python3 bench/plot.py " + " ".join(sys.argv[1:])
    width_chars = int(fig.get_figwidth() * 17)
    lines = textwrap.wrap(text, width_chars)
    bottom = (0.12 + 0.16 * len(lines)) / fig.get_figheight()
    fig.tight_layout(rect=(0, bottom, 1, 0.96))
    fig.text(0.01, 0.02, "\n".join(lines), fontsize=7, color="dimgray", va="bottom")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("kind", choices=("worker", "cuda"))
    ap.add_argument("inputs", nargs="+", help="worker_bench.py --json files, or bench_cuda --tsv files")
    ap.add_argument("-o", "--output", required=True, help="the PNG to write")
    ap.add_argument("--caption", help="text under the figure (default: this command)")
    args = ap.parse_args()
    plt = need_matplotlib()
    os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
    (plot_worker if args.kind == "worker" else plot_cuda)(plt, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())

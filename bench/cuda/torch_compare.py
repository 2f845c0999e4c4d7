#!/usr/bin/env python3
"""torch_compare.py: the same 18 functions in plain torch on the same GPU and the same layouts
(idx files written by bench_cuda --idx-dir), timed like bench_cuda (CUDA events, median after
warm-up); prints torch's GB/s of minimal traffic and the ratio segops/torch from bench_cuda's TSV.
Rows of another width than 3 (bench_cuda --widths: "w=16" in the function's name, idx files
idx_LAYOUT_wW.i32) run on (E, F) arrays through the same candidates (index_add_, segment_reduce,
gathers by indexing); mul with y (S,*F) ("y=(S,*F)") multiplies element-wise.
Usage: torch_compare.py BENCH_TSV IDX_DIR [--reps 10]"""
import re
import csv
import statistics
import sys

import numpy as np
import torch

dev = torch.device("cuda")
SPIN_CYCLES = 0  # set in main: about 40 us of spin for small N, none for large


def timed(fn, reps):
    """Median device time of fn: each run follows a spin kernel (torch.cuda._sleep) so that its
    launches are all queued when the first event fires, as bench_cuda times (no launch latency)."""
    for _ in range(2):
        fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        if SPIN_CYCLES:
            torch.cuda._sleep(SPIN_CYCLES)
        a.record()
        fn()
        b.record()
        b.synchronize()
        ts.append(a.elapsed_time(b))
    return statistics.median(ts)


def best_of(cands, reps):
    """Median time of torch's fastest candidate; a candidate 3x slower than the best on a first
    timing is not timed further (torch.segment_reduce with one huge segment takes seconds)."""
    first = []
    for c in cands:
        c()
        torch.cuda.synchronize()
        first.append(timed(c, 1))
    lead = min(first)
    return min(timed(c, reps) for c, t in zip(cands, first) if t <= 3 * lead)


def functions(dt, idx, s, lengths, sorted_idx, n, w=3):
    """name -> list of candidate callables (torch's best is taken); rows of w values."""
    g = torch.Generator(device=dev).manual_seed(0)
    E = lambda: (torch.rand((n, w), generator=g, device=dev, dtype=dt) - 0.5)
    S1 = lambda: (torch.rand((s,), generator=g, device=dev, dtype=dt) - 0.5)
    S3 = lambda: (torch.rand((s, w), generator=g, device=dev, dtype=dt) - 0.5)
    M = lambda: (torch.rand((s, 3, 3), generator=g, device=dev, dtype=dt) - 0.5)
    x, y, gx, gy, ge = E(), E(), E(), E(), E()
    ys, gs1, ggy, gs3 = S1(), S1(), S1(), S3()
    m, ggm = M(), M()
    cnt = lengths.to(dt)
    cntc = cnt.clamp(min=1)

    def ssum(v):  # best-known segment sum of rows
        if sorted_idx:
            return torch.segment_reduce(v, "sum", lengths=lengths, axis=0)
        return torch.zeros((s,) + tuple(v.shape[1:]), dtype=v.dtype, device=dev).index_add_(0, idx, v)

    def isum(v):
        return torch.zeros((s,) + tuple(v.shape[1:]), dtype=v.dtype, device=dev).index_add_(0, idx, v)

    def rms_inv(sq):
        r = torch.sqrt(sq / cntc)
        cr = cnt * r
        return torch.where(cr == 0, torch.zeros_like(cr), 1.0 / torch.where(cr == 0, torch.ones_like(cr), cr)), r

    f = {}
    f["segmented_sum/forward"] = [lambda: isum(x), lambda: ssum(x)]
    f["segmented_sum/backward"] = [lambda: gs3[idx], lambda: torch.index_select(gs3, 0, idx)]
    f["segmented_sum/double_backward"] = f["segmented_sum/forward"]
    f["segmented_dot/forward"] = [lambda: isum((x * y).sum(1)), lambda: ssum((x * y).sum(1)),
                                  lambda: isum(torch.einsum("nk,nk->n", x, y))]
    f["segmented_dot/backward"] = [lambda: (gs1[idx, None] * y, gs1[idx, None] * x)]
    f["segmented_dot/double_backward"] = [lambda: (ssum((gx * y).sum(1) + (gy * x).sum(1)),
                                                   gs1[idx, None] * gy, gs1[idx, None] * gx),
                                          lambda: (isum((gx * y).sum(1) + (gy * x).sum(1)),
                                                   gs1[idx, None] * gy, gs1[idx, None] * gx)]
    f["segmented_mul/forward"] = [lambda: x * ys[idx, None]]
    f["segmented_mul/backward"] = [lambda: (ge * ys[idx, None], ssum((ge * x).sum(1))),
                                   lambda: (ge * ys[idx, None], isum((ge * x).sum(1)))]
    f["segmented_mul/double_backward"] = [lambda: (gx * ys[idx, None] + ggy[idx, None] * x, ggy[idx, None] * ge,
                                                   ssum((gx * ge).sum(1)))]
    f["segmented_mean/forward"] = [lambda: ssum(x) / cntc[:, None]] + (
        [lambda: torch.segment_reduce(x, "mean", lengths=lengths, axis=0)] if sorted_idx else [])
    f["segmented_mean/backward"] = [lambda: gs3[idx] / cntc[idx, None],
                                    lambda: gs3[idx] / torch.bincount(idx, minlength=s).to(dt)[idx, None]]
    f["segmented_mean/double_backward"] = f["segmented_mean/forward"]

    def rms_fwd():
        return torch.sqrt(ssum((x * x).sum(1)) / cntc)

    def rms_bwd():
        inv, _ = rms_inv(ssum((x * x).sum(1)))
        return (gs1 * inv)[idx, None] * x

    def rms_dbl():
        sq = ssum((x * x).sum(1))
        q = ssum((gx * x).sum(1))
        inv, _ = rms_inv(sq)
        a = gs1 * inv
        b = gs1 * inv ** 3 * cnt * q
        return q * inv, a[idx, None] * gx - b[idx, None] * x

    f["segmented_rms_norm/forward"] = [rms_fwd]
    f["segmented_rms_norm/backward"] = [rms_bwd]
    f["segmented_rms_norm/double_backward"] = [rms_dbl]
    if w != 3:  # mul with y (S,*F): element-wise (gs3: y, ggy: gg_y)
        ggw = S3()
        f["segmented_mul/forward y=(S,*F)"] = [lambda: x * gs3[idx]]
        f["segmented_mul/backward y=(S,*F)"] = [lambda: (ge * gs3[idx], ssum(ge * x)),
                                                lambda: (ge * gs3[idx], isum(ge * x))]
        f["segmented_mul/double_backward y=(S,*F)"] = [
            lambda: (gx * gs3[idx] + ggw[idx] * x, ggw[idx] * ge, ssum(gx * ge)),
            lambda: (gx * gs3[idx] + ggw[idx] * x, ggw[idx] * ge, isum(gx * ge))]
        return f
    f["segmented_matvec/forward"] = [lambda: torch.einsum("njk,nj->nk", m[idx], x),
                                     lambda: torch.bmm(x.unsqueeze(1), m[idx]).squeeze(1)]
    f["segmented_matvec/backward"] = [lambda: (torch.bmm(m[idx], ge.unsqueeze(2)).squeeze(2),
                                               ssum((x.unsqueeze(2) * ge.unsqueeze(1)).reshape(n, 9)).reshape(s, 3, 3)),
                                      lambda: (torch.einsum("njk,nk->nj", m[idx], ge),
                                               isum(torch.einsum("nj,nk->njk", x, ge)))]
    f["segmented_matvec/double_backward"] = [
        lambda: (torch.bmm(gx.unsqueeze(1), m[idx]).squeeze(1) + torch.bmm(y.unsqueeze(1), ggm[idx]).squeeze(1),
                 torch.bmm(ggm[idx], ge.unsqueeze(2)).squeeze(2),
                 ssum((gx.unsqueeze(2) * ge.unsqueeze(1)).reshape(n, 9)).reshape(s, 3, 3))]
    return f


def bench_args(argv, doc):
    """(rows of bench_cuda's TSV, rows by layout, idx dir, reps) from the command line, or None
    after printing the usage; sets the spin before each timed run (about 40 us at small N)."""
    if len(argv) < 3:
        print(doc)
        return None
    tsv, idx_dir = argv[1], argv[2]
    reps = int(argv[argv.index("--reps") + 1]) if "--reps" in argv else 10
    rows = list(csv.DictReader(open(tsv), delimiter="\t"))
    global SPIN_CYCLES
    SPIN_CYCLES = 80000 if int(rows[0]["n"]) <= (1 << 20) else 0
    by_layout = {}
    for r in rows:  # the vec3 rows (by_width has every width's)
        if width_of(r) == 3:
            by_layout.setdefault(r["layout"], []).append(r)
    return rows, by_layout, idx_dir, reps


def width_of(r):
    """The row width of a row of bench_cuda's TSV (" w=16" in its function's name; 3 without)."""
    m = re.search(r" w=(\d+)", r["fn"])
    return int(m.group(1)) if m else 3


def by_width(rows):
    """Rows by (layout, width), in the TSV's order."""
    groups = {}
    for r in rows:
        groups.setdefault((r["layout"], width_of(r)), []).append(r)
    return groups


def main():
    args = bench_args(sys.argv, __doc__)
    if args is None:
        return 2
    rows, _, idx_dir, reps = args
    print(f"torch {torch.__version__} on {torch.cuda.get_device_name()}; copy bandwidth {float(rows[0]['copy_gbps']):.0f} GB/s")
    print(f"{'function':34} {'dtype':8} {'layout':15} {'segops ms':>10} {'torch ms':>10} {'torch/segops':>12} "
          f"{'warm: torch/segops':>18}")
    summary = []
    for (layout, w), lrows in by_width(rows).items():
        idx32 = np.fromfile(f"{idx_dir}/idx_{layout}{'' if w == 3 else f'_w{w}'}.i32", dtype=np.int32)
        n = idx32.size
        idx = torch.from_numpy(idx32.astype(np.int64)).to(dev)
        s = int(lrows[0]["s"])
        sorted_idx = bool(np.all(idx32[1:] >= idx32[:-1]))
        lengths = torch.bincount(idx, minlength=s)
        for dtn, dt in (("float32", torch.float32), ("float64", torch.float64)):
            fns = functions(dt, idx, s, lengths, sorted_idx, n, w)
            for r in lrows:
                if r["dtype"] != dtn:
                    continue
                best = best_of(fns[re.sub(r" w=\d+", "", r["fn"])], reps)
                ratio = best / float(r["median_ms"])
                warm = best / float(r.get("warm_ms") or r["median_ms"])
                summary.append(ratio)
                print(f"{r['fn']:34} {dtn:8} {layout:15} {float(r['median_ms']):10.4f} {best:10.4f} {ratio:12.2f} "
                      f"{warm:18.2f}")
            del fns
            torch.cuda.empty_cache()
    print(f"torch/segops (time ratio, >1: segops faster; layout cold): min {min(summary):.2f}, "
          f"median {statistics.median(summary):.2f}, max {max(summary):.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

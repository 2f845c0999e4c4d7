#!/usr/bin/env python3
"""nvalchemi_compare.py: nvalchemiops (nvalchemi-toolkit-ops 0.5) itself on the same GPU and the
same idx files as bench_cuda (written by bench_cuda --idx-dir), timed like bench_cuda (CUDA
events, a spin kernel first at small N, median after warm-up). It runs the launchers its autograd
runs (nvalchemiops.torch.segment_ops._segmented_<op>_<pass>); the mean and rms_norm backward
passes get the counts / inverse norms its forward saved (not timed), where segops recomputes them.
Prints its time, segops' (layout cold and warm) and the ratios theirs / ours (> 1: segops faster).
Usage: nvalchemi_compare.py BENCH_TSV IDX_DIR [--reps 10]"""
import statistics
import sys

import numpy as np
import torch

import torch_compare

dev = torch.device("cuda")


def launchers(so, dt, idx, s, n):
    """name -> a callable running nvalchemiops' launcher for that function on fresh inputs."""
    g = torch.Generator(device=dev).manual_seed(1)
    R = lambda *shape: torch.rand(shape, generator=g, device=dev, dtype=dt) - 0.5
    x, y, gx, gy, ge = R(n, 3), R(n, 3), R(n, 3), R(n, 3), R(n, 3)
    ys, gs1, ggy, gs3, m, ggm = R(s), R(s), R(s), R(s, 3), R(s, 3, 3), R(s, 3, 3)
    _, counts = so._segmented_mean_forward(x, idx, s)
    _, inv_norm, rcounts = so._segmented_rms_norm_forward(x, idx, s)
    return {
        "segmented_sum/forward": lambda: so._segmented_sum_forward(x, idx, s),
        "segmented_sum/backward": lambda: so._segmented_sum_backward(gs3, x, idx, s),
        "segmented_sum/double_backward": lambda: so._segmented_sum_double_backward(gx, gs3, x, idx, s),
        "segmented_dot/forward": lambda: so._segmented_dot_forward(x, y, idx, s),
        "segmented_dot/backward": lambda: so._segmented_dot_backward(gs1, x, y, idx, s),
        "segmented_dot/double_backward": lambda: so._segmented_dot_double_backward(gx, gy, gs1, x, y, idx, s),
        "segmented_mul/forward": lambda: so._segmented_mul_forward(x, ys, idx, s),
        "segmented_mul/backward": lambda: so._segmented_mul_backward(ge, x, ys, idx, s),
        "segmented_mul/double_backward": lambda: so._segmented_mul_double_backward(gx, ggy, ge, x, ys, idx, s),
        "segmented_mean/forward": lambda: so._segmented_mean_forward(x, idx, s),
        "segmented_mean/backward": lambda: so._segmented_mean_backward(counts, gs3, x, idx, s),
        "segmented_mean/double_backward": lambda: so._segmented_mean_double_backward(gx, counts, gs3, x, idx, s),
        "segmented_rms_norm/forward": lambda: so._segmented_rms_norm_forward(x, idx, s),
        "segmented_rms_norm/backward": lambda: so._segmented_rms_norm_backward(inv_norm, rcounts, gs1, x, idx, s),
        "segmented_rms_norm/double_backward": lambda: so._segmented_rms_norm_double_backward(
            gx, inv_norm, rcounts, gs1, x, idx, s),
        "segmented_matvec/forward": lambda: so._segmented_matvec_forward(x, m, idx, s),
        "segmented_matvec/backward": lambda: so._segmented_matvec_backward(ge, x, m, idx, s),
        "segmented_matvec/double_backward": lambda: so._segmented_matvec_double_backward(gx, ggm, ge, y, m, idx, s),
    }


def main():
    args = torch_compare.bench_args(sys.argv, __doc__)
    if args is None:
        return 2
    rows, by_layout, idx_dir, reps = args
    import nvalchemiops
    import nvalchemiops.torch.segment_ops as so

    print(f"nvalchemiops {getattr(nvalchemiops, '__version__', '?')} on {torch.cuda.get_device_name()}, "
          f"N = {rows[0]['n']}")
    print(f"{'function':34} {'dtype':8} {'layout':15} {'theirs ms':>10} {'segops ms':>10} {'warm ms':>10} "
          f"{'theirs/ours':>11} {'warm':>6}")
    cold, warm = [], []
    for layout, lrows in by_layout.items():
        idx32 = np.fromfile(f"{idx_dir}/idx_{layout}.i32", dtype=np.int32)
        n = idx32.size
        idx = torch.from_numpy(idx32).to(dev)
        s = int(lrows[0]["s"])
        for dtn, dt in (("float32", torch.float32), ("float64", torch.float64)):
            fns = launchers(so, dt, idx, s, n)
            for r in lrows:
                if r["dtype"] != dtn:
                    continue
                t = torch_compare.timed(fns[r["fn"]], reps)
                ours, ours_w = float(r["median_ms"]), float(r["warm_ms"])
                cold.append(t / ours)
                warm.append(t / ours_w)
                print(f"{r['fn']:34} {dtn:8} {layout:15} {t:10.4f} {ours:10.4f} {ours_w:10.4f} {t / ours:11.2f} "
                      f"{t / ours_w:6.2f}")
            del fns
            torch.cuda.empty_cache()
    print(f"theirs/ours (>1: segops faster): layout cold min {min(cold):.2f} median {statistics.median(cold):.2f} "
          f"max {max(cold):.2f}; warm min {min(warm):.2f} median {statistics.median(warm):.2f} max {max(warm):.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

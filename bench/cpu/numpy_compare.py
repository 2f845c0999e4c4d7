#!/usr/bin/env python3
"""numpy_compare.py: the CPU benchmark against numpy in the same run.

Runs segops_bench_cpu (--csv) for every function, then the same math in numpy on arrays of the
same shapes (vec3, sorted idx, segment lengths uniform in [16, 48]), and prints per function the
segops time, the best numpy time with the variant that achieved it, and numpy/segops (how many
times faster segops is). Reductions are timed with np.add.at, np.bincount with weights and
np.add.reduceat (valid here: sorted idx, no empty segment); the best one counts.

usage: numpy_compare.py [--bench PATH] [--n N] [--reps R] [--threads T] [--dtype f32|f64|both]
"""
import argparse
import csv
import glob
import io
import os
import subprocess
import sys
import time

import numpy as np


def find_bench():
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(os.path.dirname(here))
    for pattern in ("build-cpu", "build", "build*"):
        for d in sorted(glob.glob(os.path.join(root, pattern))):
            p = os.path.join(d, "bench", "cpu", "segops_bench_cpu")
            if os.access(p, os.X_OK):
                return p
    return None


def best_time(fn, reps):
    fn()  # warm-up
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


class Seg:
    """Segment reductions of (N, k) or (N,) values into (S, k) or (S,), several ways."""

    def __init__(self, idx, s):
        self.idx, self.s = idx, s
        self.starts = np.flatnonzero(np.r_[True, idx[1:] != idx[:-1]])  # sorted, no empty segment

    def add_at(self, v):
        out = np.zeros((self.s,) + v.shape[1:], v.dtype)
        np.add.at(out, self.idx, v)
        return out

    def bincount(self, v):
        if v.ndim == 1:
            return np.bincount(self.idx, weights=v, minlength=self.s)
        return np.stack([np.bincount(self.idx, weights=v[:, k], minlength=self.s) for k in range(v.shape[1])], 1)

    def reduceat(self, v):
        return np.add.reduceat(v, self.starts, axis=0)


def functions(idx, s, dt, rng):
    """(name, {variant: callable}) for every function; reductions come in three variants."""
    n = idx.shape[0]
    seg = Seg(idx, s)
    cnt = np.bincount(idx, minlength=s).astype(dt)
    e = lambda: rng.uniform(-1, 1, (n, 3)).astype(dt)
    g1 = lambda: rng.uniform(-1, 1, s).astype(dt)
    g3 = lambda: rng.uniform(-1, 1, (s, 3)).astype(dt)
    mat = lambda: rng.uniform(-1, 1, (s, 3, 3)).astype(dt)
    x, y, gx, gy, g_e = e(), e(), e(), e(), e()
    g_s3, g_s1, y_s, ggy_s, m, ggm = g3(), g1(), g1(), g1(), mat(), mat()

    def rms_inv(xv, red):
        r = np.sqrt(red((xv * xv).sum(1)) / np.maximum(cnt, 1))
        cr = cnt * r
        return np.divide(1.0, cr, out=np.zeros_like(cr), where=cr != 0)

    fns = {
        "segmented_sum/forward": lambda red: red(x),
        "segmented_sum/backward": None,
        "segmented_sum/double_backward": lambda red: red(gx),
        "segmented_dot/forward": lambda red: red((x * y).sum(1)),
        "segmented_dot/backward": None,
        "segmented_dot/double_backward": lambda red: (red((gx * y).sum(1) + (gy * x).sum(1)),
                                                      g_s1[idx, None] * gy, g_s1[idx, None] * gx),
        "segmented_mul/forward": None,
        "segmented_mul/backward": lambda red: (g_e * y_s[idx, None], red((g_e * x).sum(1))),
        "segmented_mul/double_backward": lambda red: (gx * y_s[idx, None] + ggy_s[idx, None] * x,
                                                      ggy_s[idx, None] * g_e, red((gx * g_e).sum(1))),
        "segmented_mean/forward": lambda red: red(x) / np.maximum(cnt, 1)[:, None],
        "segmented_mean/backward": None,
        "segmented_mean/double_backward": lambda red: red(gx) / np.maximum(cnt, 1)[:, None],
        "segmented_rms_norm/forward": lambda red: np.sqrt(red((x * x).sum(1)) / np.maximum(cnt, 1)),
        "segmented_rms_norm/backward": lambda red: (g_s1 * rms_inv(x, red))[idx, None] * x,
        "segmented_rms_norm/double_backward": lambda red: rms_dbl(red),
        "segmented_matvec/forward": None,
        "segmented_matvec/backward": lambda red: (np.einsum("ijk,ik->ij", m[idx], g_e),
                                                  red((x[:, :, None] * g_e[:, None, :]).reshape(n, 9))),
        "segmented_matvec/double_backward": lambda red: (
            np.einsum("ijk,ij->ik", m[idx], gx) + np.einsum("ijk,ij->ik", ggm[idx], x),
            np.einsum("ijk,ik->ij", ggm[idx], g_e),
            red((gx[:, :, None] * g_e[:, None, :]).reshape(n, 9))),
    }

    def rms_dbl(red):
        inv = rms_inv(x, red)
        q = red((gx * x).sum(1))
        a, b = g_s1 * inv, g_s1 * inv ** 3 * cnt * q
        return q * inv, a[idx, None] * gx - b[idx, None] * x

    gathers = {
        "segmented_sum/backward": lambda: g_s3[idx],
        "segmented_dot/backward": lambda: (g_s1[idx, None] * y, g_s1[idx, None] * x),
        "segmented_mul/forward": lambda: x * y_s[idx, None],
        "segmented_mean/backward": lambda: g_s3[idx] / cnt[idx, None],
        "segmented_matvec/forward": lambda: np.einsum("ijk,ij->ik", m[idx], x),
    }
    for name, f in fns.items():
        if f is None:
            yield name, {"gather": gathers[name]}
        else:
            yield name, {"add.at": lambda f=f: f(seg.add_at), "bincount": lambda f=f: f(seg.bincount),
                         "reduceat": lambda f=f: f(seg.reduceat)}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bench", default=None, help="path to segops_bench_cpu (default: look in build dirs)")
    ap.add_argument("--n", type=int, default=1 << 22)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--dtype", default="both", choices=["f32", "f64", "both"])
    a = ap.parse_args()
    bench = a.bench or find_bench()
    if not bench:
        sys.exit("segops_bench_cpu not found: build it, or pass --bench")
    cmd = [bench, "--csv", "--n", str(a.n), "--reps", str(a.reps), "--threads", str(a.threads), "--dtype", a.dtype]
    rows = list(csv.DictReader(io.StringIO(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)))
    segops = {(r["function"], r["dtype"]): r for r in rows}

    rng = np.random.default_rng(1)
    lens = rng.integers(16, 49, a.n // 16 + 1)
    idx = np.repeat(np.arange(lens.size, dtype=np.int64), lens)[: a.n]
    s = int(idx[-1]) + 1
    print(f"numpy {np.__version__}; N={a.n} vec3, S={s}, sorted idx; best of {a.reps}; segops: {' '.join(cmd[1:])}")
    print(f"{'function':36} {'dtype':8} {'segops ms':>10} {'GB/s':>7} {'memcpy':>7} {'numpy ms':>10} "
          f"{'numpy variant':14} {'numpy/segops':>12}")
    dtypes = {"f32": ["float32"], "f64": ["float64"], "both": ["float32", "float64"]}[a.dtype]
    for dname in dtypes:
        dt = np.dtype(dname)
        for name, variants in functions(idx, s, dt, rng):
            r = segops.get((name, dname))
            times = {v: best_time(f, a.reps) for v, f in variants.items()}
            best_v = min(times, key=times.get)
            seg_ms = float(r["seconds"]) * 1e3 if r else float("nan")
            ratio = times[best_v] * 1e3 / seg_ms if r else float("nan")
            print(f"{name:36} {dname:8} {seg_ms:10.2f} {float(r['gbps']) if r else 0:7.2f} "
                  f"{float(r['memcpy_gbps']) if r else 0:7.2f} {times[best_v] * 1e3:10.2f} {best_v:14} {ratio:12.1f}",
                  flush=True)


if __name__ == "__main__":
    main()

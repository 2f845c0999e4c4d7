#!/usr/bin/env python3
"""overhead.py: the Python client's cost per call above the empty call, on a daemon it starts (CPU
backend, one compute thread). The floor, measured in the same run: libsegops' own empty call
(segmented_sum forward, N = S = 0) over the native channel from C (bench/client/lib_overhead --only
native), and the same C call at N; then segops.Client and segops.torch calls at N through the C
extension (segops.torch with torch's int64 idx, and with the numpy call's int32 idx: the call that
carries the same bytes as the numpy floor), and the pure-Python client for comparison. With two or
more CPUs the daemon runs on CPU 1 and this process and the C floor on CPU 0.

usage: overhead.py --segopsd PATH [--lib-overhead PATH] [--n 1024] [--calls 10000] [--rounds 3]
                   [--spin-matrix] [--no-pure]
Prints the median microseconds per call of each way (the median over rounds of each round's median:
the machine is shared and noisy), what each costs above the empty call and above the C call at the
same N, and the targets (segops.Client <= 15 us, segops.torch <= 30 us above the empty
call). --spin-matrix repeats everything for the client's spin (spin_us 50, 0) x the daemon's
(--native-spin-us 50, 0)."""

import argparse
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "clients", "python", "src"))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests"))  # the tests' daemon runner

import numpy as np  # noqa: E402

import segops  # noqa: E402
from segopsd_proc import Daemon  # noqa: E402

TARGETS = {"segops.Client": 15.0, "segops.torch": 30.0}  # us above the empty call
EMPTY_APPLY = "torch.autograd.Function.apply, empty (forward saves idx, returns new_empty(1))"
TORCH_I32 = "segops.torch, idx int32 (the numpy call's arrays)"


def per_call_us(fn, calls):
    """Median microseconds of calls calls of fn, each timed."""
    t = []
    clock = time.perf_counter_ns
    for _ in range(calls):
        t0 = clock()
        fn()
        t.append(clock() - t0)
    t.sort()
    return t[len(t) // 2] / 1e3


def c_floor(lib_overhead, url, n, calls, cpu, spin_us):
    """libsegops' native call from C, polling for spin_us as the Python client does: {0: the empty
    call's us, n: the call at n's us}."""
    cmd = [lib_overhead, url, "--calls", str(calls), "--n", str(n), "--only", "native"]
    if cpu is not None:
        cmd = ["taskset", "-c", str(cpu)] + cmd
    env = dict(os.environ, SEGOPS_CLIENT_SPIN_US=str(spin_us))
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=True, env=env).stdout
    got = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) >= 4 and parts[1:3] == ["libsegops", "native"]:
            got[int(parts[0])] = float(parts[3])
    return got


def python_ways(url, n, spin_us, pure):
    """(name, zero-argument call) for each Python way at size n."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal(n)  # the C floor's call: x (N,) float64, one segment
    idx = np.zeros(n, np.int32)
    c = segops.Client(url, spin_us=spin_us)
    xe = c.empty(n)
    xe[:] = x
    ways = [("segops.Client", lambda: c.segmented_sum(x, idx, 1)),
            ("segops.Client, x from Client.empty", lambda: c.segmented_sum(xe, idx, 1))]
    try:
        import torch

        import segops.torch as st

        torch.set_num_threads(1)
        xt = torch.from_numpy(x.copy())
        xg = xt.clone().requires_grad_(True)
        it = torch.from_numpy(idx.astype(np.int64))
        class Empty(torch.autograd.Function):  # the floor of a call that autograd records
            @staticmethod
            def forward(ctx, x, idx):
                ctx.save_for_backward(idx)
                return x.new_empty((1,))

            @staticmethod
            def backward(ctx, g):
                return g.expand(n), None

        it32 = torch.from_numpy(idx)  # the numpy call's idx, for the like-for-like row
        ways += [("segops.torch (no grad)", lambda: st.segmented_sum(xt, it, 1, client=c)),
                 ("segops.torch", lambda: st.segmented_sum(xg, it, 1, client=c)),
                 (TORCH_I32, lambda: st.segmented_sum(xg, it32, 1, client=c)),
                 (EMPTY_APPLY, lambda: Empty.apply(xg, it))]
    except ImportError:
        print("overhead: no torch here: the segops.torch rows are left out")
    if pure:
        from segops.client import PurePythonClient

        p = PurePythonClient(url, transport="http")
        ways.append(("pure-Python client (HTTP, TCP)", lambda: p.segmented_sum(x, idx, 1)))
    want = np.array([x.sum()])
    for name, f in ways:
        if name == EMPTY_APPLY:
            continue
        got = f()
        got = got.detach().numpy() if hasattr(got, "detach") else got
        assert np.allclose(got, want), f"{name}: wrong result"
    return c, ways


def run(a, client_spin, daemon_spin):
    cpus = os.sched_getaffinity(0)
    pin = len(cpus) >= 2
    args = ["--backend", "cpu", "--threads", "1", "--log-level", "error"]
    if daemon_spin is not None:
        args += ["--native-spin-us", str(daemon_spin)]
    d = Daemon(a.segopsd, args, wrapper=("taskset", "-c", "1") if pin else ())
    try:
        if pin:
            os.sched_setaffinity(0, {0})
        c, ways = python_ways(d.url, a.n, client_spin, not a.no_pure)
        assert c.transport_used == "native", c.transport_used
        rows = {name: [] for name, _ in ways}
        floor0, floor_n = [], []
        for f in ways:  # warm
            per_call_us(f[1], 200)
        for _ in range(a.rounds):
            fl = c_floor(a.lib_overhead, d.url, a.n, a.calls, 0 if pin else None, int(c.spin_us))
            floor0.append(fl[0])
            floor_n.append(fl[a.n])
            for name, f in ways:
                calls = a.calls if "pure" not in name else max(a.calls // 10, 100)
                rows[name].append(per_call_us(f, calls))
        c.close()
    finally:
        if pin:
            os.sched_setaffinity(0, cpus)
        d.stop(20)
        d.kill()
    e0, en = statistics.median(floor0), statistics.median(floor_n)
    spin = f"client spin_us {client_spin if client_spin is not None else 'default'}, daemon --native-spin-us " \
           f"{daemon_spin if daemon_spin is not None else 'default'}"
    print(f"\n### N = {a.n}, {spin}; {a.rounds} rounds of {a.calls} calls, medians "
          f"({'client CPU 0, daemon CPU 1' if pin else 'not pinned'})\n")
    print("| way | median µs/call | above the empty call | above C at the same N | target |")
    print("|---|---|---|---|---|")
    print(f"| C: libsegops native, empty call (N = 0) | {e0:.2f} | floor | | |")
    print(f"| C: libsegops native, N = {a.n} | {en:.2f} | {en - e0:+.2f} | | |")
    for name, ts in rows.items():
        m = statistics.median(ts)
        target = TARGETS.get(name)
        ok = "" if target is None else f"<= {target:g} ({'met' if m - e0 <= target else 'missed'})"
        print(f"| {name} | {m:.2f} | {m - e0:+.2f} | {m - en:+.2f} | {ok} |")
    if "segops.torch" in rows and EMPTY_APPLY in rows:
        # segops.torch eager, autograd recording, against what it cannot do without: an empty
        # Function.apply on the same inputs plus the numpy client's call at the same N, + 1 us
        floor = statistics.median(rows[EMPTY_APPLY]) + statistics.median(rows["segops.Client"])
        for name in ("segops.torch", TORCH_I32):
            if name not in rows:
                continue
            m = statistics.median(rows[name])
            print(f"{name} eager {m:.2f} us against empty Function.apply + segops.Client {floor:.2f} us: "
                  f"{m - floor:+.2f} us (target <= +1: {'met' if m - floor <= 1.0 else 'missed'})")
    print(f"(rounds: empty call {', '.join(f'{v:.1f}' for v in floor0)}; "
          + "; ".join(f"{k} {', '.join(f'{v:.1f}' for v in ts)}" for k, ts in rows.items()) + ")")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--segopsd", required=True)
    ap.add_argument("--lib-overhead", default=None, help="bench/client/lib_overhead (default: beside segopsd's build)")
    ap.add_argument("--n", type=int, default=1024)
    ap.add_argument("--calls", type=int, default=10000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--spin-matrix", action="store_true", help="client spin 50 / 0 x daemon spin 50 / 0")
    ap.add_argument("--no-pure", action="store_true", help="leave out the pure-Python client")
    a = ap.parse_args()
    if a.lib_overhead is None:
        a.lib_overhead = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(a.segopsd))), "bench", "client",
                                      "lib_overhead")
    if not segops.native_available():
        raise SystemExit(f"overhead: segops' C extension is not in use here ({segops._ext.why_not})")
    if a.spin_matrix:
        for cs in (50, 0):
            for ds in (50, 0):
                run(a, cs, ds)
    else:
        run(a, None, None)


if __name__ == "__main__":
    main()

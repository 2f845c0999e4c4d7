#!/usr/bin/env python3
"""step_cost.py: the client's own cost of one MLIP training step through segops.torch (the step of
bench/worker/worker_bench.py: forward, backward with create_graph, double backward), measured in
instructions with callgrind, which the noise of a shared machine does not move:

    valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file=/tmp/cg.%p \\
        python3 bench/client/step_cost.py --segopsd build/server/segopsd --op sum --log2n 10

Only the timed steps are collected (the driver zeroes and dumps through callgrind_control around
them); it prints instructions per step (callgrind_annotate on the dump shows where they go).
Without valgrind it prints the steps' CPU time instead; --profile prints cProfile's view.
--fake answers each daemon call from a recorded answer (the same tensors) without the exchange: the
cost of segops.torch and torch's autograd alone (with the C extension the answers replace its
run_torch, so the extension's own argument and output handling is not counted either).
--fake-http answers each HTTP exchange of the pure-Python client (segops.client.PurePythonClient)
from a recorded one: that client's Python, HTTP and decoding without the daemon.

Every run ends by checking one more step's gradient against plain torch's (worker_bench's check:
printed, and over its tolerance exits 1), so a replayed run is known to replay the real one. --smoke runs the
four ways in turn (a few steps each; the CTest smoke test).

usage: step_cost.py --segopsd PATH | --url URL  [--op sum] [--log2n 10] [--steps 50]
                    [--transport native] [--backend cpu] [--fake | --fake-http | --local | --smoke]
                    [--pin CPU] [--profile | --torch-profile]
"""

import argparse
import os
import resource
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "clients", "python", "src"))
sys.path.insert(0, os.path.join(HERE, "..", "worker"))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests"))


def under_callgrind():
    try:
        with open(f"/proc/{os.getpid()}/cmdline", "rb") as f:
            return b"valgrind" in f.read() or "valgrind" in os.environ.get("LD_PRELOAD", "")
    except OSError:
        return False


def callgrind(cmd):
    """callgrind_control -i (instrumentation on), -z (zero) or -d (dump) on this process; it acts
    while we wait here."""
    args = [cmd, "on"] if cmd == "-i" else [cmd]
    subprocess.run(["callgrind_control", *args, str(os.getpid())], check=True, stdout=subprocess.DEVNULL)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--segopsd")
    g.add_argument("--url")
    ap.add_argument("--op", default="sum")
    ap.add_argument("--log2n", type=int, default=10)
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--transport", default="native", help="native, unix, http or local (segops.Client's)")
    ap.add_argument("--backend", default="cpu", help="the started daemon's backend (cpu, cuda, auto)")
    ap.add_argument("--fake", action="store_true")
    ap.add_argument("--fake-http", action="store_true")
    ap.add_argument("--local", action="store_true")
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--pin", type=int, default=None,
                    help="pin this client to one CPU, after the daemon it starts (which keeps every CPU)")
    ap.add_argument("--torch-profile", action="store_true",
                    help="print torch.profiler's table of the steps' operators (CPU time by op)")
    ap.add_argument("--smoke", action="store_true",
                    help="run local, --fake, --fake-http and the real exchange in turn (each a process)")
    a = ap.parse_args()

    try:
        import torch

        import segops
        import worker_bench as wb
    except ImportError as e:
        print(f"SKIP: step_cost needs numpy, torch and the segops client ({e})")
        sys.exit(77)
    if a.smoke:
        sys.exit(smoke(a))

    torch.set_num_threads(1)
    torch.set_num_interop_threads(1)
    daemon = None
    url = a.url
    if a.segopsd:
        import tempfile

        sock = os.path.join(tempfile.mkdtemp(prefix="segops-sc-"), "segopsd.sock")  # as worker_bench
        daemon, url = wb.start_daemon(a.segopsd, a.backend, sock if wb.supports_unix(a.segopsd) else None)
    if a.pin is not None:
        os.sched_setaffinity(0, {a.pin})
    op = "segmented_" + a.op
    try:
        if a.fake_http:  # the pure-Python client's HTTP exchanges are what it replays
            from segops.client import PurePythonClient

            unix = a.transport == "unix" and a.segopsd and wb.supports_unix(a.segopsd)  # its unix:/// URL
            client = PurePythonClient("unix://" + sock if unix else url, transport="unix" if unix else "http")
        else:
            client = segops.Client("local" if a.transport == "local" else url, transport=a.transport)
        inputs, idx_t, idx_np, s = wb.make_inputs(op, 1 << a.log2n, 1000)
        fn = wb.step_fn("local" if a.local else "x", op, idx_t, idx_np, s, {"x": client}, url)
        for _ in range(5):
            wb.step(fn, inputs)
        print(f"transport {client.transport_used}")
        # The replays must hand the step the values the daemon gave (wrong values would time other
        # arithmetic, e.g. denormals, and fail the gradient check at the end); what they do for that
        # beyond the client's own work is timed (this thread's CPU) and taken off the result.
        replay = {"cpu": 0.0, "i": 0}

        def timed(fn, *args):
            t0 = time.thread_time()
            res = fn(*args)
            replay["cpu"] += time.thread_time() - t0
            return res

        if a.fake and getattr(client, "_nc", None) is not None:
            # The extension's calls answered with fresh copies of what the daemon answered, in
            # the order of a step's calls.
            client._nc = Replay(client._nc, timed)
            wb.step(fn, inputs)
            client._nc.replaying = True
            for _ in range(3):
                wb.step(fn, inputs)
        elif a.fake:
            # The pure-Python client's calls answered likewise.
            real = type(client).call
            answers = []
            def record(self, *args, **kw):
                res = real(self, *args, **kw)
                answers.append(fresh(res))
                return res
            type(client).call = record
            wb.step(fn, inputs)
            turn = iter(range(1 << 62))
            def fake(self, op, pass_, args, *, outputs=None, versions=None):
                return timed(fresh, answers[next(turn) % len(answers)])
            type(client).call = fake
            for _ in range(3):
                wb.step(fn, inputs)
        if a.fake_http:
            # Each HTTP exchange answered with what the daemon sent: the answer's bytes, or the
            # arrays the reader decoded as it read (their decoding is not replayed).
            real_rt = type(client)._roundtrip
            raws = []
            def record_rt(self, method, path, body=None, length=0, headers=None, read=None):
                def rec(resp):
                    raw = read(resp)
                    raws.append(fresh(raw))
                    return raw
                return real_rt(self, method, path, body, length, headers, rec)
            type(client)._roundtrip = record_rt
            wb.step(fn, inputs)
            turn2 = iter(range(1 << 62))
            def fake_rt(self, method, path, body=None, length=0, headers=None, read=None):
                return timed(fresh, raws[next(turn2) % len(raws)])
            type(client)._roundtrip = fake_rt
            for _ in range(3):
                wb.step(fn, inputs)
        cg = under_callgrind()
        if a.profile:
            import cProfile
            import pstats

            prof = cProfile.Profile()
            prof.enable()
        if cg:
            callgrind("-i")  # instrumentation on (started with --instr-atstart=no)
            callgrind("-z")
        tprof = None
        if a.torch_profile:
            tprof = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU])
            tprof.__enter__()
        replay["cpu"] = 0.0
        r0, w0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
        for _ in range(a.steps):
            wb.step(fn, inputs)
        w1, r1 = time.perf_counter(), resource.getrusage(resource.RUSAGE_SELF)
        replay_us = replay["cpu"] * 1e6 / a.steps
        if tprof is not None:
            tprof.__exit__(None, None, None)
            print(tprof.key_averages().table(sort_by="self_cpu_time_total", row_limit=25))
        if cg:
            callgrind("-d")
        if a.profile:
            prof.disable()
            pstats.Stats(prof).sort_stats("tottime").print_stats(40)
        err = wb.grad_error(op, fn, inputs, idx_t, s)
        user, sys_, per = r1.ru_utime - r0.ru_utime, r1.ru_stime - r0.ru_stime, 1e6 / a.steps
        print(f"{op} 2^{a.log2n} {a.transport}{' fake' if a.fake else ''}{' fake-http' if a.fake_http else ''}{' local' if a.local else ''}: {a.steps} steps, "
              f"{(user + sys_) * per - replay_us:.0f} us CPU per step"
              + (f" (after {replay_us:.0f} us per step of the replay's own copies)" if replay_us else ""))
        print(f"  per step: user {user * per:.0f} us, sys {sys_ * per:.0f} us, "
              f"wall {(w1 - w0) * per:.0f} us, context switches {(r1.ru_nvcsw - r0.ru_nvcsw) / a.steps:.1f} voluntary / "
              f"{(r1.ru_nivcsw - r0.ru_nivcsw) / a.steps:.1f} involuntary, "
              f"page faults {(r1.ru_minflt - r0.ru_minflt) / a.steps:.1f}")
        print(f"  gradient vs plain torch: max rel. error {err:.1e}")
        client.close()
        if not err <= wb.GRAD_TOL:
            print("step_cost: the step's gradient differs from plain torch's", file=sys.stderr)
            return 1
        return 0
    finally:
        if daemon is not None:
            daemon.stop()


def fresh(answer):
    """An answer to replay, as new objects: torch's autograd may accumulate a gradient into an
    answer's array in place (an answer's bytes cannot change and replay as they are)."""
    if isinstance(answer, dict):
        return {k: v.copy() if hasattr(v, "copy") else v for k, v in answer.items()}
    if isinstance(answer, tuple):
        return tuple(fresh(v) for v in answer)
    if hasattr(answer, "clone"):
        return answer.clone()
    return answer


class Replay:
    """Stands for the extension's client (segops._native.Client): its run_torch answers are
    recorded while replaying is False, then given back (fresh copies, in turn) without a call."""

    def __init__(self, real, timed):
        self.real, self.timed, self.replaying, self.answers, self.turn = real, timed, False, [], 0

    def run_torch(self, *args):
        if not self.replaying:
            res = self.real.run_torch(*args)
            self.answers.append(fresh(res))
            return res
        res = self.answers[self.turn % len(self.answers)]
        self.turn += 1
        return self.timed(fresh, res)

    def __getattr__(self, name):
        return getattr(self.real, name)


def smoke(a):
    """Each way once, in its own process (the replays patch the client's class); every one must print
    its CPU per step and pass the gradient check."""
    base = [sys.executable, os.path.abspath(__file__), "--op", a.op, "--log2n", str(a.log2n),
            "--steps", str(a.steps), "--transport", a.transport, "--backend", a.backend]
    base += ["--segopsd", a.segopsd] if a.segopsd else ["--url", a.url]
    bad = 0
    for mode in ("--local", "--fake", "--fake-http", None):
        r = subprocess.run(base + ([mode] if mode else []), capture_output=True, text=True, timeout=300)
        sys.stdout.write(r.stdout)
        ok = r.returncode == 0 and "us CPU per step" in r.stdout and "max rel. error" in r.stdout
        if not ok:
            bad += 1
            print(f"step_cost --smoke: {mode or 'real'} failed (exit {r.returncode})\n{r.stderr[-2000:]}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())

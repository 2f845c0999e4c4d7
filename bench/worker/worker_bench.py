#!/usr/bin/env python3
"""worker_bench.py: the headline benchmark. One MLIP training step per op through segops.torch
(forward, backward with create_graph, double backward), against the same math in plain torch on
the worker's own core (torch.set_num_threads(1)), measured in the same run:

    out = op(*inputs, idx, S); loss = (out**2).sum()
    g = torch.autograd.grad(loss, inputs, create_graph=True)
    sum((gi**2).sum() for gi in g).backward()

vec3 float32, about 32 elements per segment (every segment non-empty). For each op, size N and
transport: one worker (median step latency) and W worker processes at once (steps/s summed over
a common window after a warm-up; the processes start the window together at an agreed time). A
cell whose one-worker step takes longer than window / --min-steps gets a window of --min-steps such
steps instead (both runs of that side), so slow cells count whole steps.

usage: worker_bench.py (--segopsd PATH [--backend cpu|cuda] | --url URL)
                       [--transport native|unix|http|local|all] [--ops sum,dot,...] [--sizes 10,14,17,20]
                       [--workers W] [--window S] [--warmup S] [--min-steps K] [--json PATH] [--smoke]
                       [--daemon-arg=--FLAG=VALUE ...]   (extra flags for the daemon it starts)
                       [--daemon-env=NAME=VALUE ...]     (environment for the daemon it starts)
                       [--worker-env=NAME=VALUE ...]     (environment for every worker process, local and
                                                          remote alike, e.g. GLIBC_TUNABLES)
Transports: segops.Client's ("native": the native channel, "unix" and "http": HTTP bodies, "local":
segops.Client("local"), the CPU backend in the worker's own process, no daemon; "shm" is taken as
"native"). "local" in the tables' other columns is the plain-torch step.
Prints one markdown table per transport (ratios remote/local: above 1 means the daemon wins)
and writes every measurement to --json. Beside the rates it reports where the cores went during
the W-worker windows: CPU microseconds per step in one client process (median over the workers,
against the same for the local step) and in the daemon (all its threads; only when this bench
started it), and the fraction of all the machine's cores that were busy (/proc/stat).
"""

import argparse
import http.client
import json
import multiprocessing as mp
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.join(HERE, "..", "..", "clients", "python", "src")

OPS = ("segmented_sum", "segmented_dot", "segmented_mul", "segmented_mean", "segmented_rms_norm", "segmented_matvec")
TRANSPORTS = ("native", "unix", "http", "local")
PLAIN = "plain"  # the mode of the plain-torch step (the tables' "local" columns)
SEG = 32  # elements per segment on average


# ---------------------------------------------------------------- the step, local and remote


def make_inputs(op, n, seed):
    """(inputs requiring grad, idx int64 tensor, idx int32 numpy, S) for one op at size n."""
    import numpy as np
    import torch

    rng = np.random.default_rng(seed)
    s = max(n // SEG, 1)
    # Every segment gets one element, the rest fall at random: sorted, mean length n/s.
    idx = np.sort(np.concatenate([np.arange(s), rng.integers(0, s, n - s)])).astype(np.int32)

    def t(*shape):
        return torch.from_numpy(rng.standard_normal(shape).astype(np.float32)).requires_grad_(True)

    if op in ("segmented_sum", "segmented_mean", "segmented_rms_norm"):
        inputs = (t(n, 3),)
    elif op == "segmented_dot":
        inputs = (t(n, 3), t(n, 3))
    elif op == "segmented_mul":
        inputs = (t(n, 3), t(s))
    elif op == "segmented_matvec":
        inputs = (t(n, 3), t(s, 3, 3))
    else:
        raise SystemExit(f"worker_bench: unknown op {op}")
    return inputs, torch.from_numpy(idx.astype(np.int64)), idx, s


def local_op(op, inputs, idx, s):
    """The op in plain torch (index_add_ for the reductions, gathers for the broadcasts)."""
    import torch

    x = inputs[0]
    if op == "segmented_sum":
        return x.new_zeros((s, 3)).index_add(0, idx, x)
    if op == "segmented_dot":
        return x.new_zeros((s,)).index_add(0, idx, (x * inputs[1]).sum(-1))
    if op == "segmented_mul":
        return x * inputs[1][idx].unsqueeze(-1)
    cnt = torch.bincount(idx, minlength=s).clamp(min=1).to(x.dtype)
    if op == "segmented_mean":
        return x.new_zeros((s, 3)).index_add(0, idx, x) / cnt.unsqueeze(-1)
    if op == "segmented_rms_norm":
        return torch.sqrt(x.new_zeros((s,)).index_add(0, idx, (x * x).sum(-1)) / cnt)
    if op == "segmented_matvec":
        # out[i][k] = sum_j m[s][j][k] v[i][j]; one column at a time was the fastest of
        # broadcast-sum, einsum, bmm and row sums measured on one core.
        mi = inputs[1].reshape(s, 9)[idx].reshape(-1, 3, 3)
        return torch.stack([(x * mi[:, :, k]).sum(1) for k in range(3)], 1)
    raise SystemExit(f"worker_bench: unknown op {op}")


def step(fn, inputs):
    import torch

    for t in inputs:
        t.grad = None
    out = fn(inputs)
    loss = (out * out).sum()
    g = torch.autograd.grad(loss, inputs, create_graph=True)
    sum((gi * gi).sum() for gi in g).backward()
    return inputs[0].grad


GRAD_TOL = 1e-3  # largest remote-vs-local gradient difference over the largest value (float32)


def grad_error(op, fn, inputs, idx_t, s):
    """One step through fn against the same step in plain torch: the largest difference of the
    gradients over the largest local value (compare with GRAD_TOL)."""
    want = step(lambda i: local_op(op, i, idx_t, s), inputs).clone()
    got = step(fn, inputs)
    return float((got - want).abs().max() / max(float(want.abs().max()), 1.0))


def make_client(url, transport):
    import segops

    try:
        return segops.Client("local" if transport == "local" else url, transport=transport)
    except TypeError:  # a client without transports: HTTP bodies only
        if transport != "http":
            raise SystemExit(f"worker_bench: this segops client has no transport={transport!r}")
        return segops.Client(url)


# What a worker on a GPU node could do instead of calling segopsd, each in its own CUDA context:
#   offload  the same segment ops run by the worker itself on the GPU (inputs to the GPU and the
#            results back on every call; the rest of the step stays on its CPU)
#   gpu      the whole step on the GPU (inputs made there once; each step synchronises at its end)
ALTERNATIVES = ("offload", "gpu")


def on_gpu(mode, inputs, idx_t):
    """The inputs and idx as the alternative `mode` starts a step with."""
    import torch

    if mode == "gpu":
        return tuple(t.detach().cuda().requires_grad_(True) for t in inputs), idx_t.cuda()
    return inputs, idx_t.cuda()


# The remote step's idx, made once as a batch index is, in the client's memory (segops.torch.empty)
# unless --idx-copied: then in torch's, copied into the client's memory on every call.
IDX_IN_CLIENT_MEMORY = os.environ.get("SEGOPS_BENCH_IDX_COPIED") != "1"


def step_fn(mode, op, idx_t, idx_np, s, clients, url, idx_dtype="int32"):
    if mode in (PLAIN, "gpu"):  # for gpu, idx_t and the inputs are on the GPU already
        return lambda inputs: local_op(op, inputs, idx_t, s)
    if mode == "offload":
        return lambda inputs: local_op(op, [t.cuda() for t in inputs], idx_t, s).cpu()
    import torch

    import segops.torch as st

    c = clients.get(mode)
    if c is None:
        c = clients[mode] = make_client(url, mode)
    f = getattr(st, op)
    # made once, as a torch user's batch index is; int64 is torch's default index dtype
    idx_remote = torch.from_numpy(idx_np if idx_dtype == "int32" else idx_np.astype("int64"))
    if IDX_IN_CLIENT_MEMORY:  # in the client's memory (segops.torch.empty): sent without a copy
        idx_remote = st.empty(idx_remote.shape, dtype=idx_remote.dtype, client=c).copy_(idx_remote)
    return lambda inputs: f(*inputs, idx_remote, s, client=c)


# ---------------------------------------------------------------- worker processes


def worker_main(rank, conn, url, idx_dtype="int32", cpus=None):
    """One worker process: one torch thread; runs the measurements the parent asks for. cpus: the
    CPUs this process may run on (all of them when None)."""
    if cpus:
        os.sched_setaffinity(0, cpus)
    sys.path.insert(0, SRC)
    import torch

    torch.set_num_threads(1)
    torch.set_num_interop_threads(1)
    clients = {}
    while True:
        msg = conn.recv()
        if msg is None:
            break
        mode, op, n, warmup, window = msg
        try:
            inputs, idx_t, idx_np, s = make_inputs(op, n, 1000 + rank)
            if mode in ALTERNATIVES:
                inputs, idx_t = on_gpu(mode, inputs, idx_t)
            fn = step_fn(mode, op, idx_t, idx_np, s, clients, url, idx_dtype)
            sync = torch.cuda.synchronize if mode == "gpu" else (lambda: None)
            step(fn, inputs)  # first step: connections, regions, allocator warm
            sync()
            check = None
            if rank == 0 and mode not in (PLAIN,) + ALTERNATIVES:
                check = grad_error(op, fn, inputs, idx_t, s)  # the remote step computes the local one's
            conn.send(("ready", None))
            t0 = conn.recv()  # the agreed start of the window (time.time())
            t1 = t0 + window
            count = 0.0  # steps before t0 are the warm-up; they count nothing
            lat = []
            cpu0 = cpu1 = None  # this process's CPU seconds around the steps timed for it
            cpu_steps = 0  # steps between cpu0 and cpu1: from the first that starts inside the window
            while True:
                a = time.time()
                if a >= t1:
                    break
                if cpu0 is None and a >= t0:
                    cpu0 = time.process_time()
                step(fn, inputs)
                sync()
                b = time.time()
                if cpu0 is not None and cpu1 is None:
                    cpu_steps += 1
                    if b >= t1:
                        cpu1 = time.process_time()
                # Steps straddling an edge count by the fraction inside the window.
                inside = min(b, t1) - max(a, t0)
                if inside > 0:
                    count += inside / (b - a)
                    if a >= t0:
                        lat.append(b - a)
            cpu_step = (cpu1 - cpu0) / cpu_steps if cpu1 is not None and cpu_steps else float("nan")
            conn.send(("done", {"steps": count, "lat": lat, "check": check, "cpu_step_s": cpu_step}))
        except Exception as e:  # reported to the parent, which stops
            conn.send(("error", f"{type(e).__name__}: {e}"))
    for c in clients.values():
        c.close()


def proc_cpu_s(pid):
    """User + system CPU seconds of process pid (all its threads), or None."""
    if not pid:
        return None
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


def machine_cpu():
    """(busy jiffies, total jiffies) over all cores, from /proc/stat, or None."""
    try:
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:9]]  # guest time is inside user already
    except (OSError, ValueError):
        return None
    idle = v[3] + (v[4] if len(v) > 4 else 0)  # idle + iowait
    return sum(v) - idle, sum(v)


def daemon_busy(url):
    """Seconds each backend worker (CPU thread or CUDA lane) has spent running calls, from the
    daemon's /metrics (segops_device_busy_seconds_total), or None (not an http:// URL, no answer)."""
    if not url or not url.startswith("http://"):
        return None
    host, _, port = url[len("http://"):].split("/")[0].rpartition(":")
    try:
        c = http.client.HTTPConnection(host, int(port), timeout=5)
        c.request("GET", "/metrics")
        text = c.getresponse().read().decode()
        c.close()
    except (OSError, ValueError, http.client.HTTPException):
        return None
    got = re.findall(r'^segops_device_busy_seconds_total\{device="(\d+)"\} (\S+)$', text, re.M)
    return [float(v) for _, v in sorted(got, key=lambda g: int(g[0]))] or None


def run1(pool, mode, op, n, warmup, window, min_steps):
    """One worker's run of a cell, and the window for the cell's W-worker run: `window`, or longer
    when one step takes more than window / min_steps (then the one-worker run is repeated with
    that window too, so its median latency has whole steps to take)."""
    r = pool.run(1, mode, op, n, warmup, window)[0][0]
    step_s = statistics.median(r["lat"]) if r["lat"] else window / max(r["steps"], 1e-3)
    if min_steps * step_s <= window:
        return r, window
    longer = min_steps * step_s
    r = pool.run(1, mode, op, n, warmup, longer)[0][0]
    return r, longer


class Pool:
    def __init__(self, w, url, idx_dtype="int32", cpus=None):
        self.url = url
        ctx = mp.get_context("spawn")
        self.conns, self.procs = [], []
        for r in range(w):
            a, b = ctx.Pipe()
            p = ctx.Process(target=worker_main, args=(r, b, url, idx_dtype, cpus), daemon=True)
            p.start()
            self.conns.append(a)
            self.procs.append(p)

    def run(self, k, mode, op, n, warmup, window, daemon_pid=None):
        """Runs the measurement on the first k workers at once; returns their results and what
        the machine's CPUs did over the window: {"daemon_cpu_s", "busy", "lanes_busy"} (the
        daemon's CPU seconds, when its pid is given; the fraction of all cores busy, from
        /proc/stat; the fraction of the window its busiest backend worker ran calls, from its
        /metrics, when it was started here)."""
        conns = self.conns[:k]
        for c in conns:
            c.send((mode, op, n, warmup, window))
        for c in conns:
            tag, v = c.recv()
            if tag == "error":
                raise SystemExit(f"worker_bench: {mode} {op} N={n}: {v}")
        t0 = time.time() + warmup + 0.02
        for c in conns:
            c.send(t0)
        time.sleep(max(t0 - time.time(), 0))
        d0, m0 = proc_cpu_s(daemon_pid), machine_cpu()
        b0 = daemon_busy(self.url) if daemon_pid else None
        time.sleep(max(t0 + window - time.time(), 0))
        d1, m1 = proc_cpu_s(daemon_pid), machine_cpu()
        b1 = daemon_busy(self.url) if daemon_pid else None
        out = []
        for c in conns:
            tag, v = c.recv()
            if tag == "error":
                raise SystemExit(f"worker_bench: {mode} {op} N={n}: {v}")
            out.append(v)
        busy = (m1[0] - m0[0]) / (m1[1] - m0[1]) if m0 and m1 and m1[1] > m0[1] else float("nan")
        lanes = max((y - x) / window for x, y in zip(b0, b1)) if b0 and b1 and len(b0) == len(b1) else float("nan")
        return out, {"daemon_cpu_s": d1 - d0 if d0 is not None and d1 is not None else float("nan"), "busy": busy,
                     "lanes_busy": lanes}

    def close(self):
        for c in self.conns:
            try:
                c.send(None)
            except OSError:
                pass
        for p in self.procs:
            p.join(10)
            if p.is_alive():
                p.kill()


# ---------------------------------------------------------------- the daemon


def parse_cpus(text):
    """A CPU list as taskset takes it ("0-11,14") -> sorted list of ints."""
    cpus = set()
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        cpus.update(range(int(lo), int(hi or lo) + 1))
    return sorted(cpus)


def start_daemon(path, backend, sock, extra=(), env=None, cpus=None):
    """The tests' daemon runner (tests/segopsd_proc.py): stderr to a file, address from its line;
    cpus: a CPU list the daemon and all its threads are confined to (taskset)."""
    sys.path.insert(0, os.path.join(HERE, "..", "..", "tests"))
    from segopsd_proc import Daemon

    args = ["--backend", backend] + (["--listen", "unix:" + sock] if sock else [])
    args += list(extra)
    try:
        d = Daemon(path, args, env=env, start_timeout=60, wrapper=("taskset", "-c", cpus) if cpus else ())
    except AssertionError as e:
        raise SystemExit(f"worker_bench: segopsd did not start: {str(e)[-2000:]}")
    return d, d.url


def supports_unix(path):
    try:
        h = subprocess.run([path, "--help"], capture_output=True, text=True, timeout=10).stdout
    except OSError:
        return False
    return "unix:" in h


# ---------------------------------------------------------------- report


def fmt_rate(v):
    return f"{v:,.0f}" if v >= 100 else f"{v:.1f}"


def table(rows, transport, w, backend):
    alts = [m for m in ALTERNATIVES if any(f"vs_{m}" in r for r in rows)]
    if alts:  # segopsd against what the worker could do with the GPU itself
        lines = [f"\n### transport {transport}, backend {backend}, W = {w}: segopsd against each worker using the GPU itself\n",
                 "| op | N | segopsd steps/s | " + " | ".join(f"{m} steps/s | segopsd/{m}" for m in alts) + " |",
                 "|---|---|---|" + "---|---|" * len(alts)]
        for r in rows:
            if r["transport"] == transport:
                lines.append(f"| {r['op'].replace('segmented_', '')} | 2^{r['log2n']} | {fmt_rate(r['remote_sps'])} | "
                             + " | ".join(f"{fmt_rate(r[m + '_sps'])} | **{r['vs_' + m]:.2f}**" for m in alts) + " |")
        extra = "\n".join(lines)
    else:
        extra = ""
    return _table_main(rows, transport, w, backend) + extra


def _table_main(rows, transport, w, backend):
    lines = [
        f"\n### transport {transport}, backend {backend}, W = {w} workers\n",
        "| op | N | 1 worker: local ms | segopsd ms | local/segopsd | "
        f"{w} workers: local steps/s | segopsd steps/s | **segopsd/local** | "
        "CPU µs/step: local | client | daemon | cores busy: local / segopsd | busiest backend worker |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        if r["transport"] != transport:
            continue
        lines.append(
            f"| {r['op'].replace('segmented_', '')} | 2^{r['log2n']} | {r['local_ms']:.3f} | {r['remote_ms']:.3f} | "
            f"{r['latency_ratio']:.2f} | {fmt_rate(r['local_sps'])} | {fmt_rate(r['remote_sps'])} | "
            f"**{r['throughput_ratio']:.2f}** | {r['local_cpu_us']:.0f} | {r['client_cpu_us']:.0f} | "
            f"{r['daemon_cpu_us']:.0f} | {r['local_busy']:.0%} / {r['remote_busy']:.0%} | "
            f"{r.get('lanes_busy', float('nan')):.0%} |"
        )
    return "\n".join(lines)


def env_pairs(pairs, flag):
    """{NAME: VALUE} from flag's NAME=VALUE arguments."""
    env = {}
    for kv in pairs:
        k, sep, v = kv.partition("=")
        if not sep or not k:
            raise SystemExit(f"worker_bench: {flag} wants NAME=VALUE, not {kv!r}")
        env[k] = v
    return env


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--segopsd", help="start this segopsd (port 0, plus a unix socket when it has one)")
    g.add_argument("--url", help="use a running daemon")
    ap.add_argument("--backend", default="cpu", choices=("auto", "cpu", "cuda"))
    ap.add_argument("--transport", default="native", help="native, unix, http, local, a comma list, all, or none (no daemon: --alternatives alone)")
    ap.add_argument("--ops", default=",".join(o.replace("segmented_", "") for o in OPS))
    ap.add_argument("--sizes", default="10,14,17,20", help="log2 N, comma-separated")
    ap.add_argument("--workers", type=int, default=os.cpu_count())
    ap.add_argument("--window", type=float, default=1.0, help="seconds measured per cell")
    ap.add_argument("--warmup", type=float, default=0.3, help="seconds of steps before each window")
    ap.add_argument("--min-steps", type=float, default=4,
                    help="a cell's window is at least this many one-worker steps long (slow cells get longer windows)")
    ap.add_argument("--json", default=None, help="write the measurements here")
    ap.add_argument("--idx-dtype", default="int32", choices=("int32", "int64"),
                    help="dtype of the idx tensor the remote step sends (torch's default is int64)")
    ap.add_argument("--idx-copied", action="store_true",
                    help="the remote step's idx in torch's memory (copied on every call), not segops.torch.empty's")
    ap.add_argument("--daemon-arg", action="append", default=[], metavar="FLAG=VALUE",
                    help="one more segopsd flag for the daemon this bench starts (repeatable), "
                    "e.g. --daemon-arg=--worker-spin-us=0")
    ap.add_argument("--daemon-cpus", default=None, metavar="LIST",
                    help="confine the daemon this bench starts to these CPUs (taskset -c LIST, e.g. 12-15)")
    ap.add_argument("--worker-cpus", default=None, metavar="LIST",
                    help="confine every worker process (local and remote alike) to these CPUs (e.g. 0-11)")
    ap.add_argument("--daemon-env", action="append", default=[], metavar="NAME=VALUE",
                    help="an environment variable for the daemon this bench starts (repeatable; the daemon "
                    "otherwise sees no SEGOPS_* variables), e.g. --daemon-env=SEGOPS_CUDA_LANES=4")
    ap.add_argument("--worker-env", action="append", default=[], metavar="NAME=VALUE",
                    help="an environment variable for every worker process (repeatable; the same processes run the "
                    "local and the remote steps, so both sides see it), e.g. "
                    "--worker-env=GLIBC_TUNABLES=glibc.malloc.trim_threshold=1073741824")
    ap.add_argument("--alternatives", default="", metavar="LIST",
                    help="also measure what a worker could do with the GPU itself, each in its own CUDA context: "
                    "offload (the same segment ops on the GPU, inputs there and results back on every call), "
                    "gpu (the whole step on the GPU); comma list; needs torch with CUDA")
    ap.add_argument("--smoke", action="store_true", help="tiny windows, for the CTest smoke test")
    a = ap.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # stop the daemon and workers too
    if a.smoke:
        a.window, a.warmup = 0.2, 0.05
    # "none": no segopsd rows, no daemon started (the alternatives alone, e.g. under NVIDIA MPS, which
    # a daemon started in the same run would join)
    transports = TRANSPORTS if a.transport == "all" else () if a.transport == "none" else tuple(a.transport.split(","))
    transports = tuple(dict.fromkeys("native" if t == "shm" else t for t in transports))  # shm: the old name
    for t in transports:
        if t not in TRANSPORTS:
            raise SystemExit(f"worker_bench: unknown transport {t!r} (want {', '.join(TRANSPORTS)} or all)")
    ops = tuple(o if o.startswith("segmented_") else "segmented_" + o for o in a.ops.split(","))
    for o in ops:
        if o not in OPS:
            raise SystemExit(f"worker_bench: unknown op {o!r}")
    sizes = tuple(int(x) for x in a.sizes.split(","))
    alts = tuple(x for x in a.alternatives.split(",") if x)
    for x in alts:
        if x not in ALTERNATIVES:
            raise SystemExit(f"worker_bench: unknown alternative {x!r} (want {', '.join(ALTERNATIVES)})")
    wenv, denv = env_pairs(a.worker_env, "--worker-env"), env_pairs(a.daemon_env, "--daemon-env")
    w = max(a.workers, 1)
    sys.path.insert(0, SRC)
    try:
        import numpy  # noqa: F401
        import torch  # noqa: F401

        import segops
    except ImportError as e:
        print(f"SKIP: worker_bench needs numpy, torch and the segops client ({e})")
        sys.exit(77)
    if alts and not torch.cuda.is_available():
        raise SystemExit(f"worker_bench: --alternatives {a.alternatives} needs torch with a usable GPU")


    daemon, tmpdir = None, None
    daemon_pid = None  # its CPU time is read from /proc when this bench started it
    url = a.url
    backend = a.backend
    if a.segopsd and transports:
        sock = None
        if "unix" in transports:
            if supports_unix(a.segopsd):
                tmpdir = tempfile.mkdtemp(prefix="segops-wb-")
                sock = os.path.join(tmpdir, "segopsd.sock")
            elif "unix" in transports:
                print("worker_bench: this segopsd has no unix listener; the unix rows use what the client falls back to")
        daemon, url = start_daemon(a.segopsd, a.backend, sock, a.daemon_arg, denv, a.daemon_cpus)
        daemon_pid = daemon.proc.pid
    usable = []
    for t in transports:  # a transport the daemon cannot serve is left out, and said so
        try:
            with make_client(url, t) as probe:
                probe.transport_used
            usable.append(t)
        except (segops.SegopsError, ValueError) as e:
            print(f"worker_bench: transport {t} is not available here, left out: {e}")
        except TypeError:  # a client without transports
            if t == "http":
                usable.append(t)
    if transports and not usable:
        raise SystemExit("worker_bench: no usable transport")
    transports = tuple(usable)
    if transports:
        backend = segops.Client(url).info().get("backend", backend)
    elif not alts:
        raise SystemExit("worker_bench: --transport none measures only --alternatives; give some")
    cores = os.cpu_count()
    print(f"worker_bench: daemon {url} backend {backend}; {cores} cores here; W = {w}; "
          f"window {a.window} s after {a.warmup} s warm-up; ops {len(ops)} x sizes {len(sizes)} x transports {len(transports)}; "
          f"remote idx {a.idx_dtype} in {'torch' if a.idx_copied else 'the client'}'s memory")
    # The workers are spawned (a fresh interpreter each) and start with this environment; this
    # process only reads it at its own start, and the daemon was started before.
    os.environ.update(wenv)
    if a.idx_copied:  # read by the spawned workers at import
        os.environ["SEGOPS_BENCH_IDX_COPIED"] = "1"
    pool = Pool(w, url, a.idx_dtype, parse_cpus(a.worker_cpus) if a.worker_cpus else None)
    if wenv:
        print("worker_bench: every worker process runs with " + " ".join(f"{k}={v}" for k, v in wenv.items()))
    if a.worker_cpus or a.daemon_cpus:
        print(f"worker_bench: workers on CPUs {a.worker_cpus or 'all'}, the daemon on CPUs {a.daemon_cpus or 'all'}")
    rows = []
    t_start = time.time()
    try:
        for op in ops:
            for lg in sizes:
                n = 1 << lg
                loc1, lwin = run1(pool, PLAIN, op, n, a.warmup, a.window, a.min_steps)
                locw, locm = pool.run(w, PLAIN, op, n, a.warmup, lwin)
                local_ms = statistics.median(loc1["lat"]) * 1e3 if loc1["lat"] else float("nan")
                local_sps = sum(r["steps"] for r in locw) / lwin
                alt = {}
                for m in alts:  # the same window as the local side's: the steps are the same math
                    altw, _ = pool.run(w, m, op, n, a.warmup, lwin)
                    alt[m] = sum(r["steps"] for r in altw) / lwin
                    print(f"  {op:<20} 2^{lg:<2} {m:<8} {w}w {fmt_rate(alt[m]):>8} steps/s "
                          f"(local {fmt_rate(local_sps)})", flush=True)
                if not transports:  # the alternatives alone: their steps/s beside the plain step's
                    rows.append({"op": op, "log2n": lg, "n": n, "transport": "none", "workers": w,
                                 "local_ms": local_ms, "local_sps": local_sps,
                                 **{f"{m}_sps": v for m, v in alt.items()}})
                for tr in transports:
                    rem1, rwin = run1(pool, tr, op, n, a.warmup, a.window, a.min_steps)
                    remw, remm = pool.run(w, tr, op, n, a.warmup, rwin, daemon_pid)
                    remote_ms = statistics.median(rem1["lat"]) * 1e3 if rem1["lat"] else float("nan")
                    remote_sps = sum(r["steps"] for r in remw) / rwin
                    steps_w = sum(r["steps"] for r in remw)
                    row = {
                        "op": op, "log2n": lg, "n": n, "transport": tr, "workers": w, "backend": backend,
                        "local_ms": local_ms, "remote_ms": remote_ms, "latency_ratio": local_ms / remote_ms,
                        "local_sps": local_sps, "remote_sps": remote_sps,
                        "throughput_ratio": remote_sps / local_sps if local_sps else float("nan"),
                        "local_1w_steps": loc1["steps"], "remote_1w_steps": rem1["steps"],
                        "max_rel_err": rem1["check"],
                        # Where the cores went at W workers: CPU microseconds per step in a client
                        # process (median over workers) and in the daemon (all its threads, per
                        # step of all workers), and the fraction of all cores busy.
                        "local_cpu_us": statistics.median(r["cpu_step_s"] for r in locw) * 1e6,
                        "client_cpu_us": statistics.median(r["cpu_step_s"] for r in remw) * 1e6,
                        "daemon_cpu_us": remm["daemon_cpu_s"] / steps_w * 1e6 if steps_w else float("nan"),
                        "local_busy": locm["busy"], "remote_busy": remm["busy"],
                        "lanes_busy": remm["lanes_busy"],
                        "local_window_s": lwin, "remote_window_s": rwin,
                    }
                    for m, v in alt.items():
                        row[f"{m}_sps"] = v
                        row[f"vs_{m}"] = remote_sps / v if v else float("nan")
                    rows.append(row)
                    print(f"  {op:<20} 2^{lg:<2} {tr:<4}  1w {local_ms:8.3f} / {remote_ms:8.3f} ms   "
                          f"{w}w {fmt_rate(local_sps):>8} / {fmt_rate(remote_sps):>8} steps/s   "
                          f"ratio {row['throughput_ratio']:.2f}   err {rem1['check']:.1e}   "
                          f"cpu/step us local {row['local_cpu_us']:.0f} client {row['client_cpu_us']:.0f} "
                          f"daemon {row['daemon_cpu_us']:.0f}   busy {row['local_busy']:.0%}/{row['remote_busy']:.0%} "
                          f"busiest backend worker {row['lanes_busy']:.0%}", flush=True)
                    if rem1["check"] is not None and rem1["check"] > GRAD_TOL:
                        raise SystemExit(f"worker_bench: {op} N={n} {tr}: remote gradient differs from local by {rem1['check']:.2e}")
    finally:
        pool.close()
        if daemon:
            try:
                daemon.stop(30)
            except AssertionError:
                pass  # did not exit after SIGTERM: killed by stop()
            daemon.kill()
        if tmpdir:
            try:
                os.rmdir(tmpdir)
            except OSError:
                pass
    took = time.time() - t_start
    print(f"\nworker_bench: {len(rows)} cells in {took:.0f} s. Ratios: 1 worker local/segopsd step latency; "
          f"{w} workers segopsd/local steps/s (above 1: the daemon makes the workers faster).")
    for tr in transports:
        print(table(rows, tr, w, backend))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"backend": backend, "workers": w, "cores": cores, "window_s": a.window,
                       "warmup_s": a.warmup, "idx_dtype": a.idx_dtype, "idx_copied": a.idx_copied, "worker_env": wenv, "daemon_env": denv,
                       "daemon_args": a.daemon_arg, "rows": rows}, f, indent=1)
        print(f"\nworker_bench: wrote {a.json}")


if __name__ == "__main__":
    main()

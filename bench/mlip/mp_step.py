#!/usr/bin/env python3
"""mp_step.py: the message-passing training step (bench/mlip/mp_model.py: two interaction blocks,
energies per structure, forces by autograd with create_graph, loss on both, Adam) with its segment
work through segops.torch, against the same step in plain torch, measured in the same run:

    python3 bench/mlip/mp_step.py --segopsd build/server/segopsd --atoms 1000,4000,16000 \\
        --features 32 --transport native,local,http --workers 1 --worker-cpus 0 --daemon-cpus 1 \\
        --daemon-arg=--threads=1 --json bench/out/mp_w1.json

Per batch size (atoms) and feature width F: the plain-torch step's steps/s with W worker processes
(one torch thread each), each transport's steps/s and its ratio to plain torch (above 1: segops
wins), and, as context, the ceiling: one worker's step with every segops answer replayed (no
exchange, no daemon work: what torch's autograd and segops.torch alone cost; step_cost.py's --fake)
against the plain step, and the wrapper's own cost (replayed step minus plain step, ms).

segops.torch sends (E,F) messages (segmented_mul for h[snd] * m, segmented_sum over the receivers)
only to a daemon with feature channels ((N, *F) arrays); the run asks each transport with a tiny
(4,2) call and, where it is refused, says "feature channels not supported by this daemon" and sends
only what fits (the energies per structure; the rows say "energies only").

Every segops step's parameter gradients are checked once against plain torch's (max relative error;
over 1e-3 the run fails). --smoke: a tiny batch, short windows (the CTest smoke test).
"""

import argparse
import json
import multiprocessing as mp
import os
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.join(HERE, "..", "..", "clients", "python", "src")
TRANSPORTS = ("native", "local", "http", "unix")
GRAD_TOL = 1e-3


def _paths():
    for p in (SRC, HERE, os.path.join(HERE, "..", "worker"), os.path.join(HERE, "..", "client")):
        if p not in sys.path:
            sys.path.insert(0, p)


def features_supported(client):
    """Whether the client's daemon (or its local backend) takes (N, *F) arrays: a tiny (4,2)
    segmented_sum and segmented_mul; False when it refuses them as invalid arguments, or when this
    client cannot carry them (a client older than the daemon: its protocol error, said here)."""
    import numpy as np

    import segops

    x = np.arange(8, dtype=np.float32).reshape(4, 2)
    idx = np.array([0, 0, 1, 1], np.int32)
    try:
        got = client.segmented_sum(x, idx, 2)
        client.segmented_mul(x, np.ones((2, 2), np.float32), idx, 2)
    except segops.InvalidArgument:
        return False
    except segops.ProtocolError as e:
        print(f"mp_step: this client cannot carry (N, *F) arrays to that daemon: {e}")
        return False
    return tuple(np.shape(got)) == (2, 2)


# ---------------------------------------------------------------- one worker process


def _setup(mode, atoms, f, url, clients, feats, check=True):
    """(step function, check error or None, label) of one mode for this batch."""
    import torch

    import mp_model as mm

    b = mm.make_batch(atoms, seed=1)
    torch.manual_seed(0)
    model = mm.Potential(f)
    if mode == "plain":
        return mm.make_step(model, b, mm.PlainWork()), None, "plain"
    import segops

    tr = "native" if mode == "fake" else mode
    c = clients.get(tr)
    if c is None:
        c = clients[tr] = segops.Client("local" if tr == "local" else url, transport=tr)
        feats[tr] = features_supported(c)
    work = mm.SegopsWork(c, b, feats[tr])
    err = None
    if check:  # one worker's parameter gradients against plain torch's
        want = mm.grads_of_one_step(model, b, mm.PlainWork())
        got = mm.grads_of_one_step(model, b, work)
        err = max(float((g - w).abs().max()) / max(float(w.abs().max()), 1e-30) for g, w in zip(got, want))
    step = mm.make_step(model, b, work)
    if mode == "fake":  # the native answers of one step, replayed in turn (step_cost.py --fake)
        from step_cost import Replay

        clock = {"cpu": 0.0}

        def timed(fn, *a):
            t0 = time.thread_time()
            r = fn(*a)
            clock["cpu"] += time.thread_time() - t0
            return r

        real = c._nc
        if real is None:
            raise SystemExit("mp_step: the replayed step needs segops' C extension")
        c._nc = Replay(real, timed)
        step()
        c._nc.replaying = True
        step._replay_clock = clock
        step._restore = lambda: setattr(c, "_nc", real)
    return step, err, work.name


def worker_main(rank, conn, url, cpus):
    if cpus:
        os.sched_setaffinity(0, cpus)
    _paths()
    import torch

    torch.set_num_threads(1)
    torch.set_num_interop_threads(1)
    clients, feats = {}, {}
    while True:
        msg = conn.recv()
        if msg is None:
            break
        mode, atoms, f, warm_steps, check = msg
        try:
            step, err, label = _setup(mode, atoms, f, url, clients, feats, check and rank == 0)
            t = time.perf_counter()
            for _ in range(warm_steps):
                step()
            step_s = (time.perf_counter() - t) / max(warm_steps, 1)
            conn.send(("ready", {"step_s": step_s, "check": err, "label": label}))
            t0, window = conn.recv()
            t1 = t0 + window
            count, cpu0, steps_cpu, lat = 0.0, None, 0, []
            clock = getattr(step, "_replay_clock", None)
            while True:  # steps before t0 warm up; one straddling an edge counts by its share inside
                a = time.time()
                if a >= t1:
                    break
                if cpu0 is None and a >= t0:
                    cpu0 = time.process_time()
                    if clock:
                        clock["cpu"] = 0.0
                step()
                b = time.time()
                if cpu0 is not None:
                    steps_cpu += 1
                    lat.append(b - a)
                inside = min(b, t1) - max(a, t0)
                if inside > 0:
                    count += inside / (b - a)
            if cpu0 is None:
                cpu0 = time.process_time()
            cpu = (time.process_time() - cpu0 - (clock["cpu"] if clock else 0.0)) / max(steps_cpu, 1)
            if hasattr(step, "_restore"):
                step._restore()
            conn.send(("done", {"steps": count, "cpu_step_s": cpu, "lat": lat}))
        except Exception as e:  # reported to the parent, which stops
            import traceback

            conn.send(("error", f"{type(e).__name__}: {e}\n{traceback.format_exc()[-1500:]}"))
    for c in clients.values():
        c.close()


class Pool:
    def __init__(self, w, url, cpus):
        ctx = mp.get_context("spawn")
        self.conns, self.procs = [], []
        for r in range(w):
            a, b = ctx.Pipe()
            p = ctx.Process(target=worker_main, args=(r, b, url, cpus), daemon=True)
            p.start()
            self.conns.append(a)
            self.procs.append(p)

    def run(self, k, mode, atoms, f, window, warmup, min_steps, check=True):
        """k workers at once over a common window (at least min_steps of the slowest worker's
        warm-up step): their results and the window."""
        conns = self.conns[:k]
        for c in conns:
            c.send((mode, atoms, f, 1, check))
        ready = []
        for c in conns:
            tag, v = c.recv()
            if tag == "error":
                raise SystemExit(f"mp_step: {mode} {atoms} atoms F={f}: {v}")
            ready.append(v)
        slowest = max(r["step_s"] for r in ready)
        window = max(window, min_steps * slowest)
        t0 = time.time() + max(warmup, slowest) + 0.05
        for c in conns:
            c.send((t0, window))
        out = []
        for c in conns:
            tag, v = c.recv()
            if tag == "error":
                raise SystemExit(f"mp_step: {mode} {atoms} atoms F={f}: {v}")
            out.append(v)
        return ready, out, window

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


# ---------------------------------------------------------------- the run


def measure_round(pool, a, w, atoms, f, transports, ceiling, check):
    """One round of a cell: plain torch, the replayed step (one worker), then each transport; ratios
    against this round's plain steps/s (rounds alternate the sides, so the load of a shared machine
    moves both)."""
    ready, res, win = pool.run(w, "plain", atoms, f, a.window, a.warmup, a.min_steps, False)
    plain_sps = sum(r["steps"] for r in res) / win
    plain_cpu = statistics.median(r["cpu_step_s"] for r in res) * 1e3
    row = {"atoms": atoms, "f": f, "workers": w, "plain_sps": plain_sps, "plain_cpu_ms": plain_cpu,
           "plain_ms": statistics.median(res[0]["lat"] or [float("nan")]) * 1e3, "transports": {}}
    print(f"  {atoms:>6} atoms F={f:<3} plain        {fmt(plain_sps):>8} steps/s  ({row['plain_ms']:.1f} ms/step)",
          flush=True)
    if ceiling and not a.no_ceiling:
        ready, res, win = pool.run(1, "fake", atoms, f, a.window, a.warmup, a.min_steps, False)
        row["fake_cpu_ms"] = res[0]["cpu_step_s"] * 1e3
        # the replayed step against the plain step's CPU, both on one worker
        _, res1, _ = pool.run(1, "plain", atoms, f, a.window, a.warmup, a.min_steps, False)
        row["plain1_cpu_ms"] = res1[0]["cpu_step_s"] * 1e3
        print(f"  {atoms:>6} atoms F={f:<3} replayed     {row['fake_cpu_ms']:.1f} ms CPU/step (plain "
              f"{row['plain1_cpu_ms']:.1f}): ceiling {row['plain1_cpu_ms'] / row['fake_cpu_ms']:.2f}, wrapper "
              f"{row['fake_cpu_ms'] - row['plain1_cpu_ms']:+.1f} ms", flush=True)
    for t in transports:
        ready, res, win = pool.run(w, t, atoms, f, a.window, a.warmup, a.min_steps, check)
        sps = sum(r["steps"] for r in res) / win
        cell = {"sps": sps, "ratio": sps / plain_sps, "ms": statistics.median(res[0]["lat"] or [float("nan")]) * 1e3,
                "client_cpu_ms": statistics.median(r["cpu_step_s"] for r in res) * 1e3,
                "check": ready[0]["check"], "label": ready[0]["label"]}
        row["transports"][t] = cell
        err = "" if cell["check"] is None else f", grad err {cell['check']:.1e}"
        print(f"  {atoms:>6} atoms F={f:<3} {t:<6} {fmt(sps):>8} steps/s  ratio {cell['ratio']:.2f}  "
              f"({cell['ms']:.1f} ms/step, {cell['label']}{err})", flush=True)
        if check and not (cell["check"] is not None and cell["check"] <= GRAD_TOL):
            raise SystemExit(f"mp_step: {t} {atoms} atoms F={f}: the gradients differ from plain torch's "
                             f"(max relative error {cell['check']})")
    return row


def combine(rounds):
    """One row from a cell's rounds: medians, and each ratio's range over the rounds."""
    med = statistics.median
    row = {k: rounds[0][k] for k in ("atoms", "f", "workers")}
    row["rounds"] = rounds
    for k in ("plain_sps", "plain_cpu_ms", "plain_ms", "fake_cpu_ms", "plain1_cpu_ms"):
        if k in rounds[0]:
            row[k] = med(r[k] for r in rounds)
    if "fake_cpu_ms" in row:
        cei = [r["plain1_cpu_ms"] / r["fake_cpu_ms"] for r in rounds]
        row["ceiling"], row["wrapper_ms"] = med(cei), med(r["fake_cpu_ms"] - r["plain1_cpu_ms"] for r in rounds)
    row["transports"] = {}
    for t in rounds[0]["transports"]:
        cells = [r["transports"][t] for r in rounds]
        ratios = [c["ratio"] for c in cells]
        row["transports"][t] = {"sps": med(c["sps"] for c in cells), "ratio": med(ratios), "min": min(ratios),
                                "max": max(ratios), "label": cells[0]["label"], "check": cells[0]["check"],
                                "client_cpu_ms": med(c["client_cpu_ms"] for c in cells)}
    return row


def fmt(v):
    return f"{v:,.0f}" if v >= 100 else f"{v:.2f}" if v < 10 else f"{v:.1f}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--segopsd", help="start this segopsd (port 0, and a unix socket for the unix transport)")
    g.add_argument("--url", help="use a running daemon")
    ap.add_argument("--backend", default="cpu", help="the started daemon's backend (cpu, cuda, auto)")
    ap.add_argument("--atoms", default="1000,4000,16000", help="atoms per batch, comma list (30 per structure)")
    ap.add_argument("--features", default="32", help="F, comma list")
    ap.add_argument("--transport", default="native,local,http", help=f"comma list of {', '.join(TRANSPORTS)}")
    ap.add_argument("--workers", type=int, default=1, help="worker processes at once (default 1)")
    ap.add_argument("--worker-cpus", default=None, metavar="LIST", help="confine the workers to these CPUs")
    ap.add_argument("--daemon-cpus", default=None, metavar="LIST", help="confine the started daemon (taskset -c)")
    ap.add_argument("--daemon-arg", action="append", default=[], metavar="FLAG=VALUE",
                    help="one more flag for the started daemon, e.g. --daemon-arg=--threads=1")
    ap.add_argument("--window", type=float, default=3.0, help="seconds measured per cell (at least --min-steps steps)")
    ap.add_argument("--warmup", type=float, default=0.5)
    ap.add_argument("--min-steps", type=float, default=4)
    ap.add_argument("--rounds", type=int, default=1,
                    help="measure each cell this many times, plain and segops alternating; medians and ranges")
    ap.add_argument("--no-ceiling", action="store_true", help="skip the replayed step")
    ap.add_argument("--json", default=None)
    ap.add_argument("--smoke", action="store_true", help="a tiny batch and short windows (CTest)")
    a = ap.parse_args()
    if a.smoke:
        a.atoms, a.window, a.warmup, a.min_steps = "120", 0.2, 0.05, 1
    _paths()
    try:
        import numpy  # noqa: F401
        import torch  # noqa: F401

        import segops
        import worker_bench as wb
    except ImportError as e:
        print(f"SKIP: mp_step needs numpy, torch and the segops client ({e})")
        sys.exit(77)
    transports = tuple(t for t in a.transport.split(",") if t)
    for t in transports:
        if t not in TRANSPORTS:
            raise SystemExit(f"mp_step: unknown transport {t!r} (want {', '.join(TRANSPORTS)})")
    atoms_list = [int(x) for x in a.atoms.split(",")]
    feats_list = [int(x) for x in a.features.split(",")]
    daemon, url, tmpdir = None, a.url, None
    if a.segopsd:
        sock = None
        if "unix" in transports and wb.supports_unix(a.segopsd):
            tmpdir = tempfile.mkdtemp(prefix="segops-mp-")
            sock = os.path.join(tmpdir, "segopsd.sock")
        daemon, url = wb.start_daemon(a.segopsd, a.backend, sock, a.daemon_arg, None, a.daemon_cpus)
    feats = {}
    for t in transports:
        with segops.Client("local" if t == "local" else url, transport=t) as c:
            feats[t] = features_supported(c)
        if not feats[t]:
            who = "client's local backend" if t == "local" else "daemon"
            print(f"mp_step: {t}: feature channels not supported by this {who}; its rows send only what fits "
                  "(the energies per structure: segops (energies only))")
    cpus = wb.parse_cpus(a.worker_cpus) if a.worker_cpus else None
    w = max(a.workers, 1)
    print(f"mp_step: daemon {url}; {os.cpu_count()} cores; W = {w} worker(s) on CPUs {a.worker_cpus or 'all'}, "
          f"daemon on CPUs {a.daemon_cpus or 'all'} {' '.join(a.daemon_arg)}; window {a.window} s "
          f"(at least {a.min_steps:g} steps); segops {segops.__file__}", flush=True)
    pool = Pool(w, url, cpus)
    rows = []
    try:
        for atoms in atoms_list:
            for f in feats_list:
                rounds = [measure_round(pool, a, w, atoms, f, transports, "native" in feats, r == 0)
                          for r in range(a.rounds)]
                rows.append(combine(rounds))
    finally:
        pool.close()
        if daemon is not None:
            daemon.stop()
        if tmpdir:
            try:
                os.rmdir(tmpdir)
            except OSError:
                pass
    print(report(rows, transports, w))
    if a.json:
        with open(a.json, "w") as fh:
            json.dump({"workers": w, "worker_cpus": a.worker_cpus, "daemon_cpus": a.daemon_cpus,
                       "daemon_args": a.daemon_arg, "features_supported": feats, "rows": rows}, fh, indent=1)
        print(f"mp_step: wrote {a.json}")
    return 0


def report(rows, transports, w):
    head = ("| atoms | F | plain steps/s | " + " | ".join(f"{t} steps/s (**ratio**)" for t in transports)
            + " | ceiling (replayed) | wrapper ms/step | what segops runs |")
    lines = [f"\n### message-passing step, W = {w}: steps/s over plain torch (median of the rounds, and their "
             "range)\n", head,
             "|---|---|---|" + "---|" * len(transports) + "---|---|---|"]
    for r in rows:
        cells = []
        labels = set()
        for t in transports:
            c = r["transports"][t]
            spread = f" {c['min']:.2f}-{c['max']:.2f}" if c["max"] > c["min"] else ""
            cells.append(f"{fmt(c['sps'])} (**{c['ratio']:.2f}**{spread})")
            labels.add(c["label"])
        ceil = f"{r['ceiling']:.2f}" if "ceiling" in r else "-"
        wrap = f"{r['wrapper_ms']:+.1f}" if "wrapper_ms" in r else "-"
        lines.append(f"| {r['atoms']:,} | {r['f']} | {fmt(r['plain_sps'])} | " + " | ".join(cells)
                     + f" | {ceil} | {wrap} | {', '.join(sorted(labels))} |")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())

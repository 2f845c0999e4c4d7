#!/usr/bin/env python3
"""shm_ab.py: one worker's training step (worker_bench.py's step, through segops.torch over shared
memory) with a client setting on and off, in one process and against one daemon, in interleaved
rounds, so both sides see the same machine: CPU and wall time per step, min and median over the
rounds. The settings compared:
  lend  results as views into their region (_shm._MAX_LENT 8) vs copies (0)
  keep  idx kept in a region of its own (kept inputs) vs copied on every call

usage: shm_ab.py --segopsd PATH [--backend cpu|cuda] --what lend|keep [--op sum] [--log2n 20]
                 [--steps 10] [--rounds 6]
"""
import argparse
import os
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "clients", "python", "src"))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests"))
sys.path.insert(0, HERE)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--segopsd", required=True)
    ap.add_argument("--backend", default="cpu", choices=("cpu", "cuda"))
    ap.add_argument("--what", required=True, choices=("lend", "keep"))
    ap.add_argument("--op", default="sum")
    ap.add_argument("--log2n", type=int, default=20)
    ap.add_argument("--steps", type=int, default=10, help="steps per round and side")
    ap.add_argument("--rounds", type=int, default=6)
    a = ap.parse_args()
    try:
        import torch
    except ImportError:
        print("SKIP: shm_ab needs torch")
        sys.exit(77)
    torch.set_num_threads(1)
    import worker_bench as wb
    from segops import _shm
    from segopsd_proc import Daemon

    op = a.op if a.op.startswith("segmented_") else "segmented_" + a.op
    sock = os.path.join(tempfile.mkdtemp(prefix="segops-ab-"), "segopsd.sock")
    d = Daemon(a.segopsd, ["--backend", a.backend, "--threads", "1", "--max-shm-bytes", "8G",
                           "--listen", "unix:" + sock], start_timeout=60)
    try:
        inputs, idx_t, idx_np, s = wb.make_inputs(op, 1 << a.log2n, 1)
        clients = {}
        fn = wb.step_fn("shm", op, idx_t, idx_np, s, clients, d.url)
        sides = {"on": [], "off": []}
        _shm._MAX_LENT_BYTES = 512 << 20
        for _ in range(a.rounds):
            for side in sides:
                on = side == "on"
                if a.what == "lend":
                    _shm._MAX_LENT = 8 if on else 0
                else:
                    _shm._KEEP_MIN_BYTES = (64 << 10) if on else (1 << 62)
                for _ in range(3):  # the side's regions and kept inputs settle
                    wb.step(fn, inputs)
                c0, w0 = time.process_time(), time.time()
                for _ in range(a.steps):
                    wb.step(fn, inputs)
                sides[side].append(((time.process_time() - c0) / a.steps, (time.time() - w0) / a.steps))
        for side, v in sides.items():
            cpu = [x for x, _ in v]
            wall = [y for _, y in v]
            print(f"shm_ab: {op} 2^{a.log2n} {a.what} {side:<3}  CPU/step min {min(cpu) * 1e3:8.3f} ms, median "
                  f"{statistics.median(cpu) * 1e3:8.3f}; wall/step min {min(wall) * 1e3:8.3f} ms")
    finally:
        d.stop(30)


if __name__ == "__main__":
    main()

"""cli.py: the `segops` command (also `python -m segops`): info, health, ready and a quick
latency check against a daemon.

    segops info    [--url URL]          the daemon's version, backend, devices, limits (JSON)
    segops health  [--url URL]          liveness: exit 0 when alive
    segops ready   [--url URL]          readiness: exit 0 when the backend takes work, 1 when not
    segops bench   [--url URL] [-n N] [--op OP] [--elements E] [--segments S]

The URL defaults to $SEGOPS_URL, then http://127.0.0.1:8080; the token to $SEGOPS_TOKEN.
Exit status: 0 success, 1 the daemon answered no (not ready, an error), 2 no answer at all.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Sequence

import numpy as np

from . import __version__, _table
from .client import Client
from .errors import SegopsConnectionError, SegopsError, SegopsTimeout


def _inputs(op: str, n: int, s: int, rng: np.random.Generator) -> dict:
    """Random float64 forward inputs of op: N elements in S segments (vec3 where allowed)."""
    shapes = {"N": (n, 3), "S": (s,)}
    args = {}
    for name, lead in _table.LEADS[op].items():
        shape = shapes[lead]
        if op == "segmented_matvec" and name == "m":
            shape = (s, 3, 3)
        args[name] = rng.standard_normal(shape)
    args["idx"] = np.sort(rng.integers(0, s, n)).astype(np.int32) if s else np.zeros(0, np.int32)
    args["num_segments"] = s
    return args


def _cmd_info(c: Client, ns) -> int:
    json.dump(c.info(), sys.stdout, indent=2)
    print()
    return 0


def _cmd_probe(c: Client, ns) -> int:
    st = c.health() if ns.cmd == "health" else c.ready()
    print(f"{c.url}: {st.status} ({st.http_status})")
    return 0 if st.ok else 1


def _cmd_bench(c: Client, ns) -> int:
    rng = np.random.default_rng(0)
    args = _inputs(ns.op, ns.elements, ns.segments, rng)
    for _ in range(min(ns.warmup, ns.n)):
        c.call(ns.op, "forward", args)
    times = []
    t_all = time.perf_counter()
    for _ in range(ns.n):
        t0 = time.perf_counter()
        c.call(ns.op, "forward", args)
        times.append(time.perf_counter() - t0)
    wall = time.perf_counter() - t_all
    ms = np.array(times) * 1e3
    p50, p90, p99 = np.percentile(ms, [50, 90, 99])
    used = c.transport_used  # what the calls went over: the native channel, a socket, in-process
    how = {"native": "over the native channel", "local": "in this process (local)",
           "unix": "on one unix-socket connection", "http": "on one HTTP connection"}.get(used, f"over {used}")
    print(f"{c.url} {ns.op} forward, N={ns.elements} S={ns.segments} float64, {ns.n} calls {how} "
          f"(transport {used}, one thread):")
    print(f"  latency ms: p50 {p50:.3f}  p90 {p90:.3f}  p99 {p99:.3f}  min {ms.min():.3f}  max {ms.max():.3f}")
    print(f"  {ns.n / wall:.0f} calls/s")
    return 0


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="segops", description="Talk to a segops daemon (segopsd).")
    p.add_argument("--version", action="version", version=f"segops-client {__version__}")
    sub = p.add_subparsers(dest="cmd", required=True)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--url", help="daemon URL (default: $SEGOPS_URL, then http://127.0.0.1:8080)")
    common.add_argument("--timeout", type=float, default=10.0, help="seconds per request (default 10)")
    sub.add_parser("info", parents=[common], help="version, backend, devices, limits and op table (JSON)")
    sub.add_parser("health", parents=[common], help="liveness (GET /healthz)")
    sub.add_parser("ready", parents=[common], help="readiness (GET /readyz)")
    b = sub.add_parser("bench", parents=[common], help="a quick latency check: one op's forward, repeated")
    b.add_argument("-n", type=int, default=200, help="timed calls (default 200)")
    b.add_argument("--warmup", type=int, default=20, help="untimed calls first (default 20)")
    b.add_argument("--op", default="segmented_sum", choices=list(_table.OPS), help="op (default segmented_sum)")
    b.add_argument("--elements", type=int, default=1000, help="N (default 1000)")
    b.add_argument("--segments", type=int, default=10, help="S (default 10)")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    ns = _parser().parse_args(argv)
    if ns.cmd == "bench" and (ns.n < 1 or ns.elements < 0 or ns.segments < 0 or (ns.elements and not ns.segments)):
        print("segops bench: -n must be >= 1, --elements and --segments >= 0, and --segments >= 1 when --elements > 0", file=sys.stderr)
        return 2
    cmd = {"info": _cmd_info, "health": _cmd_probe, "ready": _cmd_probe, "bench": _cmd_bench}[ns.cmd]
    try:
        with Client(ns.url, timeout=ns.timeout) as c:
            return cmd(c, ns)
    except BrokenPipeError:  # `segops info | head`: the reader has what it wanted
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # so that the exit's flush of stdout fails no more
        return 141  # as a command killed by SIGPIPE
    except (SegopsConnectionError, SegopsTimeout) as e:
        print(f"segops {ns.cmd}: {e}", file=sys.stderr)
        return 2
    except SegopsError as e:
        print(f"segops {ns.cmd}: {e}", file=sys.stderr)
        return 1
    except ValueError as e:  # a bad URL
        print(f"segops {ns.cmd}: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""soak.py: drives segopsd at full load with good clients, restarting daemons and hostile ones; checks
every answer.

Starts the real daemon on a free port (--segopsd PATH) or uses a running one (--url), runs
--connections keep-alive clients for --duration seconds, each sending a random mix of valid
requests (checked against a float64 numpy reference, msgpack and JSON) and invalid ones
(checked for the expected status and error code), beside --hostile raw-socket clients that loop
over the red-team classes of hostile.py (random mutations, dead uploads, slow bodies, bad
framing, smuggling, huge heads and queries, amplification, shm registration garbage, answers
never read or taken slowly, idle connections, regions not the client's, many registrations, OIP
header and data abuse), each answer checked; with --segopsd, one more loops over the native channel's
hostile classes of hostile_native.py (a sparse pool, a hole punched after the hand-over, many pools,
many silent connects) against the first daemon's native socket. With --segopsd, --shm-clients segops.Client callers
(over the native channel with segops' C extension, HTTP without it) use a second daemon that is
restarted every --restart-every seconds (one caller of it alone, waiting out each restart, the
others of both daemons, moving between them): no call may fail. Reports counts, unexpected answers and the first daemon's RSS. Exit 1 when any
answer was unexpected, or its RSS at the end exceeds its RSS at --rss-baseline-at seconds (default:
the first minute, or the first third of a shorter run) by more than --max-rss-growth-mib (16).

CI runs it 60 s (CTest hardening_soak); the long run is 10 minutes:
  python3 tests/hardening/soak.py --segopsd build/server/segopsd --duration 600 --hostile 4
"""
import argparse
import http.client
import json
import os
import re
import socket
import sys
import threading
import time

import msgpack
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # tests/: shared modules
from segopsd_proc import Daemon  # noqa: E402
from segref import FORWARD_INPUTS, OPS, WIDTHS, reference, shape_of  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "clients", "python", "src"))
import segops  # noqa: E402

from hostile import hostile_once  # noqa: E402  (tests/hardening)
from hostile_native import CLASSES as NATIVE_CLASSES, native_once  # noqa: E402


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def tensor(a):
    a = np.ascontiguousarray(a)
    return {"dtype": str(a.dtype), "shape": list(a.shape), "data": a.tobytes()}


def from_wire(t):
    return np.frombuffer(t["data"], dtype=t["dtype"]).reshape(t["shape"])


def make_good(rng):
    """A valid forward call of a random op of the table (proto/optable.json), its inputs shaped by it."""
    op = str(rng.choice(OPS))
    n = int(rng.integers(0, 300))
    s = int(rng.integers(1, 20))
    dt = rng.choice([np.float32, np.float64])
    width = 3 if WIDTHS[op] == (3,) or rng.random() < 0.5 else 1
    idx = rng.integers(0, s, n).astype(np.int32)
    if rng.random() < 0.5:
        idx.sort()
    a = {name: rng.standard_normal(shape_of(op, name, width, n, s)).astype(dt) for name in FORWARD_INPUTS[op]}
    return op, a, idx, s, dt


BAD = [
    # (path, content-type, body, expected status, expected code)
    ("/v1/segmented_sum/forward", "application/json", b'{"x":[1,2],"idx":[0,5],"num_segments":2}', 400,
     "invalid_argument"),
    ("/v1/segmented_sum/forward", "application/json", b'{"x":[1,2],"idx":[0,1],"num_segments":2,"bogus":1}', 400,
     "invalid_argument"),
    ("/v1/segmented_sum/forward", "application/json", b'{"x":[1,2],"idx":[0,1],', 400, "malformed_body"),
    ("/v1/segmented_mul/forward", "application/json", b'{"x":[1,2],"y":[1,2,3],"idx":[0,1],"num_segments":2}',
     400, "invalid_argument"),
    ("/v1/segmented_sum/forward", "application/msgpack", b"\x83\xa1x\xc4", 400, "malformed_body"),
    ("/v1/segmented_sum/forward", "text/plain", b"hello", 415, "unsupported_media_type"),
    ("/v1/segmented_nope/forward", "application/json", b"{}", 404, "not_found"),
    ("/v1/segmented_sum/sideways", "application/json", b"{}", 404, "not_found"),
    ("/v1/segmented_matvec/forward", "application/json", b'{"v":[1,2],"m":[[[1,0,0],[0,1,0],[0,0,1]]],"idx":[0,0],"num_segments":1}',
     400, "invalid_argument"),
    ("/v1/segmented_sum/forward", "application/json", b'{"x":[1],"idx":[0],"num_segments":1099511627776}', 413,
     "too_large"),
]


class Stats:
    def __init__(self):
        self.lock = threading.Lock()
        self.good = self.bad = self.unexpected = self.hostile = 0
        self.samples = []

    def add(self, good, ok, msg=None):
        with self.lock:
            if good:
                self.good += 1
            else:
                self.bad += 1
            if not ok:
                self.unexpected += 1
                if len(self.samples) < 10:
                    self.samples.append(msg)


def worker(host, port, deadline, seed, stats, token):
    rng = np.random.default_rng(seed)
    conn = http.client.HTTPConnection(host, port, timeout=30)
    auth = {"Authorization": f"Bearer {token}"} if token else {}
    while time.time() < deadline:
        try:
            if rng.random() < 0.8:
                op, a, idx, s, dt = make_good(rng)
                use_json = rng.random() < 0.3
                if use_json:
                    # Bare nested lists when they carry the shape; the map form otherwise (N = 0).
                    js = {k: (v.tolist() if v.size else {"dtype": v.dtype.name, "shape": list(v.shape), "data": []})
                          for k, v in a.items()}
                    body = json.dumps({**js, "idx": idx.tolist(), "num_segments": s,
                                       "dtype": np.dtype(dt).name}).encode()
                    ctype = "application/json"
                else:
                    body = msgpack.packb({**{k: tensor(v) for k, v in a.items()}, "idx": tensor(idx),
                                          "num_segments": s})
                    ctype = "application/msgpack"
                conn.request("POST", f"/v1/{op}/forward", body, {"Content-Type": ctype, **auth})
                r = conn.getresponse()
                data = r.read()
                if r.status != 200:
                    stats.add(True, False, f"{op}: status {r.status} {data[:200]!r}")
                    continue
                if use_json:
                    t = json.loads(data)["out"]
                    got = np.array(t["data"], np.float64).reshape(t["shape"])
                else:
                    got = from_wire(msgpack.unpackb(data)["out"]).astype(np.float64)
                ref = reference(op, "forward", a, idx, s)["out"]
                tol = 1e-12 if dt == np.float64 else 1e-5
                if got.shape != ref.shape:
                    stats.add(True, False, f"{op}: shape {got.shape}, expected {ref.shape}")
                    continue
                err = np.max(np.abs(got - ref) / np.maximum(np.abs(ref), 1.0)) if ref.size else 0.0
                ok = err <= tol
                stats.add(True, ok, f"{op}: max rel err {err} shape {got.shape} vs {ref.shape}")
            else:
                path, ctype, body, want, code = BAD[int(rng.integers(0, len(BAD)))]
                conn.request("POST", path, body, {"Content-Type": ctype, **auth})
                r = conn.getresponse()
                data = r.read()
                try:
                    got_code = json.loads(data)["error"]["code"]
                except Exception:
                    got_code = None
                stats.add(False, r.status == want and got_code == code,
                          f"{path} {body[:40]!r}: got {r.status} {data[:200]!r}, want {want} {code}")
        except (http.client.HTTPException, OSError) as e:
            stats.add(True, False, f"connection error: {e!r}")
            conn.close()
            conn = http.client.HTTPConnection(host, port, timeout=30)
        except Exception as e:  # a checking bug must count, not kill the thread silently
            stats.add(True, False, f"checker error: {e!r}")
    conn.close()


def hostile_worker(host, port, deadline, seed, stats, counts):
    import random

    rng = random.Random(seed)
    while time.time() < deadline:
        name, wrong = hostile_once((host, port), rng)
        with stats.lock:
            counts[name] = counts.get(name, 0) + 1
            stats.hostile += 1
            if wrong:
                stats.unexpected += 1
                if len(stats.samples) < 10:
                    stats.samples.append(f"hostile {name}: {wrong}")


def native_hostile_worker(sock, url, deadline, seed, stats, counts):
    import random

    rng = random.Random(seed)
    while time.time() < deadline:
        name, wrong = native_once(sock, url, rng)
        with stats.lock:
            counts[name] = counts.get(name, 0) + 1
            stats.hostile += 1
            if wrong:
                stats.unexpected += 1
                if len(stats.samples) < 10:
                    stats.samples.append(f"hostile {name}: {wrong}")


def native_socket(host, port):
    c = http.client.HTTPConnection(host, port, timeout=10)
    c.request("GET", "/v1/info")
    info = json.loads(c.getresponse().read())
    c.close()
    return info.get("native", {}).get("socket")


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class Restarter:
    """A daemon restarted every `every` seconds on the same address (SIGTERM, exit 0 expected)."""

    def __init__(self, binary, args, every, stats):
        self.binary, self.args, self.every, self.stats = binary, args, every, stats
        self.listen = f"127.0.0.1:{free_port()}"
        self.d = Daemon(binary, args, listen=self.listen)
        self.url, self.restarts, self.stop = self.d.url, 0, threading.Event()
        self.t = threading.Thread(target=self._run)
        self.t.start()

    def _run(self):
        while not self.stop.wait(self.every):
            rc = self.d.stop()
            self.d.kill()
            if rc != 0:
                self.stats.add(True, False, f"restarting daemon exited {rc}: {self.d.stderr_text()[-500:]}")
            self.d = Daemon(self.binary, self.args, listen=self.listen)
            self.restarts += 1

    def close(self):
        self.stop.set()
        self.t.join()
        rc = self.d.stop()
        self.d.kill()
        return rc


def shm_worker(client, deadline, seed, stats):
    """Good calls through a segops.Client (the native channel where it can): every one must succeed and be right."""
    rng = np.random.default_rng(seed)
    while time.time() < deadline:
        op, a, idx, s, dt = make_good(rng)
        try:
            got = client.call(op, "forward", {**a, "idx": idx, "num_segments": s})["out"].astype(np.float64)
            ref = reference(op, "forward", a, idx, s)["out"]
            tol = 1e-12 if dt == np.float64 else 1e-5
            err = np.max(np.abs(got - ref) / np.maximum(np.abs(ref), 1.0)) if ref.size else 0.0
            stats.add(True, got.shape == ref.shape and err <= tol, f"shm {op}: max rel err {err}")
        except Exception as e:
            stats.add(True, False, f"shm client {client.url}: {e!r}"[:300])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--segopsd", help="path of segopsd to start on a free port")
    ap.add_argument("--url", help="use a running daemon instead (RSS is then not measured)")
    ap.add_argument("--duration", type=float, default=60.0)
    ap.add_argument("--connections", type=int, default=16)
    ap.add_argument("--hostile", type=int, default=0, help="raw-socket hostile clients beside them (default 0)")
    ap.add_argument("--shm-clients", type=int, default=3,
                    help="segops.Client callers (native channel) with a restarting second daemon (--segopsd only)")
    ap.add_argument("--restart-every", type=float, default=8.0)
    ap.add_argument("--rss-baseline-at", type=float, default=None,
                    help="seconds into the run of the RSS baseline (default: 60, or a third of a shorter run)")
    ap.add_argument("--max-rss-growth-mib", type=float, default=16.0)
    ap.add_argument("--token", default=os.environ.get("SEGOPS_TOKEN"))
    a = ap.parse_args()
    proc = None
    # Answers nobody reads are cut sooner than by default, so the hostile classes turn over.
    daemon_args = ["--answer-stall-timeout", "3"]
    if a.segopsd:
        d = Daemon(a.segopsd, daemon_args)
        proc, host, port = d.proc, d.host, d.port
    elif a.url:
        m = re.match(r"http://([^:/]+):(\d+)", a.url)
        host, port = m.group(1), int(m.group(2))
    else:
        ap.error("give --segopsd or --url")
    baseline_at = a.rss_baseline_at if a.rss_baseline_at is not None else min(60.0, a.duration / 3)
    stats = Stats()
    start = time.time()
    deadline = start + a.duration
    threads = [threading.Thread(target=worker, args=(host, port, deadline, 1000 + i, stats, a.token))
               for i in range(a.connections)]
    counts = {}
    threads += [threading.Thread(target=hostile_worker, args=(host, port, deadline, 5000 + i, stats, counts))
                for i in range(a.hostile)]
    sock = native_socket(host, port) if a.segopsd and a.hostile else None
    if sock:
        if not segops.native_available():  # the hole-punching client needs libsegops' extension
            NATIVE_CLASSES[:] = [c for c in NATIVE_CLASSES if c[0] != "native hole punched"]
        threads.append(threading.Thread(target=native_hostile_worker,
                                        args=(sock, d.url, deadline, 7000, stats, counts)))
    restarter, clients = None, []
    if a.segopsd and a.shm_clients > 0:
        restarter = Restarter(a.segopsd, daemon_args, a.restart_every, stats)
        tr = "native" if segops.native_available() else "auto"
        clients = [segops.Client(restarter.url, transport=tr, timeout=60)]  # waits out each restart
        clients += [segops.Client([d.url, restarter.url], transport=tr, timeout=60)
                    for _ in range(a.shm_clients - 1)]  # moves between the two
        threads += [threading.Thread(target=shm_worker, args=(c, deadline, 9000 + i, stats))
                    for i, c in enumerate(clients)]
    for t in threads:
        t.start()
    rss0 = rss1 = None
    if proc:
        time.sleep(min(baseline_at, a.duration))
        rss0 = rss_kib(proc.pid)
    for t in threads:
        t.join()
    rc = 0
    for c in clients:
        c.close()
    if restarter:
        code = restarter.close()
        print(f"soak: the second daemon was restarted {restarter.restarts} times")
        if code != 0:
            print(f"soak: the restarting segopsd exited {code} on SIGTERM")
            rc = 1
    if proc:
        rss1 = rss_kib(proc.pid)
        code = d.stop()
        d.kill()
        if code != 0:
            print(f"soak: segopsd exited {code} on SIGTERM: {d.stderr_text()[-2000:]}")
            rc = 1
    el = time.time() - start
    total = stats.good + stats.bad
    print(f"soak: {el:.1f} s, {a.connections} connections, {total} requests ({total / el:.0f}/s): "
          f"{stats.good} valid, {stats.bad} invalid, {stats.unexpected} unexpected answers")
    if a.hostile:
        print(f"soak: {stats.hostile} hostile exchanges on {a.hostile} raw connections: "
              + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    for s in stats.samples:
        print("  unexpected:", s)
    if stats.unexpected:
        rc = 1
    if rss0 and rss1:
        growth = (rss1 - rss0) / 1024
        print(f"soak: RSS at {baseline_at:.0f} s {rss0} KiB, at the end {rss1} KiB: {growth:+.1f} MiB "
              f"(limit +{a.max_rss_growth_mib:g} MiB)")
        if growth > a.max_rss_growth_mib:
            rc = 1
    if total == 0:
        rc = 1
    return rc


if __name__ == "__main__":
    sys.exit(main())

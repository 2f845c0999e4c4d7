#!/usr/bin/env python3
"""soak.py: drives a segopsd at full load with good and bad requests, checks every answer.

Starts the real daemon on a free port (--segopsd PATH) or uses a running one (--url), runs
--connections keep-alive clients for --duration seconds, each sending a random mix of valid
requests (checked against a float64 numpy reference, msgpack and JSON) and invalid ones
(checked for the expected status and error code), beside --hostile raw-socket clients that loop
over the red-team classes of hostile.py (random mutations, dead uploads, slow bodies, bad
framing, smuggling, huge heads and queries, amplification, shm registration garbage), each
answer checked. Reports counts, unexpected answers and the daemon's RSS growth after warm-up. Exit 1 when any answer was unexpected or RSS grew by more
than --max-rss-growth (default 5%).
"""
import argparse
import http.client
import json
import os
import re
import sys
import threading
import time

import msgpack
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # tests/: shared modules
from segopsd_proc import Daemon  # noqa: E402
from segref import reference  # noqa: E402

from hostile import hostile_once  # noqa: E402  (tests/hardening)


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
    op = rng.choice(["segmented_sum", "segmented_mean", "segmented_dot", "segmented_mul",
                     "segmented_rms_norm", "segmented_matvec"])
    n = int(rng.integers(0, 300))
    s = int(rng.integers(1, 20))
    dt = rng.choice([np.float32, np.float64])
    width = 3 if op in ("segmented_rms_norm", "segmented_matvec") or rng.random() < 0.5 else 1
    idx = rng.integers(0, s, n).astype(np.int32)
    if rng.random() < 0.5:
        idx.sort()
    shp = (n, 3) if width == 3 else (n,)
    a = {}
    if op == "segmented_matvec":
        a["v"] = rng.standard_normal((n, 3)).astype(dt)
        a["m"] = rng.standard_normal((s, 3, 3)).astype(dt)
    else:
        a["x"] = rng.standard_normal(shp).astype(dt)
        if op == "segmented_dot":
            a["y"] = rng.standard_normal(shp).astype(dt)
        if op == "segmented_mul":
            a["y"] = rng.standard_normal((s,)).astype(dt)
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
    ("/v1/segmented_rms_norm/forward", "application/json", b'{"x":[1,2],"idx":[0,1],"num_segments":2}', 400,
     "invalid_argument"),
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


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--segopsd", help="path of segopsd to start on a free port")
    ap.add_argument("--url", help="use a running daemon instead (RSS is then not measured)")
    ap.add_argument("--duration", type=float, default=60.0)
    ap.add_argument("--warmup", type=float, default=None, help="seconds before the RSS baseline (default duration/6)")
    ap.add_argument("--connections", type=int, default=16)
    ap.add_argument("--hostile", type=int, default=0, help="raw-socket hostile clients beside them (default 0)")
    ap.add_argument("--max-rss-growth", type=float, default=0.05)
    ap.add_argument("--token", default=os.environ.get("SEGOPS_TOKEN"))
    a = ap.parse_args()
    proc = None
    if a.segopsd:
        d = Daemon(a.segopsd)
        proc, host, port = d.proc, d.host, d.port
    elif a.url:
        m = re.match(r"http://([^:/]+):(\d+)", a.url)
        host, port = m.group(1), int(m.group(2))
    else:
        ap.error("give --segopsd or --url")
    warmup = a.warmup if a.warmup is not None else a.duration / 6
    stats = Stats()
    start = time.time()
    deadline = start + a.duration
    threads = [threading.Thread(target=worker, args=(host, port, deadline, 1000 + i, stats, a.token))
               for i in range(a.connections)]
    counts = {}
    threads += [threading.Thread(target=hostile_worker, args=(host, port, deadline, 5000 + i, stats, counts))
                for i in range(a.hostile)]
    for t in threads:
        t.start()
    rss0 = rss1 = None
    if proc:
        time.sleep(min(warmup, a.duration))
        rss0 = rss_kib(proc.pid)
    for t in threads:
        t.join()
    rc = 0
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
        growth = (rss1 - rss0) / rss0
        print(f"soak: RSS after warm-up {rss0} KiB, at end {rss1} KiB, growth {100 * growth:.2f}% "
              f"(limit {100 * a.max_rss_growth:.0f}%)")
        if growth > a.max_rss_growth:
            rc = 1
    if total == 0:
        rc = 1
    return rc


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""overhead.py: the Python client's cost per call against a raw http.client POST of the same
bytes (keep-alive, body prebuilt, response read but not decoded), on a daemon it starts itself.

usage: overhead.py --segopsd PATH [--calls 2000] [--rounds 5] [--big-n 262144]
Prints per-call times (best of interleaved rounds) and the ratio client / raw; the raw POST is
the floor.
"""

import argparse
import http.client
import os
import statistics
import sys
import time
import urllib.parse

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "clients", "python", "src"))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests"))  # the tests' daemon runner

import numpy as np  # noqa: E402

import segops  # noqa: E402
from segops import _wire  # noqa: E402
from segopsd_proc import Daemon  # noqa: E402


def timed(fn, calls):
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - t0) / calls


def case(url, name, x, idx, s, calls, rounds):
    body, length = _wire.encode_request({"x": x, "idx": idx, "num_segments": s})
    body = bytes(body) if isinstance(body, (bytes, bytearray)) else b"".join(bytes(p) for p in body)
    u = urllib.parse.urlsplit(url)
    raw = http.client.HTTPConnection(u.hostname, u.port, timeout=60)
    hdrs = {"Content-Type": "application/msgpack", "Accept": "application/msgpack"}

    def raw_call():
        raw.request("POST", "/v1/segmented_sum/forward", body=body, headers=hdrs)
        r = raw.getresponse()
        data = r.read()
        if r.status != 200:
            raise SystemExit(f"raw POST: HTTP {r.status} {data[:200]!r}")

    c = segops.Client(url, transport=os.environ.get("SEGOPS_TRANSPORT", "auto"))
    want = c.segmented_sum(x, idx, s)

    def client_call():
        c.segmented_sum(x, idx, s)

    for _ in range(max(calls // 10, 5)):  # warm both connections
        raw_call()
        client_call()
    t_raw, t_cli = [], []
    for _ in range(rounds):  # interleaved rounds: drift hits both alike
        t_raw.append(timed(raw_call, calls))
        t_cli.append(timed(client_call, calls))
    ref = np.zeros((s,) + x.shape[1:])
    np.add.at(ref, idx, x)
    assert np.allclose(want, ref), "wrong result"
    # Best round: the least disturbed by other load on the machine; the median is shown too.
    raw_us, cli_us = min(t_raw) * 1e6, min(t_cli) * 1e6
    med = statistics.median(t_cli) / statistics.median(t_raw)
    print(f"{name:<40} bytes/req {len(body):>8}  raw http.client {raw_us:8.1f} us/call  "
          f"segops.Client {cli_us:8.1f} us/call  ratio {cli_us / raw_us:5.2f} (median {med:4.2f})  "
          f"overhead {cli_us - raw_us:+7.1f} us")
    # The client's own CPU work, without the network: encoding the request, decoding a response.
    resp_body = c._roundtrip("POST", "/v1/segmented_sum/forward", body, len(body), read=lambda r: r.read())
    n_cpu = max(calls, 100)
    t0 = time.perf_counter()
    for _ in range(n_cpu):
        _wire.encode_request({"x": x, "idx": idx, "num_segments": s})
    enc_us = (time.perf_counter() - t0) / n_cpu * 1e6
    if len(resp_body) <= _wire.JOIN_BELOW:
        t0 = time.perf_counter()
        for _ in range(n_cpu):
            _wire.decode_msgpack_bytes(resp_body)
        dec_us = (time.perf_counter() - t0) / n_cpu * 1e6
        print(f"{'':<40} client CPU alone: encode {enc_us:.1f} us + decode {dec_us:.1f} us per call")
    else:
        print(f"{'':<40} client CPU alone: encode {enc_us:.1f} us per call (response streamed from the socket)")
    raw.close()
    c.close()
    return cli_us / raw_us


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--segopsd", required=True)
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--big-n", type=int, default=262144)
    a = ap.parse_args()
    d = Daemon(a.segopsd)
    url = d.url
    try:
        rng = np.random.default_rng(0)
        n = 64
        idx = np.sort(rng.integers(0, 8, n)).astype(np.int32)
        case(url, "sum forward N=64 float64 (S=8)", rng.standard_normal(n), idx, 8, a.calls, a.rounds)
        if a.big_n:
            n = a.big_n
            idx = np.sort(rng.integers(0, 64, n)).astype(np.int32)
            calls = max(a.calls // 200, 5)
            case(url, f"sum forward N={n} x3 float64 (S=64)", rng.standard_normal((n, 3)), idx, 64, calls, a.rounds)
    finally:
        d.stop(20)
        d.kill()


if __name__ == "__main__":
    main()

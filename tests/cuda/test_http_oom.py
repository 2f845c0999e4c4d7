#!/usr/bin/env python3
"""test_http_oom.py: a real device out-of-memory through the daemon: 503 resource_exhausted for
that request only; other requests, before and after, succeed; /readyz stays 200.

The GPU is filled by a second process (torch) so that the daemon's next large request cannot get
device memory. Exit 77 (skip) without a GPU or torch, unless SEGOPS_REQUIRE_CUDA=1."""
import http.client
import json
import os
import re
import subprocess
import sys

import numpy as np

SKIP = 77


def skip(msg):
    print("SKIP:", msg)
    sys.exit(1 if os.environ.get("SEGOPS_REQUIRE_CUDA") == "1" else SKIP)


def main():
    segopsd = sys.argv[1]
    try:
        import msgpack
        import torch
    except ImportError as e:
        skip(f"needs msgpack and torch: {e}")
    if not torch.cuda.is_available():
        skip("no CUDA GPU visible to torch")
    p = subprocess.Popen([segopsd, "--backend", "cuda", "--listen", "127.0.0.1:0", "--max-body-bytes", "1073741824",
                          "--max-batch-elements", "0"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = p.stdout.readline()
    m = re.search(r"http://([^:]+):(\d+)", line)
    if not m:
        err = p.stderr.read()
        p.wait()
        skip(f"segopsd --backend cuda did not start: {err.strip()[-300:]}")
    conn = http.client.HTTPConnection(m.group(1), int(m.group(2)), timeout=120)

    def post(op, args, s):
        body = msgpack.packb({**{k: {"dtype": v.dtype.name, "shape": list(v.shape), "data": v.tobytes()}
                                 for k, v in args.items()}, "num_segments": s})
        conn.request("POST", f"/v1/{op}/forward", body, {"Content-Type": "application/msgpack"})
        r = conn.getresponse()
        return r.status, r.getheader("Retry-After"), r.read()

    small = {"x": np.arange(12.0).reshape(4, 3), "idx": np.array([0, 0, 1, 1], np.int32)}
    want = np.array([[3.0, 5, 7], [15, 17, 19]])
    st, _, body = post("segmented_sum", small, 2)
    assert st == 200, body
    assert np.array_equal(np.frombuffer(msgpack.unpackb(body)["out"]["data"]).reshape(2, 3), want)

    # Fill the device, leaving ~256 MiB, then ask for ~470 MB of device memory.
    hog = []
    free, _ = torch.cuda.mem_get_info()
    chunk = 1 << 30
    while free > (256 << 20) + chunk:
        hog.append(torch.empty(chunk, dtype=torch.uint8, device="cuda"))
        free, _ = torch.cuda.mem_get_info()
    while free > (256 << 20) + (16 << 20):
        hog.append(torch.empty(16 << 20, dtype=torch.uint8, device="cuda"))
        free, _ = torch.cuda.mem_get_info()
    n = 1 << 24  # x is 402 MB: more than the ~256 MiB left free, within --max-elements
    big = {"x": np.ones((n, 3), np.float64), "idx": np.zeros(n, np.int32)}
    st, retry, body = post("segmented_sum", big, 1)
    print("big request while the device is full:", st, body[:200])
    assert st == 503, (st, body[:300])
    assert json.loads(body)["error"]["code"] == "resource_exhausted", body
    assert retry is not None
    # Others are unaffected, while the device is still full and after it is freed.
    st, _, body = post("segmented_sum", small, 2)
    assert st == 200, body
    conn.request("GET", "/readyz")
    r = conn.getresponse()
    r.read()
    assert r.status == 200, r.status
    del hog
    torch.cuda.empty_cache()
    st, _, body = post("segmented_sum", big, 1)
    assert st == 200, body[:300]
    out = np.frombuffer(msgpack.unpackb(body)["out"]["data"])
    assert np.array_equal(out, np.full(3, float(n)))
    conn.close()
    p.terminate()
    assert p.wait(timeout=60) == 0
    print("http_oom: ok")


if __name__ == "__main__":
    main()

"""test_budget.py: resource use under hostile clients: answers count against the
in-flight budget and --max-output-bytes, dead and slow uploads do not hold the budget or the
connection slots, a mid-upload refusal is readable, memory goes back after a large body."""
import json
import os
import select
import socket
import threading
import time

import pytest

from conftest import GOOD, OP, head, json_error, read_all, serving, wait_until


def post(d, body, accept="application/json", timeout=60):
    c = d.conn(timeout=timeout)
    c.request("POST", OP.decode(), body, {"Content-Type": "application/json", "Accept": accept})
    r = c.getresponse()
    data = r.read()
    c.close()
    return r.status, data


def info(d):
    c = d.conn()
    c.request("GET", "/v1/info")
    inf = json.loads(c.getresponse().read())
    c.close()
    return inf


def test_amplification_is_refused_by_the_output_limit(daemon):
    d = daemon()
    assert info(d)["limits"]["max_output_bytes"] == 256 << 20
    st, data = post(d, b'{"x":[],"idx":[],"num_segments":67108864}')
    assert st == 413, data[:300]
    assert "--max-output-bytes" in json.loads(data)["error"]["message"]
    assert serving(d)


def test_outputs_and_answer_count_against_the_budget(daemon):
    # 16M float64 outputs = 128 MiB; as JSON ~400 MiB more: over a 300 MiB budget, msgpack fits.
    d = daemon("--max-body-bytes", "1M", "--max-inflight-bytes", "300M")
    body = b'{"x":[],"idx":[],"num_segments":16777216}'
    st, data = post(d, body)
    assert st == 503, data[:300]
    assert json.loads(data)["error"]["code"] == "resource_exhausted"
    st, data = post(d, body, accept="application/msgpack")
    assert st == 200 and len(data) > 128 << 20
    assert serving(d)


def test_dead_uploads_release_the_budget_at_once(daemon):
    d = daemon("--max-body-bytes", "64M", "--max-inflight-bytes", "70M")
    for _ in range(30):  # each sends 2 MiB of a 64 MiB body, then closes: 60 MiB if held
        s = d.sock()
        s.sendall(head(64 << 20) + b"[" + b"1," * (1 << 20))
        s.close()
    for _ in range(8):  # the case: head and FIN together
        s = d.sock()
        s.sendall(head(268435456) + b"{")
        s.close()
    ok = wait_until(lambda: post(d, GOOD)[0] == 200, 3, step=0.2)
    assert ok


def test_a_declared_length_is_not_reserved_before_it_arrives(daemon):
    # An upload that declares 64 MiB and sends 2 MiB holds about 2 MiB of a 70 MiB budget, even
    # when its body goes to a pooled (pre-mapped) buffer: a 6 MiB request beside it is served.
    d = daemon("--max-body-bytes", "64M", "--max-inflight-bytes", "70M")
    s = d.sock()
    s.sendall(head(64 << 20) + b"[" + b"1," * (1 << 20))
    n = 1_500_000
    body = b'{"x":[' + b"1," * (n - 1) + b'1],"idx":[' + b"0," * (n - 1) + b'0],"num_segments":1}'
    st, data = post(d, body)
    s.close()
    assert st == 200, data[:300]
    assert json.loads(data)["out"]["data"] == [float(n)]


def test_slow_bodies_are_cut_and_healthz_answers(daemon):
    d = daemon("--idle-timeout", "2", "--min-upload-rate", "1000", "--max-connections", "20")
    socks = []
    for _ in range(20):
        s = d.sock()
        s.sendall(head(10000) + b"{")
        socks.append(s)
    stop = time.time() + 8
    while time.time() < stop:  # one byte per 0.5 s on each
        for s in socks:
            try:
                s.send(b" ")
            except OSError:
                pass
        time.sleep(0.5)
        try:
            c = d.conn(timeout=1)
            c.request("GET", "/healthz")
            if c.getresponse().status == 200:
                break
        except OSError:
            pass
    assert time.time() < stop, "no /healthz answer while 20 bodies trickled"
    for s in socks:
        s.close()
    # The daemon counts this peer's connections (--max-connections-per-peer) until its event loop
    # has seen each close: a request right after the closes may still meet the limit (503).
    deadline = time.time() + 5
    while True:
        try:
            assert serving(d)
            break
        except AssertionError:
            if time.time() > deadline:
                raise
            time.sleep(0.1)


def test_mid_upload_503_is_readable(daemon):
    d = daemon("--max-body-bytes", "8M", "--max-inflight-bytes", "10M")
    hog = d.sock()
    hog.sendall(head(8 << 20) + b"[" + b"1," * (3 << 20))  # holds ~7 MiB
    time.sleep(0.3)
    s = d.sock()
    s.sendall(head(6 << 20))
    chunk = b"1," * 32768
    got = b""
    for _ in range(200):
        try:
            s.send(chunk)
        except OSError:
            break
        r, _, _ = select.select([s], [], [], 0.01)
        if r:
            break
    got = read_all(s, 3)
    s.close()
    hog.close()
    code, msg, hdr, _ = json_error(got, 503)
    assert code == "resource_exhausted" and hdr.get("retry-after")
    assert wait_until(lambda: post(d, GOOD)[0] == 200, 3, step=0.2)


def _rss(pid):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


# ASan's allocator keeps freed blocks in its quarantine and never trims, so RSS cannot fall back
# in the sanitizer build; the Release build's run of this file checks it.
@pytest.mark.skipif(os.environ.get("SEGOPS_SANITIZED") == "1", reason="sanitizer build: ASan's allocator keeps freed memory")
def test_memory_goes_back_after_a_large_json_body(daemon):
    d = daemon()
    assert serving(d)
    base = _rss(d.proc.pid)
    n = 3_000_000  # ~70 MiB of JSON numbers (under the 4M-item cap), padded with whitespace to ~150 MiB
    x = b",".join([b"0.12345678901234567" + b" " * 30] * n)
    body = b'{"x":[' + x + b'],"idx":[' + b",".join([b"0"] * 1) + b'],"num_segments":1}'
    st, data = post(d, body, timeout=120)
    assert st == 400  # x and idx lengths differ: decoded and validated, then refused
    # Given back once the request completes (just after its answer is sent).
    assert wait_until(lambda: _rss(d.proc.pid) < base + (48 << 20), 5, step=0.1), (base, _rss(d.proc.pid))

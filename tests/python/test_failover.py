"""test_failover.py: one segops.Client over three real daemons on 127.0.0.2, 127.0.0.3 and
127.0.0.4 (port 0 each; with the C extension the calls go over each one's native channel). Many
threads call while one daemon is SIGKILLed and another drained (SIGTERM with --drain-seconds): no
call fails and every result matches the float64 reference. A daemon that comes back on its address
rejoins after its back-off."""

import re
import signal
import threading
import time
import urllib.request

import numpy as np
import pytest

import segops
from segops import _endpoints, _table
from segopsd_proc import Daemon
from segref import WIDTHS
from test_ops import check

ADDRS = ("127.0.0.2", "127.0.0.3", "127.0.0.4")
FUNCS = [(op, pass_, w) for (op, pass_) in _table.FUNCS for w in WIDTHS[op]]


@pytest.fixture
def daemons(segopsd_path, own_daemons):
    made = []

    def start(addr, *args):
        d = Daemon(segopsd_path, ["--threads", "1", "--backend", "cpu", *args], listen=addr)
        made.append(d)
        return d

    yield start
    for d in made:
        d.kill()


NATIVE = segops.native_available()


def op_count(url, status="200"):
    """Op calls a daemon answered with status (HTTP's status, "200"), over HTTP and its native
    channels alike (the transport label)."""
    text = urllib.request.urlopen(url + "/metrics", timeout=10).read().decode()
    found = re.findall(r'^segops_requests_total\{[^}]*status="%s"[^}]*\} (\S+)$' % status, text, re.M)
    return sum(float(v) for v in found)


def test_urls_from_list_string_and_environment(monkeypatch):
    assert _endpoints.split_urls(" http://a:1, http://b:2 ,") == ["http://a:1", "http://b:2"]
    assert _endpoints.split_urls(["http://a:1", "http://b:2"]) == ["http://a:1", "http://b:2"]
    monkeypatch.setenv("SEGOPS_URL", "http://127.0.0.2:1,http://127.0.0.3:2")
    c = segops.Client()
    assert c.url.split(",") == ["http://127.0.0.2:1", "http://127.0.0.3:2"]
    with pytest.raises(ValueError):
        segops.Client(" , ")


def test_kill_and_drain_mid_run(daemons):
    a = daemons(ADDRS[0] + ":0")
    b = daemons(ADDRS[1] + ":0", "--drain-seconds", "0.5", "--shutdown-timeout", "10")
    c = daemons(ADDRS[2] + ":0")
    client = segops.Client([a.url, b.url, c.url], timeout=30)
    errors, done = [], [0] * 8
    stop = threading.Event()

    def worker(t):
        k = 0
        while not stop.is_set():
            op, pass_, w = FUNCS[(t * 7 + k) % len(FUNCS)]
            lengths = [3, 0, 5, 1 + k % 4, 2]
            try:
                check(client, op, pass_, w, lengths, "float64", seed=t * 1000 + k)
                done[t] += 1
            except Exception as e:  # noqa: BLE001 - every failure is reported
                errors.append(f"{op}/{pass_}: {type(e).__name__}: {e}")
            k += 1

    ts = [threading.Thread(target=worker, args=(t,)) for t in range(len(done))]
    for t in ts:
        t.start()
    try:
        deadline = time.monotonic() + 15
        while not all(op_count(d.url) > 0 for d in (a, b, c)) and time.monotonic() < deadline:
            time.sleep(0.1)
        counts = [op_count(d.url) for d in (a, b, c)]
        assert all(counts), f"calls are not spread over the three: {counts}"
        time.sleep(0.5)
        a.proc.send_signal(signal.SIGKILL)
        time.sleep(1.0)
        b.proc.send_signal(signal.SIGTERM)
        rc = b.proc.wait(timeout=15)
        assert rc == 0, f"drained daemon exited {rc}: {b.stderr_text()[-2000:]}"  # it finished its work
        before = op_count(c.url)
        time.sleep(1.0)
    finally:
        stop.set()
        for t in ts:
            t.join(60)
    assert not errors, errors[:5]
    assert sum(done) > 50
    assert op_count(c.url) > before, (before, done)  # the survivor took the work
    assert NATIVE or client._py._endpoints.moves > 0  # some calls were sent again to another daemon
    assert client.ready()
    client.close()


def test_failed_endpoint_rejoins(daemons):
    a = daemons(ADDRS[0] + ":0")
    b = daemons(ADDRS[1] + ":0")
    client = segops.Client(f"{a.url},{b.url}", timeout=30)
    x, idx = np.arange(6.0), np.array([0, 0, 1, 1, 1, 2], np.int32)
    a.kill()
    for _ in range(20):
        np.testing.assert_array_equal(client.segmented_sum(x, idx, 3), [1.0, 9.0, 5.0])
    ep_a = None if NATIVE else client._py._endpoints.endpoints[0]
    assert NATIVE or (ep_a.failures >= 1 and isinstance(ep_a.last_error, segops.SegopsError))
    a2 = daemons(f"{ADDRS[0]}:{a.port}")  # back on the same address
    deadline = time.monotonic() + 10
    while op_count(a2.url) == 0 and time.monotonic() < deadline:
        client.segmented_sum(x, idx, 3)
    assert op_count(a2.url) > 0 and (NATIVE or ep_a.failures == 0)
    client.close()


def test_no_daemon_left_raises(daemons):
    a = daemons(ADDRS[0] + ":0")
    b = daemons(ADDRS[1] + ":0")
    client = segops.Client([a.url, b.url], timeout=1.5)
    a.kill()
    b.kill()
    t0 = time.monotonic()
    with pytest.raises(segops.SegopsConnectionError):
        client.segmented_sum(np.ones(2), np.zeros(2, np.int32), 1)
    assert time.monotonic() - t0 < 5
    # A client error is not retried elsewhere: it is the same everywhere.
    c = daemons(ADDRS[2] + ":0")
    client2 = segops.Client([c.url, c.url], timeout=30)
    with pytest.raises(segops.InvalidArgument):
        client2.segmented_sum(np.ones(2), np.array([0, 5], np.int32), 1)
    # Sent once, not moved (over HTTP or the native channel); a native call is counted before its
    # answer is published, so the count is there as soon as the call returns.
    assert op_count(c.url, "400") == 1


def test_module_functions_use_segops_url_list(daemons, monkeypatch):
    a = daemons(ADDRS[0] + ":0")
    b = daemons(ADDRS[1] + ":0")
    monkeypatch.setenv("SEGOPS_URL", f"{a.url},{b.url}")
    prev = segops.set_default_client(None)  # made again from the environment on next use
    try:
        out = segops.segmented_sum(np.arange(4.0), np.array([0, 1, 1, 0], np.int32), 2)
        np.testing.assert_array_equal(out, [3.0, 3.0])
        assert len(segops.default_client().url.split(",")) == 2
    finally:
        segops.set_default_client(prev)

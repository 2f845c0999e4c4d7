"""test_transport.py: how segops.Client reaches the real daemon: unix:/// URLs, the native channel or a
unix listener found through /v1/info under transport="auto", forced transports, and what each
refuses; the pure-Python client's polling for its answers (spin_us)."""

import os
import tempfile

import time

import numpy as np
import pytest

import segops
from segops.client import PurePythonClient

NATIVE = segops.native_available()
# What "auto" finds on a daemon of this host: its native channel with the extension, else a unix
# listener it lists (or its TCP address when it has none).
AUTO = "native" if NATIVE else None


def _sum_args():
    return np.arange(1.0, 7.0), np.array([0, 0, 1, 1, 1, 2], np.int32)


@pytest.fixture(scope="module")
def unix_daemon(start_daemon, own_daemons):
    d = tempfile.mkdtemp(prefix="segops-tt-")
    sock = os.path.join(d, "segopsd.sock")
    daemon = start_daemon(["--listen", "unix:" + sock])
    daemon.sock_path = sock
    yield daemon
    daemon.stop_and_check()
    os.rmdir(d)


def test_unix_url(unix_daemon):
    with segops.Client("unix://" + unix_daemon.sock_path, transport="unix") as c:
        x, idx = _sum_args()
        for _ in range(5):
            np.testing.assert_array_equal(c.segmented_sum(x, idx, 3), [3, 12, 6])
        assert c.transport_used == "unix"
        assert NATIVE or c._py.connections_opened == 1  # one keep-alive unix connection
        assert c.health().ok


def test_auto_finds_the_unix_listener(unix_daemon):
    with segops.Client(unix_daemon.url) as c:
        x, idx = _sum_args()
        np.testing.assert_array_equal(c.segmented_sum(x, idx, 3), [3, 12, 6])
        # the native channel with the extension, else its unix socket: never TCP bodies
        assert c.transport_used == (AUTO or "unix")


def test_forced_unix_over_a_tcp_url(unix_daemon):
    with segops.Client(unix_daemon.url, transport="unix") as c:
        x, idx = _sum_args()
        np.testing.assert_array_equal(c.segmented_sum(x, idx, 3), [3, 12, 6])
        assert c.transport_used == "unix"


def test_forced_http_stays_on_tcp(unix_daemon):
    with segops.Client(unix_daemon.url, transport="http") as c:
        x, idx = _sum_args()
        np.testing.assert_array_equal(c.segmented_sum(x, idx, 3), [3, 12, 6])
        assert c.transport_used == "http"
        assert NATIVE or c._py.connections_opened == 1  # no discovery request at all


def test_unix_refused_without_a_listener(server_url):
    with segops.Client(server_url, transport="unix") as c:
        # libsegops: a forced transport the daemon does not offer is invalid at once
        with pytest.raises(segops.InvalidArgument if NATIVE else segops.SegopsConnectionError) as ei:
            c.segmented_sum(*_sum_args(), 3)
        assert "unix" in ei.value.message


def test_auto_without_unix_listener_uses_tcp(server_url):
    with segops.Client(server_url) as c:
        np.testing.assert_array_equal(c.segmented_sum(*_sum_args(), 3), [3, 12, 6])
        assert c.transport_used == (AUTO or "http")


def test_unix_url_to_a_non_socket_is_a_connection_error(tmp_path):
    f = tmp_path / "not-a-socket.sock"
    f.write_text("")
    # (refused: a client that never reached a daemon gives up within about a second, naming it)
    with segops.Client("unix://" + str(f), timeout=30) as c:
        t0 = time.monotonic()
        with pytest.raises(segops.SegopsConnectionError) as ei:
            c.segmented_sum(*_sum_args(), 3)
        assert time.monotonic() - t0 < 2.0
        assert "no segops daemon answered in" in ei.value.message and str(f) in ei.value.message


def test_bad_transport_and_url():
    with pytest.raises(ValueError, match="transport"):
        segops.Client("http://127.0.0.1:1", transport="carrier-pigeon")
    with pytest.raises(ValueError, match="unix"):
        segops.Client("ftp://example.org/")


def test_errors_are_the_same_over_unix(unix_daemon):
    with segops.Client("unix://" + unix_daemon.sock_path) as c:
        with pytest.raises(segops.InvalidArgument) as ei:
            c.segmented_mul(np.ones(4), np.ones(3), np.zeros(4, np.int32), 4)
        assert "segmented_mul" in ei.value.message and "num_segments" in ei.value.message


# ---- the pure-Python client's polling for the answer (spin_us): same answers, no descriptor left
# behind, this host only ----


def _open_fds():
    return len(os.listdir("/proc/self/fd"))


@pytest.mark.parametrize("spin_yield", [False, True])
@pytest.mark.parametrize("transport", ["unix", "http"])
def test_spin_gives_the_same_answers_and_closes_its_twin(unix_daemon, transport, spin_yield, monkeypatch):
    # spin_yield: the poll yields the CPU between reads ($SEGOPS_CLIENT_SPIN_YIELD=1)
    monkeypatch.setattr(segops._transport, "_SPIN_YIELD", spin_yield)
    url = "unix://" + unix_daemon.sock_path if transport == "unix" else unix_daemon.url
    before = _open_fds()
    x, idx = _sum_args()
    for spin in (0, 1, 100000):  # off; always outlasted (then sleeps); always caught
        with PurePythonClient(url, transport=transport, spin_us=spin) as c:
            for _ in range(20):
                np.testing.assert_array_equal(c.segmented_sum(x, idx, 3), [3, 12, 6])
            conns = list(c._idle)
            assert conns, "the keep-alive connection is back in the pool"
            # the polling reads go through a non-blocking twin of the socket, made on first use
            assert all((conn._nb is not None) == (spin > 0) for conn in conns)
        assert all(conn._nb is None for conn in conns)  # closed with the connection
    assert _open_fds() <= before  # neither twins nor sockets left open


def test_spin_after_reconnect_follows_the_new_socket(unix_daemon):
    with PurePythonClient("unix://" + unix_daemon.sock_path, transport="unix", spin_us=100000) as c:
        x, idx = _sum_args()
        np.testing.assert_array_equal(c.segmented_sum(x, idx, 3), [3, 12, 6])
        conn = c._idle[0]
        old = conn.sock
        conn.sock.close()  # as if the server had closed it: the client reconnects
        conn.sock = None
        np.testing.assert_array_equal(c.segmented_sum(x, idx, 3), [3, 12, 6])
        conn = c._idle[0]
        assert conn.sock is not old and conn._nb_of is conn.sock


def test_spin_only_for_this_host():
    assert PurePythonClient("http://127.0.0.1:1", spin_us=50)._spin_s == pytest.approx(50e-6)
    assert PurePythonClient("http://localhost:1", spin_us=50)._spin_s > 0
    assert PurePythonClient("http://[::1]:1", spin_us=50)._spin_s > 0
    assert PurePythonClient("unix:///tmp/none.sock", spin_us=50)._spin_s > 0
    assert PurePythonClient("http://192.0.2.1:1", spin_us=50)._spin_s == 0  # another host: sleep
    assert PurePythonClient("https://127.0.0.1:1", spin_us=50)._spin_s == 0  # TLS bytes: never polled raw
    assert PurePythonClient("http://127.0.0.1:1").spin_us == segops._http.DEFAULT_SPIN_US
    # segops.Client's default: the native channel's budget with the extension, else the same
    want = segops.client.DEFAULT_SPIN_US if NATIVE else segops._http.DEFAULT_SPIN_US
    assert segops.Client("http://127.0.0.1:1").spin_us == want


def test_spin_us_is_checked(monkeypatch):
    for bad in (-1, 100001, float("nan"), "fast"):
        with pytest.raises(ValueError, match="spin_us must be a number of microseconds from 0 to 100000"):
            segops.Client("http://127.0.0.1:1", spin_us=bad)
    monkeypatch.setenv("SEGOPS_CLIENT_SPIN_US", "soon")
    with pytest.raises(ValueError, match="SEGOPS_CLIENT_SPIN_US must be"):
        segops.Client("http://127.0.0.1:1")
    monkeypatch.setenv("SEGOPS_CLIENT_SPIN_US", "0")
    assert segops.Client("http://127.0.0.1:1").spin_us == 0


def test_spin_outlasted_sleeps_for_the_next_calls():
    # spin_wait on a socket pair: an answer that comes after the poll makes the next 8 reads
    # sleep at once; an answer already there is caught by the poll
    import socket
    import threading
    import types

    from segops import _transport

    a, b = socket.socketpair()
    a.settimeout(5.0)
    conn = types.SimpleNamespace(spin_s=1e-6, _spin_skip=0, _nb=None, _nb_of=None)
    try:
        late = threading.Timer(0.05, b.sendall, (b"late",))
        late.start()
        assert _transport.spin_wait(conn, a) == b"late"  # the poll gave up, the blocking read got it
        late.join()
        seen = [conn._spin_skip]
        for k in range(9):
            b.sendall(b"x%d" % k)
            assert _transport.spin_wait(conn, a) == b"x%d" % k
            seen.append(conn._spin_skip)
        assert seen == [8, 7, 6, 5, 4, 3, 2, 1, 0, 0]  # the 9th read polled again and caught it
        assert conn._nb is not None and conn._nb_of is a
    finally:
        if conn._nb is not None:
            conn._nb.close()
        a.close()
        b.close()

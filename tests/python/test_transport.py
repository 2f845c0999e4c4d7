"""test_transport.py: how segops.Client reaches the real daemon: unix:/// URLs, the native channel or a
unix listener found through /v1/info under transport="auto" (the extension's; the pure-Python client
speaks HTTP over the URL's own socket), forced transports, and what each refuses; spin_us."""

import os
import tempfile

import time

import numpy as np
import pytest

import segops

NATIVE = segops.native_available()
# What "auto" finds on a daemon of this host: its native channel with the extension, else the URL's
# own socket (the pure-Python client asks the daemon nothing to choose).
AUTO = "native" if NATIVE else "http"


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


def test_auto_over_a_tcp_url(unix_daemon):
    with segops.Client(unix_daemon.url) as c:
        x, idx = _sum_args()
        np.testing.assert_array_equal(c.segmented_sum(x, idx, 3), [3, 12, 6])
        # the native channel with the extension; else the URL's TCP socket, with no request to find
        # another (one connection for the call, none for /v1/info)
        assert c.transport_used == AUTO
        assert NATIVE or c._py.connections_opened == 1


def test_forced_unix_over_a_tcp_url(unix_daemon):
    if not NATIVE:  # finding the daemon's unix listener from its URL is the extension's
        with pytest.raises(ValueError, match="C extension.*unix:///path"):
            segops.Client(unix_daemon.url, transport="unix")
        return
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
    if not NATIVE:
        with pytest.raises(ValueError, match="transport='unix'"):
            segops.Client(server_url, transport="unix")
        return
    with segops.Client(server_url, transport="unix") as c:
        # libsegops: a forced transport the daemon does not offer is invalid at once
        with pytest.raises(segops.InvalidArgument) as ei:
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


# ---- spin_us: the extension's polling for its answers (the pure-Python client does not poll) ----


def test_spin_us_default():
    assert segops.Client("http://127.0.0.1:1").spin_us == (segops.client.DEFAULT_SPIN_US if NATIVE else 0)


def test_spin_us_is_checked(monkeypatch):
    for bad in (-1, 100001, float("nan"), "fast"):
        with pytest.raises(ValueError, match="spin_us must be a number of microseconds from 0 to 100000"):
            segops.Client("http://127.0.0.1:1", spin_us=bad)
    monkeypatch.setenv("SEGOPS_CLIENT_SPIN_US", "soon")
    with pytest.raises(ValueError, match="SEGOPS_CLIENT_SPIN_US must be"):
        segops.Client("http://127.0.0.1:1")
    monkeypatch.setenv("SEGOPS_CLIENT_SPIN_US", "0")
    assert segops.Client("http://127.0.0.1:1").spin_us == 0


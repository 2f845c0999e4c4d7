"""test_transport.py: how segops.Client reaches the real daemon: unix:/// URLs, a unix listener
found through /v1/info under transport="auto", forced transports, and what each refuses."""

import os
import tempfile

import numpy as np
import pytest

import segops


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
        assert c.connections_opened == 1  # one keep-alive unix connection
        assert c.health().ok


def test_auto_finds_the_unix_listener(unix_daemon):
    with segops.Client(unix_daemon.url) as c:
        x, idx = _sum_args()
        np.testing.assert_array_equal(c.segmented_sum(x, idx, 3), [3, 12, 6])
        # shared memory when this daemon has it, else its unix socket: never TCP bodies
        assert c.transport_used in ("shm", "unix")


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
        assert c.connections_opened == 1  # no discovery request at all


def test_unix_refused_without_a_listener(server_url):
    with segops.Client(server_url, transport="unix") as c:
        with pytest.raises(segops.SegopsConnectionError) as ei:
            c.segmented_sum(*_sum_args(), 3)
        assert "unix" in ei.value.message


def test_auto_without_unix_listener_uses_tcp(server_url):
    with segops.Client(server_url) as c:
        np.testing.assert_array_equal(c.segmented_sum(*_sum_args(), 3), [3, 12, 6])
        assert c.transport_used in ("shm", "http")


def test_unix_url_to_a_non_socket_is_a_connection_error(tmp_path):
    f = tmp_path / "not-a-socket.sock"
    f.write_text("")
    with segops.Client("unix://" + str(f)) as c:
        with pytest.raises(segops.SegopsConnectionError):
            c.segmented_sum(*_sum_args(), 3)


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

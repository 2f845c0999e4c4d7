"""test_restart.py: segops.Client across daemon restarts and against hostile daemons: a client
loses no call while its daemon restarts, on TCP, on a unix socket and with two daemons (1: over the
native channel with the C extension, which connects again and hands its memory over again; over
HTTP without it; either way it waits for a daemon that is restarting); `timeout` bounds the whole call against a daemon that
trickles its answer, and a client of two daemons then gets its answer from the other (7); error and
JSON answers are bounded whatever length is declared (8); hostile answer shapes are a ProtocolError
(10); with every daemon down the error names each one's last failure and the time spent (11)."""

import os
import socket
import threading
import time

import msgpack
import numpy as np
import pytest

import segops
from segopsd_proc import Daemon

NATIVE = segops.native_available()
# The transport restarts are survived on: the native channel with the extension, else HTTP.
SURVIVOR = "native" if NATIVE else "http"

X = np.arange(1.0, 7.0)
IDX = np.array([0, 0, 1, 1, 1, 2], np.int32)
WANT = [3.0, 12.0, 6.0]


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class Caller:
    """Threads calling through one client until stopped; every result checked."""

    def __init__(self, client, threads=4, n=2000):
        rng = np.random.default_rng(1)
        self.x = rng.standard_normal((n, 3))
        self.idx = np.sort(rng.integers(0, 16, n)).astype(np.int32)
        self.want = np.zeros((16, 3))
        np.add.at(self.want, self.idx, self.x)
        self.client, self.stop, self.calls, self.errors = client, threading.Event(), [0], []
        self.threads = [threading.Thread(target=self._run) for _ in range(threads)]
        for t in self.threads:
            t.start()

    def _run(self):
        while not self.stop.is_set():
            try:
                got = self.client.segmented_sum(self.x, self.idx, 16)
                if not np.allclose(got, self.want, rtol=1e-12, atol=1e-12):
                    self.errors.append("wrong result")
                self.calls[0] += 1
            except Exception as e:  # every failure counts
                self.errors.append(repr(e)[:300])

    def wait_calls(self, n, timeout=20):
        end = time.time() + timeout
        start = self.calls[0]
        while self.calls[0] < start + n and time.time() < end:
            time.sleep(0.02)
        assert self.calls[0] >= start + n, f"only {self.calls[0] - start} calls in {timeout} s: {self.errors[:3]}"

    def finish(self):
        self.stop.set()
        for t in self.threads:
            t.join(60)
        return self.errors


@pytest.fixture
def run(segopsd_path, own_daemons):
    made = []

    def start(listen, *args):
        d = Daemon(segopsd_path, ["--threads", "2", "--backend", "cpu", *args], listen=listen)
        made.append(d)
        return d

    yield start
    for d in made:
        d.kill()


def _restart(run, d, listen, *args):
    assert d.stop() == 0
    return run(listen, *args)


def test_restart_over_tcp_loses_no_call(run):
    listen = f"127.0.0.1:{free_port()}"
    d = run(listen)
    c = segops.Client(d.url, transport=SURVIVOR, timeout=30)
    caller = Caller(c)
    try:
        caller.wait_calls(20)
        d = _restart(run, d, listen)
        caller.wait_calls(50)
    finally:
        errors = caller.finish()
    assert not errors, errors[:5]
    assert c.transport_used == SURVIVOR  # the channel opened again, not moved to another transport
    c.close()


def test_restart_over_a_unix_socket_loses_no_call(run, tmp_path):
    path = str(tmp_path / "d.sock")
    # (the native channel's socket named, so the restarted daemon, on another TCP port, serves it
    # at the same place)
    args = ("--listen", f"unix:{path}", "--native-socket", str(tmp_path / "d.native"))
    d = run("127.0.0.1:0", *args)
    c = segops.Client("unix://" + path, transport="auto", timeout=30)
    caller = Caller(c)
    try:
        caller.wait_calls(20)
        d = _restart(run, d, "127.0.0.1:0", *args)
        caller.wait_calls(50)
    finally:
        errors = caller.finish()
    assert not errors, errors[:5]
    assert c.transport_used == ("native" if NATIVE else "unix")
    c.close()


def test_rolling_restart_of_two_daemons_loses_no_call(run):
    la, lb = f"127.0.0.1:{free_port()}", f"127.0.0.1:{free_port()}"
    a, b = run(la), run(lb)
    c = segops.Client([a.url, b.url], transport=SURVIVOR, timeout=30)
    caller = Caller(c)
    try:
        caller.wait_calls(20)
        a = _restart(run, a, la)
        caller.wait_calls(40)
        b = _restart(run, b, lb)
        caller.wait_calls(40)
    finally:
        errors = caller.finish()
    assert not errors, errors[:5]
    c.close()


# ---- scripted daemons ------------------------------------------------------------------------------


class Peer:
    """A local socket that answers every request with answer(conn) after reading the head and a
    Content-Length body."""

    def __init__(self, answer):
        self.answer = answer
        self.srv = socket.socket()
        self.srv.bind(("127.0.0.1", 0))
        self.srv.listen(16)
        self.url = f"http://127.0.0.1:{self.srv.getsockname()[1]}"
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self):
        while True:
            try:
                conn, _ = self.srv.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn):
        with conn:
            buf = b""
            while b"\r\n\r\n" not in buf:
                chunk = conn.recv(65536)
                if not chunk:
                    return
                buf += chunk
            head, rest = buf.split(b"\r\n\r\n", 1)
            n = 0
            for line in head.split(b"\r\n")[1:]:
                k, _, v = line.partition(b":")
                if k.strip().lower() == b"content-length":
                    n = int(v)
            while len(rest) < n:
                rest += conn.recv(65536)
            try:
                self.answer(conn)
            except OSError:
                pass

    def close(self):
        self.srv.close()


def trickle(conn):
    body = msgpack.packb({"out": {"dtype": "float64", "shape": [3], "data": np.array(WANT).tobytes()}})
    msg = b"HTTP/1.1 200 OK\r\nContent-Type: application/msgpack\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)
    for i in range(len(msg)):  # a byte every 0.5 s: about a minute for the answer
        conn.sendall(msg[i:i + 1])
        time.sleep(0.5)


def test_timeout_bounds_the_whole_call():
    p = Peer(trickle)
    try:
        c = segops.Client(p.url, transport="http", timeout=2)
        t0 = time.monotonic()
        with pytest.raises(segops.SegopsTimeout):
            c.segmented_sum(X, IDX, 3)
        assert time.monotonic() - t0 < 4
        c.close()
    finally:
        p.close()


def test_a_trickling_daemon_leaves_time_for_the_other(run):
    p = Peer(trickle)
    d = run("127.0.0.1:0")
    try:
        c = segops.Client([p.url, d.url], transport="http", timeout=3)
        for _ in range(3):
            t0 = time.monotonic()
            np.testing.assert_array_equal(c.segmented_sum(X, IDX, 3), WANT)
            assert time.monotonic() - t0 < 3.5
        c.close()
    finally:
        p.close()


@pytest.mark.parametrize("head", [
    b"HTTP/1.1 500 Internal Server Error\r\nContent-Type: application/json\r\nContent-Length: 1125899906842624\r\n\r\n",
    b"HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\nContent-Length: 1073741824\r\n\r\n{",
    b"HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n",
])
def test_error_answers_are_bounded(head):
    def answer(conn):
        conn.sendall(head)
        if b"Content-Length" not in head:
            junk = b"x" * (1 << 16)
            for _ in range(1 << 14):  # up to 1 GiB, as long as the client reads
                conn.sendall(junk)

    p = Peer(answer)
    try:
        c = segops.Client(p.url, transport="http", timeout=10)
        t0 = time.monotonic()
        with pytest.raises(segops.ProtocolError) as ei:
            c.segmented_sum(X, IDX, 3)
        assert "65536" in ei.value.message and time.monotonic() - t0 < 5, ei.value.message
        c.close()
    finally:
        p.close()


def test_json_answers_are_bounded():
    def answer(conn):
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 1125899906842624\r\n\r\n{")

    p = Peer(answer)
    try:
        c = segops.Client(p.url, transport="http", timeout=10)
        with pytest.raises(segops.ProtocolError):
            c.info()
        c.close()
    finally:
        p.close()


@pytest.mark.parametrize("out", [
    {"dtype": "float64", "shape": [-1, -3], "data": np.zeros(3).tobytes()},
    {"dtype": "float64", "shape": "abc", "data": np.zeros(3).tobytes()},
    {"dtype": "float64", "shape": [2, "x"], "data": np.zeros(2).tobytes()},
    {"dtype": "float64", "shape": [2], "data": [1.0, 2.0, 3.0]},
    {"dtype": "float64", "shape": [1, 1, 1, 1, 1, 1, 1], "data": np.zeros(1).tobytes()},
])
def test_hostile_answer_shapes_are_protocol_errors(out):
    body = msgpack.packb({"out": out})

    def answer(conn):
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/msgpack\r\nContent-Length: %d\r\n\r\n%s"
                     % (len(body), body))

    p = Peer(answer)
    try:
        c = segops.Client(p.url, transport="http", timeout=10)
        with pytest.raises(segops.ProtocolError):
            c.segmented_sum(X, IDX, 3)
        c.close()
    finally:
        p.close()


def test_every_daemon_down_names_each_failure():
    a, b = f"http://127.0.0.1:{free_port()}", f"http://127.0.0.1:{free_port()}"
    c = segops.Client([a, b], timeout=2, wait=10)  # told to wait: first contact waits as a restart does
    t0 = time.monotonic()
    with pytest.raises(segops.SegopsConnectionError) as ei:
        c.segmented_sum(X, IDX, 3)
    el = time.monotonic() - t0
    msg = ei.value.message
    spent = "no daemon took the call in" if NATIVE else "no daemon answered in"
    assert a in msg and b in msg and spent in msg, msg
    assert 1.5 <= el < 5, el
    c.close()


# ---- first contact: a client that never reached a daemon fails within about a second

FAST = 2.0  # about 1 s, with room for a loaded 2-core CI machine


@pytest.mark.parametrize("url,why", [
    ("http://127.0.0.1:{port}", "connection refused"),
    ("http://segops-test.invalid:8080", "does not resolve"),  # the reserved TLD: no DNS server is asked
    ("unix:///nonexistent/segops.sock", "/nonexistent/segops.sock does not exist"),
])
def test_first_contact_fails_fast_naming_the_url_and_why(url, why):
    url = url.format(port=free_port())
    c = segops.Client(url)  # the default 60 s timeout
    t0 = time.monotonic()
    with pytest.raises(segops.SegopsConnectionError) as ei:
        c.segmented_sum(X, IDX, 3)
    took = time.monotonic() - t0
    msg = ei.value.message
    assert took < FAST, (took, msg)
    assert url in msg and why in msg and "no segops daemon answered" in msg, msg
    assert "segopsd" in msg and "SEGOPS_WAIT_S" in msg, msg  # how to start one, how to wait for one
    c.close()


def test_first_contact_names_every_url():
    a, b = f"http://127.0.0.1:{free_port()}", "http://segops-test.invalid:1"
    t0 = time.monotonic()
    with pytest.raises(segops.SegopsConnectionError) as ei:
        segops.Client(f"{a},{b}").segmented_sum(X, IDX, 3)
    assert time.monotonic() - t0 < FAST
    msg = ei.value.message
    assert f"{a}: " in msg and "connection refused" in msg and f"{b}: " in msg and "does not resolve" in msg, msg


def test_wait_restores_the_long_wait_on_first_contact(monkeypatch):
    url = f"http://127.0.0.1:{free_port()}"
    for client in (lambda: segops.Client(url, wait=2.0),
                   lambda: (monkeypatch.setenv("SEGOPS_WAIT_S", "2.0"), segops.Client(url))[1]):
        c = client()
        t0 = time.monotonic()
        with pytest.raises(segops.SegopsConnectionError):
            c.segmented_sum(X, IDX, 3)
        assert 1.7 < time.monotonic() - t0 < 4.0  # told to wait 2 s, not the default 1
        c.close()
    monkeypatch.setenv("SEGOPS_WAIT_S", "soon")
    with pytest.raises(ValueError, match="SEGOPS_WAIT_S"):
        segops.Client(url)


def test_a_daemon_it_reached_is_waited_for_and_said_once(run, caplog):
    listen = f"127.0.0.1:{free_port()}"
    d = run(listen)
    c = segops.Client(d.url, transport="http", timeout=30)
    np.testing.assert_array_equal(c.segmented_sum(X, IDX, 3), WANT)
    assert d.stop() == 0
    back = []
    t = threading.Timer(2.0, lambda: back.append(run(listen)))
    t.start()
    caplog.set_level("INFO", logger="segops")
    t0 = time.monotonic()
    try:
        np.testing.assert_array_equal(c.segmented_sum(X, IDX, 3), WANT)  # waited for the restart
    finally:
        t.join()
    assert time.monotonic() - t0 > 1.5
    said = [r.getMessage() for r in caplog.records if r.name == "segops"]
    assert len(said) == 1 and "waiting for" in said[0] and d.url in said[0] and "until" in said[0], said
    c.close()

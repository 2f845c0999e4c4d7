"""test_response.py: how the pure-Python client (the client when the C extension is not in use) reads
HTTP answers. segopsd always answers with a Content-Length; a proxy in front of it
(a service mesh, an ingress) may not. So besides a check against the real daemon, these tests
put a scripted peer on a local socket that answers with the framings a proxy may use (chunked,
close-delimited, an interim 100) and with broken answers, and check what the client makes of
each: the same arrays, or a typed error and a connection that is not reused."""

import socket
import threading

import msgpack
import numpy as np
import pytest

import segops
from segops.client import PurePythonClient

X = np.arange(1.0, 7.0)
IDX = np.array([0, 0, 1, 1, 1, 2], np.int32)
BODY = msgpack.packb({"out": {"dtype": "float64", "shape": [3], "data": np.array([3.0, 12.0, 6.0]).tobytes()}})


class Peer:
    """Accepts connections on 127.0.0.1; for the k-th request (over all connections) sends
    answers[k] (bytes, or a callable(conn) that does what it likes) after reading the head and
    the Content-Length body. Counts connections."""

    def __init__(self, answers):
        self.answers = list(answers)
        self.srv = socket.socket()
        self.srv.bind(("127.0.0.1", 0))
        self.srv.listen(8)
        self.url = f"http://127.0.0.1:{self.srv.getsockname()[1]}"
        self.connections = 0
        self.requests = 0
        self.t = threading.Thread(target=self._run, daemon=True)
        self.t.start()

    def _run(self):
        while self.answers:
            try:
                conn, _ = self.srv.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn):
        buf = b""
        with conn:
            while self.answers:
                while b"\r\n\r\n" not in buf:
                    chunk = conn.recv(65536)
                    if not chunk:
                        return
                    buf += chunk
                head, buf = buf.split(b"\r\n\r\n", 1)
                n = 0
                for line in head.split(b"\r\n")[1:]:
                    k, _, v = line.partition(b":")
                    if k.strip().lower() == b"content-length":
                        n = int(v)
                while len(buf) < n:
                    buf += conn.recv(65536)
                buf = buf[n:]
                self.requests += 1
                a = self.answers.pop(0)
                if callable(a):
                    if a(conn) == "close":
                        return
                else:
                    conn.sendall(a)

    def close(self):
        self.srv.close()


def ok(body=BODY, extra=b""):
    return b"HTTP/1.1 200 OK\r\nContent-Type: application/msgpack\r\nContent-Length: %d\r\n%s\r\n%s" % (
        len(body), extra, body)


def chunked(body=BODY, size=7):
    pieces = b"".join(b"%x;ext=1\r\n%s\r\n" % (len(body[i:i + size]), body[i:i + size])
                      for i in range(0, len(body), size))
    return b"HTTP/1.1 200 OK\r\nContent-Type: application/msgpack\r\nTransfer-Encoding: chunked\r\n\r\n" + \
        pieces + b"0\r\nX-Trailer: 1\r\n\r\n"


def until_close(conn):
    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/msgpack\r\nConnection: close\r\n\r\n" + BODY)
    conn.shutdown(socket.SHUT_WR)
    return "close"


def call(c):
    return c.segmented_sum(X, IDX, 3)


@pytest.fixture
def peer():
    made = []

    def make(answers):
        p = Peer(answers)
        made.append(p)
        return p

    yield make
    for p in made:
        p.close()


def test_against_the_daemon_answers_and_connection_are_reused(server_url):
    c = PurePythonClient(server_url, transport="http")
    for _ in range(50):
        np.testing.assert_array_equal(call(c), [3, 12, 6])
    assert c.connections_opened == 1  # every answer was read to its end: the connection stays
    c.close()


def test_keep_alive_framings(peer):
    """Content-Length, chunked (small chunks, extensions, a trailer), a 100 first, each followed
    by another call on the same connection."""
    interim = b"HTTP/1.1 100 Continue\r\n\r\n" + ok()
    p = peer([ok(), chunked(), chunked(size=1), interim, ok(extra=b"X-Long: " + b"a" * 5000 + b"\r\n")])
    c = PurePythonClient(p.url, transport="http")
    for _ in range(5):
        np.testing.assert_array_equal(call(c), [3, 12, 6])
    assert p.connections == 1 and c.connections_opened == 1
    c.close()


def test_close_delimited_body_then_a_new_connection(peer):
    p = peer([until_close, ok()])
    c = PurePythonClient(p.url, transport="http")
    np.testing.assert_array_equal(call(c), [3, 12, 6])
    np.testing.assert_array_equal(call(c), [3, 12, 6])
    assert c.connections_opened == 2  # the first connection ended with its answer
    c.close()


def test_connection_close_header_is_honoured(peer):
    p = peer([ok(extra=b"Connection: close\r\n"), ok()])
    c = PurePythonClient(p.url, transport="http")
    call(c)
    call(c)
    assert c.connections_opened == 2
    c.close()


def test_error_answer_is_typed_with_retry_after(peer):
    # (resource_exhausted: an "unavailable" 503 is waited out, as from a restarting daemon)
    err = b'{"error": {"code": "resource_exhausted", "message": "the request queue is full"}}'
    p = peer([b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nRetry-After: 2\r\n"
              b"Content-Length: %d\r\n\r\n%s" % (len(err), err), ok()])
    c = PurePythonClient(p.url, transport="http")
    with pytest.raises(segops.SegopsError) as ei:
        call(c)
    assert ei.value.status == 503 and ei.value.code == "resource_exhausted" and "queue" in ei.value.message
    assert ei.value.retry_after == 2.0
    np.testing.assert_array_equal(call(c), [3, 12, 6])
    assert c.connections_opened == 1  # an error read to its end leaves the connection usable
    c.close()


def test_stale_keep_alive_connection_is_retried_once(peer):
    def drop(conn):
        return "close"  # read the request, close without an answer

    p = peer([ok(), drop, ok()])
    c = PurePythonClient(p.url, transport="http")
    call(c)
    np.testing.assert_array_equal(call(c), [3, 12, 6])  # the reused connection was closed: retried
    assert c.connections_opened == 2
    c.close()


@pytest.mark.parametrize("answer, what", [
    (b"HTTP/1.1 200 OK\r\nContent-Length: 500\r\n\r\nshort", "body shorter than its Content-Length"),
    (b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello", "two Content-Lengths"),
    (b"HTTP/1.1 200 OK\r\nContent-Length: -5\r\n\r\n", "a negative Content-Length"),
    (b"SSH-2.0-OpenSSH\r\n\r\n", "not HTTP"),
    (b"HTTP/1.1 200 OK\r\nno colon here\r\nContent-Length: 0\r\n\r\n", "a header without a colon"),
    (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", "a bad chunk size"),
    (b"HTTP/1.1 200 OK\r\nX: " + b"a" * 70000, "an endless head"),
])
def test_broken_answers_are_connection_errors(peer, answer, what):
    def send_and_close(conn):
        conn.sendall(answer)
        return "close"

    p = peer([send_and_close])
    c = PurePythonClient(p.url, transport="http", timeout=5)
    with pytest.raises((segops.SegopsConnectionError, segops.ProtocolError)) as ei:
        call(c)
    assert not isinstance(ei.value, segops.SegopsTimeout), what
    assert not c._idle, f"{what}: a connection left in an unknown state was kept for reuse"
    c.close()


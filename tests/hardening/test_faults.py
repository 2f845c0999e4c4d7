"""test_faults.py: the real segopsd under client faults: aborted uploads and downloads, idle and
trickling connections, connection limits, oversized bodies, and a valgrind memcheck run."""
import json
import os
import shutil
import socket
import sys
import threading
import time

import msgpack
import numpy as np
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # tests/: shared modules
from segopsd_proc import Daemon  # noqa: E402

SEGOPSD = os.environ.get("SEGOPSD")
pytestmark = pytest.mark.skipif(not SEGOPSD, reason="SEGOPSD (path of the daemon) not set")

GOOD = b'{"x":[1,2,3,4,5,6],"idx":[0,0,1,1,1,2],"num_segments":3}'
GOOD_ANSWER = {"out": {"dtype": "float64", "shape": [3], "data": [3.0, 12.0, 6.0]}}


def good_request(d, conn=None):
    c = conn or d.conn()
    c.request("POST", "/v1/segmented_sum/forward", GOOD, {"Content-Type": "application/json"})
    r = c.getresponse()
    body = r.read()
    if conn is None:
        c.close()
    return r.status, json.loads(body)


@pytest.fixture
def daemon_factory():
    made = []

    def make(*args, wrapper=()):
        d = Daemon(SEGOPSD, args, wrapper=wrapper, start_timeout=60)
        made.append(d)
        return d

    yield make
    for d in made:
        d.kill()


def assert_serving(d):
    status, body = good_request(d)
    assert status == 200 and body == GOOD_ANSWER


def test_abort_mid_upload(daemon_factory):
    d = daemon_factory()
    for _ in range(50):
        s = d.sock()
        s.sendall(b"POST /v1/segmented_sum/forward HTTP/1.1\r\nHost: x\r\nContent-Type: application/msgpack\r\n"
                  b"Content-Length: 100000\r\n\r\n" + b"\x00" * 1000)
        s.close()
    assert_serving(d)
    assert d.stop() == 0


def test_abort_mid_response(daemon_factory):
    d = daemon_factory()
    n = 1 << 20
    body = msgpack.packb({"g_out": {"dtype": "float32", "shape": [1, 3], "data": np.ones((1, 3), np.float32).tobytes()},
                          "idx": {"dtype": "int32", "shape": [n], "data": np.zeros(n, np.int32).tobytes()},
                          "num_segments": 1})
    req = (b"POST /v1/segmented_sum/backward HTTP/1.1\r\nHost: x\r\nContent-Type: application/msgpack\r\n"
           b"Content-Length: %d\r\n\r\n" % len(body)) + body
    for _ in range(10):
        s = d.sock()
        s.sendall(req)
        s.recv(100)  # the response (12 MiB) has started; drop the connection
        s.close()
    assert_serving(d)
    assert d.stop() == 0


def test_idle_connection_is_cut(daemon_factory):
    d = daemon_factory("--idle-timeout", "1")
    s = d.sock()
    s.settimeout(10)
    t0 = time.time()
    data = s.recv(100)  # no request: the daemon closes us after the idle timeout
    el = time.time() - t0
    assert data == b"" or data.startswith(b"HTTP/1.1 408"), data
    assert 0.5 <= el <= 5.0, el
    s.close()


def test_trickling_connections_do_not_starve_others(daemon_factory):
    d = daemon_factory("--idle-timeout", "2")
    stop = threading.Event()
    socks = [d.sock() for _ in range(32)]

    def trickle():
        msg = b"POST /v1/segmented_sum/forward HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 1000
        i = 0
        while not stop.is_set() and i < len(msg):
            for s in socks:
                try:
                    s.send(msg[i:i + 1])
                except OSError:
                    pass
            i += 1
            time.sleep(0.2)

    t = threading.Thread(target=trickle)
    t.start()
    try:
        lat = []
        c = d.conn()
        for _ in range(20):
            t0 = time.time()
            status, body = good_request(d, c)
            lat.append(time.time() - t0)
            assert status == 200 and body == GOOD_ANSWER
        assert max(lat) < 1.0, lat
    finally:
        stop.set()
        t.join()
        for s in socks:
            s.close()


def test_trickling_connection_is_cut_at_idle_timeout(daemon_factory):
    # Slowloris: one header byte every 0.2 s never looks idle to a silence timeout; the
    # request-head deadline (--idle-timeout) cuts it anyway.
    d = daemon_factory("--idle-timeout", "2")
    s = d.sock()
    msg = b"POST /v1/segmented_sum/forward HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 100
    t0 = time.time()
    cut_after = None
    for i in range(len(msg)):
        try:
            s.send(msg[i:i + 1])
            s.settimeout(0.2)
            if s.recv(100) == b"":
                cut_after = time.time() - t0
                break
        except socket.timeout:
            continue
        except OSError:
            cut_after = time.time() - t0
            break
    s.close()
    assert cut_after is not None, "the trickling connection was never cut"
    assert 1.5 <= cut_after <= 5.0, cut_after
    assert_serving(d)
    # A keep-alive connection that finished a request gets the same deadline for its next head,
    # and one that keeps making requests is never cut.
    c = d.conn()
    for _ in range(3):
        assert good_request(d, c)[0] == 200
        time.sleep(1.0)
    c.close()


def test_more_connections_than_limit(daemon_factory):
    d = daemon_factory("--max-connections", "8", "--idle-timeout", "30")
    held = [d.sock() for _ in range(8)]
    time.sleep(0.2)
    # The 9th is refused: closed at once, or no answer.
    extra = d.sock()
    extra.settimeout(2)
    try:
        extra.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        got = extra.recv(100)
    except OSError:
        got = b""
    except socket.timeout:
        got = b""
    assert not got.startswith(b"HTTP/1.1 200"), got
    extra.close()
    for s in held:
        s.close()
    time.sleep(0.3)
    assert_serving(d)


def test_body_over_limit_is_refused_before_reading_it(daemon_factory):
    d = daemon_factory("--max-body-bytes", "1000")
    s = d.sock()
    s.settimeout(5)
    s.sendall(b"POST /v1/segmented_sum/forward HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              b"Content-Length: 10000000\r\n\r\n")
    head = s.recv(4096)  # sent no body at all: the answer must come anyway
    assert head.startswith(b"HTTP/1.1 413"), head
    s.close()
    # chunked: the cap is enforced while the body streams in
    s = d.sock()
    s.settimeout(5)
    s.sendall(b"POST /v1/segmented_sum/forward HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              b"Transfer-Encoding: chunked\r\n\r\n")
    got = b""
    try:
        for _ in range(100):
            s.sendall(b"200\r\n" + b" " * 512 + b"\r\n")
            s.settimeout(0.05)
            try:
                got += s.recv(4096)
            except socket.timeout:
                pass
            if got:
                break
    except OSError:
        pass
    assert got.startswith(b"HTTP/1.1 413"), got
    s.close()
    assert_serving(d)


@pytest.mark.skipif(shutil.which("valgrind") is None, reason="valgrind not installed")
@pytest.mark.skipif(os.environ.get("SEGOPS_SANITIZED") == "1", reason="sanitizer build: ASan checks it instead")
def test_valgrind_memcheck_mixed_run(daemon_factory):
    d = daemon_factory("--threads", "2", wrapper=["valgrind", "--error-exitcode=99", "--leak-check=full",
                                                   "--errors-for-leak-kinds=definite", "--quiet"])
    c = d.conn(timeout=60)
    for _ in range(3):
        status, body = good_request(d, c)
        assert status == 200 and body == GOOD_ANSWER
    for path, body in [("/v1/segmented_sum/forward", b'{"x":[1],"idx":[3],"num_segments":1}'),
                       ("/v1/segmented_sum/forward", b"{not json"),
                       ("/v1/nope/forward", b"{}")]:
        c.request("POST", path, body, {"Content-Type": "application/json"})
        r = c.getresponse()
        r.read()
        assert r.status in (400, 404)
    mp = msgpack.packb({"x": {"dtype": "float32", "shape": [4, 3], "data": np.ones((4, 3), np.float32).tobytes()},
                        "idx": {"dtype": "int64", "shape": [4], "data": np.array([0, 1, 1, 0], np.int64).tobytes()},
                        "num_segments": 2})
    c.request("POST", "/v1/segmented_mean/forward", mp, {"Content-Type": "application/msgpack"})
    r = c.getresponse()
    out = msgpack.unpackb(r.read())
    assert r.status == 200 and out["out"]["shape"] == [2, 3]
    c.close()
    rc = d.stop(timeout=120)
    assert rc == 0, d.stderr_text()[-3000:]

"""test_client.py: segops.Client against the real daemon: typed errors (status, code, message),
32 threads sharing one client, bearer-token auth, info/health, the module-level default client; and
the pure-Python client's keep-alive reuse and reconnect after the server drops an idle connection."""

import os
import re
import threading
import time

import numpy as np
import pytest

import segops
from segops.client import PurePythonClient
from segref import idx_from_lengths, max_rel_err, reference


def _sum_args():
    return np.arange(1.0, 7.0), np.array([0, 0, 1, 1, 1, 2], np.int32)


def test_health_and_info(client):
    assert client.health() == segops.Status(True, "ok", 200) and client.health()
    assert client.ready() == segops.Status(True, "ready", 200) and client.ready()
    info = client.info()
    assert isinstance(info, dict)
    assert "version" in info and "backend" in info
    # The server's op table (proto/API.md) is the client's: same functions, inputs in the same
    # order with the same use, same outputs in the same order.
    from segops import _table

    uses = {"required": _table.REQ, "cotangent": _table.COT, "unread": _table.UNR}
    ops = info["ops"]
    assert sorted(ops) == sorted(_table.OPS)
    for (op, pass_), (ins, outs) in _table.FUNCS.items():
        row = ops[op][pass_]
        server_in = [(a["name"], uses.get(a.get("use"), a.get("use"))) for a in row["inputs"]
                     if a["name"] not in ("idx", "num_segments")]
        assert server_in == list(ins), (op, pass_)
        assert [o["name"] for o in row["outputs"]] == list(outs), (op, pass_)


def test_keep_alive_reuses_one_connection(server_url):
    with PurePythonClient(server_url) as c:
        x, idx = _sum_args()
        for _ in range(20):
            np.testing.assert_array_equal(c.segmented_sum(x, idx, 3), [3, 12, 6])
        c.info()
        assert c.connections_opened == 1


def _expect(exc_type, status, code, fn, *words):
    with pytest.raises(exc_type) as ei:
        fn()
    e = ei.value
    assert isinstance(e, segops.SegopsError)
    assert e.status == status and e.code == code, (e.status, e.code, e.message)
    for w in words:
        assert w in e.message, f"{w!r} not in {e.message!r}"
    return e


def test_invalid_argument_errors(client):
    x = np.ones((4, 3))
    idx = np.array([0, 1, 2, 3], np.int32)
    _expect(segops.InvalidArgument, 400, "invalid_argument",
            lambda: client.segmented_mul(x, np.ones(3), idx, 4), "segmented_mul", "y")
    _expect(segops.InvalidArgument, 400, "invalid_argument",
            lambda: client.segmented_sum(x, np.array([0, 1, 2, 4], np.int32), 4), "segmented_sum", "idx")
    _expect(segops.InvalidArgument, 400, "invalid_argument",
            lambda: client.segmented_dot(x, x.astype(np.float32), idx, 4), "segmented_dot")
    _expect(segops.InvalidArgument, 400, "invalid_argument",
            lambda: client.segmented_dot(np.ones(4), np.ones((4, 2)), idx, 4), "segmented_dot", "x (4,)", "y (4,2)")
    _expect(segops.InvalidArgument, 400, "invalid_argument",
            lambda: client.segmented_sum(x, idx, -1), "num_segments")
    _expect(segops.InvalidArgument, 400, "invalid_argument",
            lambda: client.segmented_sum(x.astype(np.float16), idx, 4), "x", "float32 or float64")
    _expect(segops.InvalidArgument, 400, "invalid_argument",
            lambda: client.segmented_dot(x, None, idx, 4), "segmented_dot", "y")
    _expect(segops.InvalidArgument, 400, "invalid_argument",
            lambda: client.call("segmented_sum", "forward", {"x": x, "idx": idx, "num_segments": 4, "bogus": x}),
            "bogus")
    # The connection that carried the errors is still good.
    np.testing.assert_array_equal(client.segmented_sum(*_sum_args(), 3), [3, 12, 6])


def test_not_found(client):
    x, idx = _sum_args()
    _expect(segops.NotFound, 404, "not_found",
            lambda: client.call("segmented_nope", "forward", {"x": x, "idx": idx, "num_segments": 3}))
    _expect(segops.NotFound, 404, "not_found",
            lambda: client.call("segmented_sum", "sideways", {"x": x, "idx": idx, "num_segments": 3}))


def test_malformed_body(server_url):
    client = PurePythonClient(server_url)
    _expect(segops.MalformedBody, 400, "malformed_body",
            lambda: client._roundtrip("POST", "/v1/segmented_sum/forward", b"\xc1\xff\x00", 3, read=lambda r: r.read()))


def test_every_error_of_the_table_has_its_class():
    """The error table (proto/segops_types.h, read here on its own): every wire code the daemon
    answers is a class of its own that segops exports, which error_for picks by the code and, for an
    answer that names none, by its status (the status's first row)."""
    header = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "proto", "segops_types.h")
    with open(header) as f:
        rows = re.findall(r'X\(\w+, -\d+, "(\w+)", (\d+), "[^"]*"\)', f.read())
    assert len(rows) >= 19, rows
    first = {}
    for code, status in rows:
        if int(status):
            err = segops.errors.error_for(int(status), code, "a message")
            assert type(err) is not segops.SegopsError and type(err).code_name == code, code
            assert getattr(segops, type(err).__name__) is type(err) and type(err).__name__ in segops.__all__, code
            first.setdefault(int(status), code)
    for status, code in first.items():
        assert segops.errors.error_for(status, None, "a message").code == code, status


def test_client_refuses_what_it_cannot_send(client):
    with pytest.raises(TypeError):
        client.segmented_sum(np.array(["a", "b"]), np.array([0, 0]), 1)
    with pytest.raises(TypeError):
        client.segmented_sum(np.ones(2), np.array([0, 0]), object())


def test_connection_refused_is_typed():
    c = segops.Client("http://127.0.0.1:1", timeout=5)
    with pytest.raises(segops.SegopsConnectionError) as ei:
        c.health()
    assert ei.value.status == 0 and ei.value.code == "connection_error"
    assert isinstance(ei.value, ConnectionError)


def test_threads_share_one_client(server_url):
    """32 threads, one client: every result right, at most one connection per thread."""
    c = segops.Client(server_url)
    errors = []
    n_threads, n_calls = 32, 15
    barrier = threading.Barrier(n_threads)

    def work(t):
        try:
            rng = np.random.default_rng(100 + t)
            barrier.wait()
            for k in range(n_calls):
                lengths = rng.integers(0, 20, 6)
                idx = idx_from_lengths(lengths, rng)
                x = rng.standard_normal((len(idx), 3))
                y = rng.standard_normal(6)
                if k % 3 == 0:
                    got = c.segmented_sum(x, idx, 6)
                    ref = reference("segmented_sum", "forward", {"x": x}, idx, 6)["out"]
                elif k % 3 == 1:
                    got = c.segmented_mul(x, y, idx, 6)
                    ref = reference("segmented_mul", "forward", {"x": x, "y": y}, idx, 6)["out"]
                else:
                    g = rng.standard_normal(6)
                    got = c.segmented_dot_backward(g, x, x, idx, 6)[0]
                    ref = reference("segmented_dot", "backward", {"g_out": g, "x": x, "y": x}, idx, 6)["grad_x"]
                assert max_rel_err(got, ref) <= 1e-12, f"thread {t} call {k}"
        except BaseException as e:  # collected and re-raised in the main thread
            errors.append(e)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(n_threads)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(120)
    assert not any(th.is_alive() for th in threads), "threads hung"
    assert not errors, errors[:3]
    if not segops.native_available():
        assert 1 <= c._py.connections_opened <= n_threads
    c.close()


def test_reconnects_after_idle_close(start_daemon, own_daemons):
    """The server closes an idle keep-alive connection; the next call reconnects once."""
    d = start_daemon(["--idle-timeout", "1"])
    c = PurePythonClient(d.url)
    x, idx = _sum_args()
    np.testing.assert_array_equal(c.segmented_sum(x, idx, 3), [3, 12, 6])
    time.sleep(2.5)
    np.testing.assert_array_equal(c.segmented_sum(x, idx, 3), [3, 12, 6])
    assert c.connections_opened == 2
    c.close()
    assert d.stop() == 0


def test_token_auth(start_daemon, own_daemons):
    d = start_daemon(env={"SEGOPS_TOKEN": "s3cret-token"})
    x, idx = _sum_args()
    anon = segops.Client(d.url, token="")
    _expect(segops.Unauthenticated, 401, "unauthenticated", lambda: anon.segmented_sum(x, idx, 3))
    _expect(segops.Unauthenticated, 401, "unauthenticated", lambda: anon.info())
    assert anon.health().ok and anon.ready().ok  # /healthz and /readyz need no token
    wrong = segops.Client(d.url, token="not-it")
    _expect(segops.Unauthenticated, 401, "unauthenticated", lambda: wrong.segmented_sum(x, idx, 3))
    good = segops.Client(d.url, token="s3cret-token")
    np.testing.assert_array_equal(good.segmented_sum(x, idx, 3), [3, 12, 6])
    assert "version" in good.info()
    for c in (anon, wrong, good):
        c.close()
    assert d.stop() == 0


def test_too_large(start_daemon, own_daemons):
    d = start_daemon(["--max-body-bytes", "65536"])
    c = segops.Client(d.url, transport="http")  # a body limit: shared memory would carry no body
    # The server may answer 413 and close while the body is still going out: the client
    # must still report the 413, whatever the timing (hence several sizes and tries).
    for n in (20000, 500000) * 3:
        idx = np.zeros(n, np.int32)
        _expect(segops.TooLarge, 413, "too_large", lambda: c.segmented_sum(np.ones(n), idx, 1))
    small = np.array([1.0, 2.0])
    np.testing.assert_array_equal(c.segmented_sum(small, np.array([0, 0], np.int32), 1), [3.0])
    c.close()
    assert d.stop() == 0


def test_timeout_is_typed():
    """A server that accepts but never answers in time gives SegopsTimeout (here: a listening
    socket that nobody serves)."""
    import socket

    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    try:
        c = segops.Client(f"http://127.0.0.1:{srv.getsockname()[1]}", timeout=0.5)
        with pytest.raises(segops.SegopsTimeout) as ei:
            c.health()
        assert isinstance(ei.value, TimeoutError) and ei.value.code == "timeout"
    finally:
        srv.close()


def test_default_client_from_env(server_url, monkeypatch):
    monkeypatch.setenv("SEGOPS_URL", server_url)
    prev = segops.set_default_client(None)
    try:
        x, idx = _sum_args()
        np.testing.assert_array_equal(segops.segmented_sum(x, idx, 3), [3, 12, 6])
        gx = segops.segmented_sum_backward(np.array([1.0, 2.0, 3.0]), None, idx, 3)
        np.testing.assert_array_equal(gx, [1, 1, 2, 2, 2, 3])
        assert segops.default_client().url == server_url
        assert segops.health().ok and segops.ready().ok
    finally:
        c = segops.set_default_client(prev)
        if c is not None:
            c.close()


def test_url_default(monkeypatch):
    monkeypatch.delenv("SEGOPS_URL", raising=False)
    assert segops.Client().url == "http://127.0.0.1:8080"
    monkeypatch.setenv("SEGOPS_URL", "http://segops.invalid:9000")  # parsed only, never contacted
    assert segops.Client().url == "http://segops.invalid:9000"

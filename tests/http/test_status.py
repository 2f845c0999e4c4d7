"""test_status.py: every status code of proto/API.md from the real segopsd, with its JSON error body
and the headers each one needs (Allow, WWW-Authenticate, Retry-After)."""
import json
import socket
import threading
import time

import msgpack
import numpy as np
import pytest

from client import JSON, MSGPACK, call, encode, info, request

SUM = "/v1/segmented_sum/forward"
GOOD = b'{"x":[1,2,3,4,5,6],"idx":[0,0,1,1,1,2],"num_segments":3}'


def err_of(data):
    e = json.loads(data)["error"]
    assert set(e) == {"code", "message"} and e["message"], e
    return e["code"], e["message"]


def post(url, body, ctype=JSON, path=SUM, headers=None):
    h = {"Content-Type": ctype}
    h.update(headers or {})
    return request(url, "POST", path, body, h)


def test_400_invalid_argument(shared_daemon):
    st, hd, data = post(shared_daemon.url, b'{"x":[1,2,3],"idx":[0,1,2],"num_segments":2}')
    assert st == 400 and hd["content-type"] == "application/json"
    code, msg = err_of(data)
    assert code == "invalid_argument" and "segmented_sum" in msg and "idx" in msg
    st, _, data = post(shared_daemon.url, b'{"x":[1,2],"idx":[0,1],"num_segments":2,"bogus":[1,2]}')
    assert st == 400 and err_of(data)[0] == "invalid_argument" and "bogus" in err_of(data)[1]
    st, _, data = call(shared_daemon.url, "segmented_mul", "forward", {"x": np.ones(3), "y": np.ones(3)},
                       [0, 1, 1], 4)
    assert st == 400 and "num_segments (4) must equal y.shape[0] (3)" in data["error"]["message"]


def test_400_error_body_is_valid_json_for_hostile_names(shared_daemon):
    """An argument name that is not UTF-8 is quoted in the message, and the body stays valid JSON."""
    x = {"dtype": "float64", "shape": [2], "data": np.ones(2).tobytes()}
    body = (b"\x83\xa2\xff\xfe" + msgpack.packb(x) + msgpack.packb("idx") +
            msgpack.packb({"dtype": "int32", "shape": [2], "data": np.zeros(2, np.int32).tobytes()}) +
            msgpack.packb("num_segments") + msgpack.packb(1))
    st, _, data = post(shared_daemon.url, body, MSGPACK)
    assert st == 400
    code, msg = err_of(data)  # json.loads decodes strict UTF-8
    assert code in ("invalid_argument", "malformed_body"), msg
    data.decode("utf-8")


def test_400_malformed_body(shared_daemon):
    for body, ctype in [(b'{"x":[1,2,3', JSON), (b"\xc1\xc1", MSGPACK), (b"", JSON),
                        (msgpack.packb({"x": 1})[:-1], MSGPACK), (b"[" * 100000, JSON)]:
        st, _, data = post(shared_daemon.url, body, ctype)
        assert st == 400, (body[:20], st, data[:200])
        assert err_of(data)[0] == "malformed_body", data


def test_404(shared_daemon):
    for path in ["/v1/segmented_foo/forward", "/v1/segmented_sum/sideways", "/nope", "/v1/segmented_sum",
                 "/v1/segmented_sum/forward/x"]:
        st, _, data = post(shared_daemon.url, GOOD, path=path)
        assert st == 404 and err_of(data)[0] == "not_found", path
    # Under /v2 errors take the Open Inference Protocol's form: {"error": "<message>"}.
    for path in ["/v2/info", "/v2/models/segmented_foo_forward/infer"]:
        st, _, data = post(shared_daemon.url, GOOD, path=path)
        assert st == 404 and isinstance(json.loads(data)["error"], str), path
    st, _, data = request(shared_daemon.url, "GET", "/favicon.ico")
    assert st == 404 and err_of(data)[0] == "not_found"


def test_405_with_allow(shared_daemon):
    st, hd, data = request(shared_daemon.url, "GET", SUM)
    assert st == 405 and hd["allow"] == "POST" and err_of(data)[0] == "method_not_allowed"
    st, hd, data = request(shared_daemon.url, "PUT", SUM, GOOD, {"Content-Type": JSON})
    assert st == 405 and hd["allow"] == "POST"
    for path in ["/healthz", "/readyz", "/metrics", "/v1/info"]:
        st, hd, data = request(shared_daemon.url, "POST", path, b"{}", {"Content-Type": JSON})
        assert st == 405 and "GET" in hd["allow"], path


def test_406(shared_daemon):
    st, _, data = post(shared_daemon.url, GOOD, headers={"Accept": "text/html"})
    assert st == 406 and err_of(data)[0] == "not_acceptable"
    st, _, data = post(shared_daemon.url, GOOD, headers={"Accept": "application/json;q=0, application/msgpack;q=0"})
    assert st == 406


def test_415(shared_daemon):
    for ctype in ["text/plain", "application/json; charset=latin-1", "application/xml", None]:
        h = {"Content-Type": ctype} if ctype else {}
        st, _, data = request(shared_daemon.url, "POST", SUM, GOOD, h)
        assert st == 415 and err_of(data)[0] == "unsupported_media_type", ctype


def test_413_content_length_up_front(daemon_factory):
    d = daemon_factory("--max-body-bytes", "1000")
    big = encode({"x": np.ones(200)}, np.zeros(200, np.int32), 1, MSGPACK)
    assert len(big) > 1000
    st, hd, data = post(d.url, big, MSGPACK)
    assert st == 413 and err_of(data)[0] == "too_large"
    assert "limit of 1000 bytes (--max-body-bytes)" in err_of(data)[1], data  # names the option to raise
    # Announced but never sent: the 413 must come back at once, before any body byte.
    s = socket.create_connection((d.host, d.port), timeout=10)
    s.sendall(b"POST " + SUM.encode() + b" HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              b"Content-Length: 100000000\r\n\r\n")
    head = s.recv(4096)
    s.close()
    assert head.startswith(b"HTTP/1.1 413"), head[:100]
    # A small body still works on the same daemon.
    st, _, data = post(d.url, GOOD)
    assert st == 200, data


def test_413_chunked_over_the_cap(daemon_factory):
    """A chunked upload is cut while it streams: the 413 arrives before the body ends."""
    d = daemon_factory("--max-body-bytes", "1000")
    s = socket.create_connection((d.host, d.port), timeout=10)
    s.sendall(b"POST " + SUM.encode() + b" HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              b"Transfer-Encoding: chunked\r\n\r\n")
    got = b""
    for _ in range(40):  # up to 40 KiB, never terminated
        s.sendall(b"400\r\n" + b" " * 1024 + b"\r\n")
        s.settimeout(0.05)
        try:
            got += s.recv(65536)
        except socket.timeout:
            pass
        if got:
            break
    s.close()
    assert got.startswith(b"HTTP/1.1 413"), got[:100]
    assert b'"code":"too_large"' in got and b"(--max-body-bytes)" in got
    st, _, _ = post(d.url, GOOD)  # and the daemon serves on
    assert st == 200
    # Counted when decided, before the answer is written; the wait only covers a scrape racing
    # the daemon's own thread, and the count must still be exactly one.
    want = b'segops_requests_total{op="segmented_sum",pass="forward",status="413",transport="http"} 1\n'
    deadline = time.monotonic() + 5
    while True:
        _, _, m = request(d.url, "GET", "/metrics")
        if want in m or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert want in m, [ln for ln in m.split(b"\n") if b'status="413"' in ln]


def test_aborted_uploads_do_not_hold_shutdown(daemon_factory):
    d = daemon_factory("--idle-timeout", "60")
    for _ in range(10):
        s = socket.create_connection((d.host, d.port), timeout=10)
        s.sendall(b"POST " + SUM.encode() + b" HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  b"Content-Length: 100000\r\n\r\n" + b"[" * 1000)
        s.close()
    assert post(d.url, GOOD)[0] == 200
    import time
    t0 = time.time()
    assert d.terminate(timeout=30) == 0
    assert time.time() - t0 < 15


def test_503_when_request_bodies_exceed_the_inflight_budget(daemon_factory):
    d = daemon_factory("--max-body-bytes", "1000", "--max-inflight-bytes", "1500")
    assert info(d.url)["limits"]["max_inflight_bytes"] == 1500
    body = GOOD + b" " * (900 - len(GOOD))
    hold = socket.create_connection((d.host, d.port), timeout=10)  # announces 900 bytes, sends half
    hold.sendall(b"POST " + SUM.encode() + b" HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 b"Content-Length: 900\r\n\r\n" + body[:450])
    import time
    time.sleep(0.2)
    st, hd, data = post(d.url, body)
    assert st == 503 and hd["retry-after"] and err_of(data)[0] == "resource_exhausted", (st, data)
    hold.sendall(body[450:])
    head = hold.recv(65536)
    hold.close()
    assert head.startswith(b"HTTP/1.1 200"), head[:100]
    st, _, data = post(d.url, body)  # the budget was given back
    assert st == 200, data


def test_413_num_segments_and_elements_bounded(daemon_factory):
    d = daemon_factory("--max-elements", "1000")
    st, _, data = post(d.url, b'{"x":[1],"idx":[0],"num_segments":1099511627776}')
    assert st == 413 and err_of(data)[0] == "too_large" and "num_segments" in err_of(data)[1]
    assert "(--max-segments 1000)" in err_of(data)[1], data  # the default: as --max-elements
    st, _, data = call(d.url, "segmented_sum", "forward", {"x": np.ones(2000)}, np.zeros(2000, np.int32), 1)
    assert st == 413 and data["error"]["code"] == "too_large"
    assert "x (2000,) has more elements than the limit (--max-elements 1000)" in data["error"]["message"], data
    st, _, data = post(d.url, GOOD)
    assert st == 200
    # Outputs are bounded too: (S,3) with S*3 over the limit, from an empty x.
    st, _, data = post(d.url, b'{"x":{"dtype":"float64","shape":[0,3],"data":[]},"idx":[],"num_segments":500}')
    assert st == 413 and "output out" in err_of(data)[1] and "(--max-elements 1000)" in err_of(data)[1], data


def test_413_json_items_bounded(daemon_factory):
    # The item cap bounds the JSON decoder's tree, whatever the body size allows.
    d = daemon_factory("--max-body-items", "100")
    assert info(d.url)["limits"]["max_body_items"] == 100
    many = ",".join(["1"] * 200).encode()
    st, _, data = post(d.url, b'{"x":[' + many + b'],"idx":[' + many.replace(b"1", b"0") + b'],"num_segments":1}')
    assert st == 413 and err_of(data)[0] == "too_large" and "items" in err_of(data)[1], data
    assert "(the limit, --max-body-items)" in err_of(data)[1], data
    st, _, data = post(d.url, GOOD)
    assert st == 200


def test_401_and_health_stays_open(daemon_factory, tmp_path):
    tok = tmp_path / "token"
    tok.write_text("s3cret-token\n")
    for d in (daemon_factory("--token-file", str(tok)), daemon_factory(env={"SEGOPS_TOKEN": "s3cret-token"})):
        for path in [SUM, "/v1/info", "/metrics", "/nope"]:
            for auth in [None, "Bearer wrong", "Bearer s3cret-toke", "Bearer s3cret-token2", "Basic s3cret-token"]:
                h = {"Authorization": auth} if auth else {}
                st, hd, data = post(d.url, GOOD, path=path, headers=h) if path == SUM else \
                    request(d.url, "GET", path, headers=h)
                assert st == 401, (path, auth, st)
                assert hd["www-authenticate"].startswith("Bearer")
                assert err_of(data)[0] == "unauthenticated"
        ok = {"Authorization": "Bearer s3cret-token"}
        st, _, data = post(d.url, GOOD, headers=ok)
        assert st == 200 and json.loads(data)["out"]["data"] == [3.0, 12.0, 6.0]
        assert request(d.url, "GET", "/v1/info", headers=ok)[0] == 200
        assert request(d.url, "GET", "/healthz")[0] == 200
        assert request(d.url, "GET", "/readyz")[0] == 200


def test_auth_off_by_default(shared_daemon):
    assert post(shared_daemon.url, GOOD)[0] == 200
    assert request(shared_daemon.url, "GET", "/v1/info")[0] == 200


def test_500_injected_backend_failure(daemon_factory):
    d = daemon_factory(env={"SEGOPS_TEST_FAIL_OP": "segmented_sum/forward"}, test_build=True)
    st, hd, data = post(d.url, GOOD)
    assert st == 500 and err_of(data)[0] == "internal"
    assert "server-timing" in hd
    # The daemon stays up and ready; other functions are unaffected.
    assert request(d.url, "GET", "/readyz")[0] == 200
    st, _, _ = call(d.url, "segmented_sum", "backward", {"g_out": np.ones(3)}, [0, 1, 2], 3)
    assert st == 200


def _concurrent(n, fn):
    out = [None] * n
    ts = [threading.Thread(target=lambda i=i: out.__setitem__(i, fn(i))) for i in range(n)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return out


def test_503_queue_full_with_retry_after(daemon_factory):
    d = daemon_factory("--max-queue", "1", "--max-batch-elements", "0", env={"SEGOPS_TEST_DELAY_MS": "400"},
                       test_build=True)
    res = _concurrent(12, lambda i: post(d.url, GOOD))
    codes = sorted(r[0] for r in res)
    assert 200 in codes and 503 in codes, codes
    assert set(codes) <= {200, 503}, codes
    for st, hd, data in res:
        if st == 503:
            assert hd["retry-after"] == "1"
            assert err_of(data)[0] == "resource_exhausted"
        else:
            assert json.loads(data)["out"]["data"] == [3.0, 12.0, 6.0]


def test_504_deadline_frees_the_worker(daemon_factory):
    # Unbatched: a worker that takes one request must leave the others queued until they expire.
    d = daemon_factory("--request-timeout", "0.3", "--max-batch-elements", "0", env={"SEGOPS_TEST_DELAY_MS": "700"},
                       test_build=True)
    res = _concurrent(6, lambda i: post(d.url, GOOD))
    codes = [r[0] for r in res]
    assert 504 in codes, codes
    assert set(codes) <= {200, 504}, codes
    for st, hd, data in res:
        if st == 504:
            assert err_of(data)[0] == "deadline_exceeded"
    assert request(d.url, "GET", "/readyz")[0] == 200


def test_backend_cuda_without_gpu_fails_clearly(daemon_factory):
    import shutil
    import subprocess
    if shutil.which("nvidia-smi") and subprocess.run(["nvidia-smi", "-L"], capture_output=True).returncode == 0:
        pytest.skip("a GPU is present")
    d = daemon_factory("--backend", "cuda", expect_start=False)
    rc = d.proc.wait(timeout=30)
    err = d.stderr_text()
    assert rc != 0 and "cuda" in err.lower() and "GPU" in err, (rc, err)

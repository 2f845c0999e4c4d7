"""test_shm.py: the system shared-memory registry (Triton's extension, proto/API.md, Shared memory) against the real
segopsd with real /dev/shm objects: registration, status, unregistration, every key, bounds and
cap error, auth, API v1 tensors by reference (msgpack and JSON, inputs and outputs; the same bits
as inline bodies), and an object truncated by its owner while the daemon uses it."""
import json
import os
import threading
import time

import msgpack
import numpy as np
import pytest

from client import JSON, MSGPACK, NP, call, decode, info, request, tensor_json, tensor_msgpack
from reference import random_case
from segref import OPS, PASSES  # the op table (proto/optable.json): every op, every pass
from shm_util import ShmObject, register, shm_call



@pytest.fixture
def shm_objects():
    made = []

    def make(size):
        o = ShmObject(size)
        made.append(o)
        return o

    yield make
    for o in made:
        o.close()


@pytest.fixture(scope="module")
def table(shared_daemon):
    return info(shared_daemon.url)["ops"]


def test_register_status_unregister(daemon_factory, shm_objects):
    d = daemon_factory("--backend", "cpu")
    a, b = shm_objects(1 << 16), shm_objects(8192)
    assert register(d.url, "ra", a.key, 1 << 16) == (200, {})
    assert register(d.url, "rb", b.key, 4096, offset=4096) == (200, {})
    st, regions = shm_call(d.url, "GET", "/status")
    assert st == 200
    assert sorted(regions, key=lambda x: x["name"]) == [
        {"name": "ra", "key": a.key, "offset": 0, "byte_size": 1 << 16},
        {"name": "rb", "key": b.key, "offset": 4096, "byte_size": 4096}]
    assert shm_call(d.url, "GET", "/region/rb/status") == (200, [
        {"name": "rb", "key": b.key, "offset": 4096, "byte_size": 4096}])
    assert info(d.url)["shm"] == {"max_shm_bytes": 1 << 30, "max_shm_bytes_per_uid": 1 << 29, "max_regions": 1024,
                                  "max_regions_per_uid": 512, "registered_bytes": (1 << 16) + 4096}
    assert shm_call(d.url, "POST", "/region/ra/unregister") == (200, {})
    st, body = shm_call(d.url, "GET", "/region/ra/status")
    assert st == 404 and "'ra' is not registered" in body["error"]
    st, body = shm_call(d.url, "POST", "/region/ra/unregister")
    assert st == 404 and "'ra' is not registered" in body["error"]
    assert shm_call(d.url, "POST", "/unregister") == (200, {})
    assert shm_call(d.url, "GET", "/status") == (200, [])
    assert info(d.url)["shm"]["registered_bytes"] == 0
    # A name may be registered again once free.
    assert register(d.url, "ra", a.key, 100, offset=7) == (200, {})


def test_registration_errors(daemon_factory, shm_objects):
    d = daemon_factory("--backend", "cpu", "--max-shm-bytes", "128k")
    obj = shm_objects(40000)
    big = shm_objects(1 << 17)
    cases = [
        ({"key": "no-slash", "byte_size": 8}, "not a plain shm object name"),
        ({"key": "/a/b", "byte_size": 8}, "not a plain shm object name"),
        ({"key": "/", "byte_size": 8}, "not a plain shm object name"),
        ({"key": "/..", "byte_size": 8}, "not a plain shm object name"),
        ({"key": "/" + "k" * 300, "byte_size": 8}, "not a plain shm object name"),
        ({"key": "/a\u0000b", "byte_size": 8}, "not a plain shm object name"),
        ({"key": "/segops-test-does-not-exist", "byte_size": 8}, "cannot open shm object"),
        ({"key": obj.key, "byte_size": 40001}, "is larger than shm object"),
        ({"key": obj.key, "offset": 39999, "byte_size": 2}, "is larger than shm object"),
        ({"key": obj.key, "offset": 2 ** 63 - 1, "byte_size": 2}, "overflows"),
        ({"key": obj.key, "byte_size": 0}, "byte_size must be at least 1"),
        ({"key": obj.key, "byte_size": -1}, "\"byte_size\" must be an integer"),
        ({"key": obj.key, "byte_size": "8"}, "\"byte_size\" must be an integer"),
        ({"key": obj.key}, "\"byte_size\" must be an integer"),
        ({"key": obj.key, "offset": -4, "byte_size": 8}, "\"offset\" must be an integer >= 0"),
        ({"key": 5, "byte_size": 8}, "\"key\" must be a string"),
        ({"key": obj.key, "byte_size": 8, "device_id": 0}, "unknown key"),
        ({"key": big.key, "byte_size": 1 << 17}, "would exceed this uid's share of --max-shm-bytes"),
    ]
    for body, want in cases:
        st, out = shm_call(d.url, "POST", "/region/r/register", body)
        assert st == 400, (body, st, out)
        assert want in out["error"], (body, out)
    st, out = shm_call(d.url, "POST", "/region/r/register", b"not json")
    assert st == 400 and "must be a JSON object" in out["error"]
    st, out = shm_call(d.url, "POST", "/region/r/register", b"[1]")
    assert st == 400 and "must be a JSON object" in out["error"]
    # A uid's share (half the cap) counts every region of it: two of 40000 bytes do not fit in 64 KiB.
    assert register(d.url, "one", obj.key, 40000) == (200, {})
    st, out = register(d.url, "two", obj.key, 40000)
    assert st == 400 and "share of --max-shm-bytes (--max-shm-bytes-per-uid: 65536 bytes; 40000 registered by this uid)" in out["error"]
    st, out = register(d.url, "one", obj.key, 8)
    assert st == 400 and "'one' is already registered" in out["error"]
    assert shm_call(d.url, "GET", "/status")[1] == [{"name": "one", "key": obj.key, "offset": 0, "byte_size": 40000}]
    # Methods and paths.
    st, _, body = request(d.url, "GET", "/v2/systemsharedmemory/region/one/register")
    assert st == 405
    st, _, body = request(d.url, "POST", "/v2/systemsharedmemory/status")
    assert st == 405
    st, _, body = request(d.url, "GET", "/v2/systemsharedmemory/region/one/bogus")
    assert st == 404
    st, _, body = request(d.url, "POST", "/v2/systemsharedmemory/region/one/register", b"x" * 70000)
    assert st == 413
    assert request(d.url, "GET", "/healthz")[0] == 200


def test_shm_endpoints_need_the_token(daemon_factory, shm_objects):
    d = daemon_factory("--backend", "cpu", env={"SEGOPS_TOKEN": "t0ken-abcd"})
    obj = shm_objects(4096)
    auth = {"Authorization": "Bearer t0ken-abcd"}
    st, _ = register(d.url, "r", obj.key, 4096)
    assert st == 401
    assert shm_call(d.url, "GET", "/status")[0] == 401
    assert shm_call(d.url, "POST", "/unregister")[0] == 401
    assert register(d.url, "r", obj.key, 4096, headers=auth) == (200, {})
    assert shm_call(d.url, "GET", "/status", headers=auth)[0] == 200
    assert shm_call(d.url, "POST", "/region/r/unregister", headers={"Authorization": "Bearer nope"})[0] == 401
    assert shm_call(d.url, "POST", "/region/r/unregister", headers=auth) == (200, {})


# ---- API v1 tensors by reference ----------------------------------------------------------------


def by_ref_body(args, idx, S, enc, dtype, layout, outputs_shm=None):
    """A v1 body whose float tensors (and idx) live in the region at layout[name] offsets."""
    body = {}
    for k, v in args.items():
        body[k] = {"dtype": dtype, "shape": list(v.shape), "shm": {"region": "io", "offset": layout[k]}}
    body["idx"] = {"dtype": "int32", "shape": [len(idx)], "shm": {"region": "io", "offset": layout["idx"]}}
    body["num_segments"] = int(S)
    if outputs_shm:
        body["outputs_shm"] = {k: {"region": "io", "offset": o} for k, o in outputs_shm.items()}
    return msgpack.packb(body, use_bin_type=True) if enc == MSGPACK else json.dumps(body).encode()


def place(obj, args, idx, dtype, start=0, align=64):
    layout, off = {}, start
    for k, v in list(args.items()) + [("idx", idx)]:
        a = np.ascontiguousarray(v, dtype=np.int32 if k == "idx" else dtype)
        layout[k] = off
        obj.write(off, a.tobytes())
        off += (a.nbytes + align - 1) // align * align
    return layout, off


def post(url, op, pas, body, enc):
    st, hd, data = request(url, "POST", f"/v1/{op}/{pas}", body, {"Content-Type": enc})
    return st, hd, data


@pytest.mark.parametrize("enc", [MSGPACK, JSON])
@pytest.mark.parametrize("op", OPS)
def test_v1_by_reference_bit_identical(shared_daemon, table, shm_objects, op, enc):
    url = shared_daemon.url
    obj = shm_objects(1 << 20)
    assert register(url, "io", obj.key, 1 << 20) == (200, {})
    try:
        for pas in PASSES:
            fn = table[op][pas]
            rng = np.random.default_rng(len(op) * 7 + len(pas))
            for dtype in ("float32", "float64"):
                args, idx, S = random_case(rng, fn, 3, N=301, S=23)
                args = {k: v.astype(dtype) for k, v in args.items()}
                st, _, inline = call(url, op, pas, args, idx, S, enc=MSGPACK, dtype=dtype)
                assert st == 200, inline
                layout, end = place(obj, args, idx, dtype)
                # Inputs by reference, outputs inline.
                st, hd, data = post(url, op, pas, by_ref_body(args, idx, S, enc, dtype, layout), enc)
                assert st == 200, data
                got = decode(data, hd["content-type"])
                assert set(got) == set(inline)
                for k in inline:
                    assert got[k].tobytes() == inline[k].tobytes(), (op, pas, dtype, k)
                # Outputs into the region too: the first in place (64-byte aligned), the others at
                # odd offsets (computed aside, then copied).
                outs, o = {}, end
                for i, k in enumerate(sorted(inline)):
                    o += 64 if i == 0 else 3
                    outs[k] = o
                    o += inline[k].nbytes
                obj.write(end, b"\xff" * (o - end + 64))
                st, hd, data = post(url, op, pas, by_ref_body(args, idx, S, enc, dtype, layout, outs), enc)
                assert st == 200, data
                ans = json.loads(data) if enc == JSON else msgpack.unpackb(data)
                for k, ref in inline.items():
                    a = ans[k]
                    assert "data" not in a
                    assert a["shm"] == {"region": "io", "offset": outs[k], "byte_size": ref.nbytes}
                    assert a["dtype"] == dtype and a["shape"] == list(ref.shape)
                    assert obj.read(outs[k], ref.nbytes) == ref.tobytes(), (op, pas, dtype, k)
    finally:
        shm_call(url, "POST", "/region/io/unregister")


def test_v1_outputs_subset_and_mixed(shared_daemon, shm_objects):
    """One output into the region, the other inline; "outputs" and "outputs_shm" together."""
    url = shared_daemon.url
    obj = shm_objects(1 << 16)
    assert register(url, "io", obj.key, 1 << 16) == (200, {})
    try:
        rng = np.random.default_rng(5)
        x, y = rng.standard_normal((50, 3)), rng.standard_normal((50, 3))
        idx = np.sort(rng.integers(0, 9, 50)).astype(np.int32)
        g = rng.standard_normal(9)
        st, _, inline = call(url, "segmented_dot", "backward", {"g_out": g, "x": x, "y": y}, idx, 9)
        assert st == 200 and set(inline) == {"grad_x", "grad_y"}
        obj.write(0, x.tobytes())
        body = {"x": {"dtype": "float64", "shape": [50, 3], "shm": {"region": "io", "offset": 0}},
                "y": tensor_msgpack(y), "g_out": tensor_msgpack(g), "idx": tensor_msgpack(idx), "num_segments": 9,
                "outputs_shm": {"grad_x": {"region": "io", "offset": 4096}}}
        st, hd, data = post(url, "segmented_dot", "backward", msgpack.packb(body), MSGPACK)
        assert st == 200, data
        ans = msgpack.unpackb(data)
        assert obj.read(4096, x.nbytes) == inline["grad_x"].tobytes()
        assert ans["grad_x"]["shm"] == {"region": "io", "offset": 4096, "byte_size": x.nbytes}
        assert ans["grad_y"]["data"] == inline["grad_y"].tobytes()
        body["outputs"] = ["grad_x"]
        st, _, data = post(url, "segmented_dot", "backward", msgpack.packb(body), MSGPACK)
        assert st == 200 and list(msgpack.unpackb(data)) == ["grad_x"], data
        body["outputs"] = ["grad_y"]
        st, _, data = post(url, "segmented_dot", "backward", msgpack.packb(body), MSGPACK)
        assert st == 400
        assert "outputs_shm names 'grad_x', which \"outputs\" does not ask for" in json.loads(data)["error"]["message"]
        # Two outputs over the same bytes are refused.
        del body["outputs"]
        body["outputs_shm"]["grad_y"] = {"region": "io", "offset": 4096 + 8}
        st, _, data = post(url, "segmented_dot", "backward", msgpack.packb(body), MSGPACK)
        assert st == 400 and "grad_x and grad_y overlap" in json.loads(data)["error"]["message"]
        # An output over its own input's bytes is computed aside first: still exact.
        body["outputs_shm"] = {"grad_x": {"region": "io", "offset": 0}}
        st, _, data = post(url, "segmented_dot", "backward", msgpack.packb(body), MSGPACK)
        assert st == 200 and obj.read(0, x.nbytes) == inline["grad_x"].tobytes()
    finally:
        shm_call(url, "POST", "/region/io/unregister")


def test_v1_reference_errors(shared_daemon, shm_objects):
    url = shared_daemon.url
    obj = shm_objects(8192)
    assert register(url, "small", obj.key, 4096, offset=4096) == (200, {})
    try:
        def body(x_shm=None, outs=None, n=100, data=None, extra=None):
            b = {"x": {"dtype": "float64", "shape": [n, 3], "shm": x_shm or {"region": "small", "offset": 0}},
                 "idx": tensor_json(np.zeros(n, np.int32)), "num_segments": 1}
            if data is not None:
                b["x"]["data"] = data
            if outs:
                b["outputs_shm"] = outs
            b.update(extra or {})
            return json.dumps(b).encode()

        cases = [
            (body(n=171), "x: bytes [0, 4104) are outside shared-memory region 'small' (byte_size 4096)"),
            (body({"region": "small", "offset": 4000}, n=10), "bytes [4000, 4240) are outside"),
            (body({"region": "small", "offset": 2 ** 62}, n=1), "are outside shared-memory region 'small'"),
            (body({"region": "small"}, n=10, data=[0.0] * 30), "has both \"data\" and \"shm\""),
            (body({"offset": 0}), "x.shm must be a map"),
            (body({"region": "small", "offset": -1}), "x.shm must be a map"),
            (body({"region": "small", "offset": 0, "extra": 1}), "x.shm must be a map"),
            (body(n=10, outs={"bogus": {"region": "small", "offset": 0}}),
             "outputs_shm names 'bogus', which is not an output of forward (outputs: out)"),
            (body(n=10, outs={"out": {"region": "small", "offset": 4090}}), "outputs_shm.out: bytes [4090, 4114)"),
            (body(n=10, outs={"out": "small"}), "outputs_shm.out must be a map"),
            (body(n=10, outs=["out"]), "outputs_shm must be a map"),
        ]
        for b, want in cases:
            st, _, data = post(url, "segmented_sum", "forward", b, JSON)
            assert st == 400, (b, data)
            msg = json.loads(data)["error"]["message"]
            assert want in msg, (want, msg)
            assert msg.startswith("segmented_sum: "), msg
        # A region the daemon does not know (for this uid) has its own code, so that a client
        # registers it again and resends (after a restart): 404 shm_region_unknown, never 400.
        for b, want in [(body({"region": "nope", "offset": 0}), "x: shared-memory region 'nope' is not registered"),
                        (body(n=10, outs={"out": {"region": "gone", "offset": 0}}),
                         "outputs_shm.out: shared-memory region 'gone' is not registered")]:
            st, _, data = post(url, "segmented_sum", "forward", b, JSON)
            err = json.loads(data)["error"]
            assert st == 404 and err["code"] == "shm_region_unknown", (st, data)
            assert want in err["message"] and err["message"].startswith("segmented_sum: "), err
        # The same through msgpack.
        mp = msgpack.packb({"x": {"dtype": "float64", "shape": [171, 3], "shm": {"region": "small", "offset": 0}},
                            "idx": tensor_msgpack(np.zeros(171, np.int32)), "num_segments": 1})
        st, _, data = post(url, "segmented_sum", "forward", mp, MSGPACK)
        assert st == 400 and "outside shared-memory region 'small'" in json.loads(data)["error"]["message"]
    finally:
        shm_call(url, "POST", "/region/small/unregister")


# ---- regions changing under the daemon ----------------------------------------------------------


def slow_request(url, obj_region_body, results):
    st, hd, data = request(url, "POST", "/v1/segmented_sum/forward", obj_region_body, {"Content-Type": MSGPACK})
    results.append((st, data))


def ref_body(n, region="io", out_offset=None):
    b = {"x": {"dtype": "float64", "shape": [n, 3], "shm": {"region": region, "offset": 0}},
         "idx": tensor_msgpack(np.zeros(n, np.int32)), "num_segments": 1}
    if out_offset is not None:
        b["outputs_shm"] = {"out": {"region": region, "offset": out_offset}}
    return msgpack.packb(b)


@pytest.mark.parametrize("what", ["input", "output"])
def test_region_truncated_during_a_request(daemon_factory, shm_objects, what):
    """The owner shrinks its object while a request that reads (or writes) it waits in the backend:
    the daemon must not die of SIGBUS; that request fails with 400 naming the region."""
    d = daemon_factory("--backend", "cpu", "--threads", "1", env={"SEGOPS_TEST_DELAY_MS": "600"}, test_build=True)
    size = 1 << 22
    obj = shm_objects(size)
    other = shm_objects(1 << 16)
    assert register(d.url, "io", obj.key, size) == (200, {})
    assert register(d.url, "other", other.key, 1 << 16) == (200, {})
    n = (size - 4096) // 24 if what == "input" else 1000
    x = np.ones((n, 3))
    obj.write(0, x.tobytes())
    body = ref_body(n, out_offset=size - 64 * 1024 if what == "output" else None)
    results = []
    t = threading.Thread(target=slow_request, args=(d.url, body, results))
    t.start()
    time.sleep(0.3)  # the request holds its region and sleeps in the backend now
    obj.truncate(4096)
    t.join(30)
    assert results, "no answer"
    st, data = results[0]
    assert st == 400, data
    msg = json.loads(data)["error"]["message"]
    assert "shared-memory region 'io' was truncated by its owner" in msg and obj.key in msg, msg
    assert d.proc.poll() is None, d.stderr_text()
    assert request(d.url, "GET", "/healthz")[0] == 200
    # Later uses of the damaged region are refused at once; other regions work.
    st, _, data = request(d.url, "POST", "/v1/segmented_sum/forward", ref_body(10), {"Content-Type": MSGPACK})
    assert st == 400 and "truncated" in json.loads(data)["error"]["message"]
    other.write(0, np.ones((10, 3)).tobytes())
    st, hd, data = request(d.url, "POST", "/v1/segmented_sum/forward", ref_body(10, "other"),
                           {"Content-Type": MSGPACK})
    assert st == 200 and decode(data, MSGPACK)["out"].tolist() == [[10.0, 10.0, 10.0]]
    # Re-registering the (regrown) object makes it usable again.
    assert shm_call(d.url, "POST", "/region/io/unregister") == (200, {})
    obj.truncate(size)
    obj.write(0, np.ones((10, 3)).tobytes())
    assert register(d.url, "io", obj.key, size) == (200, {})
    st, _, data = request(d.url, "POST", "/v1/segmented_sum/forward", ref_body(10), {"Content-Type": MSGPACK})
    assert st == 200, data


def test_region_truncated_before_use_and_under_registration(daemon_factory, shm_objects):
    d = daemon_factory("--backend", "cpu")
    obj = shm_objects(1 << 16)
    assert register(d.url, "io", obj.key, 1 << 16) == (200, {})
    obj.truncate(100)
    st, _, data = request(d.url, "POST", "/v1/segmented_sum/forward", ref_body(2), {"Content-Type": MSGPACK})
    assert st == 400
    assert "'io' was truncated by its owner (shm object '%s' is now shorter than the 65536 bytes the region " \
        "needs)" % obj.key in json.loads(data)["error"]["message"]
    assert d.proc.poll() is None


def test_unregister_while_in_use(daemon_factory, shm_objects):
    """Unregistering a region a request is using does not pull its memory away: the request
    completes with the right answer; the next one is refused."""
    d = daemon_factory("--backend", "cpu", env={"SEGOPS_TEST_DELAY_MS": "500"}, test_build=True)
    obj = shm_objects(1 << 16)
    assert register(d.url, "io", obj.key, 1 << 16) == (200, {})
    obj.write(0, np.full((100, 3), 2.0).tobytes())
    results = []
    t = threading.Thread(target=slow_request, args=(d.url, ref_body(100, out_offset=8192), results))
    t.start()
    time.sleep(0.2)
    assert shm_call(d.url, "POST", "/unregister") == (200, {})
    t.join(30)
    st, data = results[0]
    assert st == 200, data
    assert np.frombuffer(obj.read(8192, 24)).tolist() == [200.0, 200.0, 200.0]
    st, _, data = request(d.url, "POST", "/v1/segmented_sum/forward", ref_body(100), {"Content-Type": MSGPACK})
    assert st == 404 and "not registered" in json.loads(data)["error"]["message"]


def _idx_cache_lookups(url):
    text = request(url, "GET", "/metrics")[2].decode()
    got = {}
    for line in text.splitlines():
        for r in ("hit", "miss"):
            if line.startswith(f'segops_idx_cache_lookups_total{{result="{r}"}}'):
                got[r] = int(line.split()[-1])
    return got


@pytest.mark.parametrize("dtype,n", [("int32", 4096), ("int64", 4096), ("int32", 1 << 15)])
def test_idx_rewritten_after_its_check(daemon_factory, shm_objects, dtype, n):
    """A client rewrites idx in its region after the daemon checked it, while the request waits in
    the backend: out-of-range segment numbers must never reach the backend (they index its
    outputs). The answer is the one for the idx that was checked, and the daemon lives on. A large
    int32 idx sent a second time is served from the daemon's validated copy (a cache hit, seen in
    /metrics), which the rewrite cannot reach either."""
    d = daemon_factory("--backend", "cpu", "--threads", "1", env={"SEGOPS_TEST_DELAY_MS": "500"}, test_build=True)
    s = 8
    obj = shm_objects(2 << 20)
    assert register(d.url, "io", obj.key, 2 << 20) == (200, {})
    rng = np.random.default_rng(7)
    x = rng.integers(-1000, 1000, (n, 3)).astype(np.float64)  # sums exact in any order
    idx = np.sort(rng.integers(0, s, n)).astype(dtype)
    xo, io, oo = 0, n * 24, n * 24 + n * 8
    obj.write(xo, x.tobytes())
    obj.write(io, idx.tobytes())
    body = msgpack.packb({"x": {"dtype": "float64", "shape": [n, 3], "shm": {"region": "io", "offset": xo}},
                          "idx": {"dtype": dtype, "shape": [n], "shm": {"region": "io", "offset": io}},
                          "num_segments": s, "outputs_shm": {"out": {"region": "io", "offset": oo}}})
    want = np.zeros((s, 3))
    np.add.at(want, idx, x)
    cached = dtype == "int32" and n * 4 >= 64 << 10
    if cached:  # a first request puts the validated copy into the cache
        st, _, data = request(d.url, "POST", "/v1/segmented_sum/forward", body, {"Content-Type": MSGPACK})
        assert st == 200, data
        before = _idx_cache_lookups(d.url)
    results = []
    t = threading.Thread(target=lambda: results.append(
        request(d.url, "POST", "/v1/segmented_sum/forward", body, {"Content-Type": MSGPACK})))
    t.start()
    time.sleep(0.25)  # checked, now held in the backend's delay
    bad = np.full(n, 2**31 - 1 if dtype == "int32" else 2**40, dtype)
    bad[::2] = -(2**30)
    obj.write(io, bad.tobytes())
    t.join(30)
    assert results, "no answer"
    st, _, data = results[0]
    assert st == 200, data
    assert d.proc.poll() is None, d.stderr_text()
    got = np.frombuffer(obj.read(oo, s * 24), np.float64).reshape(s, 3)
    assert np.array_equal(got, want)
    if cached:
        after = _idx_cache_lookups(d.url)
        assert after["hit"] == before["hit"] + 1, (before, after)
    # The rewritten idx is refused by the next request's check, with the op, argument and rule.
    st, _, data = request(d.url, "POST", "/v1/segmented_sum/forward", body, {"Content-Type": MSGPACK})
    assert st == 400 and "idx[0]" in json.loads(data)["error"]["message"], data
    assert request(d.url, "GET", "/healthz")[0] == 200

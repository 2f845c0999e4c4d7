"""test_features.py: (N, *F) feature channels end to end. One flat F (16,) and one multi-dimensional
F (2, 3), and ranks up to 6, travel unchanged over every transport: msgpack from the pure-Python
client, libsegops' HTTP (msgpack) and native channel, the in-process "local" backend, JSON (bare
nested lists and the map form) and the OIP (nested JSON data and binary tensors). Every transport
gives the same bits, and the answers match a numpy reference. A seventh dimension is refused on
every path, naming the argument and the limit."""

import json
import struct
import urllib.error
import urllib.request

import numpy as np
import pytest

import segops
from segops.client import PurePythonClient

NATIVE = segops.native_available()
N, S = 12, 4
IDX = np.array([3, 0, 1, 1, 0, 3, 2, 0, 3, 3, 1, 0], np.int32)  # unsorted, every segment used
FEATURES = [(16,), (2, 3)]


def _x(f, dtype=np.float64, seed=0):
    return np.random.default_rng(seed).standard_normal((N,) + f).astype(dtype)


def _seg_sum(a):
    out = np.zeros((S,) + a.shape[1:], a.dtype)
    np.add.at(out, IDX, a)
    return out


def _flat(a):
    return a.reshape(a.shape[0], -1)


def reference(op, args):
    """The forward of op in float64 numpy (proto/API.md's feature-channel formulas)."""
    x = args["x"].astype(np.float64)
    if op == "segmented_sum":
        return {"out": _seg_sum(x)}
    if op == "segmented_mean":
        c = np.bincount(IDX, minlength=S).astype(np.float64)
        return {"out": _seg_sum(x) / c.reshape((S,) + (1,) * (x.ndim - 1))}
    if op == "segmented_dot":
        return {"out": _seg_sum((_flat(x) * _flat(args["y"].astype(np.float64))).sum(1))}
    if op == "segmented_mul":
        y = args["y"].astype(np.float64)
        ys = y[IDX] if y.ndim == x.ndim else y[IDX].reshape((N,) + (1,) * (x.ndim - 1))
        return {"out": x * ys}
    if op == "segmented_rms_norm":
        c = np.bincount(IDX, minlength=S).astype(np.float64)
        return {"out": np.sqrt(_seg_sum((_flat(x) ** 2).sum(1)) / c)}
    raise AssertionError(op)


def cases(f, dtype=np.float64):
    x, y = _x(f, dtype, 1), _x(f, dtype, 2)
    ys = np.random.default_rng(3).standard_normal((S,) + f).astype(dtype)
    return [
        ("segmented_sum", {"x": x}),
        ("segmented_mean", {"x": x}),
        ("segmented_dot", {"x": x, "y": y}),
        ("segmented_mul", {"x": x, "y": ys.reshape(S, -1)[:, 0].copy()}),  # y (S,)
        ("segmented_mul", {"x": x, "y": ys}),  # y (S, *F)
        ("segmented_rms_norm", {"x": x}),
    ]


# ---- the transports: each runs (op, "forward", args) and answers {name: np.ndarray} ----

WIRE_DTYPE = {np.dtype("float32"): ("float32", "FP32"), np.dtype("float64"): ("float64", "FP64"),
              np.dtype("int32"): ("int32", "INT32")}


def _post(url, body, headers):
    req = urllib.request.Request(url, data=body, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, r.headers, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read()


def _json_tensor(out):
    dt = {"float32": np.float32, "float64": np.float64}[out["dtype"]]
    return np.array(out["data"], dt).reshape(out["shape"])


def json_bare(url, op, args, s=S):
    """v1 JSON with bare nested lists (floats in the request's dtype) and 17/9-digit numbers back."""
    dtype = next(v.dtype for k, v in args.items() if k != "idx")
    body = {k: v.tolist() for k, v in args.items()}
    body.update(idx=IDX.tolist(), num_segments=s, dtype=WIRE_DTYPE[dtype][0])
    st, _, data = _post(f"{url}/v1/{op}/forward", json.dumps(body).encode(), {"Content-Type": "application/json"})
    if st != 200:
        raise segops.SegopsError(st, "", json.loads(data)["error"]["message"])
    return {k: _json_tensor(v) for k, v in json.loads(data).items()}


def json_map(url, op, args, s=S):
    """v1 JSON, each tensor a map {"dtype", "shape", "data": flat list}."""
    body = {k: {"dtype": WIRE_DTYPE[v.dtype][0], "shape": list(v.shape), "data": v.reshape(-1).tolist()}
            for k, v in args.items()}
    body.update(idx=IDX.tolist(), num_segments=s)
    st, _, data = _post(f"{url}/v1/{op}/forward", json.dumps(body).encode(), {"Content-Type": "application/json"})
    if st != 200:
        raise segops.SegopsError(st, "", json.loads(data)["error"]["message"])
    return {k: _json_tensor(v) for k, v in json.loads(data).items()}


def _oip_outputs(st, headers, data):
    hl = headers.get("Inference-Header-Content-Length")
    head = json.loads(data[: int(hl)] if hl else data)
    if st != 200:
        raise segops.SegopsError(st, "", head["error"])
    got, at = {}, int(hl) if hl else 0
    for o in head["outputs"]:
        dt = {"FP32": np.float32, "FP64": np.float64}[o["datatype"]]
        if "data" in o:
            got[o["name"]] = np.array(o["data"], dt).reshape(o["shape"])
        else:
            n = o["parameters"]["binary_data_size"]
            got[o["name"]] = np.frombuffer(data[at : at + n], dt).reshape(o["shape"])
            at += n
    return got


def oip_json(url, op, args, s=S):
    """OIP infer with JSON data nested as the shape is (tritonclient sends it flat; both are taken)."""
    ins = [{"name": k, "datatype": WIRE_DTYPE[v.dtype][1], "shape": list(v.shape), "data": v.tolist()}
           for k, v in args.items()]
    ins += [{"name": "idx", "datatype": "INT32", "shape": [N], "data": IDX.tolist()},
            {"name": "num_segments", "datatype": "INT64", "shape": [1], "data": [s]}]
    return _oip_outputs(*_post(f"{url}/v2/models/{op}_forward/infer", json.dumps({"inputs": ins}).encode(),
                               {"Content-Type": "application/json"}))


def oip_binary(url, op, args, s=S):
    """OIP infer with binary tensor data both ways."""
    arrs = dict(args, idx=IDX)
    ins = [{"name": k, "datatype": WIRE_DTYPE[v.dtype][1], "shape": list(v.shape),
            "parameters": {"binary_data_size": v.nbytes}} for k, v in arrs.items()]
    ins.append({"name": "num_segments", "datatype": "INT64", "shape": [1], "parameters": {"binary_data_size": 8}})
    head = json.dumps({"inputs": ins, "parameters": {"binary_data_output": True}}).encode()
    body = head + b"".join(np.ascontiguousarray(v).tobytes() for v in arrs.values()) + struct.pack("<q", s)
    return _oip_outputs(*_post(f"{url}/v2/models/{op}_forward/infer", body,
                               {"Content-Type": "application/octet-stream",
                                "Inference-Header-Content-Length": str(len(head))}))


@pytest.fixture(scope="module")
def transports(server_url):
    opened = [("python-msgpack", PurePythonClient(server_url, transport="http", timeout=60.0))]
    if NATIVE:
        opened += [("libsegops-http", segops.Client(server_url, transport="http", timeout=60.0)),
                   ("native", segops.Client(server_url, transport="native", timeout=60.0))]
        # "local" runs the CPU backend in this process: the daemon's bits when the daemon's backend
        # is the CPU's too (bit-identical holds on one backend; a CUDA daemon sums in another order)
        with urllib.request.urlopen(f"{server_url}/v1/info", timeout=30) as r:
            if json.loads(r.read())["backend"] == "cpu":
                opened.append(("local", segops.Client("local")))
    runs = {name: (lambda c: lambda op, args, s=S: c.call(op, "forward", dict(args, idx=IDX, num_segments=s)))(c)
            for name, c in opened}
    for name, f in [("json-bare", json_bare), ("json-map", json_map), ("oip-json", oip_json),
                    ("oip-binary", oip_binary)]:
        runs[name] = (lambda f: lambda op, args, s=S: f(server_url, op, args, s))(f)
    yield runs
    for _, c in opened:
        c.close()


def _bits(a):
    return a.dtype.str, a.shape, a.tobytes()


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("f", FEATURES, ids=["F16", "F2x3"])
def test_every_transport_same_bits_and_the_reference(transports, f, dtype):
    for op, args in cases(f, dtype):
        want = reference(op, args)
        answers = {name: run(op, args) for name, run in transports.items()}
        first_name, first = next(iter(answers.items()))
        for k, v in want.items():
            got = first[k]
            assert got.dtype == dtype and got.shape == v.shape, (op, first_name, k, got.dtype, got.shape, v.shape)
            tol = 1e-12 if dtype == np.float64 else 1e-5
            np.testing.assert_allclose(got, v, rtol=tol, atol=tol, err_msg=f"{op} {k}")
        for name, got in answers.items():
            assert got.keys() == first.keys(), (op, name)
            for k in got:
                assert _bits(got[k]) == _bits(first[k]), f"{op} {k}: {name} differs from {first_name}"


def test_rank_six_travels(transports):
    """(N, 1, 2, 1, 3, 1): sum keeps every trailing dimension; the same bits everywhere."""
    x = _x((1, 2, 1, 3, 1), seed=5)
    want = _seg_sum(x)
    for name, run in transports.items():
        got = run("segmented_sum", {"x": x})["out"]
        assert got.shape == (S, 1, 2, 1, 3, 1), name
        assert _bits(got) == _bits(transports["python-msgpack"]("segmented_sum", {"x": x})["out"]), name
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


@pytest.mark.skipif(not NATIVE, reason="segops' C extension is not in use")
def test_backward_shapes_through_libsegops(server_url):
    """libsegops predicts each answer's shape before the daemon answers: a gradient is shaped like its
    input (mul's grad_y is (S,) or (S, *F) as y is), sum's grad_x is (N, *F) from g_out."""
    x = _x((2, 3), seed=7)
    for transport in ("native", "http"):
        with segops.Client(server_url, transport=transport, timeout=60.0) as c:
            g = np.ones((N, 2, 3))
            for y in (np.full((S,), 2.0), np.full((S, 2, 3), 2.0)):
                gx, gy = c.segmented_mul_backward(g, x, y, IDX, S)
                assert gx.shape == x.shape and gy.shape == y.shape, transport
                np.testing.assert_allclose(gx, 2.0 * g)
            gx = c.segmented_sum_backward(np.ones((S, 2, 3)), None, IDX, S)
            assert gx.shape == (N, 2, 3)


def test_seven_dimensions_refused_everywhere(transports):
    x = np.ones((N, 1, 1, 1, 1, 1, 2))
    for name, run in transports.items():
        with pytest.raises(segops.SegopsError) as e:
            run("segmented_sum", {"x": x})
        msg = str(e.value)
        assert "x has" in msg and "dimensions" in msg and "at most 6" in msg, (name, msg)

"""test_oip.py: the Open Inference Protocol (KServe v2 REST, proto/API.md, Open Inference Protocol) on the real segopsd,
driven by the real tritonclient[http] from PyPI: health, server and model metadata, every one of
the 24 functions with JSON tensors and with binary tensor data, an output subset, bad input
(400 with v1's message), unknown models (404); answers bit-identical to API v1's and within the
float64 reference's tolerance (tests/segref.py)."""
import json

import numpy as np
import pytest
import tritonclient.http as th  # CTest runs this through run_pytest.py --require: SKIP (77) without it
from tritonclient.utils import InferenceServerException

from client import JSON, MSGPACK, call, info, request
from reference import random_case, reference
from segref import OPS, PASSES  # the op table (proto/optable.json): every op, every pass

DT = {"float32": "FP32", "float64": "FP64"}


def make_inputs(args, idx, S, dtype, binary, ns_dtype="INT64"):
    ins = []
    for name, a in args.items():
        a = np.ascontiguousarray(a, dtype=dtype)
        t = th.InferInput(name, list(a.shape), DT[dtype])
        t.set_data_from_numpy(a, binary_data=binary)
        ins.append(t)
    t = th.InferInput("idx", [len(idx)], "INT32")
    t.set_data_from_numpy(np.asarray(idx, np.int32), binary_data=binary)
    ins.append(t)
    t = th.InferInput("num_segments", [1], ns_dtype)
    t.set_data_from_numpy(np.array([S], np.int64 if ns_dtype == "INT64" else np.int32), binary_data=binary)
    ins.append(t)
    return ins


def assert_close(got, ref, dtype):
    tol = 1e-12 if dtype == "float64" else 1e-5
    err = np.abs(got.astype(np.float64) - ref) / np.maximum(np.abs(ref), 1.0)
    assert err.max(initial=0) <= tol, err.max()


def test_health_and_server_metadata(tc, shared_daemon):
    assert tc.is_server_live() and tc.is_server_ready()
    meta = tc.get_server_metadata()
    assert meta["name"] == "segopsd" and meta["version"] == info(shared_daemon.url)["version"]
    assert {"binary_tensor_data", "system_shared_memory"} <= set(meta["extensions"])


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("pas", PASSES)
def test_model_metadata_and_ready(tc, table, op, pas):
    model = f"{op}_{pas}"
    assert tc.is_model_ready(model) and tc.is_model_ready(model, "1")
    fn = table[op][pas]
    for meta in (tc.get_model_metadata(model), tc.get_model_metadata(model, "1")):
        assert meta["name"] == model and meta["versions"] == ["1"]
        assert [t["name"] for t in meta["inputs"]] == [t["name"] for t in fn["inputs"]]
        assert [t["name"] for t in meta["outputs"]] == [t["name"] for t in fn["outputs"]]
        for t in meta["inputs"] + meta["outputs"]:
            assert t["datatype"] in ("FP32", "INT32", "INT64") and -1 in t["shape"] or t["name"] == "num_segments", t
        ns = meta["inputs"][-1]
        assert ns["shape"] == [1] and ns["datatype"] == "INT64"


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("pas", PASSES)
def test_every_function_json_and_binary(tc, shared_daemon, table, op, pas):
    """Each function, both tensor encodings, both float dtypes: the v1 answer's bits exactly."""
    fn = table[op][pas]
    rng = np.random.default_rng(hash((op, pas, "oip")) & 0xFFFF)
    for width in [3] if fn["vec3_only"] else [1, 3]:
        for dtype in ("float64", "float32"):
            args, idx, S = random_case(rng, fn, width)
            args = {k: v.astype(dtype) for k, v in args.items()}
            st, _, v1 = call(shared_daemon.url, op, pas, args, idx, S, enc=MSGPACK, dtype=dtype)
            assert st == 200, v1
            ref = reference(op, pas, {k: v.astype(np.float64) for k, v in args.items()}, idx, S)
            for binary in (False, True):
                res = tc.infer(f"{op}_{pas}", make_inputs(args, idx, S, dtype, binary),
                               outputs=[th.InferRequestedOutput(o["name"], binary_data=binary) for o in fn["outputs"]])
                r = res.get_response()
                assert r["model_name"] == f"{op}_{pas}" and r["model_version"] == "1"
                assert [o["name"] for o in r["outputs"]] == [o["name"] for o in fn["outputs"]]
                for o in r["outputs"]:
                    assert ("parameters" in o) == binary and ("data" in o) != binary, o.keys()
                    got = res.as_numpy(o["name"])
                    assert got.dtype == np.dtype(dtype) and got.shape == v1[o["name"]].shape
                    assert got.tobytes() == v1[o["name"]].tobytes(), (o["name"], binary)
                    assert_close(got, ref[o["name"]], dtype)


def test_default_outputs_binary_and_int32_num_segments(tc, table):
    """No outputs list: tritonclient asks binary_data_output and gets every output as binary."""
    fn = table["segmented_matvec"]["backward"]
    args, idx, S = random_case(np.random.default_rng(5), fn, 3)
    res = tc.infer("segmented_matvec_backward", make_inputs(args, idx, S, "float64", True, ns_dtype="INT32"),
                   request_id="req-7")
    r = res.get_response()
    assert r["id"] == "req-7"
    assert all(o["parameters"]["binary_data_size"] > 0 for o in r["outputs"])
    ref = reference("segmented_matvec", "backward", args, idx, S)
    for k in ("grad_v", "grad_m"):
        assert_close(res.as_numpy(k), ref[k], "float64")


def test_output_subset(tc, shared_daemon, table):
    fn = table["segmented_dot"]["double_backward"]
    args, idx, S = random_case(np.random.default_rng(9), fn, 3)
    res = tc.infer("segmented_dot_double_backward", make_inputs(args, idx, S, "float64", True),
                   outputs=[th.InferRequestedOutput("grad_y", binary_data=True),
                            th.InferRequestedOutput("grad_g_out", binary_data=False)])
    names = [o["name"] for o in res.get_response()["outputs"]]
    assert sorted(names) == ["grad_g_out", "grad_y"] and res.as_numpy("grad_x") is None
    st, _, v1 = call(shared_daemon.url, "segmented_dot", "double_backward", args, idx, S,
                     outputs=["grad_y", "grad_g_out"])
    assert st == 200
    for k in names:
        assert res.as_numpy(k).tobytes() == v1[k].tobytes()


def v1_message(url, op, pas, args, idx, S):
    st, _, err = call(url, op, pas, args, idx, S, enc=JSON)
    assert st == 400, err
    return err["error"]["message"]


@pytest.mark.parametrize("binary", [False, True])
def test_bad_input_has_v1_message(tc, shared_daemon, binary):
    cases = [
        ("segmented_sum", "forward", {"x": np.ones(3)}, [0, 1, 2], 2),  # idx out of range
        ("segmented_mul", "forward", {"x": np.ones(3), "y": np.ones(3)}, [0, 1, 1], 4),  # y.shape[0] != S
        ("segmented_dot", "forward", {"x": np.ones(4), "y": np.ones((4, 1))}, [0, 0, 1, 1], 2),  # trailing shapes differ
        ("segmented_sum", "forward", {"x": np.ones(3), "bogus": np.ones(3)}, [0, 0, 1], 2),  # unknown argument
        ("segmented_dot", "forward", {"x": np.ones(3)}, [0, 0, 1], 2),  # y missing
    ]
    for op, pas, args, idx, S in cases:
        msg = v1_message(shared_daemon.url, op, pas, args, idx, S)
        with pytest.raises(InferenceServerException) as e:
            tc.infer(f"{op}_{pas}", make_inputs(args, idx, S, "float64", binary))
        assert e.value.status() == "400" and e.value.message() == msg, (e.value.status(), e.value.message(), msg)


def test_unknown_model_and_version(tc, shared_daemon):
    for call_ in (lambda: tc.get_model_metadata("segmented_foo_forward"),
                  lambda: tc.get_model_metadata("segmented_sum_forward", "2"),
                  lambda: tc.infer("segmented_sum_sideways", make_inputs({"x": np.ones(2)}, [0, 0], 1, "float64", True))):
        with pytest.raises(InferenceServerException) as e:
            call_()
        assert e.value.status() == "404" and "unknown" in e.value.message()
    assert not tc.is_model_ready("segmented_foo_forward")
    st, hd, data = request(shared_daemon.url, "GET", "/v2/models/nope/ready")
    assert st == 404 and isinstance(json.loads(data)["error"], str) and hd["content-type"] == "application/json"


def test_malformed_bodies_are_400(shared_daemon):
    url, path = shared_daemon.url, "/v2/models/segmented_sum_forward/infer"
    x = np.arange(4, dtype=np.float64)
    head = {"inputs": [{"name": "x", "datatype": "FP64", "shape": [4], "parameters": {"binary_data_size": 32}},
                       {"name": "idx", "datatype": "INT32", "shape": [4], "data": [0, 0, 1, 1]},
                       {"name": "num_segments", "datatype": "INT64", "shape": [1], "data": [2]}],
            "parameters": {"binary_data_output": True}}
    h = json.dumps(head).encode()
    good = h + x.tobytes()
    st, hd, data = request(url, "POST", path, good, {"Inference-Header-Content-Length": str(len(h))})
    assert st == 200 and int(hd["inference-header-content-length"]) < len(data)
    assert np.frombuffer(data[int(hd["inference-header-content-length"]):], np.float64).tolist() == [1.0, 5.0]
    bad = [
        (b"{", {}),  # not JSON
        (good, {"Inference-Header-Content-Length": str(len(good) + 1)}),  # past the body
        (good[:-8], {"Inference-Header-Content-Length": str(len(h))}),  # binary data short
        (good + b"\0" * 8, {"Inference-Header-Content-Length": str(len(h))}),  # unclaimed bytes
        (h, {}),  # binary_data_size without a binary part
        (json.dumps({"inputs": [{"name": "x", "datatype": "FP16", "shape": [1], "data": [1]}]}).encode(), {}),
        (json.dumps({"inputs": [{"name": "num_segments", "datatype": "INT64", "shape": [2], "data": [1, 2]}]}).encode(),
         {}),
        (json.dumps({"inputs": [], "bogus": 1}).encode(), {}),
    ]
    for body, hdrs in bad:
        st, _, data = request(url, "POST", path, body, hdrs)
        assert st == 400, (body[:60], data)
        msg = json.loads(data)["error"]
        assert isinstance(msg, str) and msg.startswith("segmented_sum"), msg


def test_token_is_needed(daemon_factory):
    d = daemon_factory(env={"SEGOPS_TOKEN": "s3cret-token"})
    c = th.InferenceServerClient(f"{d.host}:{d.port}")
    with pytest.raises(InferenceServerException) as e:
        c.get_server_metadata()
    assert e.value.status() == "401"
    assert c.get_server_metadata(headers={"Authorization": "Bearer s3cret-token"})["name"] == "segopsd"
    c.close()

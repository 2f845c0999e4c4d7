"""test_same_message.py: every rule of proto/API.md, Validation has one source. Each bad input is sent
to the real segopsd through every wire that can express it (v1 msgpack, v1 JSON, the Open Inference
Protocol with JSON data and with binary data) and must get the same status and the same message,
naming the op, the argument and the rule."""
import json
import struct

import msgpack
import numpy as np
import pytest

from client import JSON, MSGPACK, request

DT = {"float32": "FP32", "float64": "FP64", "int32": "INT32", "int64": "INT64", "float16": "FP16"}
NP = {"float32": np.float32, "float64": np.float64, "int32": np.int32, "int64": np.int64, "float16": np.float16}
WIRES = ("msgpack", "json", "oip", "oip-binary")


def t(dtype, shape, data):
    """A tensor as the case means it: dtype, shape and its numbers, flat (their count need not fit)."""
    return {"dtype": dtype, "shape": list(shape), "data": list(data)}


def ref(dtype, shape, region):
    """A tensor by reference into a shared-memory region."""
    return {"dtype": dtype, "shape": list(shape), "shm": region}


def _bytes(x):
    return np.array(x["data"], dtype=NP[x["dtype"]]).tobytes()


def v1_body(case, wire):
    body = {}
    for name, x in case["args"]:  # a list of pairs: a name may come twice
        if "shm" in x:
            v = {"dtype": x["dtype"], "shape": x["shape"], "shm": {"region": x["shm"], "offset": 0}}
        else:
            v = {"dtype": x["dtype"], "shape": x["shape"], "data": _bytes(x) if wire == "msgpack" else x["data"]}
        body[name] = v
    if "ns" in case:
        body["num_segments"] = case["ns"]
    if "outputs" in case:
        body["outputs"] = case["outputs"]
    if wire == "json":
        return json.dumps(body).encode(), {"Content-Type": JSON}
    if len(dict(case["args"])) != len(case["args"]):  # the same key twice: msgpack maps may repeat keys
        pk = msgpack.Packer(use_bin_type=True)
        out = pk.pack_map_header(len(case["args"]) + len(body) - len(dict(case["args"])))
        for name, x in case["args"]:
            out += pk.pack(name) + pk.pack({"dtype": x["dtype"], "shape": x["shape"], "data": _bytes(x)})
        out += b"".join(pk.pack(k) + pk.pack(v) for k, v in body.items() if k not in dict(case["args"]))
        return out, {"Content-Type": MSGPACK}
    return msgpack.packb(body, use_bin_type=True), {"Content-Type": MSGPACK}


def oip_body(case, binary):
    inputs, blobs = [], []
    for name, x in case["args"]:
        i = {"name": name, "datatype": DT[x["dtype"]], "shape": x["shape"]}
        if "shm" in x:
            nbytes = int(np.prod(x["shape"], dtype=np.uint64)) * NP[x["dtype"]]().itemsize if x["shape"] else 8
            i["parameters"] = {"shared_memory_region": x["shm"], "shared_memory_byte_size": nbytes % (1 << 63)}
        elif binary:
            blobs.append(_bytes(x))
            i["parameters"] = {"binary_data_size": len(blobs[-1])}
        else:
            i["data"] = x["data"]
        inputs.append(i)
    if "ns" in case:
        ns = case["ns"]
        dt = "INT64" if isinstance(ns, int) else "FP64"
        i = {"name": "num_segments", "datatype": dt, "shape": [1]}
        if binary:
            blobs.append(struct.pack("<q" if dt == "INT64" else "<d", ns))
            i["parameters"] = {"binary_data_size": 8}
        else:
            i["data"] = [ns]
        inputs.append(i)
    head = {"inputs": inputs}
    if "outputs" in case:
        head["outputs"] = [{"name": o} for o in case["outputs"]]
    h = json.dumps(head).encode()
    hdrs = {"Content-Type": JSON}
    if binary:
        hdrs["Inference-Header-Content-Length"] = str(len(h))
    return h + b"".join(blobs), hdrs


def answer(url, case, wire):
    """(status, message) of the daemon's answer to the case on one wire."""
    op, pas = case["fn"]
    if wire.startswith("oip"):
        body, hdrs = oip_body(case, wire == "oip-binary")
        st, _, data = request(url, "POST", f"/v2/models/{op}_{pas}/infer", body, hdrs)
        return st, json.loads(data)["error"]
    body, hdrs = v1_body(case, wire)
    st, _, data = request(url, "POST", f"/v1/{op}/{pas}", body, hdrs)
    return st, json.loads(data)["error"]["message"]


SUM = ("segmented_sum", "forward")
X4 = t("float64", [4], [1, 2, 3, 4])
IDX4 = t("int32", [4], [0, 0, 1, 1])
NUMBERS = ("json", "oip")  # values only a list of numbers can carry

# (id, case, the message's expected text, the wires that can express it)
CASES = [
    ("idx_2d", {"fn": SUM, "args": [("x", X4), ("idx", t("int32", [4, 1], [0, 0, 1, 1]))], "ns": 2},
     "segmented_sum: idx must be 1-D, got 2-D", WIRES),
    ("idx_float", {"fn": SUM, "args": [("x", X4), ("idx", t("float64", [4], [0, 0, 1, 1]))], "ns": 2},
     "segmented_sum: idx must be int32 or int64, got float64", WIRES),
    ("idx_negative", {"fn": SUM, "args": [("x", X4), ("idx", t("int32", [4], [0, -1, 1, 1]))], "ns": 2},
     "segmented_sum: idx[1] = -1 is out of range [0, num_segments = 2)", WIRES),
    ("idx_past_s", {"fn": SUM, "args": [("x", X4), ("idx", t("int64", [4], [0, 0, 1, 2]))], "ns": 2},
     "segmented_sum: idx[3] = 2 is out of range [0, num_segments = 2)", WIRES),
    ("x_integer", {"fn": SUM, "args": [("x", t("int32", [4], [1, 2, 3, 4])), ("idx", IDX4)], "ns": 2},
     "segmented_sum: x must be float32 or float64, got int32", WIRES),
    ("dtypes_differ", {"fn": ("segmented_dot", "forward"),
                       "args": [("x", t("float32", [4], [1, 2, 3, 4])), ("y", X4), ("idx", IDX4)], "ns": 2},
     "segmented_dot: y is float64 but x is float32; all float inputs must share one dtype", WIRES),
    ("rank", {"fn": SUM, "args": [("x", t("float64", [], [1])), ("idx", IDX4)], "ns": 2},
     "segmented_sum: x must have shape (N,*F), got ()", WIRES),
    ("leading_n", {"fn": SUM, "args": [("x", t("float64", [3], [1, 2, 3])), ("idx", IDX4)], "ns": 2},
     "segmented_sum: x.shape[0] (3) must equal idx.shape[0] (4)", WIRES),
    ("y_not_s", {"fn": ("segmented_mul", "forward"),
                 "args": [("x", X4), ("y", t("float64", [3], [1, 2, 3])), ("idx", IDX4)], "ns": 2},
     "segmented_mul: num_segments (2) must equal y.shape[0] (3)", WIRES),
    ("m_not_s", {"fn": ("segmented_matvec", "forward"),
                 "args": [("v", t("float64", [4, 3], range(12))), ("m", t("float64", [3, 3, 3], range(27))),
                          ("idx", IDX4)], "ns": 2},
     "segmented_matvec: num_segments (2) must equal m.shape[0] (3)", WIRES),
    ("trailing_differ", {"fn": ("segmented_dot", "forward"),
                         "args": [("x", X4), ("y", t("float64", [4, 1], [1, 2, 3, 4])), ("idx", IDX4)], "ns": 2},
     "segmented_dot: the trailing shapes of x (4,) and y (4,1) differ; every (N,*F) and (S,*F) argument has the "
     "same F", WIRES),
    ("missing_x", {"fn": SUM, "args": [("idx", IDX4)], "ns": 2}, "segmented_sum: x is required for forward", WIRES),
    ("unknown_argument", {"fn": SUM, "args": [("x", X4), ("z", X4), ("idx", IDX4)], "ns": 2},
     "segmented_sum: unknown argument 'z' for forward (expected: x, idx, num_segments)", WIRES),
    ("unknown_argument_bad_dtype",
     {"fn": SUM, "args": [("x", X4), ("q", t("float16", [4], [1, 2, 3, 4])), ("idx", IDX4)], "ns": 2},
     "segmented_sum: unknown argument 'q' for forward", WIRES),
    ("repeated_argument", {"fn": SUM, "args": [("x", X4), ("x", X4), ("idx", IDX4)], "ns": 2},
     "segmented_sum: argument 'x' is given more than once", ("msgpack", "oip", "oip-binary")),
    ("num_segments_negative", {"fn": SUM, "args": [("x", X4), ("idx", IDX4)], "ns": -1},
     "segmented_sum: num_segments (-1) must be >= 0", WIRES),
    ("num_segments_not_integer", {"fn": SUM, "args": [("x", X4), ("idx", IDX4)], "ns": 1.5},
     "segmented_sum: num_segments must be an integer", WIRES),
    ("num_segments_missing", {"fn": SUM, "args": [("x", X4), ("idx", IDX4)]},
     "segmented_sum: num_segments is required", WIRES),
    ("data_length", {"fn": SUM, "args": [("x", t("float64", [4], [1, 2, 3])), ("idx", IDX4)], "ns": 2},
     "segmented_sum: x data has 24 bytes but shape (4,) x float64 needs 32", WIRES),
    ("seven_dimensions", {"fn": SUM, "args": [("x", t("float64", [1, 1, 1, 1, 1, 1, 1], [1])), ("idx", IDX4)], "ns": 2},
     "segmented_sum: x has 7 dimensions; at most 6 are allowed", WIRES),
    ("negative_dimension", {"fn": SUM, "args": [("x", t("float64", [-1], [])), ("idx", IDX4)], "ns": 2},
     "segmented_sum: x.shape[0] (-1) must be >= 0", WIRES),
    ("unknown_output", {"fn": SUM, "args": [("x", X4), ("idx", IDX4)], "ns": 2, "outputs": ["nope"]},
     "segmented_sum: unknown output 'nope' for forward (expected: out)", WIRES),
    ("no_output", {"fn": SUM, "args": [("x", X4), ("idx", IDX4)], "ns": 2, "outputs": []},
     "segmented_sum: outputs must name at least one output", WIRES),
    ("float32_range", {"fn": SUM, "args": [("x", t("float32", [4], [1, 1e39, 3, 4])), ("idx", IDX4)], "ns": 2},
     "segmented_sum: x.data[1] (9.9999999999999994e+38) is out of float32 range", NUMBERS),
    ("idx_not_integer", {"fn": SUM, "args": [("x", X4), ("idx", t("int32", [4], [0, 0.5, 1, 1]))], "ns": 2},
     "segmented_sum: idx.data[1] (0.5) must be an integer", NUMBERS),
    ("idx_int32_range", {"fn": SUM, "args": [("x", X4), ("idx", t("int32", [4], [0, 2**31, 1, 1]))], "ns": 2},
     "segmented_sum: idx.data[1] (2147483648) is out of int32 range", NUMBERS),
    ("shm_unknown_region",
     {"fn": SUM, "args": [("x", ref("float64", [4], "segops-nowhere")), ("idx", IDX4)], "ns": 2},
     "segmented_sum: x: ", WIRES),
    ("shm_shape_too_large",
     {"fn": SUM, "args": [("x", ref("float64", [1 << 62], "segops-nowhere")), ("idx", IDX4)], "ns": 2},
     "segmented_sum: x: its shape is too large", WIRES),
]


@pytest.mark.parametrize("case,text,wires", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_one_rule_one_message(shared_daemon, case, text, wires):
    got = {w: answer(shared_daemon.url, case, w) for w in wires}
    first = got[wires[0]]
    assert first[0] in (400, 404, 413), got
    assert first[1].startswith(text), got
    for w in wires[1:]:
        assert got[w] == first, (w, got)


LIMITS = [
    ("elements", {"fn": SUM, "args": [("x", t("float64", [100], range(100))), ("idx", t("int32", [4], [0, 0, 1, 1]))],
                  "ns": 2},
     "segmented_sum: x (100,) has more elements than the limit (--max-elements 64)"),
    ("segments", {"fn": SUM, "args": [("x", X4), ("idx", IDX4)], "ns": 100},
     "segmented_sum: num_segments (100) exceeds the limit (--max-segments 16)"),
    ("output", {"fn": ("segmented_sum", "backward"),
                "args": [("g_out", t("float64", [2, 3], range(6))), ("idx", t("int32", [30], [0] * 15 + [1] * 15))],
                "ns": 2},
     "segmented_sum: output grad_x would have 90 elements, more than the limit (--max-elements 64)"),
]


@pytest.mark.parametrize("case,text", [c[1:] for c in LIMITS], ids=[c[0] for c in LIMITS])
def test_limits_one_message(daemon_factory, case, text):
    d = daemon_factory("--max-elements", "64", "--max-segments", "16")
    got = {w: answer(d.url, case, w) for w in WIRES}
    assert got["msgpack"][0] == 413 and got["msgpack"][1] == text, got
    assert all(v == got["msgpack"] for v in got.values()), got

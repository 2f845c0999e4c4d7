"""test_contract.py: the contract holes a hostile-client run found: sum and mean double backward with only idx
and num_segments, hostile bytes in error texts, /v1/info's devices on the CPU backend."""
import json

import msgpack
import pytest


def post(d, path, body, ctype="application/json", accept="application/json"):
    c = d.conn()
    c.request("POST", path, body, {"Content-Type": ctype, "Accept": accept})
    r = c.getresponse()
    data = r.read()
    c.close()
    return r.status, data


@pytest.mark.parametrize("op", ["segmented_sum", "segmented_mean"])
@pytest.mark.parametrize("dtype", [None, "float32", "float64"])
def test_double_backward_with_idx_alone(daemon, op, dtype):
    d = daemon()
    body = {"idx": [0, 0, 2], "num_segments": 3}
    if dtype:
        body["dtype"] = dtype
    st, data = post(d, f"/v1/{op}/double_backward", json.dumps(body))
    assert st == 200, data
    for t in json.loads(data).values():
        assert t["dtype"] == (dtype or "float64")
        assert t["shape"][0] in (3, 3) and set(t["data"]) <= {0.0}


def test_no_message_lists_idx_as_a_float_tensor(daemon):
    d = daemon()
    st, data = post(d, "/v1/segmented_mul/double_backward", json.dumps({"idx": [0], "num_segments": 1}))
    assert st == 400
    msg = json.loads(data)["error"]["message"]
    assert "float tensor" not in msg


@pytest.mark.parametrize("name", ["a\0b", 'q"uote', "back\\slash", "nl\nx", "\x7f\xff"])
def test_error_texts_show_hostile_names_escaped(daemon, name):
    d = daemon()
    body = msgpack.packb({"KEY": 1, "idx": {"dtype": "int32", "shape": [0], "data": b""}, "num_segments": 0})
    raw_key = name.encode("latin1")  # a str key of exactly these bytes (\xff: not UTF-8)
    body = body.replace(b"\xa3KEY", bytes([0xa0 | len(raw_key)]) + raw_key)
    st, data = post(d, "/v1/segmented_sum/forward", body, ctype="application/msgpack")
    assert st == 400
    msg = json.loads(data)["error"]["message"]  # valid JSON whatever the bytes
    assert "?" not in msg
    shown = "".join(c if 0x20 <= ord(c) < 0x7f and c != "\\" else ("\\\\" if c == "\\" else "\\x%02x" % ord(c))
                    for c in name)
    assert f"'{shown}'" in msg, msg


def test_info_lists_the_host_once(daemon):
    d = daemon("--threads", "2")
    c = d.conn()
    c.request("GET", "/v1/info")
    inf = json.loads(c.getresponse().read())
    if inf["backend"] != "cpu":
        pytest.skip("not the CPU backend")
    assert len(inf["devices"]) == 1, inf["devices"]
    assert inf["devices"][0]["workers"] >= 1 and inf["devices"][0]["memory_total"] > 0

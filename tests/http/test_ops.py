"""test_ops.py: every op x pass through JSON and msgpack, against the float64 reference of
proto/API.md, Formulas (reference.py), on the real segopsd; plus proto/API.md's curl example, byte for byte."""
import re
import subprocess

import numpy as np
import pytest

from client import JSON, MSGPACK, call, info
from reference import random_case, reference

OPS = ["segmented_sum", "segmented_dot", "segmented_mul", "segmented_mean", "segmented_rms_norm", "segmented_matvec"]
PASSES = ["forward", "backward", "double_backward"]


def check(got, ref, dtype):
    assert set(got) == set(ref), (sorted(got), sorted(ref))
    tol = 1e-12 if dtype == "float64" else 1e-5
    for k in ref:
        g = got[k]
        assert g.dtype == np.dtype(dtype), (k, g.dtype)
        assert g.shape == ref[k].shape, (k, g.shape, ref[k].shape)
        err = np.abs(g.astype(np.float64) - ref[k]) / np.maximum(np.abs(ref[k]), 1.0)
        assert err.max(initial=0) <= tol, (k, err.max())
        assert np.all(np.isfinite(g)), k


@pytest.fixture(scope="module")
def table(shared_daemon):
    return info(shared_daemon.url)["ops"]


@pytest.mark.parametrize("enc", [MSGPACK, JSON])
@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("pas", PASSES)
def test_every_function(shared_daemon, table, op, pas, enc):
    fn = table[op][pas]
    rng = np.random.default_rng(hash((op, pas, enc)) & 0xFFFF)
    widths = [3] if fn["vec3_only"] else [1, 3]
    for width in widths:
        for dtype in ("float64", "float32"):
            args, idx, S = random_case(rng, fn, width)
            if dtype == "float32":  # the reference sees exactly the values sent
                args = {k: v.astype(np.float32).astype(np.float64) for k, v in args.items()}
            st, hd, got = call(shared_daemon.url, op, pas, args, idx, S, enc=enc, dtype=dtype)
            assert st == 200, got
            assert hd["content-type"].startswith(enc)
            timing = re.fullmatch(r"queue;dur=(\d+\.\d{3}), compute;dur=(\d+\.\d{3})", hd["server-timing"])
            assert timing, hd["server-timing"]  # milliseconds, three decimals
            assert all(0 <= float(v) < 60e3 for v in timing.groups()), hd["server-timing"]
            check(got, reference(op, pas, args, idx, S), dtype)


@pytest.mark.parametrize("op", OPS)
def test_double_backward_without_cotangents_and_output_selection(shared_daemon, table, op):
    """Omitted optional inputs mean zeros / are not read; "outputs" returns only those named."""
    fn = table[op]["double_backward"]
    rng = np.random.default_rng(7)
    width = 3
    args, idx, S = random_case(rng, fn, width, omit_optional=True)
    last = fn["outputs"][-1]["name"]
    st, _, got = call(shared_daemon.url, op, "double_backward", args, idx, S, outputs=[last])
    assert st == 200, got
    ref = reference(op, "double_backward", args, idx, S)
    check(got, {last: ref[last]}, "float64")


def test_accept_picks_the_response_encoding(shared_daemon):
    x = np.arange(6.0)
    idx = [0, 0, 1, 1, 1, 2]
    # (Content-Type sent, body encoding, Accept, Content-Type expected back)
    cases = [(JSON, JSON, MSGPACK, MSGPACK), (MSGPACK, MSGPACK, JSON, JSON), (JSON, JSON, "*/*", JSON),
             (MSGPACK, MSGPACK, None, MSGPACK), ("application/x-msgpack", MSGPACK, "application/*", MSGPACK),
             ("application/vnd.msgpack", MSGPACK, "application/json;q=0.5, application/msgpack", MSGPACK),
             ("application/json; charset=utf-8", JSON, "text/html, application/json;q=0.1", JSON),
             (MSGPACK, MSGPACK, "application/x-msgpack", "application/x-msgpack")]
    for ctype, enc, accept, want in cases:
        st, hd, got = call(shared_daemon.url, "segmented_sum", "forward", {"x": x}, idx, 3, enc=enc, accept=accept,
                           headers={"Content-Type": ctype})
        assert st == 200, (ctype, accept, got)
        assert hd["content-type"] == want, (ctype, accept, hd["content-type"])
        assert got["out"].tolist() == [1.0, 9.0, 5.0]


def test_spec_curl_example_exact(shared_daemon):
    out = subprocess.run(["curl", "-s", f"{shared_daemon.url}/v1/segmented_sum/forward", "-H",
                          "Content-Type: application/json", "-d",
                          '{"x":[1,2,3,4,5,6],"idx":[0,0,1,1,1,2],"num_segments":3}'],
                         capture_output=True, timeout=30, check=True)
    assert out.stdout == b'{"out":{"dtype":"float64","shape":[3],"data":[3.0,12.0,6.0]}}'


def test_feature_shapes(shared_daemon):
    """(N,*F) rows of any F: sum of (N,2,3) gives (S,2,3), mul with y (S,*F) multiplies element-wise, rms_norm
    takes (N,), and trailing shapes that differ are refused naming both arguments."""
    u = shared_daemon.url
    rng = np.random.default_rng(5)
    idx = np.array([0, 2, 0, 1, 2, 2, 0], np.int32)  # segment 3 empty
    x = rng.integers(-9, 9, size=(7, 2, 3)).astype(np.float64)
    want = np.zeros((4, 2, 3))
    np.add.at(want, idx, x)
    for enc in (JSON, MSGPACK):
        st, _, g = call(u, "segmented_sum", "forward", {"x": x}, idx, 4, enc=enc)
        assert st == 200 and g["out"].shape == (4, 2, 3) and np.array_equal(g["out"], want)
        y = rng.integers(-9, 9, size=(4, 2, 3)).astype(np.float64)
        st, _, g = call(u, "segmented_mul", "forward", {"x": x, "y": y}, idx, 4, enc=enc)
        assert st == 200 and g["out"].shape == (7, 2, 3) and np.array_equal(g["out"], x * y[idx])
        st, _, g = call(u, "segmented_mul", "backward", {"g_out": x, "x": x, "y": y}, idx, 4, enc=enc)
        gy = np.zeros((4, 2, 3))
        np.add.at(gy, idx, x * x)
        assert st == 200 and g["grad_y"].shape == (4, 2, 3) and np.array_equal(g["grad_y"], gy)
        st, _, g = call(u, "segmented_rms_norm", "forward", {"x": np.array([3.0, 4.0, 2.0])}, [0, 0, 1], 2, enc=enc)
        assert st == 200 and g["out"].tolist() == [np.sqrt(12.5), 2.0]
        st, _, e = call(u, "segmented_dot", "forward", {"x": x, "y": x.reshape(7, 6)}, idx, 4, enc=enc)
        assert st == 400 and "x (7,2,3)" in e["error"]["message"] and "y (7,6)" in e["error"]["message"], e


def test_golden_cases_exact(shared_daemon):
    """A few of proto/API.md's exact cases through both encodings (== in float64)."""
    u = shared_daemon.url
    for enc in (MSGPACK, JSON):
        st, _, g = call(u, "segmented_sum", "forward", {"x": np.array([[1, 2, 3], [4, 5, 6], [7, 8, 9.0]])},
                        [0, 0, 1], 2, enc=enc)
        assert st == 200 and g["out"].tolist() == [[5, 7, 9], [7, 8, 9]]
        x = np.array([[3, 4, 0], [0, 0, 0], [1, 2, 2], [0, 0, 0.0]])
        st, _, g = call(u, "segmented_rms_norm", "forward", {"x": x}, [0, 0, 1, 2], 4, enc=enc)
        assert st == 200 and g["out"].tolist() == [3.5355339059327378, 3, 0, 0]
        st, _, g = call(u, "segmented_matvec", "forward", {"v": np.array([[1.0, 0, 0]]),
                        "m": np.array([[[1.0, 2, 0], [0, 1, 0], [0, 0, 1]]])}, [0], 1, enc=enc)
        assert st == 200 and g["out"].tolist() == [[1, 2, 0]]
        st, _, g = call(u, "segmented_sum", "forward", {"x": np.zeros((0,))}, np.zeros(0, np.int32), 5, enc=enc)
        assert st == 200 and g["out"].tolist() == [0.0] * 5


def _pool_metrics(url):
    from test_lifecycle import metric
    from client import request

    st, _, text = request(url, "GET", "/metrics")
    assert st == 200
    text = text.decode()
    return {k: metric(text, "segops_host_pool_allocations_total", source=k) for k in ("reused", "mapped", "heap")} | {
        "in_use": metric(text, "segops_host_pool_bytes", state="in_use"),
        "idle": metric(text, "segops_host_pool_bytes", state="idle"),
        "cap": metric(text, "segops_host_pool_capacity_bytes")}


@pytest.mark.parametrize("pool", ["default", "off"])
def test_large_bodies_and_outputs_through_the_host_buffer_pool(daemon_factory, table, pool):
    """Bodies and outputs of 1 MiB or more come from the daemon's pool of host buffers, reused
    from request to request and given back after each; answers are the same with the pool off."""
    d = daemon_factory(env={"SEGOPS_HOST_POOL_BYTES": "0"} if pool == "off" else None)
    fn = table["segmented_mul"]["backward"]
    rng = np.random.default_rng(11)
    for rnd in range(3):
        N, S = 70000 + rnd, 5000  # x, y, g_out: 3 x 1.6 MiB of float64 vec3; grad_x, grad_y 1.6 MiB each
        args, idx, S = random_case(rng, fn, 3, N=N, S=S)
        st, _, got = call(d.url, "segmented_mul", "backward", args, idx, S)
        assert st == 200, got
        check(got, reference("segmented_mul", "backward", args, idx, S), "float64")
    m = _pool_metrics(d.url)
    assert m["in_use"] == 0, m  # nothing held past its request
    if pool == "off":
        assert m["cap"] == 0 and m["mapped"] == 0 and m["reused"] == 0 and m["idle"] == 0, m
    else:
        # each round: one body, one output block; the first round maps them, later rounds reuse
        assert m["mapped"] >= 2 and m["reused"] >= 4 and m["idle"] > 0 and m["heap"] == 0, m

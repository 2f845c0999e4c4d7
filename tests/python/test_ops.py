"""test_ops.py: every op x pass (scalar and vec3 where allowed, float32 and float64) through
segops.Client against the float64 numpy reference of proto/API.md's formulas, on the layouts of proto/API.md (Exact cases),
plus the golden cases, omitted arguments, output subsets and input conversions."""

import numpy as np
import pytest

import segops
from segops import _table
from segref import FORWARD_INPUTS, WIDTHS, fix_missing, idx_from_lengths, max_rel_err, reference, shape_of

LAYOUTS = {
    "mixed": [500, 1, 3, 200, 2, 1, 50, 1, 1, 100],  # N=859, S=10
    "empty_segments": [0, 3, 0, 0, 5, 1, 0],  # leading, inner and trailing empty segments
    "singletons": [1] * 64,
    "n0": [0] * 5,  # N=0, S=5
    "s0": [],  # N=0, S=0
    "one_long": [10000],
}
TOL = {"float64": 1e-12, "float32": 1e-5}


def make_args(op, pass_, width, idx, s, dtype, rng, drop=()):
    n = len(idx)
    args = {}
    for name in _table.input_names(op, pass_):
        if name in drop:
            continue
        a = rng.standard_normal(shape_of(op, name, width, n, s))
        args[name] = a.astype(dtype)
    return args


def check(client, op, pass_, width, lengths, dtype, seed=0, drop=(), method=True):
    rng = np.random.default_rng(seed)
    idx = idx_from_lengths(lengths, rng)
    s = len(lengths)
    args = make_args(op, pass_, width, idx, s, dtype, rng, drop)
    ref = fix_missing(op, pass_, reference(op, pass_, args, idx, s), idx, s, width)
    names = _table.output_names(op, pass_)
    if method:
        call_args = [args.get(k) for k in _table.input_names(op, pass_)]
        got = getattr(client, _table.method_name(op, pass_))(*call_args, idx, s)
        got = (got,) if len(names) == 1 else got
        assert isinstance(got, tuple) and len(got) == len(names)
        got = dict(zip(names, got))
    else:
        got = client.call(op, pass_, dict(args, idx=idx, num_segments=s))
    assert set(got) == set(names)
    for k in names:
        assert got[k].dtype == np.dtype(dtype), f"{k}: dtype {got[k].dtype}, want {dtype}"
        assert got[k].shape == shape_of(op, k, width, len(idx), s), f"{k}: shape {got[k].shape}"
        assert np.all(np.isfinite(got[k])), f"{k}: non-finite values"
        err = max_rel_err(got[k], ref[k])
        assert err <= TOL[dtype], f"{op} {pass_} {k}: max rel err {err:.3g} > {TOL[dtype]}"
    return got, ref


CASES = [
    pytest.param(op, pass_, w, id=f"{op}-{pass_}-w{w}")
    for (op, pass_) in _table.FUNCS
    for w in WIDTHS[op]
]


@pytest.mark.parametrize("layout", list(LAYOUTS))
@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("op,pass_,width", CASES)
def test_against_reference(client, op, pass_, width, dtype, layout):
    check(client, op, pass_, width, LAYOUTS[layout], dtype, seed=hash((op, pass_, layout)) & 0xFFFF)


@pytest.mark.parametrize("op,pass_,width", CASES)
def test_generic_call(client, op, pass_, width):
    check(client, op, pass_, width, [4, 0, 7, 2], "float64", method=False)


@pytest.mark.parametrize("op", list(FORWARD_INPUTS))
def test_double_backward_cotangents_omitted(client, op):
    """A missing gg_a means zeros (proto/API.md, Formulas): drop each cotangent in turn, and all of them."""
    ggs = ["gg_" + a for a in FORWARD_INPUTS[op]]
    for drop in [(g,) for g in ggs] + [tuple(ggs)]:
        for w in WIDTHS[op]:
            check(client, op, "double_backward", w, [3, 1, 0, 5], "float64", drop=drop)


@pytest.mark.parametrize("op", ["segmented_sum", "segmented_mean"])
def test_unread_inputs_omitted_or_given(client, op):
    """x for the backward, g_out and x for the double backward are not read: None or given,
    the result is the same."""
    rng = np.random.default_rng(5)
    idx = idx_from_lengths([2, 3, 0, 4], rng)
    n, s = len(idx), 4
    x = rng.standard_normal((n, 3))
    g = rng.standard_normal((s, 3))
    gg = rng.standard_normal((n, 3))
    bwd = getattr(client, op + "_backward")
    dbl = getattr(client, op + "_double_backward")
    np.testing.assert_array_equal(bwd(g, None, idx, s), bwd(g, x, idx, s))
    np.testing.assert_array_equal(dbl(gg, None, None, idx, s), dbl(gg, g, x, idx, s))
    ref = reference(op, "double_backward", {"gg_x": gg}, idx, s)["grad_g_out"]
    assert max_rel_err(dbl(gg, None, None, idx, s), ref) <= 1e-12


def test_outputs_subset(client):
    rng = np.random.default_rng(1)
    idx = idx_from_lengths([3, 4, 2], rng)
    x, y = rng.standard_normal((9, 3)), rng.standard_normal((9, 3))
    g = rng.standard_normal(3)
    full = client.segmented_dot_backward(g, x, y, idx, 3)
    only_y = client.segmented_dot_backward(g, x, y, idx, 3, outputs=["grad_y"])
    assert isinstance(only_y, np.ndarray)
    np.testing.assert_array_equal(only_y, full[1])
    res = client.call("segmented_dot", "backward", {"g_out": g, "x": x, "y": y, "idx": idx, "num_segments": 3},
                      outputs=["grad_x"])
    assert list(res) == ["grad_x"]
    np.testing.assert_array_equal(res["grad_x"], full[0])


def test_keyword_arguments(client):
    x = np.arange(1.0, 7.0)
    idx = np.array([0, 0, 1, 1, 1, 2], np.int32)
    np.testing.assert_array_equal(client.segmented_sum(x=x, idx=idx, num_segments=3), [3, 12, 6])
    np.testing.assert_array_equal(client.segmented_sum(x, idx, num_segments=3), [3, 12, 6])
    with pytest.raises(TypeError):
        client.segmented_sum(x, idx)
    with pytest.raises(TypeError):
        client.segmented_sum(x, idx, 3, bogus=1)


def test_input_conversions(client):
    """Non-contiguous, big-endian, Python lists, int64 idx and numpy-integer num_segments all go
    through; results equal those of the plain arrays."""
    rng = np.random.default_rng(2)
    idx = idx_from_lengths([5, 0, 6, 9], rng)
    base = rng.standard_normal((40, 3))
    x = base[::2]  # non-contiguous
    assert not x.flags.c_contiguous
    want = client.segmented_mean(np.ascontiguousarray(x), idx, 4)
    np.testing.assert_array_equal(client.segmented_mean(x, idx, 4), want)
    np.testing.assert_array_equal(client.segmented_mean(x.astype(">f8"), idx, 4), want)
    np.testing.assert_array_equal(client.segmented_mean(np.asfortranarray(x), idx.astype(np.int64), np.int64(4)), want)
    np.testing.assert_array_equal(client.segmented_mean(x.tolist(), idx.tolist(), 4), want)
    y = rng.standard_normal(4).astype(">f4")
    xf = x.astype(np.float32)
    got = client.segmented_mul(xf, y, idx, 4)
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, client.segmented_mul(xf, y.astype("<f4"), idx, 4))


def test_outputs_are_plain_arrays(client):
    idx = np.array([0, 1, 1], np.int32)
    out = client.segmented_sum(np.ones((3, 3)), idx, 2)
    assert out.flags.writeable and out.flags.aligned and out.flags.c_contiguous
    out += 1  # writable, owned by the caller
    np.testing.assert_array_equal(out, [[2, 2, 2], [3, 3, 3]])


def test_large_tensors(client):
    """Multi-megabyte bodies: sent from the arrays' buffers, read straight into the result."""
    rng = np.random.default_rng(3)
    n, s = 200_000, 50
    idx = rng.integers(0, s, n).astype(np.int32)
    v = rng.standard_normal((n, 3))
    m = rng.standard_normal((s, 3, 3))
    out = client.segmented_matvec(v, m, idx, s)
    assert max_rel_err(out, np.einsum("ijk,ij->ik", m[idx], v)) <= 1e-12
    g = rng.standard_normal((n, 3))
    gv, gm = client.segmented_matvec_backward(g, v, m, idx, s)
    ref = reference("segmented_matvec", "backward", {"g_out": g, "v": v, "m": m}, idx, s)
    assert max_rel_err(gv, ref["grad_v"]) <= 1e-12
    assert max_rel_err(gm, ref["grad_m"]) <= 1e-12


def test_determinism(client):
    rng = np.random.default_rng(4)
    idx = rng.integers(0, 7, 5000).astype(np.int32)
    x = rng.standard_normal((5000, 3)).astype(np.float32)
    first = client.segmented_rms_norm(x, idx, 7)
    for _ in range(5):
        np.testing.assert_array_equal(client.segmented_rms_norm(x, idx, 7), first)


def test_unsorted_idx_same_as_sorted(client):
    rng = np.random.default_rng(6)
    idx = idx_from_lengths([30, 10, 0, 20], rng, shuffle=False)
    x = rng.standard_normal((60, 3))
    perm = rng.permutation(60)
    a = client.segmented_sum(x, idx, 4)
    b = client.segmented_sum(x[perm], idx[perm], 4)
    assert max_rel_err(b, a) <= 1e-12


# ---- proto/API.md, Exact cases, compared with == in float64 ----


def test_golden_1_sum_forward(client):
    out = client.segmented_sum(np.array([[1, 2, 3], [4, 5, 6], [7, 8, 9]], float), np.array([0, 0, 1]), 2)
    np.testing.assert_array_equal(out, [[5, 7, 9], [7, 8, 9]])


def test_golden_2_dot(client):
    x = np.array([[1, 0, 0], [0, 2, 0], [0, 0, 3], [4, 0, 0]], float)
    y = np.array([[2, 3, 4], [5, 6, 7], [8, 9, 10], [11, 12, 13]], float)
    idx = np.array([0, 0, 1, 1], np.int32)
    np.testing.assert_array_equal(client.segmented_dot(x, y, idx, 2), [14, 74])
    gx, gy = client.segmented_dot_backward(np.array([1.0, 1.0]), x, y, idx, 2)
    np.testing.assert_array_equal(gx, y)
    np.testing.assert_array_equal(gy, x)


def test_golden_3_sum_backward(client):
    out = client.segmented_sum_backward(np.array([3.5, -1.25]), None, np.array([0, 1, 1], np.int32), 2)
    np.testing.assert_array_equal(out, [3.5, -1.25, -1.25])


def test_golden_4_sum_double_backward(client):
    out = client.segmented_sum_double_backward(np.array([1.0, 2, 3, 4]), None, None, np.array([0, 0, 1, 1]), 2)
    np.testing.assert_array_equal(out, [3, 7])


def test_golden_5_sum_forward_scalar(client):
    out = client.segmented_sum(np.array([1.0, 2, 3, 4, 5, 6]), np.array([0, 0, 1, 1, 1, 2], np.int32), 3)
    np.testing.assert_array_equal(out, [3, 12, 6])


def test_golden_6_mean_empty_trailing_segment(client):
    out = client.segmented_mean(np.ones((3, 3)), np.array([0, 0, 1], np.int32), 3)
    np.testing.assert_array_equal(out, [[1, 1, 1], [1, 1, 1], [0, 0, 0]])


_X7 = np.array([[3, 4, 0], [0, 0, 0], [1, 2, 2], [0, 0, 0]], float)
_I7 = np.array([0, 0, 1, 2], np.int32)


def test_golden_7_rms_norm_forward(client):
    out = client.segmented_rms_norm(_X7, _I7, 4)
    np.testing.assert_array_equal(out, [np.sqrt(12.5), 3, 0, 0])
    assert out[0] == 3.5355339059327378


def test_golden_8_rms_norm_backward(client):
    out = client.segmented_rms_norm_backward(np.ones(4), _X7, _I7, 4)
    want = np.array([[0.4242640687119285, 0.565685424949238, 0], [0, 0, 0], [1 / 3, 2 / 3, 2 / 3], [0, 0, 0]])
    np.testing.assert_array_equal(out, want)  # zero-norm and empty rows: 0, not NaN


def test_golden_9_matvec_forward(client):
    m = np.array([[[1, 2, 0], [0, 1, 0], [0, 0, 1]]], float)
    out = client.segmented_matvec(np.array([[1.0, 0, 0]]), m, np.array([0], np.int32), 1)
    np.testing.assert_array_equal(out, [[1, 2, 0]])


def test_golden_10_matvec_backward(client):
    m = np.array([[[1, 2, 0], [0, 1, 0], [0, 0, 1]]], float)
    gv, gm = client.segmented_matvec_backward(np.array([[0.5, -1, 2]]), np.array([[1.0, 0, 0]]), m,
                                              np.array([0], np.int32), 1)
    np.testing.assert_array_equal(gm, [[[0.5, -1, 2], [0, 0, 0], [0, 0, 0]]])
    np.testing.assert_array_equal(gv, [[-1.5, -1, 2]])


@pytest.mark.parametrize("op,pass_,width", CASES)
def test_golden_11_n0(client, op, pass_, width):
    """N = 0, S = 5: zero-filled outputs of the right shapes."""
    args = make_args(op, pass_, width, np.zeros(0, np.int32), 5, "float64", np.random.default_rng(0))
    got = client.call(op, pass_, dict(args, idx=np.zeros(0, np.int32), num_segments=5))
    for k in _table.output_names(op, pass_):
        assert got[k].shape == shape_of(op, k, width, 0, 5)
        assert np.all(got[k] == 0)

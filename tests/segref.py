"""segref.py: the tests' float64 numpy reference of the 24 functions of proto/API.md (Formulas), written from the
formulas (independent of the C code, the server and the client), plus test data makers. The shape
tables (SHAPES, FORWARD_INPUTS, WIDTHS) come from the op table itself, proto/optable.json (generated
from core/ops.def and core/ops.c by scripts/gen_optable.py, checked by CTest optable_generated_files).
Shared by tests/http, tests/python and tests/hardening (their conftests put tests/ on sys.path)."""

import json
import os

import numpy as np

with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "proto", "optable.json"), encoding="utf-8") as _f:
    OPTABLE = json.load(_f)
# Every op and pass, in the table's order: what the tests that loop over functions parametrize on.
OPS = tuple(OPTABLE["ops"])
PASSES = tuple(OPTABLE["passes"])
_FORWARD = {fn["op"]: fn for fn in OPTABLE["functions"] if fn["pass"] == OPTABLE["passes"][0]}

# Shape kinds per (op, argument) of the forward (ops.h): E (N,)|(N,3) by layout, E3 (N,3),
# G (S,)|(S,3) by layout, G1 (S,), M (S,3,3); "out" is the forward's output.
SHAPES = {op: {**{i["name"]: i["shape"] for i in fn["inputs"]}, "out": fn["outputs"][0]["shape"]} for op, fn in _FORWARD.items()}
FORWARD_INPUTS = {op: tuple(i["name"] for i in fn["inputs"]) for op, fn in _FORWARD.items()}
WIDTHS = {op: ((3,) if fn["vec3_only"] else (1, 3)) for op, fn in _FORWARD.items()}


def shape_of(op, name, width, n, s):
    """Shape of an argument: g_out is shaped like out, gg_a like a, grad_a like a."""
    base = name
    if name.startswith("gg_"):
        base = name[3:]
    elif name.startswith("grad_"):
        base = name[5:]
    if base == "g_out":
        base = "out"
    kind = SHAPES[op][base]
    return {
        "E": (n,) if width == 1 else (n, 3),
        "E3": (n, 3),
        "G": (s,) if width == 1 else (s, 3),
        "G1": (s,),
        "G1F": (s,),
        "M": (s, 3, 3),
    }[kind]


def seg_sum(a, idx, s):
    out = np.zeros((s,) + a.shape[1:], dtype=np.float64)
    np.add.at(out, idx, a)
    return out


def counts(idx, s):
    return np.bincount(idx, minlength=s).astype(np.float64)


def rowdot(a, b):
    return (a * b).sum(-1) if a.ndim == 2 else a * b


def _col(v, like):
    """Per-row scalar v (N,) broadcast against like (N,) or (N,3)."""
    return v[:, None] if like.ndim == 2 else v


def _safe_div(a, c):
    """a / c, 0 where c == 0 (c broadcast along trailing dims)."""
    cc = c.reshape(c.shape + (1,) * (a.ndim - 1))
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(cc != 0, a / np.where(cc != 0, cc, 1), 0.0)


def _width(a):
    """prod of a's trailing shape: the values of one row."""
    return int(np.prod(a.shape[1:], dtype=np.int64))


def seg_arg(x, idx, s, is_max):
    """Per segment and column, the lowest element index holding the max (min) of x, a NaN beyond every
    number (the lowest NaN wins); -1 for an empty segment. Shape (S,) + x.shape[1:]."""
    cols = x.reshape(len(idx), _width(x))
    arg = np.full((s, cols.shape[1]), -1, dtype=np.int64)
    for i in range(len(idx)):
        a = arg[idx[i]]
        for k in range(cols.shape[1]):
            v = cols[i, k]
            if a[k] < 0:
                a[k] = i
                continue
            b = cols[a[k], k]
            if not np.isnan(b) and (np.isnan(v) or (v > b if is_max else v < b)):
                a[k] = i
    return arg.reshape((s,) + x.shape[1:])


def _at_arg(a, arg):
    """a[arg] per column (a (N,*F), arg (S,*F)), 0 where arg < 0."""
    cols, args = a.reshape(a.shape[0], _width(a)), arg.reshape(arg.shape[0], _width(arg))
    out = np.zeros(args.shape)
    for k in range(args.shape[1]):
        ok = args[:, k] >= 0
        out[ok, k] = cols[args[ok, k], k]
    return out.reshape(arg.shape)


def reference(op, pass_, a, idx, s):
    """Outputs {name: float64 array} of one function; a: inputs by name (gg_* may be absent)."""
    f = {k: np.asarray(v, dtype=np.float64) for k, v in a.items() if v is not None}
    idx = np.asarray(idx, dtype=np.int64)
    n = idx.shape[0]
    c = counts(idx, s)

    def gg(name, like_shape):
        return f.get(name, np.zeros(like_shape))

    def gg_x_rows():
        """gg_x of sum/mean double backward: zeros when omitted, shaped from x or g_out; None when
        neither says the layout (the caller then knows the width: fix_missing)."""
        if "gg_x" in f:
            return f["gg_x"]
        if "x" in f:
            return np.zeros(f["x"].shape)
        if "g_out" in f:
            return np.zeros((n,) + f["g_out"].shape[1:])
        return None

    if op == "segmented_sum":
        if pass_ == "forward":
            return {"out": seg_sum(f["x"], idx, s)}
        if pass_ == "backward":
            return {"grad_x": f["g_out"][idx]}
        rows = gg_x_rows()
        return {"grad_g_out": seg_sum(rows, idx, s) if rows is not None else None}
    if op == "segmented_mean":
        if pass_ == "forward":
            return {"out": _safe_div(seg_sum(f["x"], idx, s), c)}
        if pass_ == "backward":
            return {"grad_x": _safe_div(f["g_out"][idx], c[idx])}
        rows = gg_x_rows()
        return {"grad_g_out": _safe_div(seg_sum(rows, idx, s), c) if rows is not None else None}
    if op == "segmented_dot":
        x, y = f["x"], f["y"]
        if pass_ == "forward":
            return {"out": seg_sum(rowdot(x, y), idx, s)}
        g = f["g_out"][idx]
        if pass_ == "backward":
            return {"grad_x": _col(g, y) * y, "grad_y": _col(g, x) * x}
        ggx, ggy = gg("gg_x", x.shape), gg("gg_y", y.shape)
        return {
            "grad_g_out": seg_sum(rowdot(ggx, y) + rowdot(ggy, x), idx, s),
            "grad_x": _col(g, ggy) * ggy,
            "grad_y": _col(g, ggx) * ggx,
        }
    if op == "segmented_mul":
        x, y = f["x"], f["y"]
        ys = y[idx]
        if pass_ == "forward":
            return {"out": x * _col(ys, x)}
        g = f["g_out"]
        if pass_ == "backward":
            return {"grad_x": g * _col(ys, g), "grad_y": seg_sum(rowdot(g, x), idx, s)}
        ggx, ggy = gg("gg_x", x.shape), gg("gg_y", y.shape)
        return {
            "grad_g_out": ggx * _col(ys, x) + _col(ggy[idx], x) * x,
            "grad_x": _col(ggy[idx], g) * g,
            "grad_y": seg_sum(rowdot(ggx, g), idx, s),
        }
    if op == "segmented_rms_norm":
        x = f["x"]
        r = np.sqrt(_safe_div(seg_sum(rowdot(x, x), idx, s), c))
        cr = c * r
        with np.errstate(divide="ignore"):
            inv = np.where(cr != 0, 1.0 / np.where(cr != 0, cr, 1), 0.0)
        if pass_ == "forward":
            return {"out": r}
        g = f["g_out"]
        if pass_ == "backward":
            return {"grad_x": _col((g * inv)[idx], x) * x}
        ggx = gg("gg_x", x.shape)
        q = seg_sum(rowdot(ggx, x), idx, s)
        return {
            "grad_g_out": q * inv,
            "grad_x": _col((g * inv)[idx], x) * ggx - _col((g * inv**3 * c * q)[idx], x) * x,
        }
    if op in ("segmented_max", "segmented_min"):
        x = f["x"]
        arg = seg_arg(x, idx, s, op == "segmented_max")
        if pass_ == "forward":
            return {"out": _at_arg(x, arg)}
        if pass_ == "backward":
            gx = np.zeros(x.shape)
            w = _width(x)
            cols, args, g = gx.reshape(n, w), arg.reshape(s, w), f["g_out"].reshape(s, w)
            for sg in range(s):
                for k in range(args.shape[1]):
                    if args[sg, k] >= 0:
                        cols[args[sg, k], k] = g[sg, k]
            return {"grad_x": gx}
        return {"grad_g_out": _at_arg(gg("gg_x", x.shape), arg), "grad_x": np.zeros(x.shape)}
    if op == "segmented_matvec":
        v, m = f["v"], f["m"]
        ms = m[idx] if n else np.zeros((0, 3, 3))
        if pass_ == "forward":
            return {"out": np.einsum("ijk,ij->ik", ms, v)}
        g = f["g_out"]
        if pass_ == "backward":
            return {"grad_v": np.einsum("ijk,ik->ij", ms, g), "grad_m": seg_sum(np.einsum("ij,ik->ijk", v, g), idx, s)}
        ggv, ggm = gg("gg_v", v.shape), gg("gg_m", m.shape)
        ggms = ggm[idx] if n else np.zeros((0, 3, 3))
        return {
            "grad_g_out": np.einsum("ijk,ij->ik", ms, ggv) + np.einsum("ijk,ij->ik", ggms, v),
            "grad_v": np.einsum("ijk,ik->ij", ggms, g),
            "grad_m": seg_sum(np.einsum("ij,ik->ijk", ggv, g), idx, s),
        }
    raise KeyError(op)


def fix_missing(op, pass_, out, idx, s, width):
    """Outputs the reference left as None (cotangent absent) are zeros of the right shape."""
    n = len(idx)
    return {k: (np.zeros(shape_of(op, k, width, n, s)) if v is None else v) for k, v in out.items()}


def idx_from_lengths(lengths, rng, shuffle=True):
    idx = np.repeat(np.arange(len(lengths), dtype=np.int32), lengths)
    if shuffle:
        rng.shuffle(idx)
    return idx


def max_rel_err(got, ref):
    got = np.asarray(got, dtype=np.float64)
    ref = np.asarray(ref, dtype=np.float64)
    assert got.shape == ref.shape, f"shape {got.shape} != reference {ref.shape}"
    if ref.size == 0:
        return 0.0
    return float(np.max(np.abs(got - ref) / np.maximum(np.abs(ref), 1.0)))

"""reference.py: a float64 numpy reference of SPEC §2's formulas, written from the SPEC alone
(independent of the C code), and random inputs for every function."""
import numpy as np


def _segsum(a, idx, S):
    out = np.zeros((S,) + a.shape[1:], np.float64)
    np.add.at(out, idx, a)
    return out


def _dot(a, b):
    return (a * b).sum(-1) if a.ndim == 2 else a * b


def _bc(v, like):
    """Per-element scalar v (N,) broadcast against like ((N,) or (N,3))."""
    return v[:, None] if like.ndim == 2 else v


def reference(op, pas, a, idx, S):
    """Outputs {name: float64 array} of function (op, pass) on inputs a (a dict of float64
    arrays; a missing cotangent means zeros)."""
    idx = np.asarray(idx, np.int64)
    N = idx.shape[0]
    c = np.bincount(idx, minlength=S).astype(np.float64)
    g = a.get
    if op == "segmented_sum":
        if pas == "forward":
            return {"out": _segsum(a["x"], idx, S)}
        if pas == "backward":
            return {"grad_x": a["g_out"][idx]}
        like = g("gg_x") if g("gg_x") is not None else g("x")
        w = (3,) if (like is not None and like.ndim == 2) or (g("g_out") is not None and g("g_out").ndim == 2) else ()
        gg = g("gg_x") if g("gg_x") is not None else np.zeros((N,) + w)
        return {"grad_g_out": _segsum(gg, idx, S)}
    if op == "segmented_dot":
        x, y = a["x"], a["y"]
        if pas == "forward":
            return {"out": _segsum(_dot(x, y), idx, S)}
        go = a["g_out"][idx]
        if pas == "backward":
            return {"grad_x": _bc(go, y) * y, "grad_y": _bc(go, x) * x}
        ggx = g("gg_x") if g("gg_x") is not None else np.zeros_like(x)
        ggy = g("gg_y") if g("gg_y") is not None else np.zeros_like(y)
        return {"grad_g_out": _segsum(_dot(ggx, y) + _dot(ggy, x), idx, S),
                "grad_x": _bc(go, ggy) * ggy, "grad_y": _bc(go, ggx) * ggx}
    if op == "segmented_mul":
        x, y = a["x"], a["y"]
        ys = _bc(y[idx], x)
        if pas == "forward":
            return {"out": x * ys}
        gout = a["g_out"]
        if pas == "backward":
            return {"grad_x": gout * ys, "grad_y": _segsum(_dot(gout, x), idx, S)}
        ggx = g("gg_x") if g("gg_x") is not None else np.zeros_like(x)
        ggy = g("gg_y") if g("gg_y") is not None else np.zeros_like(y)
        ggys = _bc(ggy[idx], x)
        return {"grad_g_out": ggx * ys + ggys * x, "grad_x": ggys * gout, "grad_y": _segsum(_dot(ggx, gout), idx, S)}
    if op == "segmented_mean":
        inv = np.where(c > 0, 1.0 / np.where(c > 0, c, 1), 0.0)
        if pas == "forward":
            s = _segsum(a["x"], idx, S)
            return {"out": s * _bc(inv, s)}
        if pas == "backward":
            go = a["g_out"]
            return {"grad_x": go[idx] * _bc(inv[idx], go[idx])}
        like = g("gg_x") if g("gg_x") is not None else (g("x") if g("x") is not None else None)
        vec = (like is not None and like.ndim == 2) or (g("g_out") is not None and g("g_out").ndim == 2)
        gg = g("gg_x") if g("gg_x") is not None else np.zeros((N, 3) if vec else (N,))
        s = _segsum(gg, idx, S)
        return {"grad_g_out": s * _bc(inv, s)}
    if op == "segmented_rms_norm":
        x = a["x"]
        sq = _segsum((x * x).sum(-1), idx, S)
        r = np.sqrt(np.where(c > 0, sq / np.where(c > 0, c, 1), 0.0))
        if pas == "forward":
            return {"out": r}
        cr = c * r
        inv = np.where(cr != 0, 1.0 / np.where(cr != 0, cr, 1), 0.0)
        go = a["g_out"]
        if pas == "backward":
            return {"grad_x": (go[idx] * inv[idx])[:, None] * x}
        ggx = g("gg_x") if g("gg_x") is not None else np.zeros_like(x)
        q = _segsum((ggx * x).sum(-1), idx, S)
        gx = (go[idx] * inv[idx])[:, None] * ggx - (go[idx] * inv[idx] ** 3 * c[idx] * q[idx])[:, None] * x
        return {"grad_g_out": q * inv, "grad_x": gx}
    if op == "segmented_matvec":
        v, m = a["v"], a["m"]
        ms = m[idx]
        if pas == "forward":
            return {"out": np.einsum("ijk,ij->ik", ms, v)}
        gout = a["g_out"]
        if pas == "backward":
            return {"grad_v": np.einsum("ijk,ik->ij", ms, gout),
                    "grad_m": _segsum(np.einsum("ij,ik->ijk", v, gout), idx, S)}
        ggv = g("gg_v") if g("gg_v") is not None else np.zeros_like(v)
        ggm = g("gg_m") if g("gg_m") is not None else np.zeros_like(m)
        return {"grad_g_out": np.einsum("ijk,ij->ik", ms, ggv) + np.einsum("ijk,ij->ik", ggm[idx], v),
                "grad_v": np.einsum("ijk,ik->ij", ggm[idx], gout),
                "grad_m": _segsum(np.einsum("ij,ik->ijk", ggv, gout), idx, S)}
    raise KeyError(op)


def shape_of(shape_text, width, N, S):
    """Concrete shape for a /v1/info shape text like '(N,) or (N,3)'."""
    t = shape_text.replace(" ", "")
    lead = N if t.startswith("(N") else S
    if t in ("(N,)or(N,3)", "(S,)or(S,3)"):
        return (lead,) if width == 1 else (lead, 3)
    if t in ("(N,3)", "(S,3)"):
        return (lead, 3)
    if t in ("(N,)", "(S,)"):
        return (lead,)
    if t == "(S,3,3)":
        return (S, 3, 3)
    raise ValueError(shape_text)


def random_case(rng, fn_info, width, N=37, S=7, omit_optional=False):
    """omit_optional leaves out the cotangents (they then mean zeros)."""
    """Random float64 inputs for one function of /v1/info, an unsorted idx with an empty segment."""
    idx = rng.integers(0, S - 1, size=N).astype(np.int32)  # segment S-1 stays empty
    idx[rng.integers(0, N)] = 0
    args = {}
    for inp in fn_info["inputs"]:
        name = inp["name"]
        if name in ("idx", "num_segments"):
            continue
        if omit_optional and inp["use"] == "cotangent":
            continue
        args[name] = rng.standard_normal(shape_of(inp["shape"], width, N, S))
    return args, idx, S

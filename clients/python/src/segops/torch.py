"""segops.torch: the six segment ops on torch tensors, differentiable to second order; the
forward, the backward and the double backward each run on the segops server (SPEC §6).

    import segops.torch as st
    e = st.segmented_sum(st.segmented_dot(x, x, idx, S), ...)
Tensors go to the server as CPU numpy arrays and results come back on the first input's
device. idx and num_segments receive no gradient. A third derivative raises (the double
backward is not itself differentiable)."""

import numpy as np
import torch
from torch.autograd.function import once_differentiable

from . import _table, default_client

__all__ = [
    "segmented_sum",
    "segmented_dot",
    "segmented_mul",
    "segmented_mean",
    "segmented_rms_norm",
    "segmented_matvec",
]


def _build_plans():
    """Per op, from the table: forward inputs, the forward inputs the backward reads (the
    backward's differentiable inputs besides g_out), and the double backward's outputs."""
    plans = {}
    for op, (fwd, _) in _table.OPS.items():
        bwd_in, bwd_out = _table.FUNCS[(op, "backward")]
        reads = tuple(n for n, use in bwd_in if n != "g_out" and use == _table.REQ)
        dbl_out = _table.output_names(op, "double_backward")
        # The double backward returns one gradient per differentiable input of the backward.
        assert dbl_out == ("grad_g_out",) + tuple("grad_" + n for n in reads), op
        assert bwd_out == tuple("grad_" + n for n in fwd), op
        plans[op] = (fwd, reads)
    return plans


_PLANS = _build_plans()


def _np(t):
    t = t.detach()
    if t.device.type != "cpu":
        t = t.cpu()
    return t.resolve_conj().resolve_neg().numpy()


def _torch(a, device):
    t = torch.from_numpy(a)
    return t if device.type == "cpu" else t.to(device, non_blocking=False)


class _Spec:
    """What every pass of one op call shares (not a tensor: autograd ignores it)."""

    __slots__ = ("client", "op", "idx", "num_segments")

    def __init__(self, client, op, idx, num_segments):
        self.client = client
        self.op = op
        self.idx = idx
        self.num_segments = num_segments

    def run(self, pass_, args, outputs=None):
        args["idx"] = self.idx
        args["num_segments"] = self.num_segments
        return self.client.call(self.op, pass_, args, outputs=outputs)


class _Forward(torch.autograd.Function):
    @staticmethod
    def forward(ctx, sp, *inputs):
        fwd, reads = _PLANS[sp.op]
        ctx.set_materialize_grads(False)
        ctx.sp = sp
        out = sp.run("forward", {n: _np(t) for n, t in zip(fwd, inputs)})["out"]
        ctx.save_for_backward(*(t for n, t in zip(fwd, inputs) if n in reads))
        return _torch(out, inputs[0].device)

    @staticmethod
    def backward(ctx, g_out):
        sp = ctx.sp
        fwd, _ = _PLANS[sp.op]
        need = ctx.needs_input_grad[1:]
        if g_out is None or not any(need):
            return (None,) * (1 + len(fwd))
        wanted = tuple(i for i, nd in enumerate(need) if nd)
        grads = _Backward.apply(sp, wanted, g_out, *ctx.saved_tensors)
        res = [None] * len(fwd)
        for i, g in zip(wanted, grads):
            res[i] = g
        return (None, *res)


class _Backward(torch.autograd.Function):
    """The server's backward as a function of (g_out, the forward inputs it reads), so that
    autograd can differentiate it once more through the server's double backward."""

    @staticmethod
    def forward(ctx, sp, wanted, g_out, *reads_t):
        fwd, reads = _PLANS[sp.op]
        ctx.set_materialize_grads(False)
        ctx.sp = sp
        ctx.wanted = wanted
        args = {"g_out": _np(g_out)}
        args.update((n, _np(t)) for n, t in zip(reads, reads_t))
        names = ["grad_" + fwd[i] for i in wanted]
        res = sp.run("backward", args, names)
        ctx.save_for_backward(g_out, *reads_t)
        return tuple(_torch(res[n], g_out.device) for n in names)

    @staticmethod
    @once_differentiable
    def backward(ctx, *ggs):
        sp = ctx.sp
        fwd, reads = _PLANS[sp.op]
        need = ctx.needs_input_grad[2:]  # (g_out, *reads)
        if not any(need) or all(g is None for g in ggs):
            return (None, None) + (None,) * len(need)
        g_out, *reads_t = ctx.saved_tensors
        args = {}
        for i, gg in zip(ctx.wanted, ggs):
            if gg is not None:  # autograd's None cotangent: zeros, not sent
                args["gg_" + fwd[i]] = _np(gg)
        args["g_out"] = _np(g_out)
        args.update((n, _np(t)) for n, t in zip(reads, reads_t))
        grad_names = ("grad_g_out",) + tuple("grad_" + n for n in reads)
        names = [n for n, nd in zip(grad_names, need) if nd]
        res = sp.run("double_backward", args, names)
        dev = g_out.device
        return (None, None) + tuple(_torch(res[n], dev) if nd else None for n, nd in zip(grad_names, need))


def _idx_np(idx):
    if isinstance(idx, torch.Tensor):
        return _np(idx)
    return np.asarray(idx)


def _apply(op, inputs, idx, num_segments, client):
    if isinstance(num_segments, torch.Tensor):
        num_segments = num_segments.item()
    sp = _Spec(client or default_client(), op, _idx_np(idx), num_segments)
    return _Forward.apply(sp, *inputs)


def segmented_sum(x, idx, num_segments, *, client=None):
    """out[s] = sum of x[i] over idx[i] == s; x (N,) or (N,3) -> (S,) or (S,3)."""
    return _apply("segmented_sum", (x,), idx, num_segments, client)


def segmented_dot(x, y, idx, num_segments, *, client=None):
    """out[s] = sum of dot(x[i], y[i]) over idx[i] == s; x, y (N,) or (N,3) -> (S,)."""
    return _apply("segmented_dot", (x, y), idx, num_segments, client)


def segmented_mul(x, y, idx, num_segments, *, client=None):
    """out[i] = x[i] * y[idx[i]]; x (N,) or (N,3), y (S,) -> like x."""
    return _apply("segmented_mul", (x, y), idx, num_segments, client)


def segmented_mean(x, idx, num_segments, *, client=None):
    """out[s] = mean of x[i] over idx[i] == s (0 for an empty segment)."""
    return _apply("segmented_mean", (x,), idx, num_segments, client)


def segmented_rms_norm(x, idx, num_segments, *, client=None):
    """out[s] = sqrt(mean of |x[i]|^2 over idx[i] == s); x (N,3) -> (S,)."""
    return _apply("segmented_rms_norm", (x,), idx, num_segments, client)


def segmented_matvec(v, m, idx, num_segments, *, client=None):
    """out[i] = m[idx[i]]^T v[i]; v (N,3), m (S,3,3) -> (N,3)."""
    return _apply("segmented_matvec", (v, m), idx, num_segments, client)

"""_torch_eager.py: the three levels of derivatives for eager calls outside torch.compile and
torch.func: autograd.Functions that run each function's body (the same as the custom op's,
_torch_ops.IMPLS) directly, without the custom op's dispatch, which cost a small call more
than the round trip to the server. The gradient plumbing is _torch_func's (forward_grads and
backward_grads, over _torch_ops' forward_vjp and backward_vjp), so the values and the rules
(what is saved, what is asked for, no third derivative) are the custom ops'."""

import torch

from . import _table, _torch_ops
from ._torch_func import backward_grads, forward_grads

IMPLS = _torch_ops.IMPLS
# per op: how many inputs its forward takes, and the positions of those its backward reads
_FWD = {op: (len(fwd), tuple(fwd.index(n) for n in _torch_ops.READS[op])) for op, (fwd, _) in _table.OPS.items()}
# per op: how many tensors (g_out, then the forward's inputs) its backward takes
_BWD_K = {op: len(_torch_ops.FNS[(op, "backward")].ins) for op in _table.OPS}


class _Double(torch.autograd.Function):
    @staticmethod
    def forward(ctx, op, *args):
        return IMPLS[(op, "double_backward")](*args)

    @staticmethod
    def backward(ctx, *grads):
        _torch_ops.no_third()


def _double(op):
    return lambda *a: _Double.apply(op, *a)


class _Backward(torch.autograd.Function):
    @staticmethod
    def forward(ctx, op, *args):
        k = _BWD_K[op]
        ctx.op = op
        ctx.s_key_want = args[k + 1 : k + 4]
        ctx.save_for_backward(*args[:k], args[k])
        ctx.set_materialize_grads(False)
        return IMPLS[(op, "backward")](*args)

    @staticmethod
    def backward(ctx, *ggs):
        return backward_grads(ctx, ggs, _double(ctx.op))


def _backward(op):
    return lambda *a: _Backward.apply(op, *a)


class _Forward(torch.autograd.Function):
    @staticmethod
    def forward(ctx, op, *args):
        k, reads = _FWD[op]
        ctx.op = op
        ctx.s_key = args[k + 1 :]
        ctx.save_for_backward(args[k], *[args[i] for i in reads])
        ctx.set_materialize_grads(False)
        return IMPLS[(op, "forward")](*args)

    @staticmethod
    def backward(ctx, g_out):
        return forward_grads(ctx, g_out, _backward(ctx.op))


def forward(op, *args):
    """The forward of op, eagerly: (*inputs, idx, s, key)."""
    return _Forward.apply(op, *args)

"""_torch_eager.py: the three levels of derivatives for eager calls outside torch.compile and
torch.func: autograd.Functions that run each function's body (the same as the custom op's,
_torch_ops.IMPLS) directly, without the custom op's dispatch, which cost a small call more
than the round trip to the server. The rules (what is saved, what is asked for, how the next
level's call is made; _torch_ops.Rules) are the custom ops' and _torch_func's, so are the values.

Each op has its own three Function classes (made once, below), so that a call carries no op name
and looks nothing up: the forward of a call is `FORWARD[op](*inputs, idx, s, key)`. The contexts
are filled as save_for_backward and set_materialize_grads fill them (ctx.to_save,
ctx.materialize_grads), without the two Python calls. A call whose key is a segops.Client itself
(not a subclass) on the C extension goes from the Function's forward straight to the extension's
run_torch; any other key takes the body, which resolves it."""

from operator import itemgetter

import torch

from . import _table, _torch_ops
from .client import FN_IDS, Client

IMPLS = _torch_ops.IMPLS
_fill_unasked = _torch_ops.fill_unasked
_no_third = _torch_ops.no_third


def _classes(op):
    """(forward, backward) of op as the `apply` of its Function classes."""
    rules = _torch_ops.RULES[op]
    k_fwd, k_bwd = rules.k_fwd, rules.k_bwd
    k_dbl = len(_torch_ops.FNS[(op, "double_backward")].ins)
    fwd_body, bwd_body, dbl_body = (IMPLS[(op, p)] for p in ("forward", "backward", "double_backward"))
    fwd_id, bwd_id, dbl_id = (FN_IDS[(op, p)] for p in ("forward", "backward", "double_backward"))
    bwd_every, dbl_every = ((1 << len(_table.FUNCS[(op, p)][1])) - 1 for p in ("backward", "double_backward"))
    saved_of = itemgetter(*rules.saved_at) if len(rules.saved_at) > 1 else None  # else idx alone
    fwd_tail, bwd_tail = (None, None, None), (None,) * 4  # idx, s, key (and want): no gradient

    class _Double(torch.autograd.Function):
        @staticmethod
        def forward(ctx, *args):  # (*tensors, idx, s, key, want)
            c = args[k_dbl + 2]
            if c.__class__ is not Client:
                c = _torch_ops.resolve_client(c)
            if c.__class__ is Client and c._nc is not None:
                want = args[k_dbl + 3]
                res = c._nc.run_torch(dbl_id, args[:k_dbl], args[k_dbl], args[k_dbl + 1], want)
                if res is not NotImplemented:
                    return res if want == dbl_every else _fill_unasked(res, args[:k_dbl])
            return dbl_body(*args)

        @staticmethod
        def backward(ctx, *grads):
            _no_third()

    double = _Double.apply

    class _Backward(torch.autograd.Function):
        @staticmethod
        def forward(ctx, *args):  # (*tensors, idx, s, key, want)
            ctx.s_key_want = s_key_want = args[k_bwd + 1 : k_bwd + 4]
            ctx.to_save = args[: k_bwd + 1]  # the tensors, then idx (save_for_backward)
            ctx.materialize_grads = False
            s, c, want = s_key_want
            if c.__class__ is not Client:
                c = _torch_ops.resolve_client(c)
            if c.__class__ is Client and c._nc is not None:
                res = c._nc.run_torch(bwd_id, args[:k_bwd], args[k_bwd], s, want)
                if res is not NotImplemented:
                    return res if want == bwd_every else _fill_unasked(res, args[:k_bwd])
            return bwd_body(*args)

        @staticmethod
        def backward(ctx, *ggs):
            return rules.backward_vjp(double, ggs, ctx.needs_input_grad, ctx.saved_tensors, *ctx.s_key_want) + bwd_tail

    backward = _Backward.apply

    class _Forward(torch.autograd.Function):
        @staticmethod
        def forward(ctx, *args):  # (*inputs, idx, s, key)
            ctx.s_key = s_key = args[k_fwd + 1 :]
            ctx.to_save = saved_of(args) if saved_of else (args[k_fwd],)  # idx, then what the backward reads
            ctx.materialize_grads = False
            c = s_key[1]
            if c.__class__ is not Client:
                c = _torch_ops.resolve_client(c)
            if c.__class__ is Client and c._nc is not None:  # the forward has one output
                res = c._nc.run_torch(fwd_id, args[:k_fwd], args[k_fwd], s_key[0], 1)
                if res is not NotImplemented:
                    return res
            return fwd_body(*args)

        @staticmethod
        def backward(ctx, g_out):
            return rules.forward_vjp(backward, g_out, ctx.needs_input_grad, ctx.saved_tensors, *ctx.s_key) + fwd_tail

    return _Forward.apply, backward


FORWARD, BACKWARD = {}, {}
for _op in _table.OPS:
    FORWARD[_op], BACKWARD[_op] = _classes(_op)


def forward(op, *args):
    """The forward of op, eagerly: (*inputs, idx, s, key)."""
    return FORWARD[op](*args)

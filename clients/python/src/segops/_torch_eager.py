"""_torch_eager.py: the three levels of derivatives for eager calls outside torch.compile and
torch.func: autograd.Functions that run each function's body (the same as the custom op's,
_torch_ops.IMPLS) directly, without the custom op's dispatch, which cost a small call more
than the round trip to the server. The gradient plumbing is that of _torch_ops' forward_vjp and
backward_vjp (the custom ops' and _torch_func's) with its lookups done once per op, so the values
and the rules (what is saved, what is asked for, no third derivative) are the custom ops'.

Each op has its own three Function classes (made once, below), so that a call carries no op name
and looks nothing up: the forward of a call is `FORWARD[op](*inputs, idx, s, key)`. The contexts
are filled as save_for_backward and set_materialize_grads fill them (ctx.to_save,
ctx.materialize_grads), without the two Python calls. A call whose key is a segops.Client itself
(not a subclass) on the C extension goes from the Function's forward straight to the extension's
run_torch; any other key takes the body, which resolves it."""

import torch

from operator import itemgetter

from . import _table, _torch_ops
from .client import FN_IDS, Client

IMPLS = _torch_ops.IMPLS
_fill_unasked = _torch_ops.fill_unasked
_no_third = _torch_ops.no_third


def _classes(op):
    """(forward, backward) of op as the `apply` of its Function classes."""
    fwd_names = _table.OPS[op][0]
    k_fwd = len(fwd_names)
    reads = _torch_ops.READS[op]  # the forward inputs the backward reads, saved after idx
    read_at = tuple(fwd_names.index(n) for n in reads)
    bwd_names = _torch_ops.FNS[(op, "backward")].ins  # g_out, then the forward's inputs
    k_bwd = len(bwd_names)
    fwd_body, bwd_body, dbl_body = (IMPLS[(op, p)] for p in ("forward", "backward", "double_backward"))
    fwd_id, bwd_id, dbl_id = (FN_IDS[(op, p)] for p in ("forward", "backward", "double_backward"))
    bwd_every = (1 << len(_table.FUNCS[(op, "backward")][1])) - 1
    dbl_names = _torch_ops.FNS[(op, "double_backward")].ins
    k_dbl, dbl_every = len(dbl_names), (1 << len(_table.FUNCS[(op, "double_backward")][1])) - 1
    # what the forward saves: idx, then the inputs the backward reads
    saved_of = itemgetter(k_fwd, *read_at) if read_at else None
    fwd_tail, bwd_tail = (None, None, None), (None,) * 4  # idx, s, key (and want): no gradient
    fwd_none, bwd_none = (None,) * (k_fwd + 3), (None,) * (k_bwd + 4)
    plan = _torch_ops._PLANS[op]
    one_fwd, one_dbl = plan.one_fwd, plan.one_dbl
    # The backward's tensor arguments from the forward's context: -2 g_out, -1 none (not read), or
    # the position among the saved inputs.
    bwd_from = tuple(-2 if n == "g_out" else reads.index(n) if n in reads else -1 for n in bwd_names)
    # The double backward's outputs (grad_g_out, then grad_<a> of the inputs the backward reads):
    # where each one's input sits among the backward's arguments; and for each of the backward's
    # arguments, which output is its gradient (-1: none).
    diff_at = tuple(bwd_names.index(d) if d in bwd_names else -1 for d in plan.diff)
    grad_of = tuple(plan.diff.index(n) if n in plan.diff else -1 for n in bwd_names)
    # The double backward's tensor arguments: (True, k) the cotangent of the backward's output k,
    # (False, i) the backward's argument i (saved; -1: none).
    gg_names = plan.gg_names
    dbl_from = tuple((True, gg_names.index(n)) if gg else (False, bwd_names.index(n) if n in bwd_names else -1)
                     for n, gg in plan.dbl_ins)

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
        def backward(ctx, *ggs):  # _torch_ops.backward_vjp, its lookups done once
            s, key, want = ctx.s_key_want
            needs = ctx.needs_input_grad
            mask = 0
            for j, at in enumerate(diff_at):
                if at >= 0 and needs[at]:
                    mask |= 1 << j
            if not mask:
                return bwd_none
            for b, g in enumerate(ggs):
                if g is not None and want >> b & 1:
                    break
            else:
                return bwd_none
            *saved, idx = ctx.saved_tensors
            args = [(ggs[i] if want >> i & 1 else None) if gg else saved[i] if i >= 0 else None for gg, i in dbl_from]
            res = double(*args, idx, s, key, mask)
            if one_dbl:
                res = (res,)
            return tuple([res[j] if j >= 0 and mask >> j & 1 else None for j in grad_of]) + bwd_tail

    backward = _Backward.apply

    class _Forward(torch.autograd.Function):
        @staticmethod
        def forward(ctx, *args):  # (*inputs, idx, s, key)
            ctx.s_key = s_key = args[k_fwd + 1 :]
            ctx.to_save = saved_of(args) if saved_of else (args[k_fwd],)
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
        def backward(ctx, g_out):  # _torch_ops.forward_vjp, its lookups done once
            need = ctx.needs_input_grad[:k_fwd]
            mask = 0
            for j, nd in enumerate(need):
                if nd:
                    mask |= 1 << j
            if g_out is None or not mask:
                return fwd_none
            idx, *saved = ctx.saved_tensors
            s, key = ctx.s_key
            args = [g_out if i == -2 else None if i < 0 else saved[i] for i in bwd_from]
            res = backward(*args, idx, s, key, mask)
            if one_fwd:
                res = (res,)
            return tuple([r if nd else None for r, nd in zip(res, need)]) + fwd_tail

    return _Forward.apply, backward


FORWARD, BACKWARD = {}, {}
for _op in _table.OPS:
    FORWARD[_op], BACKWARD[_op] = _classes(_op)


def forward(op, *args):
    """The forward of op, eagerly: (*inputs, idx, s, key)."""
    return FORWARD[op](*args)

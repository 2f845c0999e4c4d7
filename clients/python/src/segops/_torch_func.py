"""_torch_func.py: the same three levels of derivatives as autograd.Functions with
setup_context, used under torch.func's grad transforms (grad, vjp, jacrev, hessian), which do
not accept the autograd that torch.library registers on custom ops. Each level calls the same
custom ops (torch.ops.segops.*) and the same gradient plumbing as _torch_ops."""

import torch

from . import _table, _torch_ops


def backward_grads(ctx, ggs, double):
    """The backward of a backward Function (ctx: op, s_key_want, saved g_out/inputs then idx;
    argument 0 is op): the gradients of its arguments, by double(*args) = the double backward."""
    op = ctx.op
    names = _torch_ops.FNS[(op, "backward")].ins
    *saved, idx = ctx.saved_tensors
    s, key, want = ctx.s_key_want
    need = dict(zip(names, ctx.needs_input_grad[1 : 1 + len(names)]))
    grads = _torch_ops.backward_vjp(op, double, ggs, want, need, dict(zip(names, saved)), idx, s, key)
    return (None,) + grads + (None,) * 4


def forward_grads(ctx, g_out, backward):
    """The backward of a forward Function (ctx: op, s_key, saved idx then the inputs the backward
    reads; argument 0 is op), by backward(*args) = the backward function."""
    op = ctx.op
    fwd = _table.OPS[op][0]
    idx, *saved = ctx.saved_tensors
    s, key = ctx.s_key
    need = ctx.needs_input_grad[1 : 1 + len(fwd)]
    grads = _torch_ops.forward_vjp(op, backward, g_out, need, dict(zip(_torch_ops.READS[op], saved)), idx, s, key)
    return (None,) + grads + (None, None, None)


class _Double(torch.autograd.Function):
    generate_vmap_rule = True

    @staticmethod
    def forward(op, *args):
        return _torch_ops.OPS[(op, "double_backward")](*args)

    @staticmethod
    def setup_context(ctx, inputs, output):
        pass

    @staticmethod
    def backward(ctx, *grads):
        _torch_ops.no_third()


class _Backward(torch.autograd.Function):
    generate_vmap_rule = True

    @staticmethod
    def forward(op, *args):
        return _torch_ops.OPS[(op, "backward")](*args)

    @staticmethod
    def setup_context(ctx, inputs, output):
        op, args = inputs[0], inputs[1:]
        k = len(_torch_ops.FNS[(op, "backward")].ins)
        ctx.op = op
        ctx.s_key_want = args[k + 1 : k + 4]
        ctx.save_for_backward(*args[:k], args[k])
        ctx.set_materialize_grads(False)

    @staticmethod
    def backward(ctx, *ggs):
        return backward_grads(ctx, ggs, lambda *a: _Double.apply(ctx.op, *a))


class _Forward(torch.autograd.Function):
    generate_vmap_rule = True

    @staticmethod
    def forward(op, *args):
        return _torch_ops.OPS[(op, "forward")](*args)

    @staticmethod
    def setup_context(ctx, inputs, output):
        op, args = inputs[0], inputs[1:]
        fwd = _table.OPS[op][0]
        reads = _torch_ops.READS[op]
        named = dict(zip(fwd, args))
        ctx.op = op
        ctx.s_key = args[len(fwd) + 1 :]
        ctx.save_for_backward(args[len(fwd)], *(named[n] for n in reads))
        ctx.set_materialize_grads(False)

    @staticmethod
    def backward(ctx, g_out):
        return forward_grads(ctx, g_out, lambda *a: _Backward.apply(ctx.op, *a))


def forward(op, *args):
    """The forward of op under a torch.func grad transform: (*inputs, idx, s, key)."""
    return _Forward.apply(op, *args)

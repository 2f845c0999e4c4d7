"""_torch_func.py: the same three levels of derivatives as autograd.Functions with
setup_context, used under torch.func's grad transforms (grad, vjp, jacrev, hessian), which do
not accept the autograd that torch.library registers on custom ops. Each level calls the same
custom ops (torch.ops.segops.*) and the same rules (_torch_ops.Rules) as the custom ops'
registered autograd; argument 0 of each Function is the op's name."""

import torch

from . import _torch_ops

RULES = _torch_ops.RULES


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
        k = RULES[op].k_bwd
        ctx.op = op
        ctx.s_key_want = args[k + 1 : k + 4]
        ctx.save_for_backward(*args[: k + 1])
        ctx.set_materialize_grads(False)

    @staticmethod
    def backward(ctx, *ggs):
        op = ctx.op
        grads = RULES[op].backward_vjp(lambda *a: _Double.apply(op, *a), ggs, ctx.needs_input_grad[1:],
                                       ctx.saved_tensors, *ctx.s_key_want)
        return (None,) + grads + (None,) * 4


class _Forward(torch.autograd.Function):
    generate_vmap_rule = True

    @staticmethod
    def forward(op, *args):
        return _torch_ops.OPS[(op, "forward")](*args)

    @staticmethod
    def setup_context(ctx, inputs, output):
        op, args = inputs[0], inputs[1:]
        ctx.op = op
        ctx.s_key = args[RULES[op].k_fwd + 1 :]
        ctx.save_for_backward(*RULES[op].forward_saved(args))
        ctx.set_materialize_grads(False)

    @staticmethod
    def backward(ctx, g_out):
        op = ctx.op
        grads = RULES[op].forward_vjp(lambda *a: _Backward.apply(op, *a), g_out, ctx.needs_input_grad[1:],
                                      ctx.saved_tensors, *ctx.s_key)
        return (None,) + grads + (None,) * 3


def forward(op, *args):
    """The forward of op under a torch.func grad transform: (*inputs, idx, s, key)."""
    return _Forward.apply(op, *args)

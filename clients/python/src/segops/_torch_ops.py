"""_torch_ops.py: the 24 functions as torch.library custom ops `segops::<op>_<pass>`, each with
a fake (meta) implementation, a vmap rule, and autograd to second order: the forward's
backward calls the backward op, whose backward calls the double-backward op, whose backward
raises. torch.compile keeps every call opaque (one node per server call).

Schema of every op: the function's tensor arguments in the op table's order (cotangents and
arguments the formula does not read are `Tensor?`), `Tensor idx`, `SymInt num_segments`,
`str client` (a key that segops.torch resolves to a Client when the op runs), and for the
backward and double backward `int want`, a bit mask of the outputs to compute (bit k: output
k of the table); an output not asked for comes back as an empty tensor.
"""

from operator import itemgetter

import torch
import torch.utils.dlpack

from . import _ext, _table
from .client import FN_IDS, Client

NAMESPACE = "segops"
_FLOATS = (torch.float32, torch.float64)

# Set by segops.torch: client key -> Client, called when an op runs (not when it is traced).
resolve_client = None

if _ext.native is not None:
    # The extension reads CPU tensors through their own accessors and hands outputs over as DLPack
    # capsules (torch._C._from_dlpack takes a capsule; torch.utils.dlpack.from_dlpack wraps it).
    _ext.native.set_torch(torch.Tensor, (torch.float32, torch.float64, torch.int32, torch.int64),
                          getattr(torch._C, "_from_dlpack", torch.utils.dlpack.from_dlpack))


class _Fn:
    """One function: its op-table row and the shapes of its outputs."""

    def __init__(self, op, pass_):
        self.op, self.pass_ = op, pass_
        ins, self.outs = _table.FUNCS[(op, pass_)]
        self.ins = tuple(n for n, _ in ins)
        self.optional = tuple(use != _table.REQ for _, use in ins)
        self.has_want = pass_ != "forward"
        self.qualname = f"{NAMESPACE}::{op}_{pass_}"
        args = ", ".join(f"Tensor{'?' if o else ''} {n}" for n, o in zip(self.ins, self.optional))
        ret = "Tensor" if len(self.outs) == 1 else "(" + ", ".join(["Tensor"] * len(self.outs)) + ")"
        want = ", int want" if self.has_want else ""
        self.schema = f"({args}, Tensor idx, SymInt num_segments, str client{want}) -> {ret}"

    def split(self, args):
        """(tensors by name, idx, num_segments, client key, want mask)."""
        k = len(self.ins)
        named = dict(zip(self.ins, args[:k]))
        idx, s, client = args[k], args[k + 1], args[k + 2]
        want = args[k + 3] if self.has_want else 1
        return named, idx, s, client, want

    def out_shape(self, name, named, n, s):
        """Shape of output `name` given the call's tensors (some may be None)."""
        size = {"N": n, "S": s}
        if name == "out" or name == "grad_g_out":
            lead, src = _table.OUT_SHAPE[self.op]
            if name == "grad_g_out" and named.get("g_out") is not None:
                return tuple(named["g_out"].shape)
            if src is None:
                return (size[lead],)
            for cand in (src, "gg_" + src):
                if named.get(cand) is not None:
                    return (size[lead],) + tuple(named[cand].shape[1:])
            raise ValueError(f"{self.op} {self.pass_}: the shape of {name} needs {src} or gg_{src}")
        a = name[len("grad_") :]
        if named.get(a) is not None:
            return tuple(named[a].shape)
        # Only the sum and mean backward omit their x: grad_x is (N,) + g_out's trailing dims.
        g = named.get("g_out")
        if g is None:
            raise ValueError(f"{self.op} {self.pass_}: the shape of {name} needs {a} or g_out")
        return (size[_table.LEADS[self.op][a]],) + tuple(g.shape[1:])


FNS = {key: _Fn(*key) for key in _table.FUNCS}


def _first_float(named):
    for t in named.values():
        if t is not None:
            return t
    raise ValueError("no tensor argument")


def _to_host(tensors):
    """CPU copies of tensors (None kept): from a GPU into pinned memory, asynchronously, with one
    synchronization for all of them."""
    for t in tensors:
        if t is not None and not t.is_cpu:
            break
    else:
        return list(tensors)  # all on the CPU already (the common case): nothing to copy
    out, streams = [], set()
    for t in tensors:
        if t is None or t.device.type == "cpu":
            out.append(t)
            continue
        host = torch.empty(t.shape, dtype=t.dtype, pin_memory=torch.cuda.is_available() and t.is_cuda)
        host.copy_(t, non_blocking=True)
        out.append(host)
        if t.is_cuda:
            streams.add(torch.cuda.current_stream(t.device))
    for st in streams:
        st.synchronize()
    return out


def _from_np(a, device, cpu=None):
    """a as a tensor on device (cpu: whether device is the CPU, when the caller knows)."""
    t = torch.from_numpy(a)
    if cpu if cpu is not None else device.type == "cpu":
        return t
    if device.type == "cuda":
        t = t.pin_memory()  # from the caching host allocator, which keeps it until the copy ends
    return t.to(device, non_blocking=True)


_CLIENT_CALL = Client.call


def fill_unasked(res, tensors):
    """Outputs not asked for (None from the extension) as empty tensors, as the schema returns them
    (of the dtype of the first of the call's tensors that is given)."""
    ref = next(t for t in tensors if t is not None)
    return tuple(torch.empty(0, dtype=ref.dtype) if r is None else r for r in res)


def _make_impl(fn):
    op, pass_, outs = fn.op, fn.pass_, fn.outs
    k = len(fn.ins)
    names = fn.ins + ("idx",)
    has_want = fn.has_want
    fn_id = FN_IDS[(op, pass_)]
    every = (1 << len(outs)) - 1

    def ask(want):
        """The outputs to ask for (None: all of them)."""
        o = tuple(o for b, o in enumerate(outs) if want >> b & 1)
        return None if len(o) == len(outs) else o

    asked = {w: ask(w) for w in range(1 << len(outs))}

    def impl(*args):
        s, key = args[k + 1], args[k + 2]
        want = args[k + 3] if has_want else 1
        client = key if key.__class__ is Client else resolve_client(key)  # an eager call carries its Client
        # A subclass that overrides call() sees every call (through the numpy path below).
        nc = client._nc if type(client).call is _CLIENT_CALL else None
        if nc is not None:
            # The extension: CPU tensors read in place, outputs as tensors viewing the client's
            # memory (no copy either way); NotImplemented when a tensor is on a device.
            res = nc.run_torch(fn_id, args[:k], args[k], s, want)
            if res is not NotImplemented:
                return res if want == every else fill_unasked(res, args[:k])
        given = args[: k + 1]  # the tensors by name, then idx
        for ref in given[:k]:
            if ref is not None:
                break
        else:
            raise ValueError("no tensor argument")
        host = _to_host(given)
        wire = {}
        for n, t in zip(names, host):
            if t is not None:
                # t.detach().resolve_conj().resolve_neg().numpy() in one call: a CPU tensor's
                # memory is shared (the resolves copy only a complex view with its bit set).
                wire[n] = t.numpy(force=True)
        wire["num_segments"] = int(s)
        outputs = asked[want] if want in asked else ask(want)
        if outputs is not None:
            outputs = list(outputs)
        res = client.call(op, pass_, wire, outputs=outputs)
        cpu = ref.is_cpu
        dev = ref.device
        if want == (1 << len(outs)) - 1:
            if len(outs) == 1:
                return _from_np(res[outs[0]], dev, cpu)
            return tuple([_from_np(res[o], dev, cpu) for o in outs])
        got = []
        for b, o in enumerate(outs):
            if want >> b & 1:
                got.append(_from_np(res[o], dev, cpu))
            else:
                got.append(torch.empty(0, dtype=ref.dtype, device=dev))
        return got[0] if len(got) == 1 else tuple(got)

    impl.__name__ = f"{fn.op}_{fn.pass_}"
    return impl


def _make_fake(fn):
    def fake(*args):
        named, idx, s, _, want = fn.split(args)
        ref = _first_float(named)
        n = idx.shape[0]
        got = []
        for k, o in enumerate(fn.outs):
            shape = fn.out_shape(o, named, n, s) if want >> k & 1 else (0,)
            got.append(ref.new_empty(shape))
        return got[0] if len(got) == 1 else tuple(got)

    return fake


def _make_vmap(fn, op_handle):
    """vmap as one server call: B problems of S segments each are one problem of B*S segments
    (a batched tensor's leading N or S dimension folds into the batch; idx gets b*S added), so a
    vmapped or jacrev'd call costs one round trip, not B."""
    names = fn.ins + ("idx",)

    def rule(info, in_dims, *args):
        named, idx, s, key, want = fn.split(args)
        b = info.batch_size
        dims = dict(zip(names, in_dims))
        n = idx.shape[dims["idx"] + 1 if dims["idx"] is not None else 0]
        flat = []
        for name in fn.ins:
            t, d = named[name], dims[name]
            if t is None:
                flat.append(None)
                continue
            t = t.movedim(d, 0) if d is not None else t.unsqueeze(0).expand(b, *t.shape)
            flat.append(t.reshape((b * t.shape[1],) + tuple(t.shape[2:])))
        i = idx.movedim(dims["idx"], 0) if dims["idx"] is not None else idx.unsqueeze(0).expand(b, n)
        off = torch.arange(b, dtype=i.dtype, device=i.device).unsqueeze(1) * s
        i = (i + off).reshape(b * n)
        extra = (want,) if fn.has_want else ()
        res = op_handle(*flat, i, b * s, key, *extra)
        res = (res,) if len(fn.outs) == 1 else res
        size = {"N": n, "S": s}
        out = []
        for k, (o, r) in enumerate(zip(fn.outs, res)):
            if want >> k & 1:
                out.append(r.reshape((b, size[_table.lead_of(fn.op, o)]) + tuple(r.shape[1:])))
            else:
                out.append(r.new_empty((b, 0)))
        if len(out) == 1:
            return out[0], 0
        return tuple(out), (0,) * len(out)

    return rule


def no_third():
    raise RuntimeError(
        "segops.torch: third derivative not supported: the double backward is the last "
        "derivative the server computes (differentiate at most twice)"
    )


# Each function's body: what its custom op runs, and what eager calls (_torch_eager) run directly.
IMPLS = {key: _make_impl(fn) for key, fn in FNS.items()}


def _register():
    ops = {}
    for key, fn in FNS.items():
        op = torch.library.custom_op(fn.qualname, IMPLS[key], mutates_args=(), schema=fn.schema)
        op.register_fake(_make_fake(fn))
        ops[key] = op
    for key, fn in FNS.items():
        if hasattr(torch.library, "register_vmap"):
            torch.library.register_vmap(fn.qualname, _make_vmap(fn, ops[key]))
    for op_name in _table.OPS:
        _autograd_forward(RULES[op_name], ops)
        _autograd_backward(RULES[op_name], ops)
        ops[(op_name, "double_backward")].register_autograd(lambda ctx, *grads: no_third())
    return ops


def reads_of(op_name):
    """The forward inputs the backward reads (saved for it); the others are passed as None."""
    bwd = FNS[(op_name, "backward")]
    return tuple(n for n, o in zip(bwd.ins, bwd.optional) if n != "g_out" and not o)


class Rules:
    """The derivative rules of one op, shared by the three ways a call is differentiated (the
    custom ops' registered autograd below, _torch_func's Functions under torch.func, _torch_eager's
    for eager calls), worked out once as positions: what the forward saves (idx, then the inputs
    the backward reads) and the backward (its tensors, then idx); which outputs the backward and
    the double backward are asked for (want: bit k, output k); how their arguments come from a
    context. A call's arguments are (*tensors, idx, num_segments, key[, want])."""

    def __init__(self, op):
        fwd = _table.OPS[op][0]
        bwd = FNS[(op, "backward")].ins  # g_out, then the forward's inputs
        dbl = FNS[(op, "double_backward")]
        reads = reads_of(op)
        self.op, self.k_fwd, self.k_bwd = op, len(fwd), len(bwd)
        # what the forward saves, by position among its arguments: idx, then the inputs the
        # backward reads; forward_saved(args) takes them
        self.saved_at = (self.k_fwd, *(fwd.index(n) for n in reads))
        get = itemgetter(*self.saved_at)
        self.forward_saved = get if reads else lambda args: (get(args),)
        self.no_fwd_grads, self.no_bwd_grads = (None,) * self.k_fwd, (None,) * self.k_bwd
        self.every_fwd = (1 << self.k_fwd) - 1
        # The backward's tensor arguments from the forward's context: -2 g_out, -1 none (not
        # read), or the position among the saved inputs.
        self.bwd_from = tuple(-2 if n == "g_out" else reads.index(n) if n in reads else -1 for n in bwd)
        # The double backward's outputs (grad_g_out, then grad_<a> of the inputs the backward
        # reads): where each one's input sits among the backward's arguments (-1: not there), and
        # for each of the backward's arguments, which output is its gradient (-1: none).
        diff = tuple(o[len("grad_") :] for o in dbl.outs)
        self.diff_at = tuple(bwd.index(d) if d in bwd else -1 for d in diff)
        self.grad_of = tuple(diff.index(n) if n in diff else -1 for n in bwd)
        # The double backward's tensor arguments: (True, k) the cotangent of the backward's output
        # k (grad_<forward input k>), (False, i) the backward's argument i (-1: none).
        gg = tuple("gg_" + a for a in fwd)
        self.dbl_from = tuple((True, gg.index(n)) if n in gg else (False, bwd.index(n) if n in bwd else -1)
                              for n in dbl.ins)
        self.one_dbl = len(dbl.outs) == 1

    def forward_vjp(self, call, g_out, needs, saved, s, key):
        """The gradients of the forward's inputs (None where needs[k] is false) by call = the
        backward; saved: idx, then the inputs the backward reads."""
        mask = 0
        for k in range(self.k_fwd):
            if needs[k]:
                mask |= 1 << k
        if g_out is None or not mask:
            return self.no_fwd_grads
        idx, *have = saved
        res = call(*[g_out if i == -2 else None if i < 0 else have[i] for i in self.bwd_from], idx, s, key, mask)
        if self.k_fwd == 1:
            return (res,)
        if mask == self.every_fwd:
            return tuple(res)
        return tuple([r if mask >> k & 1 else None for k, r in enumerate(res)])

    def backward_vjp(self, call, ggs, needs, saved, s, key, want):
        """The gradients of the backward's tensor arguments (g_out, then the forward's inputs;
        None where needs[k] is false or none flows) by call = the double backward, from ggs, the
        cotangents of the backward's outputs; saved: the backward's tensors, then idx; want: the
        outputs the backward computed (the others' cotangents are not read)."""
        mask = 0
        for j, at in enumerate(self.diff_at):
            if at >= 0 and needs[at]:
                mask |= 1 << j
        if not mask:
            return self.no_bwd_grads
        for b, g in enumerate(ggs):
            if g is not None and want >> b & 1:
                break
        else:
            return self.no_bwd_grads
        *have, idx = saved
        args = [(ggs[i] if want >> i & 1 else None) if gg else have[i] if i >= 0 else None for gg, i in self.dbl_from]
        res = call(*args, idx, s, key, mask)
        if self.one_dbl:
            res = (res,)
        return tuple([res[j] if j >= 0 and mask >> j & 1 else None for j in self.grad_of])


RULES = {op: Rules(op) for op in _table.OPS}


def _autograd_forward(rules, ops):
    backward_op = ops[(rules.op, "backward")]
    k = rules.k_fwd

    def setup_context(ctx, inputs, output):
        ctx.s_key = inputs[k + 1 :]
        ctx.save_for_backward(*rules.forward_saved(inputs))
        ctx.set_materialize_grads(False)

    def backward(ctx, g_out):
        return rules.forward_vjp(backward_op, g_out, ctx.needs_input_grad, ctx.saved_tensors, *ctx.s_key) + (None,) * 3

    ops[(rules.op, "forward")].register_autograd(backward, setup_context=setup_context)


def _autograd_backward(rules, ops):
    dbl_op = ops[(rules.op, "double_backward")]
    k = rules.k_bwd

    def setup_context(ctx, inputs, output):
        ctx.s_key_want = inputs[k + 1 : k + 4]
        ctx.save_for_backward(*inputs[: k + 1])
        ctx.set_materialize_grads(False)

    def backward(ctx, *ggs):
        grads = rules.backward_vjp(dbl_op, ggs, ctx.needs_input_grad, ctx.saved_tensors, *ctx.s_key_want)
        return grads + (None,) * 4

    ops[(rules.op, "backward")].register_autograd(backward, setup_context=setup_context)


OPS = _register()

"""test_torch_compile.py: segops.torch as torch.library custom ops, through the real daemon:
torch.compile(fullgraph=True) keeps every call one opaque node; gradcheck through compiled
functions (the first order through the compiled backward, the second order through a compiled
energy -> forces function and through Dynamo's graph); torch.func grad / vjp / jacrev /
jacrev(jacrev) / vmap against plain torch; forward-mode AD and a third derivative refused with
clear errors; client selection; friendly errors before anything is sent; CUDA tensors (skipped
without a GPU)."""

import re

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import segops  # noqa: E402
import segops.torch as st  # noqa: E402
from segref import FORWARD_INPUTS, OPTABLE, WIDTHS  # noqa: E402
from test_torch import make_inputs  # noqa: E402  (the same inputs as the eager tests)

OPS_W = [pytest.param(op, w, id=f"{op}-w{w}") for op in FORWARD_INPUTS for w in WIDTHS[op]]
GC = dict(eps=1e-6, atol=1e-8, rtol=1e-6)


@pytest.fixture(autouse=True)
def fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


@pytest.fixture
def default_to(client):
    """segops.torch's default client is the test daemon's for the test."""
    with st.use_client(client):
        yield client


class Recorder:
    """A torch.compile backend that keeps Dynamo's graph and runs it as it is."""

    def __init__(self):
        self.graphs = []

    def __call__(self, gm, example_inputs):
        self.graphs.append(gm)
        return gm.forward

    def targets(self):
        return [str(n.target) for g in self.graphs for n in g.graph.nodes if n.op == "call_function"]


class SpyClient(segops.Client):
    def __init__(self, url):
        super().__init__(url)
        self.log = []

    def call(self, op, pass_, args, *, outputs=None):
        self.log.append((op, pass_, outputs))
        return super().call(op, pass_, args, outputs=outputs)


# ---- torch.compile ----


def test_every_function_is_a_custom_op():
    names = {f"{fn['op']}_{fn['pass']}" for fn in OPTABLE["functions"]}
    assert len(names) == len(FORWARD_INPUTS) * len(OPTABLE["passes"])
    for n in names:
        assert hasattr(torch.ops.segops, n), n
    assert "Tensor idx, SymInt num_segments, str client" in str(torch.ops.segops.segmented_dot_backward.default._schema)


@pytest.mark.parametrize("op,w", OPS_W)
def test_compile_fullgraph_keeps_calls_opaque(default_to, op, w):
    ins, idx, s = make_inputs(op, w)
    fn = getattr(st, op)
    rec = Recorder()
    f = torch.compile(lambda *a: torch.sin(fn(*a, idx, s)) * 2, fullgraph=True, backend=rec)
    got = f(*ins)
    want = torch.sin(fn(*ins, idx, s)) * 2
    assert torch.equal(got, want)
    targets = rec.targets()
    assert targets.count(f"segops.{op}_forward.default") == 1, targets


def test_compile_inductor_forward_backward(default_to):
    """The default backend (inductor, through AOTAutograd): values and first-order gradients."""
    ins, idx, s = make_inputs("segmented_matvec", 3, seed=1)
    v, m = ins

    def model(v, m):
        return (st.segmented_matvec(v, m, idx, s) ** 2).sum()

    f = torch.compile(model, fullgraph=True)
    e = f(v, m)
    gv, gm = torch.autograd.grad(e, (v, m))
    v2, m2 = (t.detach().clone().requires_grad_() for t in ins)
    e2 = model(v2, m2)
    gv2, gm2 = torch.autograd.grad(e2, (v2, m2))
    assert torch.allclose(e, e2, rtol=1e-13) and torch.allclose(gv, gv2, rtol=1e-12) and torch.allclose(gm, gm2, rtol=1e-12)


@pytest.mark.parametrize("op,w", OPS_W)
def test_gradcheck_compiled(default_to, op, w):
    """First order through the compiled (AOTAutograd) backward."""
    ins, idx, s = make_inputs(op, w, seed=2)
    fn = getattr(st, op)
    f = torch.compile(lambda *a: fn(*a, idx, s), fullgraph=True, backend="aot_eager")
    assert torch.autograd.gradcheck(f, ins, **GC)


@pytest.mark.parametrize("op,w", OPS_W)
def test_gradgradcheck_compiled(default_to, op, w):
    """Second order through a fullgraph Dynamo graph (run by autograd: torch's AOTAutograd
    backends do not differentiate a compiled backward again, whatever the ops)."""
    ins, idx, s = make_inputs(op, w, seed=3)
    fn = getattr(st, op)
    f = torch.compile(lambda *a: fn(*a, idx, s), fullgraph=True, backend="eager")
    assert torch.autograd.gradgradcheck(f, ins, **GC)


def _energy(pos, cell, idx, s):
    frac = st.segmented_matvec(pos, cell, idx, s)
    centered = frac - st.segmented_mean(frac, idx, s)[idx]
    r = st.segmented_rms_norm(centered, idx, s)
    return (st.segmented_dot(centered, torch.sin(centered), idx, s) + r).sum()


@pytest.fixture
def trace_autograd():
    cfg = torch._dynamo.config
    if not hasattr(cfg, "trace_autograd_ops"):
        pytest.skip("this torch has no torch._dynamo.config.trace_autograd_ops")
    prev = cfg.trace_autograd_ops
    cfg.trace_autograd_ops = True
    yield
    cfg.trace_autograd_ops = prev


def test_compiled_forces_second_order(default_to, trace_autograd):
    """The MLIP pattern compiled whole (inductor, fullgraph): energy, forces = -dE/dpos inside
    the graph; gradcheck of the compiled forces checks the second order of every op in it."""
    ins, idx, s = make_inputs("segmented_matvec", 3, lengths=[4, 3, 5], seed=4)
    pos, cell = ins

    def forces(pos, cell):
        e = _energy(pos, cell, idx, s)
        (g,) = torch.autograd.grad(e, pos, create_graph=True)
        return -g

    f = torch.compile(forces, fullgraph=True)
    assert torch.allclose(f(pos, cell), forces(pos, cell), rtol=1e-12, atol=1e-14)
    assert torch.autograd.gradcheck(f, (pos, cell), **GC)


def test_compiled_graph_uses_the_current_client(server_url):
    """A graph compiled without client= resolves the client when it runs, not when traced."""
    a, b = SpyClient(server_url), SpyClient(server_url)
    x = torch.arange(6.0, dtype=torch.float64)
    idx = torch.tensor([0, 0, 1, 1, 1, 2])
    f = torch.compile(lambda x: st.segmented_sum(x, idx, 3), fullgraph=True)
    with st.use_client(a):
        f(x)
    with st.use_client(b):
        out = f(x)
    assert torch.equal(out, torch.tensor([1.0, 9, 5], dtype=torch.float64))
    assert len(a.log) == 1 and len(b.log) == 1
    a.close()
    b.close()


_TORCH_VER = tuple(int(v) for v in re.findall(r"\d+", torch.__version__)[:2])


# torch 2.11's dynamo cannot pass an object through assume_constant_result (seen on the GPU
# machine); 2.15 can. A URL string works on both.
@pytest.mark.skipif(_TORCH_VER < (2, 15), reason="an explicit Client object under torch.compile needs torch >= 2.15")
def test_compile_with_explicit_client_and_url(server_url):
    spy = SpyClient(server_url)
    x = torch.arange(6.0, dtype=torch.float64)
    idx = torch.tensor([0, 0, 1, 1, 1, 2])
    f = torch.compile(lambda x: st.segmented_mean(x, idx, 3, client=spy), fullgraph=True)
    assert torch.equal(f(x), torch.tensor([0.5, 3, 5], dtype=torch.float64)) and len(spy.log) == 1
    g = torch.compile(lambda x: st.segmented_mean(x, idx, 3, client=server_url), fullgraph=True)
    assert torch.equal(g(x), torch.tensor([0.5, 3, 5], dtype=torch.float64))
    spy.close()


def test_compile_empty_inputs(default_to):
    """N = 0 and S = 0 through the fake implementation and the server."""
    f = torch.compile(lambda x, idx: st.segmented_sum(x, idx, 4), fullgraph=True, backend="aot_eager")
    out = f(torch.zeros(0, 3, dtype=torch.float64), torch.zeros(0, dtype=torch.int64))
    assert out.shape == (4, 3) and not torch.any(out)
    out = st.segmented_mul(torch.zeros(0), torch.zeros(0), torch.zeros(0, dtype=torch.int32), 0)
    assert out.shape == (0,) and out.dtype == torch.float32


# ---- torch.func ----


def _seg(a, idx, s):
    return torch.zeros((s,) + tuple(a.shape[1:]), dtype=a.dtype).index_add(0, idx, a)


def torch_rms(x, idx, s):
    c = torch.bincount(idx, minlength=s).to(x.dtype)
    return torch.sqrt(_seg((x * x).sum(-1), idx, s) / c)


def test_func_grad_and_vjp(default_to):
    ins, idx, s = make_inputs("segmented_dot", 3, seed=5)
    x, y = (t.detach() for t in ins)
    gx = torch.func.grad(lambda a: st.segmented_dot(a, y, idx, s).sum())(x)
    assert torch.equal(gx, y)
    out, vjp = torch.func.vjp(lambda a, b: st.segmented_dot(a, b, idx, s), x, y)
    g = torch.arange(1.0, s + 1, dtype=torch.float64)
    vx, vy = vjp(g)
    assert torch.allclose(vx, g[idx][:, None] * y, rtol=1e-14) and torch.allclose(vy, g[idx][:, None] * x, rtol=1e-14)


def test_func_jacrev_and_hessian(default_to):
    ins, idx, s = make_inputs("segmented_rms_norm", 3, lengths=[3, 2, 4], seed=6)
    x = ins[0].detach()
    j = torch.func.jacrev(lambda a: st.segmented_rms_norm(a, idx, s))(x)
    assert torch.allclose(j, torch.func.jacrev(lambda a: torch_rms(a, idx, s))(x), rtol=1e-12, atol=1e-14)
    h = torch.func.jacrev(torch.func.jacrev(lambda a: st.segmented_rms_norm(a, idx, s).sum()))(x)
    want = torch.func.hessian(lambda a: torch_rms(a, idx, s).sum())(x)
    assert h.shape == (9, 3, 9, 3) and torch.allclose(h, want, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("op,w", OPS_W)
def test_vmap_is_one_call(server_url, op, w):
    spy = SpyClient(server_url)
    ins, idx, s = make_inputs(op, w, seed=7)
    fn = getattr(st, op)
    batched = [torch.stack([t.detach() * (k + 1) for k in range(4)]) for t in ins]
    got = torch.vmap(lambda *a: fn(*a, idx, s, client=spy))(*batched)
    assert len(spy.log) == 1
    want = torch.stack([fn(*(b[k] for b in batched), idx, s, client=spy) for k in range(4)])
    assert torch.allclose(got, want, rtol=1e-13, atol=1e-14)
    # one input batched, the other not (in_dims None)
    if len(ins) == 2:
        got = torch.vmap(lambda a: fn(a, ins[1].detach(), idx, s, client=spy))(batched[0])
        want = torch.stack([fn(batched[0][k], ins[1].detach(), idx, s, client=spy) for k in range(4)])
        assert torch.allclose(got, want, rtol=1e-13, atol=1e-14)
    spy.close()


def test_forward_mode_refused(default_to):
    x = torch.randn(5, 3, dtype=torch.float64)
    idx = torch.tensor([0, 0, 1, 1, 1])
    with pytest.raises(NotImplementedError, match=r"segmented_sum: forward-mode AD .* not supported"):
        torch.func.jacfwd(lambda a: st.segmented_sum(a, idx, 2))(x)
    with pytest.raises(NotImplementedError, match="segmented_sum: forward-mode AD"):
        torch.func.hessian(lambda a: st.segmented_sum(a, idx, 2).sum())(x)
    import torch.autograd.forward_ad as fwad

    with fwad.dual_level():
        d = fwad.make_dual(x, torch.ones_like(x))
        with pytest.raises(NotImplementedError, match="x carries a forward-mode tangent"):
            st.segmented_sum(d, idx, 2)


def test_third_derivative_refused(default_to):
    x = torch.randn(5, 3, dtype=torch.float64, requires_grad=True)
    idx = torch.tensor([0, 0, 1, 1, 1])
    (g,) = torch.autograd.grad(st.segmented_rms_norm(x, idx, 2).sum(), x, create_graph=True)
    (h,) = torch.autograd.grad((g * g).sum(), x, create_graph=True)
    with pytest.raises(RuntimeError, match="third derivative not supported"):
        torch.autograd.grad(h.sum(), x)
    f = torch.func.jacrev(torch.func.jacrev(torch.func.jacrev(lambda a: st.segmented_rms_norm(a, idx, 2).sum())))
    with pytest.raises(RuntimeError, match="third derivative not supported"):
        f(x.detach())


# ---- friendly errors, before anything is sent ----


def test_numpy_input_refused(default_to):
    idx = torch.tensor([0, 1])
    with pytest.raises(TypeError, match=r"segops.torch.segmented_dot: y is a numpy array.*segops.segmented_dot"):
        st.segmented_dot(torch.ones(2), np.ones(2), idx, 2)
    # idx takes no gradient: a numpy array or a list of integers is accepted as it is
    assert torch.equal(st.segmented_sum(torch.ones(3), np.array([0, 1, 1]), 2), torch.tensor([1.0, 2.0]))
    assert torch.equal(st.segmented_sum(torch.ones(3), [0, 0, 1], 2), torch.tensor([2.0, 1.0]))
    with pytest.raises(TypeError, match=r"segmented_sum: idx has dtype float64; it must hold integers"):
        st.segmented_sum(torch.ones(2), np.array([0.0, 1.0]), 2)
    with pytest.raises(TypeError, match="segmented_sum: x must be a torch.Tensor, not list"):
        st.segmented_sum([1.0, 2.0], idx, 2)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.complex64, torch.int16])
def test_unsendable_dtype_refused(default_to, dtype):
    with pytest.raises(TypeError, match=rf"segmented_mean: x has dtype {dtype}; segops computes in torch.float32"):
        st.segmented_mean(torch.ones(2, 3, dtype=dtype), torch.tensor([0, 1]), 2)


def test_bad_idx_and_num_segments_refused(default_to):
    with pytest.raises(TypeError, match="segmented_sum: idx has dtype torch.float32"):
        st.segmented_sum(torch.ones(2), torch.tensor([0.0, 1.0]), 2)
    with pytest.raises(TypeError, match="segmented_sum: num_segments must be an integer, not float"):
        st.segmented_sum(torch.ones(2), torch.tensor([0, 1]), 2.0)
    with pytest.raises(TypeError, match="client must be a segops.Client, a URL string or None"):
        st.segmented_sum(torch.ones(2), torch.tensor([0, 1]), 2, client=42)


def test_mixed_devices_refused(default_to):
    """meta tensors stand for a second device on a machine without a GPU."""
    x = torch.ones(2, 3)
    with pytest.raises(ValueError, match=r"segmented_matvec: m is on meta but v is on cpu"):
        st.segmented_matvec(x, torch.ones(2, 3, 3, device="meta"), torch.tensor([0, 1]), 2)
    with pytest.raises(ValueError, match=r"segmented_sum: idx is on meta but x is on cpu"):
        st.segmented_sum(x, torch.tensor([0, 1], device="meta"), 2)


def test_server_errors_still_typed(default_to):
    with pytest.raises(segops.InvalidArgument, match=r"num_segments \(4\) must equal y.shape\[0\] \(3\)"):
        st.segmented_mul(torch.ones(4, 3), torch.ones(3), torch.arange(4), 4)


# ---- CUDA tensors (run where torch sees a GPU; skipped visibly elsewhere) ----

cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device for torch here: CUDA-tensor tests skipped")


@cuda
@pytest.mark.parametrize("op,w", OPS_W)
def test_cuda_round_trip_second_order(default_to, op, w):
    ins, idx, s = make_inputs(op, w, seed=8)
    fn = getattr(st, op)
    cins = [t.detach().cuda().requires_grad_() for t in ins]
    out = fn(*cins, idx.cuda(), s)
    assert out.is_cuda and out.device == cins[0].device
    ref = fn(*ins, idx, s)
    assert torch.allclose(out.cpu(), ref, rtol=1e-12, atol=1e-14)
    gs = torch.autograd.grad(out.sum(), cins, create_graph=True)
    assert all(g.is_cuda for g in gs)
    loss = sum((g * g).sum() for g in gs)
    if loss.requires_grad:
        loss.backward()
        assert all(t.grad is None or t.grad.is_cuda for t in cins)
    assert torch.autograd.gradgradcheck(lambda *a: fn(*a, idx.cuda(), s), cins, **GC)


@cuda
def test_cuda_compiled(default_to):
    ins, idx, s = make_inputs("segmented_dot", 3, seed=9)
    x, y = (t.detach().cuda().requires_grad_() for t in ins)
    f = torch.compile(lambda a, b: st.segmented_dot(a, b, idx.cuda(), s), fullgraph=True)
    out = f(x, y)
    assert out.is_cuda
    out.sum().backward()
    assert torch.allclose(x.grad, y.detach(), rtol=0, atol=0)

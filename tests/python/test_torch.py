"""test_torch.py: segops.torch through the real daemon: gradcheck and gradgradcheck (float64)
for every op, scalar and vec3 where allowed; a model-like chain differentiated twice
(energy -> forces -> loss -> backward) against the same chain in plain torch; None
cotangents not sent; float32; third order refused; exact case 12 (proto/API.md)."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import segops  # noqa: E402
import segops.torch as st  # noqa: E402
from segref import FORWARD_INPUTS, WIDTHS, idx_from_lengths, max_rel_err, reference, shape_of  # noqa: E402

OPS_W = [pytest.param(op, w, id=f"{op}-w{w}") for op in FORWARD_INPUTS for w in WIDTHS[op]]
LENGTHS = [3, 0, 2, 4]  # N=9, S=4, one empty segment


def make_inputs(op, w, lengths=LENGTHS, dtype=torch.float64, seed=0):
    rng = np.random.default_rng(seed)
    idx = idx_from_lengths(lengths, rng)
    s = len(lengths)
    ins = [
        torch.tensor(rng.standard_normal(shape_of(op, a, w, len(idx), s)), dtype=dtype, requires_grad=True)
        for a in FORWARD_INPUTS[op]
    ]
    return ins, torch.from_numpy(idx.astype(np.int64)), s


@pytest.mark.parametrize("op,w", OPS_W)
def test_gradcheck(client, op, w):
    ins, idx, s = make_inputs(op, w)
    fn = getattr(st, op)
    assert torch.autograd.gradcheck(lambda *a: fn(*a, idx, s, client=client), ins, eps=1e-6, atol=1e-8, rtol=1e-6)


@pytest.mark.parametrize("op,w", OPS_W)
def test_gradgradcheck(client, op, w):
    ins, idx, s = make_inputs(op, w, seed=1)
    fn = getattr(st, op)
    assert torch.autograd.gradgradcheck(lambda *a: fn(*a, idx, s, client=client), ins, eps=1e-6, atol=1e-8, rtol=1e-6)


@pytest.mark.parametrize("op", ["segmented_max", "segmented_min"])
def test_max_min_gradient_goes_to_the_lowest_index(client, op):
    """proto/API.md, Formulas: ties (3 and 3; -0.0 and +0.0) give the whole gradient to the lowest
    index, where torch.amax would split it; the value of a signed-zero tie has the lowest index's sign;
    an empty segment gives 0 and no gradient."""
    x = torch.tensor([1.0, 3.0, 3.0, -0.0, 0.0, 2.0], dtype=torch.float64, requires_grad=True)
    idx = torch.tensor([0, 0, 0, 1, 1, 2])
    out = getattr(st, op)(x, idx, 4, client=client)
    first = 3.0 if op == "segmented_max" else 1.0
    assert out.tolist() == [first, 0.0, 2.0, 0.0] and torch.signbit(out[1])
    (grad,) = torch.autograd.grad(out, x, torch.tensor([10.0, 20.0, 30.0, 40.0], dtype=torch.float64))
    want = [0.0, 10.0, 0.0, 20.0, 0.0, 30.0] if op == "segmented_max" else [10.0, 0.0, 0.0, 20.0, 0.0, 30.0]
    assert grad.tolist() == want


@pytest.mark.parametrize("op,w", OPS_W)
def test_forward_backward_values(client, op, w):
    """Values of the forward and of the first-order gradients against the numpy reference."""
    ins, idx, s = make_inputs(op, w, lengths=[7, 1, 0, 12, 5], seed=2)
    out = getattr(st, op)(*ins, idx, s, client=client)
    args = {a: t.detach().numpy() for a, t in zip(FORWARD_INPUTS[op], ins)}
    ref = reference(op, "forward", args, idx.numpy(), s)["out"]
    assert max_rel_err(out.detach().numpy(), ref) <= 1e-12
    g = torch.randn(out.shape, dtype=out.dtype, generator=torch.Generator().manual_seed(3))
    out.backward(g)
    bref = reference(op, "backward", dict(args, g_out=g.numpy()), idx.numpy(), s)
    for a, t in zip(FORWARD_INPUTS[op], ins):
        assert max_rel_err(t.grad.numpy(), bref["grad_" + a]) <= 1e-12


@pytest.mark.parametrize("op,w", OPS_W)
def test_float32(client, op, w):
    ins64, idx, s = make_inputs(op, w, lengths=[40, 3, 0, 25], seed=4)
    ins32 = [t.detach().float().requires_grad_() for t in ins64]
    fn = getattr(st, op)
    out32 = fn(*ins32, idx, s, client=client)
    out64 = fn(*ins64, idx, s, client=client)
    assert out32.dtype == torch.float32 and out32.device == ins32[0].device
    assert max_rel_err(out32.detach().numpy(), out64.detach().numpy()) <= 1e-5
    out32.sum().backward()
    out64.sum().backward()
    for a32, a64 in zip(ins32, ins64):
        assert a32.grad.dtype == torch.float32
        assert max_rel_err(a32.grad.numpy(), a64.grad.numpy()) <= 1e-5


def _seg(a, idx, s):
    return torch.zeros((s,) + tuple(a.shape[1:]), dtype=a.dtype).index_add(0, idx, a)


def chain_segops(pos, cell, w, idx, s, client):
    mean = st.segmented_mean(pos, idx, s, client=client)  # (S,3)
    centered = pos - mean[idx]
    r = st.segmented_rms_norm(centered, idx, s, client=client)  # (S,)
    scaled = st.segmented_mul(centered, w / (1.0 + r), idx, s, client=client)  # (N,3)
    frac = st.segmented_matvec(scaled, cell, idx, s, client=client)  # (N,3)
    e = st.segmented_dot(frac, torch.sin(frac), idx, s, client=client)
    return e + 0.5 * st.segmented_sum((frac * frac).sum(-1), idx, s, client=client)


def chain_torch(pos, cell, w, idx, s):
    cnt = torch.bincount(idx, minlength=s).to(pos.dtype)
    mean = _seg(pos, idx, s) / cnt[:, None]
    centered = pos - mean[idx]
    r = torch.sqrt(_seg((centered * centered).sum(-1), idx, s) / cnt)
    scaled = centered * (w / (1.0 + r))[idx][:, None]
    frac = torch.einsum("ijk,ij->ik", cell[idx], scaled)
    e = _seg((frac * torch.sin(frac)).sum(-1), idx, s)
    return e + 0.5 * _seg((frac * frac).sum(-1), idx, s)


def _train_step(chain, pos0, cell0, w0):
    pos = pos0.clone().requires_grad_()
    cell = cell0.clone().requires_grad_()
    w = w0.clone().requires_grad_()
    energy = chain(pos, cell, w).sum()
    (grad_pos,) = torch.autograd.grad(energy, pos, create_graph=True)
    forces = -grad_pos
    loss = (forces**2).sum() + 0.1 * energy
    loss.backward()
    return energy.detach(), forces.detach(), pos.grad, cell.grad, w.grad


@pytest.mark.parametrize("dtype,tol", [(torch.float64, 1e-10), (torch.float32, 1e-4)])
def test_model_chain_second_order(client, dtype, tol):
    rng = np.random.default_rng(7)
    idx_np = idx_from_lengths([5, 8, 3, 6], rng)
    idx = torch.from_numpy(idx_np.astype(np.int64))
    s = 4
    pos0 = torch.tensor(rng.standard_normal((len(idx_np), 3)), dtype=dtype)
    cell0 = torch.tensor(np.eye(3) * 2 + 0.3 * rng.standard_normal((s, 3, 3)), dtype=dtype)
    w0 = torch.tensor(rng.uniform(0.5, 1.5, s), dtype=dtype)
    got = _train_step(lambda p, c, w: chain_segops(p, c, w, idx, s, client), pos0, cell0, w0)
    want = _train_step(lambda p, c, w: chain_torch(p, c, w, idx, s), pos0.double(), cell0.double(), w0.double())
    names = ["energy", "forces", "pos.grad", "cell.grad", "w.grad"]
    for name, a, b in zip(names, got, want):
        assert a is not None and a.dtype == dtype, name
        assert torch.all(torch.isfinite(a)), name
        err = max_rel_err(a.numpy(), b.numpy())
        assert err <= tol, f"{name}: max rel err {err:.3g} > {tol}"
    assert float(got[2].abs().max()) > 0 and float(got[3].abs().max()) > 0  # the second order reached pos, cell


class SpyClient(segops.Client):
    """A real client that also records what each call sent (names of non-None arguments)."""

    def __init__(self, url):
        super().__init__(url)
        self.log = []

    def call(self, op, pass_, args, *, outputs=None):
        self.log.append((op, pass_, sorted(k for k, v in args.items() if v is not None), outputs))
        return super().call(op, pass_, args, outputs=outputs)


def test_none_cotangents_not_sent(server_url):
    spy = SpyClient(server_url)
    ins, idx, s = make_inputs("segmented_dot", 3, seed=8)
    x, y = ins
    out = st.segmented_dot(x, y, idx, s, client=spy)
    gx, gy = torch.autograd.grad(out.sum(), (x, y), create_graph=True)
    loss = (gx**2).sum()  # gy unused: its cotangent stays None
    loss.backward()
    op, pass_, sent, _ = spy.log[-1]
    assert (op, pass_) == ("segmented_dot", "double_backward")
    assert "gg_x" in sent and "gg_y" not in sent
    # Same derivatives in plain torch.
    x2, y2 = x.detach().clone().requires_grad_(), y.detach().clone().requires_grad_()
    out2 = _seg((x2 * y2).sum(-1), idx, s)
    gx2, _ = torch.autograd.grad(out2.sum(), (x2, y2), create_graph=True)
    (gx2**2).sum().backward()
    # d loss / d x is zero here (grad_x of a dot does not depend on x): torch leaves None.
    assert x2.grad is None and (x.grad is None or not torch.any(x.grad))
    assert max_rel_err(y.grad.numpy(), y2.grad.numpy()) <= 1e-12
    assert torch.any(y.grad)
    spy.close()


def test_only_needed_gradients_requested(server_url):
    spy = SpyClient(server_url)
    ins, idx, s = make_inputs("segmented_matvec", 3, seed=9)
    v, m = ins
    m.requires_grad_(False)
    st.segmented_matvec(v, m, idx, s, client=spy).sum().backward()
    assert spy.log[-1][:2] == ("segmented_matvec", "backward")
    assert spy.log[-1][3] == ["grad_v"]
    assert m.grad is None and v.grad is not None
    spy.close()


def test_sum_backward_does_not_send_x(server_url):
    spy = SpyClient(server_url)
    ins, idx, s = make_inputs("segmented_sum", 3, seed=10)
    st.segmented_sum(ins[0], idx, s, client=spy).sum().backward()
    assert spy.log[-1][:3] == ("segmented_sum", "backward", ["g_out", "idx", "num_segments"])
    spy.close()


def test_idx_and_num_segments_take_no_gradient(client):
    ins, idx, s = make_inputs("segmented_mean", 1, seed=11)
    out = st.segmented_mean(ins[0], idx.to(torch.int32), torch.tensor(s), client=client)
    out.sum().backward()
    assert ins[0].grad is not None and idx.grad is None


def test_third_order_raises(client):
    ins, idx, s = make_inputs("segmented_mul", 1, seed=12)
    x, y = ins
    (g,) = torch.autograd.grad(st.segmented_mul(x, y, idx, s, client=client).sum(), x, create_graph=True)
    (h,) = torch.autograd.grad((g * g).sum(), y, create_graph=True)
    with pytest.raises(RuntimeError):
        torch.autograd.grad(h.sum(), y)


def test_golden_12_sum_plus_mean_gradient(client):
    idx = torch.tensor([0, 0, 1, 1, 1, 2, 3, 3], dtype=torch.int64)
    x = torch.randn(8, 3, dtype=torch.float64, requires_grad=True)
    (st.segmented_sum(x, idx, 5, client=client).sum() + st.segmented_mean(x, idx, 5, client=client).sum()).backward()
    c = torch.bincount(idx, minlength=5).double()
    want = (1 + 1 / c[idx])[:, None].expand(8, 3)
    assert torch.equal(x.grad, want)


def test_default_client(server_url, monkeypatch):
    monkeypatch.setenv("SEGOPS_URL", server_url)
    prev = segops.set_default_client(None)
    try:
        x = torch.tensor([1.0, 2, 3, 4, 5, 6], dtype=torch.float64, requires_grad=True)
        out = st.segmented_sum(x, torch.tensor([0, 0, 1, 1, 1, 2]), 3)
        assert torch.equal(out.detach(), torch.tensor([3.0, 12, 6], dtype=torch.float64))
    finally:
        c = segops.set_default_client(prev)
        if c is not None:
            c.close()


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device for torch here")
def test_cuda_tensors_come_back_on_device(client):
    ins, idx, s = make_inputs("segmented_dot", 3, seed=13)
    x, y = (t.detach().cuda().requires_grad_() for t in ins)
    out = st.segmented_dot(x, y, idx.cuda(), s, client=client)
    assert out.device == x.device
    out.sum().backward()
    assert x.grad.device == x.device


def _step(fn, ins):
    """out -> loss -> grad(create_graph) -> loss2 -> backward: every function of the op."""
    for t in ins:
        t.grad = None
    out = fn(*ins)
    g = torch.autograd.grad((out * out).sum(), ins, create_graph=True)
    sum((gi * gi).sum() for gi in g).backward()
    return [out.detach().clone()] + [gi.detach().clone() for gi in g] + [t.grad.clone() for t in ins]


@pytest.mark.parametrize("op,w", OPS_W)
def test_eager_path_matches_the_custom_ops_bit_for_bit(client, op, w):
    """Plain autograd calls run the function bodies through autograd.Functions (no custom-op
    dispatch, the fast path); torch.compile and torch.func go through torch.ops.segops.*. Both
    must give the same bits, to second order."""
    from segops import _torch_eager, _torch_ops

    ins, idx, s = make_inputs(op, w, lengths=[5, 0, 3, 9], seed=21)
    key = st._client_key(client)
    out = getattr(st, op)(*ins, idx, s, client=client)
    assert type(out.grad_fn).__name__ == "_ForwardBackward"  # the eager Function, not the custom op
    eager = _step(lambda *a: getattr(st, op)(*a, idx, s, client=client), ins)
    custom = _step(lambda *a: _torch_ops.OPS[(op, "forward")](*a, idx, s, key), ins)
    assert len(eager) == len(custom)
    for e, c in zip(eager, custom):
        assert torch.equal(e, c)
    assert _torch_eager.IMPLS is _torch_ops.IMPLS

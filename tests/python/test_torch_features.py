"""test_torch_features.py: segops.torch over (N, *F) feature channels, one flat F (4,) and one
multi-dimensional F (2, 3), through the real daemon: gradcheck and gradgradcheck (float64), every
gradient shaped like its input (mul's y as (S,) and as (S, *F)), torch.compile(fullgraph=True)
through AOTAutograd (shapes from the fake implementations), and vmap against plain torch."""

import pytest

torch = pytest.importorskip("torch")

import segops.torch as st  # noqa: E402

N, S = 5, 3
IDX = torch.tensor([2, 0, 1, 1, 0], dtype=torch.int32)
FEATURES = [pytest.param((4,), id="F4"), pytest.param((2, 3), id="F2x3")]
GC = dict(eps=1e-6, atol=1e-8, rtol=1e-6)


def inputs(op, f, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn((N,) + f, generator=g, dtype=torch.float64, requires_grad=True)
    if op == "segmented_dot":
        return [x, torch.randn((N,) + f, generator=g, dtype=torch.float64, requires_grad=True)]
    if op == "segmented_mul_y_s":
        return [x, torch.randn((S,), generator=g, dtype=torch.float64, requires_grad=True)]
    if op == "segmented_mul":
        return [x, torch.randn((S,) + f, generator=g, dtype=torch.float64, requires_grad=True)]
    if op == "segmented_rms_norm":  # away from zero norms, where the derivative jumps
        return [(x.detach() + 3.0).requires_grad_()]
    return [x]


OPS = ["segmented_sum", "segmented_mean", "segmented_dot", "segmented_mul", "segmented_mul_y_s",
       "segmented_rms_norm"]


def fn(op):
    return getattr(st, "segmented_mul" if op == "segmented_mul_y_s" else op)


def plain(op, *a):
    """The same forward in plain torch."""
    x = a[0]
    if op in ("segmented_sum", "segmented_mean"):
        out = torch.zeros((S,) + x.shape[1:], dtype=x.dtype).index_add(0, IDX.long(), x)
        if op == "segmented_mean":
            c = torch.bincount(IDX.long(), minlength=S).to(x.dtype)
            out = out / c.reshape((S,) + (1,) * (x.dim() - 1))
        return out
    if op == "segmented_dot":
        return torch.zeros(S, dtype=x.dtype).index_add(0, IDX.long(), (x * a[1]).reshape(N, -1).sum(1))
    if op in ("segmented_mul", "segmented_mul_y_s"):
        y = a[1][IDX.long()]
        return x * (y if y.dim() == x.dim() else y.reshape((N,) + (1,) * (x.dim() - 1)))
    if op == "segmented_rms_norm":
        c = torch.bincount(IDX.long(), minlength=S).to(x.dtype)
        return torch.sqrt(torch.zeros(S, dtype=x.dtype).index_add(0, IDX.long(), (x * x).reshape(N, -1).sum(1)) / c)
    raise AssertionError(op)


@pytest.mark.parametrize("f", FEATURES)
@pytest.mark.parametrize("op", OPS)
def test_forward_and_gradients_match_plain_torch(client, op, f):
    ins = inputs(op, f)
    got = fn(op)(*ins, IDX, S, client=client)
    want = plain(op, *ins)
    assert got.shape == want.shape
    torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)
    w = torch.randn(got.shape, dtype=torch.float64, generator=torch.Generator().manual_seed(9))
    gs = torch.autograd.grad((got * w).sum(), ins)
    ws = torch.autograd.grad((want * w).sum(), ins)
    for g, wg, i in zip(gs, ws, ins):
        assert g.shape == i.shape  # every gradient shaped like its input
        torch.testing.assert_close(g, wg, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("f", FEATURES)
@pytest.mark.parametrize("op", OPS)
def test_gradcheck_and_gradgradcheck(client, op, f):
    ins = inputs(op, f, seed=1)
    call = lambda *a: fn(op)(*a, IDX, S, client=client)  # noqa: E731
    assert torch.autograd.gradcheck(call, ins, **GC)
    assert torch.autograd.gradgradcheck(call, ins, **GC)


@pytest.mark.parametrize("f", FEATURES)
def test_compile_fullgraph(client, f):
    """Gather-multiply-scatter as message passing does it, compiled whole: forward and backward."""
    torch._dynamo.reset()

    def step(h, m, y):
        msg = st.segmented_mul(h, y, IDX, S, client=client) * m
        return st.segmented_sum(msg, IDX, S, client=client).pow(2).sum()

    ins = inputs("segmented_mul", f, seed=2) + [torch.randn((N,) + f, dtype=torch.float64)]
    h, y, m = ins[0], ins[1], ins[2]
    compiled = torch.compile(step, fullgraph=True, backend="aot_eager")
    e = compiled(h, m, y)
    gh, gy = torch.autograd.grad(e, (h, y))
    e0 = step(h, m, y)
    gh0, gy0 = torch.autograd.grad(e0, (h, y))
    torch.testing.assert_close(e, e0, rtol=0, atol=0)
    assert gh.shape == h.shape and gy.shape == y.shape
    torch.testing.assert_close(gh, gh0, rtol=0, atol=0)
    torch.testing.assert_close(gy, gy0, rtol=0, atol=0)
    torch._dynamo.reset()


def test_vmap_over_a_batch_of_feature_arrays(client):
    xs = torch.randn((2, N, 2, 3), dtype=torch.float64)
    got = torch.func.vmap(lambda x: st.segmented_sum(x, IDX, S, client=client))(xs)
    assert got.shape == (2, S, 2, 3)
    for b in range(2):
        torch.testing.assert_close(got[b], plain("segmented_sum", xs[b]), rtol=1e-12, atol=1e-12)

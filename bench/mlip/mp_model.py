"""mp_model.py: a message-passing interatomic potential in the shape of MACE and NequIP, written
plainly in torch, with its segment work behind three functions that plain torch or segops.torch
provide (SegmentWork). What bench/mlip/mp_step.py times and what README's "When it pays off"
measures the share of segment work of.

A batch: structures of 30 atoms in a box, 4 species; each atom's 24 nearest other atoms of its
structure are its neighbours (edges sorted by sender, receivers unsorted, E = 24 N). The model:
radial basis features of the edge lengths (8 Gaussians under a cosine cutoff), two interaction
blocks (an edge MLP m = W2 silu(W1 rbf); messages h[snd] * m; their sum at each receiver; the node
update h += silu(U agg)), a per-atom energy readout, energies summed per structure. The training
step: forces -dE/dpos by autograd with create_graph, loss on energies and forces, Adam."""

import math

import torch

ATOMS_PER_STRUCTURE = 30
NEIGHBOURS = 24
SPECIES = 4
RBF = 8
CUTOFF = 5.0


def make_batch(atoms, seed=0, dtype=torch.float32):
    """A batch of about `atoms` atoms: dict of pos (N,3), species (N,), batch (N,) int64, snd and rcv
    (E,) int64 (sorted by snd), S, and reference energies (S,) and forces (N,3)."""
    g = torch.Generator().manual_seed(seed)
    s = max(round(atoms / ATOMS_PER_STRUCTURE), 1)
    a = ATOMS_PER_STRUCTURE
    n = s * a
    box = (a * 12.0) ** (1 / 3)  # about 12 cubic units per atom: 24 neighbours inside the cutoff
    pos = torch.rand(s, a, 3, generator=g) * box
    d = torch.cdist(pos, pos) + torch.eye(a) * 1e9  # no self edges
    nbr = d.topk(NEIGHBOURS, dim=-1, largest=False).indices  # (s, a, 24) within each structure
    base = (torch.arange(s) * a).view(s, 1, 1)
    rcv = (nbr + base).reshape(-1)
    snd = torch.arange(n).repeat_interleave(NEIGHBOURS)
    return {
        "pos": pos.reshape(n, 3).to(dtype),
        "species": torch.randint(0, SPECIES, (n,), generator=g),
        "batch": torch.arange(s).repeat_interleave(a),
        "snd": snd,
        "rcv": rcv,
        "S": s,
        "energy": torch.randn(s, generator=g, dtype=dtype),
        "forces": torch.randn(n, 3, generator=g, dtype=dtype),
    }


class PlainWork:
    """The segment work in plain torch: the gathers and index_add_ a user writes."""

    name = "plain"

    def gather_mul(self, m, h, snd):
        """m[e] * h[snd[e]] (E,F)."""
        return m * h.index_select(0, snd)

    def scatter(self, msg, rcv, n):
        """sum of msg[e] over rcv[e] == i (N,F)."""
        return msg.new_zeros((n,) + msg.shape[1:]).index_add_(0, rcv, msg)

    def per_structure(self, e, batch, s):
        """sum of e[i] over batch[i] == s (S,)."""
        return e.new_zeros((s,)).index_add_(0, batch, e)


class SegopsWork(PlainWork):
    """The same through segops.torch: segmented_mul (h as y, one row per sender) for the gather-
    multiply, segmented_sum over rcv for the scatter, segmented_sum per structure for the energies.
    features=False sends only what fits a daemon without feature channels ((N,) and (N,3)): the
    energies; the (E,F) work then stays in plain torch."""

    def __init__(self, client, idx, features=True):
        import segops.torch as st

        self.st, self.c, self.features = st, client, features
        # idx as a user keeps them for segops: int32, made once per batch in the client's memory
        # (segops.torch.empty), which the native channel hands over without a copy on every call
        self.snd32, self.rcv32, self.batch32 = (self._pooled(idx[k]) for k in ("snd", "rcv", "batch"))
        self.n = idx["batch"].shape[0]
        self.name = "segops" if features else "segops (energies only)"

    def _pooled(self, t):
        out = self.st.empty(t.shape, dtype=torch.int32, client=self.c)
        return out.copy_(t)

    def gather_mul(self, m, h, snd):
        if not self.features:
            return super().gather_mul(m, h, snd)
        return self.st.segmented_mul(m, h, self.snd32, self.n, client=self.c)

    def scatter(self, msg, rcv, n):
        if not self.features:
            return super().scatter(msg, rcv, n)
        return self.st.segmented_sum(msg, self.rcv32, n, client=self.c)

    def per_structure(self, e, batch, s):
        return self.st.segmented_sum(e, self.batch32, s, client=self.c)


class Interaction(torch.nn.Module):
    def __init__(self, f):
        super().__init__()
        self.w1 = torch.nn.Linear(RBF, f)
        self.w2 = torch.nn.Linear(f, f, bias=False)
        self.u = torch.nn.Linear(f, f)

    def forward(self, h, rbf, snd, rcv, work):
        m = self.w2(torch.nn.functional.silu(self.w1(rbf)))  # the edge MLP (E,F)
        msg = work.gather_mul(m, h, snd)  # h[snd] * m
        agg = work.scatter(msg, rcv, h.shape[0])  # to the receivers
        return h + torch.nn.functional.silu(self.u(agg))


class Potential(torch.nn.Module):
    def __init__(self, f=32, blocks=2):
        super().__init__()
        self.embed = torch.nn.Embedding(SPECIES, f)
        self.blocks = torch.nn.ModuleList(Interaction(f) for _ in range(blocks))
        self.r1 = torch.nn.Linear(f, f)
        self.r2 = torch.nn.Linear(f, 1)
        self.register_buffer("mu", torch.linspace(0.5, CUTOFF, RBF))

    def forward(self, pos, b, work):
        vec = pos.index_select(0, b["rcv"]) - pos.index_select(0, b["snd"])
        d = torch.sqrt((vec * vec).sum(-1) + 1e-12)
        env = 0.5 * (torch.cos(math.pi * torch.clamp(d / CUTOFF, max=1.0)) + 1.0)
        rbf = torch.exp(-2.0 * (d.unsqueeze(-1) - self.mu) ** 2) * env.unsqueeze(-1)
        h = self.embed(b["species"])
        for blk in self.blocks:
            h = blk(h, rbf, b["snd"], b["rcv"], work)
        e_atom = self.r2(torch.nn.functional.silu(self.r1(h))).squeeze(-1)
        return work.per_structure(e_atom, b["batch"], b["S"])


def make_step(model, b, work, lr=1e-3):
    """One training step as a function: energies, forces by autograd (create_graph), loss on both,
    Adam. Returns the loss (a float)."""
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    pos = b["pos"].clone().requires_grad_(True)

    def step():
        opt.zero_grad(set_to_none=True)
        e = model(pos, b, work)
        (g,) = torch.autograd.grad(e.sum(), pos, create_graph=True)
        loss = ((e - b["energy"]) ** 2).mean() + ((-g - b["forces"]) ** 2).mean()
        loss.backward()
        opt.step()
        return loss

    return step


def grads_of_one_step(model, b, work):
    """The parameters' gradients after one loss.backward() (no optimizer step): for comparing
    segops' step with plain torch's."""
    model.zero_grad(set_to_none=True)
    pos = b["pos"].clone().requires_grad_(True)
    e = model(pos, b, work)
    (g,) = torch.autograd.grad(e.sum(), pos, create_graph=True)
    loss = ((e - b["energy"]) ** 2).mean() + ((-g - b["forces"]) ** 2).mean()
    loss.backward()
    return [p.grad.detach().clone() for p in model.parameters()]

"""mlip_training.py: an MLIP-style training loop whose segment operations run on segopsd.

A toy interatomic potential over a batch of systems (molecules of different sizes): each
atom's energy comes from its position relative to its system's centre, the system energy is
the sum over its atoms (segmented_sum), the forces are -dE/dpos by autograd (the backward runs
on the server), and the loss matches the forces of a reference potential, so loss.backward()
needs the second derivative (the double backward runs on the server too).

    SEGOPS_URL=http://127.0.0.1:8080 python examples/mlip_training.py [--steps 30] [--compile]

--compile runs the same step through torch.compile(fullgraph=True), energy and forces in one
graph. Exits 0 when the force-matching loss fell by 10x."""

import argparse
import sys

import torch

import segops
import segops.torch as st


def batch(sizes, gen):
    idx = torch.repeat_interleave(torch.arange(len(sizes)), torch.tensor(sizes))
    pos = torch.randn(int(sum(sizes)), 3, dtype=torch.float64, generator=gen)
    return pos, idx, len(sizes)


class Potential(torch.nn.Module):
    """E_s = sum over atoms i of system s of k * |A (pos_i - centre_s)|^2 / 2 + b * rms_s."""

    def __init__(self, k=1.0, b=0.0):
        super().__init__()
        self.k = torch.nn.Parameter(torch.tensor(k, dtype=torch.float64))
        self.b = torch.nn.Parameter(torch.tensor(b, dtype=torch.float64))
        self.a = torch.nn.Parameter(torch.eye(3, dtype=torch.float64))

    def forward(self, pos, idx, s):
        centre = st.segmented_mean(pos, idx, s)  # (S, 3)
        d = pos - centre[idx]
        m = self.a.expand(s, 3, 3)
        q = st.segmented_matvec(d, m, idx, s)  # (N, 3): A^T d
        per_atom = 0.5 * self.k * (q * q).sum(-1)  # (N,)
        return st.segmented_sum(per_atom, idx, s) + self.b * st.segmented_rms_norm(d, idx, s)


def energy_and_forces(model, pos, idx, s):
    """pos must require grad (set outside, so a compiled version needs no requires_grad_)."""
    e = model(pos, idx, s)
    (g,) = torch.autograd.grad(e.sum(), pos, create_graph=True)
    return e, -g


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--compile", action="store_true")
    ns = ap.parse_args()

    st.set_client(segops.Client())  # $SEGOPS_URL
    gen = torch.Generator().manual_seed(0)
    pos, idx, s = batch([5, 8, 3, 12, 6], gen)
    pos.requires_grad_()
    with torch.no_grad():
        target = Potential(k=2.5, b=0.7)
        target.a.copy_(torch.tensor([[1.0, 0.2, 0.0], [0.0, 0.9, 0.1], [0.1, 0.0, 1.1]], dtype=torch.float64))
    ref_e, ref_f = energy_and_forces(target, pos, idx, s)
    ref_e, ref_f = ref_e.detach(), ref_f.detach()

    model = Potential()
    step_fn = energy_and_forces
    if ns.compile:
        torch._dynamo.config.trace_autograd_ops = True
        step_fn = torch.compile(energy_and_forces, fullgraph=True)
    opt = torch.optim.Adam(model.parameters(), lr=0.1)
    first = None
    for step in range(ns.steps):
        opt.zero_grad()
        e, f = step_fn(model, pos, idx, s)
        loss = ((f - ref_f) ** 2).mean() + 1e-3 * ((e - ref_e) ** 2).mean()
        loss.backward()  # through the forces: the double backward, on the server
        opt.step()
        last = loss.item()
        first = last if first is None else first
        if step % 10 == 0 or step == ns.steps - 1:
            print(f"step {step:3d}  loss {last:.6g}  k {model.k.item():.4f}  b {model.b.item():.4f}")
    ok = last < first / 10
    print(f"loss {first:.4g} -> {last:.4g}: {'ok' if ok else 'did not fall 10x'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

"""mlip_training_compiled.py: the training step of mlip_training.py under torch.compile.

The pattern that works: compile one function that computes the energy *and* the forces
(torch.autograd.grad(..., create_graph=True) inside it, with
torch._dynamo.config.trace_autograd_ops = True), and take the loss and loss.backward() outside it,
in eager autograd. Compiling only the energy and taking the forces outside fails in torch itself
(AOTAutograd backends do not differentiate a compiled backward again, whatever the ops); fullgraph=True
works because segops' functions are torch.library custom ops, each one opaque node in the graph.

What it costs and gains: segops' calls are opaque to Inductor, so compiling fuses only the plain
torch around them (here the per-atom energy and the loss) while every segops call still goes to the
daemon; the first step pays the compilation (seconds), and a new batch shape compiles again unless
dynamic=True. This script runs the same steps eager and compiled on one batch, checks that both
train alike, and prints the time per step of each, measured in the same run.

    SEGOPS_URL=http://127.0.0.1:8080 python examples/mlip_training_compiled.py [--steps 30]
Exits 0 when both runs' force-matching loss fell by 10x and they agree."""

import argparse
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mlip_training import Potential, batch, energy_and_forces  # noqa: E402  (the eager example's model)

import segops  # noqa: E402
import segops.torch as st  # noqa: E402


def train(step_fn, pos, idx, s, ref_e, ref_f, steps):
    """steps of Adam on a fresh Potential; (first loss, last loss, seconds per step after the first)."""
    model = Potential()
    opt = torch.optim.Adam(model.parameters(), lr=0.1)
    losses, t1 = [], None
    for step in range(steps):
        opt.zero_grad()
        e, f = step_fn(model, pos, idx, s)  # compiled: energy and forces in one graph
        loss = ((f - ref_f) ** 2).mean() + 1e-3 * ((e - ref_e) ** 2).mean()
        loss.backward()  # eager autograd through the graph: the double backward, on the server
        opt.step()
        losses.append(loss.item())
        if step == 0:
            t1 = time.perf_counter()  # the first step compiles: not timed
    per_step = (time.perf_counter() - t1) / max(steps - 1, 1)
    return losses[0], losses[-1], per_step


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=30)
    ns = ap.parse_args()

    st.set_client(segops.Client())  # $SEGOPS_URL
    gen = torch.Generator().manual_seed(0)
    pos, idx, s = batch([5, 8, 3, 12, 6], gen)
    pos.requires_grad_()
    with torch.no_grad():
        target = Potential(k=2.5, b=0.7)
        target.a.copy_(torch.tensor([[1.0, 0.2, 0.0], [0.0, 0.9, 0.1], [0.1, 0.0, 1.1]], dtype=torch.float64))
    ref_e, ref_f = (t.detach() for t in energy_and_forces(target, pos, idx, s))

    torch._dynamo.config.trace_autograd_ops = True  # autograd.grad inside the compiled function
    compiled = torch.compile(energy_and_forces, fullgraph=True)
    t0 = time.perf_counter()
    e0, f0 = compiled(Potential(), pos, idx, s)  # the compilation, timed on its own
    compile_s = time.perf_counter() - t0
    e1, f1 = energy_and_forces(Potential(), pos, idx, s)
    same = torch.allclose(e0, e1, rtol=1e-12) and torch.allclose(f0, f1, rtol=1e-12)

    eager = train(energy_and_forces, pos, idx, s, ref_e, ref_f, ns.steps)
    comp = train(compiled, pos, idx, s, ref_e, ref_f, ns.steps)
    print(f"first compiled call (compiling): {compile_s:.2f} s; compiled and eager energies and forces agree: {same}")
    for name, (first, last, per) in (("eager", eager), ("compiled", comp)):
        print(f"{name:9s} loss {first:.4g} -> {last:.4g}   {per * 1e3:.2f} ms/step")
    print(f"compiled / eager time per step: {comp[2] / eager[2]:.2f} (same run, this machine)")
    ok = same and eager[1] < eager[0] / 10 and comp[1] < comp[0] / 10 and abs(comp[1] - eager[1]) <= 1e-6 * abs(eager[1]) + 1e-9
    print("ok" if ok else "FAILED: the runs did not both train, or disagree")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

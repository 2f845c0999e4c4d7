"""md_numpy.py: a numpy molecular-dynamics loop whose forces come from segopsd.

Atoms of several systems, each held to its own centre by a harmonic restraint: the potential
energy of system s is k/2 * sum over its atoms of |pos_i - centre_s|^2. Per step, one
segmented_mean (the centres), one segmented_dot (the energies) and the forces
-k (pos_i - centre_s) (the centres' own dependence cancels: sum of displacements is zero).
Velocity Verlet integrates it; the total energy must stay constant within 1e-4 relative.

    SEGOPS_URL=http://127.0.0.1:8080 python examples/md_numpy.py [--steps 200]"""

import argparse
import sys

import numpy as np

import segops


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--dt", type=float, default=0.01)
    ns = ap.parse_args()

    c = segops.Client()  # $SEGOPS_URL
    rng = np.random.default_rng(0)
    sizes = [4, 9, 2, 7]
    idx = np.repeat(np.arange(len(sizes)), sizes).astype(np.int32)
    s, k, mass = len(sizes), 3.0, 1.0
    pos = rng.standard_normal((len(idx), 3))
    vel = rng.standard_normal((len(idx), 3)) * 0.5
    vel -= c.segmented_mean(vel, idx, s)[idx]  # no drift of any system's centre

    def forces_and_energy(pos):
        d = pos - c.segmented_mean(pos, idx, s)[idx]
        e = 0.5 * k * c.segmented_dot(d, d, idx, s)  # (S,)
        return -k * d, e

    f, e_pot = forces_and_energy(pos)

    def total(e_pot, vel):
        return e_pot + 0.5 * mass * c.segmented_dot(vel, vel, idx, s)

    e0 = total(e_pot, vel)
    for step in range(ns.steps):
        vel += 0.5 * ns.dt * f / mass
        pos += ns.dt * vel
        f, e_pot = forces_and_energy(pos)
        vel += 0.5 * ns.dt * f / mass
        if step % 50 == 0:
            print(f"step {step:4d}  E per system {np.array2string(total(e_pot, vel), precision=6)}")
    drift = np.max(np.abs(total(e_pot, vel) - e0) / np.abs(e0))
    print(f"max relative energy drift over {ns.steps} steps: {drift:.2e}")
    return 0 if drift < 1e-4 else 1


if __name__ == "__main__":
    sys.exit(main())

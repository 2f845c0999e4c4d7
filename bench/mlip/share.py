#!/usr/bin/env python3
"""share.py: the share of a plain-torch training step's CPU time that is segment work (index_add_,
gather, scatter, index_select and their backwards), by torch.profiler: the most that moving the
segment work elsewhere can take off the step. segment_share() is the recipe README's "When it pays
off" gives for a user's own step; run as a script it measures the shipped message-passing step
(bench/mlip/mp_model.py) on one torch thread:

    python3 bench/mlip/share.py --atoms 1000,16000 --features 32
"""

import argparse
import os
import sys

try:
    import torch
    from torch.profiler import profile
except ImportError as e:  # CTest reads 77 as skipped
    print(f"SKIP: share.py needs torch ({e})")
    sys.exit(77)

SEGMENT_WORK = ("index_add", "gather", "scatter", "index_select")


def segment_share(step, steps=3, names=SEGMENT_WORK):
    """The share of step()'s CPU time (self time of every operator) spent in segment work (README's
    recipe, the same lines)."""
    step()  # warm up
    with profile() as prof:
        for _ in range(steps):
            step()
    ev = prof.key_averages()
    seg = sum(e.self_cpu_time_total for e in ev if any(k in e.key for k in names))
    return seg / sum(e.self_cpu_time_total for e in ev)


def readme_recipe(path):
    """The Python block of README.md that defines segment_share (its `# not run:` line dropped)."""
    text = open(path, encoding="utf-8").read()
    for block in text.split("```python\n")[1:]:
        code = block.split("```", 1)[0]
        if "def segment_share(" in code:
            lines = code.splitlines()
            return "\n".join(lines[1:] if lines[0].startswith("# not run:") else lines) + "\n"
    raise SystemExit(f"share.py: no block defining segment_share in {path}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--atoms", default="1000", help="atoms per batch, comma list")
    ap.add_argument("--features", default="32", help="F, comma list")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--from-readme", metavar="README", default=None,
                    help="run README's recipe itself (at most 10 lines) on the shipped step, as my_step")
    a = ap.parse_args()
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import mp_model as mm

    torch.set_num_threads(1)
    for atoms in (int(x) for x in a.atoms.split(",")):
        for f in (int(x) for x in a.features.split(",")):
            b = mm.make_batch(atoms)
            torch.manual_seed(0)
            step = mm.make_step(mm.Potential(f), b, mm.PlainWork())
            if a.from_readme:
                recipe = readme_recipe(a.from_readme)
                if len(recipe.splitlines()) > 10:
                    raise SystemExit(f"share.py: README's recipe has {len(recipe.splitlines())} lines (at most 10)")
                print(f"README's recipe on the shipped step ({b['batch'].shape[0]} atoms, F = {f}):", flush=True)
                exec(compile(recipe, a.from_readme, "exec"), {"my_step": step})  # noqa: S102
                continue
            share = segment_share(step, a.steps)
            print(f"message-passing step, {b['batch'].shape[0]} atoms, {b['snd'].shape[0]} edges, F = {f}: "
                  f"segment work {share:.1%} of the step's CPU time")
    return 0


if __name__ == "__main__":
    sys.exit(main())

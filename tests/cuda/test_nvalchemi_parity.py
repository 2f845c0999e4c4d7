#!/usr/bin/env python3
"""test_nvalchemi_parity.py: segops (segopsd --backend cuda, through segops.torch) against
nvalchemiops (nvalchemi-toolkit-ops 0.5, its own torch autograd) on the same inputs: forward,
backward (torch.autograd.grad with create_graph) and double backward (the gradient of that
backward with respect to g_out and the forward inputs), every op, float32 and float64, vec3 rows
(and scalar rows where the op has them), sorted idx without empty segments (nvalchemiops' domain).
Per element |segops - nvalchemiops| / max(|nvalchemiops|, 1) <= 1e-10 (float64), 2e-4 (float32).

Exit 77 (skip) without a GPU unless SEGOPS_REQUIRE_CUDA=1, and without nvalchemiops unless
SEGOPS_REQUIRE_NVALCHEMI=1. Usage: test_nvalchemi_parity.py SEGOPSD"""
import os
import zlib
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, os.path.join(HERE, "..", "..", "clients", "python", "src"))

SKIP = 77


def skip(msg, required):
    print("SKIP:", msg)
    sys.exit(1 if os.environ.get(required) == "1" else SKIP)


def main():
    segopsd = sys.argv[1]
    try:
        import numpy as np
        import torch
    except ImportError as e:
        skip(f"needs numpy and torch: {e}", "SEGOPS_REQUIRE_CUDA")
    if not torch.cuda.is_available():
        skip("no CUDA GPU visible to torch", "SEGOPS_REQUIRE_CUDA")
    try:
        import nvalchemiops.torch.segment_ops as nv
    except Exception as e:  # ImportError, or warp failing to initialise
        skip(f"nvalchemiops not importable: {e}", "SEGOPS_REQUIRE_NVALCHEMI")
    import segops
    import segops.torch as st
    from segopsd_proc import Daemon

    d = Daemon(segopsd, args=["--backend", "cuda"])
    client = segops.Client(d.url)
    rng = np.random.default_rng(7)
    lengths = rng.integers(1, 48, size=300)
    S = int(lengths.size)
    idx_np = np.repeat(np.arange(S, dtype=np.int32), lengths)
    N = int(idx_np.size)
    dev = torch.device("cuda")
    idx = torch.from_numpy(idx_np).to(dev)
    # op -> (input shapes for width w, which take part in autograd)
    ops = {
        "segmented_sum": lambda w: [(N, w)],
        "segmented_dot": lambda w: [(N, w), (N, w)],
        "segmented_mul": lambda w: [(N, w), (S,)],
        "segmented_mean": lambda w: [(N, w)],
        "segmented_rms_norm": lambda w: [(N, 3)],
        "segmented_matvec": lambda w: [(N, 3), (S, 3, 3)],
    }
    widths = {"segmented_rms_norm": (3,), "segmented_matvec": (3,)}
    failures, checked, worst = [], 0, {}

    def squeeze(shape, w):
        return shape[:1] if len(shape) == 2 and w == 1 else shape

    def run(fn, inputs, g_out, gg):
        ins = [t.detach().clone().requires_grad_(True) for t in inputs]
        go = g_out.detach().clone().requires_grad_(True)
        out = fn(*ins)
        grads = torch.autograd.grad(out, ins, go, create_graph=True)
        second = torch.autograd.grad(grads, [go, *ins], gg, allow_unused=True)
        second = [torch.zeros_like(t) if s is None else s for s, t in zip(second, [go, *ins])]
        return [out.detach()] + [g.detach() for g in grads] + [s.detach() for s in second]

    for dt, tol in ((torch.float64, 1e-10), (torch.float32, 2e-4)):
        for op, shapes in ops.items():
            for w in widths.get(op, (1, 3)):
                gen = torch.Generator(device=dev).manual_seed(zlib.crc32(f"{op}{w}{dt}".encode()))
                R = lambda shape: torch.rand(shape, generator=gen, device=dev, dtype=dt) - 0.5
                inputs = [R(squeeze(sh, w)) for sh in shapes(w)]
                ours = lambda *a: getattr(st, op)(*a, idx, S, client=client)
                theirs = lambda *a: getattr(nv, op)(*a, idx, S)
                probe = theirs(*inputs)
                g_out = R(tuple(probe.shape))
                gg = [R(tuple(t.shape)) for t in inputs]
                ref = run(theirs, inputs, g_out, gg)
                got = run(ours, inputs, g_out, gg)
                names = ["forward"] + [f"backward grad_{k}" for k in range(len(inputs))] + [
                    "double_backward grad_g_out"] + [f"double_backward grad_{k}" for k in range(len(inputs))]
                for name, a, b in zip(names, got, ref):
                    checked += 1
                    a64, b64 = a.double().cpu(), b.double().cpu()
                    err = ((a64 - b64).abs() / b64.abs().clamp(min=1.0)).max().item() if b64.numel() else 0.0
                    key = str(dt).split(".")[-1]
                    worst[key] = max(worst.get(key, 0.0), err)
                    if not (err <= tol):
                        failures.append(f"{op} width {w} {key} {name}: max rel. error {err:.3g} > {tol:g}")
    client.close()
    d.stop()
    for f in failures:
        print("MISMATCH", f)
    print(f"nvalchemi parity: {checked} results compared (N = {N}, S = {S}), worst rel. error "
          + ", ".join(f"{k} {v:.3g}" for k, v in worst.items()) + f"; {len(failures)} mismatches")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

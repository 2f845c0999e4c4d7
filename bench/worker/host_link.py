"""host_link.py: the host<->GPU link's bytes/s, the floor under the worker benchmark at large N.

Every byte a worker's step sends or gets back through segopsd crosses this link (PCIe on the GPU
machine): page-locked host memory to the device and back, one direction at a time and both at
once (two streams), with torch, for a few sizes. Prints one line per case, GB/s (10^9 bytes).

    python3 bench/worker/host_link.py [--sizes-mib 4,16,64] [--repeat 20]
"""
import argparse
import time

import torch


def rate(fn, nbytes, repeat):
    fn()
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(repeat):
        fn()
    torch.cuda.synchronize()
    return nbytes * repeat / (time.perf_counter() - t) / 1e9


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes-mib", default="4,16,64")
    ap.add_argument("--repeat", type=int, default=20)
    a = ap.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("host_link.py: no CUDA device")
    print(f"device: {torch.cuda.get_device_name(0)}")
    s1, s2 = torch.cuda.Stream(), torch.cuda.Stream()
    for mib in [int(x) for x in a.sizes_mib.split(",")]:
        n = mib << 20
        h_in = torch.empty(n, dtype=torch.uint8).pin_memory()
        h_out = torch.empty(n, dtype=torch.uint8).pin_memory()
        d_in = torch.empty(n, dtype=torch.uint8, device="cuda")
        d_out = torch.empty(n, dtype=torch.uint8, device="cuda")
        h2d = rate(lambda: d_in.copy_(h_in, non_blocking=True), n, a.repeat)
        d2h = rate(lambda: h_out.copy_(d_out, non_blocking=True), n, a.repeat)

        def both():
            with torch.cuda.stream(s1):
                d_in.copy_(h_in, non_blocking=True)
            with torch.cuda.stream(s2):
                h_out.copy_(d_out, non_blocking=True)

        bidir = rate(both, 2 * n, a.repeat)
        print(f"{mib:>5} MiB  H2D {h2d:6.1f} GB/s  D2H {d2h:6.1f} GB/s  both at once {bidir:6.1f} GB/s (sum)")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""vs_mps.py: segopsd's steps/s against the same workers offloading the same ops to the GPU under
NVIDIA MPS, from two worker_bench JSON files of one run: the first with segopsd's rows (and, with
--alternatives offload, each worker offloading in its own CUDA context), the second from
`--transport none --alternatives offload` while nvidia-cuda-mps-control ran.

    python3 bench/worker/vs_mps.py bench/out/w16.json bench/out/w16_mps.json [--transport native]
"""

import argparse
import json
import sys


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("segopsd_json")
    ap.add_argument("mps_json")
    ap.add_argument("--transport", default="native")
    a = ap.parse_args()
    with open(a.segopsd_json) as f:
        main_rows = json.load(f)["rows"]
    with open(a.mps_json) as f:
        mps = json.load(f)
    under = {(r["op"], r["log2n"]): r for r in mps["rows"] if "offload_sps" in r}
    print(f"| op | N | plain steps/s | segopsd ({a.transport}) steps/s | offload, own contexts | offload under MPS "
          f"| **segopsd / offload under MPS** | segopsd / offload, own contexts |")
    print("|---|---|---|---|---|---|---|---|")
    n = 0
    for r in main_rows:
        m = under.get((r["op"], r["log2n"]))
        if r.get("transport") != a.transport or m is None:
            continue
        own = r.get("offload_sps")
        seg = r["remote_sps"]
        own_s = "-" if own is None else f"{own:,.0f}"
        own_r = "-" if not own else f"{seg / own:.2f}"
        print(f"| {r['op'].replace('segmented_', '')} | 2^{r['log2n']} | {r['local_sps']:,.0f} | {seg:,.0f} | "
              f"{own_s} | {m['offload_sps']:,.0f} | **{seg / m['offload_sps']:.2f}** | {own_r} |")
        n += 1
    if not n:
        print(f"vs_mps: no (op, N) in both files for transport {a.transport}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

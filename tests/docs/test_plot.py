#!/usr/bin/env python3
"""test_plot.py: bench/plot.py draws both figures from small inputs in the formats the benchmarks
write (worker_bench.py --json rows, with and without the --alternatives columns; bench_cuda --tsv):
each run writes a PNG and says how many transports, ops, sizes and layouts it plotted. Exit 77
(skip) without matplotlib.

usage: test_plot.py REPO_ROOT"""
import json
import os
import subprocess
import sys
import tempfile

try:
    import matplotlib  # noqa: F401
except ImportError:
    print("SKIP: no matplotlib (scripts/setup.sh --bench installs it)")
    sys.exit(77)


def worker_json(path, alternatives):
    rows = []
    for t in ("shm", "http"):
        for op in ("segmented_sum", "segmented_matvec"):
            for k, log2n in enumerate((10, 14, 17)):
                r = {"op": op, "log2n": log2n, "n": 1 << log2n, "transport": t, "workers": 2,
                     "throughput_ratio": 0.2 * (k + 1) * (2 if "matvec" in op else 1)}
                if alternatives:
                    r.update(vs_offload=1.5 / (k + 1), vs_gpu=0.5 / (k + 1))
                rows.append(r)
    rows.append({"op": "segmented_sum", "log2n": 20, "n": 1 << 20, "transport": "shm", "workers": 2,
                 "throughput_ratio": float("nan")})  # a failed cell: left out, not plotted as 0
    with open(path, "w") as f:
        json.dump({"backend": "cpu", "workers": 2, "cores": 2, "rows": rows}, f)


def cuda_tsv(path, log2n):
    head = "fn\tdtype\tlayout\tn\ts\tbytes\tmedian_ms\tgbps\tcopy_gbps\twarm_ms\twarm_gbps\n"
    with open(path, "w") as f:
        f.write(head)
        for lay in ("seg32", "seg32-unsorted"):
            for fn in ("segmented_sum/forward", "segmented_dot/backward"):
                f.write(f"{fn}\tfloat32\t{lay}\t{1 << log2n}\t{1 << (log2n - 5)}\t1000\t0.1\t100\t4000\t0.05\t"
                        f"{40 * log2n}\n")


def run(root, *args):
    p = subprocess.run([sys.executable, os.path.join(root, "bench", "plot.py"), *args], capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 0, (args, p.stdout, p.stderr)
    out = args[args.index("-o") + 1]
    with open(out, "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n", out
    assert os.path.getsize(out) > 10000, out
    print(p.stdout.strip())
    return p.stdout


def main():
    root = sys.argv[1]
    with tempfile.TemporaryDirectory() as tmp:
        w1, w2 = os.path.join(tmp, "w1.json"), os.path.join(tmp, "w2.json")
        worker_json(w1, False)
        worker_json(w2, True)
        out = run(root, "worker", w1, "-o", os.path.join(tmp, "fig", "w1.png"))
        assert "1 ratio(s) x 2 transport(s), 2 op(s), 3 size(s)" in out, out
        out = run(root, "worker", w2, "-o", os.path.join(tmp, "w2.png"), "--caption", "made by test_plot.py")
        assert "3 ratio(s) x 2 transport(s)" in out, out
        tsvs = []
        for log2n in (12, 17):
            tsvs.append(os.path.join(tmp, f"n{log2n}.tsv"))
            cuda_tsv(tsvs[-1], log2n)
        out = run(root, "cuda", *tsvs, "-o", os.path.join(tmp, "k.png"))
        assert "2 layout(s), 2 size(s), 8 rows" in out, out
    print("ok: bench/plot.py drew every figure")


if __name__ == "__main__":
    main()

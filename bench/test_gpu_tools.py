#!/usr/bin/env python3
"""test_gpu_tools.py: what of the GPU entry runs without a GPU. bench/gpu.sh --help names every
step; bad arguments (no step, an unknown step or option, a missing or non-tree BASE, sizes that are
not numbers, bad WIDTHS or WIDE_LAYOUTS for kernels) exit 2 before anything is built; bench/cuda/ab_compare.py passes a run within tolerance
with identical digests and fails a slower row, a row within the baseline's own spread passes, and
a differing or missing digest fails."""
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
GPU_SH = os.path.join(HERE, "gpu.sh")
fails = []


def check(cond, what):
    if not cond:
        fails.append(what)
        print("FAIL:", what)


def gpu_sh(*args, work):
    return subprocess.run(["bash", GPU_SH, "--work", work, "--out", work, *args], capture_output=True, text=True)


def test_gpu_sh(tmp):
    r = subprocess.run(["bash", GPU_SH, "--help"], capture_output=True, text=True)
    check(r.returncode == 0, f"--help exits 0 (got {r.returncode})")
    for step in ("suite", "sanitize", "kernels", "compare", "worker", "service", "stepcost"):
        check(f"\n  {step} " in r.stdout, f"--help names the step {step}")
    work = os.path.join(tmp, "work")
    bad = [
        ((), "no step given"),
        (("bogus",), "unknown step 'bogus'"),
        (("--bogus", "suite"), "unknown option --bogus"),
        (("compare",), "compare takes BASE [SIZES]"),
        (("compare", os.path.join(tmp, "nowhere")), "is not a source tree"),
        (("compare", ROOT, "12 x"), "sizes must be log2 numbers"),
        (("kernels", "twelve"), "kernels takes one argument"),
        (("suite", "extra"), "suite takes no arguments"),
        (("--jobs", "0", "suite"), "--jobs needs a number"),
    ]
    for args, msg in bad:
        r = gpu_sh(*args, work=work)
        check(r.returncode == 2 and msg in r.stderr, f"gpu.sh {' '.join(args)}: exit 2 saying '{msg}' "
              f"(got {r.returncode}: {r.stderr.strip()})")
    for var, value in (("WIDTHS", "16,x"), ("WIDE_LAYOUTS", "05")):
        r = subprocess.run(["bash", GPU_SH, "--work", work, "--out", work, "kernels"], capture_output=True, text=True,
                           env=dict(os.environ, **{var: value}))
        check(r.returncode == 2 and f"{var}:" in r.stderr, f"gpu.sh kernels with {var}={value}: exit 2 naming {var} "
              f"(got {r.returncode}: {r.stderr.strip()})")
    check(not os.path.exists(work), "bad arguments create nothing")


HEADER = "fn\tdtype\tlayout\tn\ts\tbytes\tmedian_ms\tgbps\tcopy_gbps\twarm_ms\twarm_gbps\n"


def write_runs(work, k, base1, base2, new1, new2, dig_base="a\t1\n", dig_new="a\t1\n"):
    def tsv(name, rows):
        with open(os.path.join(work, f"cmp_{name}_n{k}.tsv"), "w") as f:
            f.write(HEADER)
            for fn, ms in rows.items():
                f.write(f"{fn}\tfloat32\tseg32\t4096\t100\t1\t{ms}\t1\t1\t{ms}\t1\n")

    for name, rows in (("base1", base1), ("base2", base2), ("new1", new1), ("new2", new2)):
        tsv(name, rows)
    for side, dig in (("base", dig_base), ("new", dig_new)):
        with open(os.path.join(work, f"cmp_{side}_n{k}.dig"), "w") as f:
            f.write(dig)
        with open(os.path.join(work, f"cmp_{side}_conformance.dig"), "w") as f:
            f.write("c\t1\n")


def ab(work):
    r = subprocess.run([sys.executable, os.path.join(HERE, "cuda", "ab_compare.py"), "--work", work, "--sizes", "12"],
                       capture_output=True, text=True)
    return r.returncode, r.stdout


def test_ab_compare(tmp):
    cases = [
        # (base1, base2, new1, new2, digests equal, expected rc, what)
        ({"f": 1.00}, {"f": 1.00}, {"f": 1.02}, {"f": 1.02}, True, 0, "2 % slower: within 3 %"),
        ({"f": 1.00}, {"f": 1.00}, {"f": 1.05}, {"f": 1.05}, True, 1, "5 % slower, no spread: SLOWER"),
        ({"f": 1.00}, {"f": 1.10}, {"f": 1.12}, {"f": 1.12}, True, 0, "7 % slower within a 10 % baseline spread"),
        ({"f": 1.00}, {"f": 1.00}, {"f": 0.80}, {"f": 0.80}, True, 0, "faster passes"),
        ({"f": 1.00}, {"f": 1.00}, {"f": 1.00}, {"f": 1.00}, False, 1, "a differing digest fails"),
    ]
    for k, (b1, b2, n1, n2, same, rc_want, what) in enumerate(cases):
        work = os.path.join(tmp, f"ab{k}")
        os.makedirs(work)
        write_runs(work, 12, b1, b2, n1, n2, dig_new="a\t1\n" if same else "a\t2\n")
        rc, out = ab(work)
        check(rc == rc_want, f"ab_compare: {what}: exit {rc_want} (got {rc}):\n{out}")
    work = os.path.join(tmp, "ab_missing")
    os.makedirs(work)
    write_runs(work, 12, {"f": 1.0}, {"f": 1.0}, {"f": 1.0}, {"f": 1.0})
    os.remove(os.path.join(work, "cmp_new_conformance.dig"))
    rc, out = ab(work)
    check(rc == 1 and "digest conformance: missing" in out, f"ab_compare: a missing digest fails (got {rc}):\n{out}")


def main():
    with tempfile.TemporaryDirectory() as tmp:
        test_gpu_sh(tmp)
        test_ab_compare(tmp)
    print(f"gpu tools: {len(fails)} failure(s)")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())

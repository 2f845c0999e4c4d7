#!/usr/bin/env python3
"""test_cuda_wait.py: SEGOPS_CUDA_WAIT and SEGOPS_CUDA_WAIT_POLL_US on the real daemon: each
policy is applied to the device (read back in /v1/info's devices[].wait), answers are the same
bits under every policy, and a bad value stops the daemon with a message naming the variable.

Exit 77 (skip) without a GPU, unless SEGOPS_REQUIRE_CUDA=1."""
import json
import os
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from segopsd_proc import Daemon  # noqa: E402

SKIP = 77


def skip(msg):
    print("SKIP:", msg)
    sys.exit(1 if os.environ.get("SEGOPS_REQUIRE_CUDA") == "1" else SKIP)


def call(d, op, pss, body):
    c = d.conn()
    c.request("POST", f"/v1/{op}/{pss}", json.dumps(body), {"Content-Type": "application/json"})
    r = c.getresponse()
    data = r.read()
    assert r.status == 200, (op, pss, r.status, data)
    return json.loads(data)


def info(d):
    c = d.conn()
    c.request("GET", "/v1/info")
    r = c.getresponse()
    assert r.status == 200
    return json.loads(r.read())


def main():
    segopsd = sys.argv[1]
    rng = np.random.default_rng(5)
    n, s = 50000, 1500
    idx = np.sort(rng.integers(0, s, n)).astype(np.int64)
    x = rng.standard_normal((n, 3))
    body = {"x": {"dtype": "float64", "shape": [n, 3], "data": x.ravel().tolist()},
            "idx": {"dtype": "int64", "shape": [n], "data": idx.tolist()}, "num_segments": s}
    want = np.zeros((s, 3))
    np.add.at(want, idx, x)

    answers = {}
    for wait, poll in (("", ""), ("spin", ""), ("yield", ""), ("block", ""), ("block", "50")):
        env = {}
        if wait:
            env["SEGOPS_CUDA_WAIT"] = wait
        if poll:
            env["SEGOPS_CUDA_WAIT_POLL_US"] = poll
        try:
            d = Daemon(segopsd, ["--backend", "cuda"], env=env, start_timeout=60)
        except AssertionError as e:
            if not wait:
                skip(f"segopsd --backend cuda did not start: {str(e)[-300:]}")
            raise
        try:
            devs = info(d)["devices"]
            assert devs and all(dv.get("wait") == (wait or "auto") for dv in devs), (wait, devs)
            # Several calls, large and small, so both short and longer waits happen.
            for _ in range(3):
                got = call(d, "segmented_sum", "forward", body)["out"]
                out = np.array(got["data"], dtype=np.float64).reshape(s, 3)
                np.testing.assert_allclose(out, want, rtol=1e-12, atol=1e-12)
            key = f"{wait or 'auto'}/{poll or 0}"
            answers[key] = out.tobytes()
            print(f"ok: SEGOPS_CUDA_WAIT={wait or '(unset)'} SEGOPS_CUDA_WAIT_POLL_US={poll or '(unset)'}: "
                  f"/v1/info wait={devs[0]['wait']}, sum forward correct")
        finally:
            d.stop_and_check()
    first = next(iter(answers.values()))
    assert all(a == first for a in answers.values()), "results differ between wait policies"
    print(f"ok: {len(answers)} policies gave identical bits")

    for env_add, needle in (({"SEGOPS_CUDA_WAIT": "sleepy"}, "SEGOPS_CUDA_WAIT must be"),
                            ({"SEGOPS_CUDA_WAIT": "sleepy", "backend": "auto"}, "SEGOPS_CUDA_WAIT must be"),
                            ({"SEGOPS_CUDA_WAIT": "block", "SEGOPS_CUDA_WAIT_POLL_US": "-1"},
                             "SEGOPS_CUDA_WAIT_POLL_US must be"),
                            ({"SEGOPS_CUDA_WAIT": "spin", "SEGOPS_CUDA_WAIT_POLL_US": "20"},
                             "applies only with SEGOPS_CUDA_WAIT=block")):
        env = {k: v for k, v in os.environ.items() if not k.startswith("SEGOPS_")}
        env.update(env_add)
        backend = env.pop("backend", "cuda")  # auto must refuse a bad setting too, not fall back to the CPU
        p = subprocess.run([segopsd, "--backend", backend, "--listen", "127.0.0.1:0"], env=env,
                           capture_output=True, text=True, timeout=60)
        assert p.returncode != 0, (env_add, p.returncode, p.stdout)
        assert needle in p.stderr, (env_add, p.stderr)
        print(f"ok: {env_add} refused: {p.stderr.strip().splitlines()[-1]}")


if __name__ == "__main__":
    main()

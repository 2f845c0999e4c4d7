#!/usr/bin/env python3
"""test_cuda_settings.py: the CUDA backend's rows of the configuration table on the real daemon.
A bad value of any of them stops the daemon (with every --backend: the table refuses it before a
backend starts) with a message naming the variable and the option; this part runs without a GPU.
With a GPU: --cuda-wait and --cuda-wait-poll-us: each policy is applied to the device (read back in
/v1/info's devices[].wait), answers are the same bits under every policy; --cuda-lanes 2 with
large and small calls from several threads at once: all answered, with the same bits; a poll time
without the block policy is refused when the CUDA backend starts.

Exit 77 (skip) without a GPU, unless SEGOPS_REQUIRE_CUDA=1."""
import json
import os
import subprocess
import sys
import threading

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
    for wait, poll, lanes in (("", "", ""), ("spin", "", ""), ("yield", "", ""), ("block", "", ""),
                              ("block", "50", ""), ("", "", "2")):
        env = {}
        if lanes:
            env["SEGOPS_CUDA_LANES"] = lanes
        if wait:
            env["SEGOPS_CUDA_WAIT"] = wait
        if poll:
            env["SEGOPS_CUDA_WAIT_POLL_US"] = poll
        try:
            d = Daemon(segopsd, ["--backend", "cuda"], env=env, start_timeout=60)
        except AssertionError as e:
            if not env:
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
            if lanes:
                assert all(dv["workers"] == int(lanes) for dv in devs), devs
                small_n = 2000
                small = {"x": {"dtype": "float64", "shape": [small_n, 3], "data": x[:small_n].ravel().tolist()},
                         "idx": {"dtype": "int64", "shape": [small_n], "data": idx[:small_n].tolist()},
                         "num_segments": s}
                got_small = call(d, "segmented_sum", "forward", small)["out"]["data"]
                errors = []

                def hammer(body_, want_data):
                    try:
                        for _ in range(4):
                            if call(d, "segmented_sum", "forward", body_)["out"]["data"] != want_data:
                                errors.append("different answer")
                    except Exception as e:  # noqa: BLE001 (reported below)
                        errors.append(repr(e))
                th = [threading.Thread(target=hammer, args=(b_, w_)) for b_, w_ in
                      ((body, got["data"]), (small, got_small)) * 4]
                for t in th:
                    t.start()
                for t in th:
                    t.join()
                assert not errors, errors
            key = f"{wait or 'auto'}/{poll or 0}/{lanes or 'lanes'}"
            answers[key] = out.tobytes()
            print(f"ok: {env or '(defaults)'}: /v1/info wait={devs[0]['wait']}, "
                  f"workers={devs[0]['workers']}, sum forward correct")
        finally:
            d.stop_and_check()
    first = next(iter(answers.values()))
    assert all(a == first for a in answers.values()), "results differ between wait policies"
    print(f"ok: {len(answers)} policies gave identical bits")

    refused(segopsd, (({"SEGOPS_CUDA_WAIT": "spin", "SEGOPS_CUDA_WAIT_POLL_US": "20"},
                       "applies only with SEGOPS_CUDA_WAIT=block"),))


def refused(segopsd, cases, backends=("cuda",)):
    """Each (environment or argv, needle): the daemon exits non-zero with needle in its stderr."""
    for add, needle in cases:
        for backend in backends:
            env = {k: v for k, v in os.environ.items() if not k.startswith("SEGOPS_")}
            argv = [segopsd, "--backend", backend, "--listen", "127.0.0.1:0"]
            if isinstance(add, dict):
                env.update(add)
            else:
                argv += add
            p = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60)
            assert p.returncode != 0, (add, backend, p.returncode, p.stdout)
            assert needle in p.stderr, (add, backend, p.stderr)
            print(f"ok: {add} refused with --backend {backend}: {p.stderr.strip().splitlines()[-1]}")


if __name__ == "__main__":
    # Bad values are the table's to refuse, before any backend: the same on every backend and machine.
    refused(sys.argv[1], (({"SEGOPS_CUDA_WAIT": "sleepy"}, "SEGOPS_CUDA_WAIT (--cuda-wait): expected auto, spin"),
                          ({"SEGOPS_CUDA_WAIT_POLL_US": "-1"}, "SEGOPS_CUDA_WAIT_POLL_US (--cuda-wait-poll-us)"),
                          ({"SEGOPS_CUDA_LANES": "0"}, "SEGOPS_CUDA_LANES (--cuda-lanes): expected 1 to 16"),
                          (["--cuda-lanes", "17"], "--cuda-lanes: expected 1 to 16"),
                          ({"SEGOPS_LAYOUT_CACHE_BYTES": "lots"}, "SEGOPS_LAYOUT_CACHE_BYTES")),
            backends=("cuda", "auto", "cpu"))
    main()

"""test_batching.py: dynamic batching (--max-batch-elements, --max-queue-delay-us) is invisible in
results: under concurrent load, every answer of a batching daemon is bit-identical to the
answer of a daemon that runs each request alone; invalid requests mixed in fail alone."""
import threading

import msgpack
import numpy as np

from client import MSGPACK, encode, info, request
from test_lifecycle import metric

FUNCS = [("segmented_sum", "forward"), ("segmented_rms_norm", "backward"), ("segmented_dot", "double_backward"),
         ("segmented_matvec", "backward"), ("segmented_mean", "forward"), ("segmented_mul", "double_backward")]


def make_requests(table, n=240):
    rng = np.random.default_rng(42)
    reqs = []
    for k in range(n):
        op, pas = FUNCS[k % len(FUNCS)]
        fn = table[op][pas]
        width = 3 if fn["vec3_only"] or k % 3 else 1
        N, S = int(rng.integers(0, 300)), int(rng.integers(1, 12))
        idx = rng.integers(0, S, N).astype(np.int32)
        if k % 2:
            idx.sort()  # both idx classes
        args = {}
        for inp in fn["inputs"]:
            if inp["name"] in ("idx", "num_segments"):
                continue
            t = inp["shape"].replace(" ", "")
            lead = N if t.startswith("(N") else S
            shape = (S, 3, 3) if t == "(S,3,3)" else (lead, 3) if (t.endswith("(N,3)") or t.endswith("(S,3)")) and \
                (width == 3 or "or" not in t) else (lead,)
            args[inp["name"]] = rng.standard_normal(shape) * 10
        dtype = "float32" if k % 4 == 0 else "float64"
        reqs.append((op, pas, encode(args, idx, S, MSGPACK, dtype)))
    return reqs


def run_all(url, reqs, threads):
    out = [None] * len(reqs)

    def worker(t):
        from client import conn_for
        c = conn_for(url)
        for i in range(t, len(reqs), threads):
            op, pas, body = reqs[i]
            st, _, data = request(url, "POST", f"/v1/{op}/{pas}", body, {"Content-Type": MSGPACK}, conn=c)
            out[i] = (st, data)
        c.close()

    ts = [threading.Thread(target=worker, args=(t,)) for t in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return out


def test_batched_bit_identical_to_unbatched(daemon_factory):
    alone = daemon_factory("--max-batch-elements", "0")
    # The test build's 3 ms pause per backend call lets requests pile up, so batches really form.
    batched = daemon_factory("--max-batch-elements", "100000", "--max-queue-delay-us", "2000",
                             env={"SEGOPS_TEST_DELAY_MS": "3"}, test_build=True)
    reqs = make_requests(info(alone.url)["ops"])
    bad = b"\x83\xa1x\x81\xa5dtype\xa7float64\xa3idx\xc0\xacnum_segments\x01"  # a malformed tensor
    reqs_with_bad = reqs + [("segmented_sum", "forward", bad)] * 8
    want = run_all(alone.url, reqs, 4)
    got = run_all(batched.url, reqs_with_bad, 48)
    for i, (w, g) in enumerate(zip(want, got)):
        assert w[0] == 200, (i, w)
        assert g[0] == 200, (i, g)
        wm, gm = msgpack.unpackb(w[1]), msgpack.unpackb(g[1])
        assert wm == gm, f"request {i} ({reqs[i][0]}/{reqs[i][1]}) differs when batched"
    for st, data in got[len(reqs):]:
        assert st == 400, (st, data)
    _, _, m = request(batched.url, "GET", "/metrics")
    t = m.decode()
    calls, joined = metric(t, "segops_batch_size_count"), metric(t, "segops_batch_size_sum")
    assert joined == len(reqs), (joined, len(reqs))
    assert calls < joined, f"no batch formed ({calls} backend calls for {joined} requests)"
    assert metric(t, "segops_batch_size_bucket", le="1") < calls


def test_batches_keep_feature_shapes_apart(daemon_factory):
    """Requests whose rows hold the same number of values in other feature shapes ((N,6) and
    (N,2,3)), or other numbers of values ((N,), (N,3), (N,16)), queued at once: each answer has its
    own request's shape and bits, as from a daemon that runs each alone, and batches still form."""
    alone = daemon_factory("--max-batch-elements", "0")
    batched = daemon_factory("--max-batch-elements", "100000", "--max-queue-delay-us", "2000",
                             env={"SEGOPS_TEST_DELAY_MS": "3"}, test_build=True)
    rng = np.random.default_rng(7)
    feats = [(), (3,), (6,), (2, 3), (16,), (3, 2)]
    reqs = []
    for k in range(120):
        f = feats[k % len(feats)]
        n, s = int(rng.integers(1, 200)), int(rng.integers(1, 9))
        idx = np.sort(rng.integers(0, s, n)).astype(np.int32)
        op, pas = ("segmented_sum", "forward") if k % 2 else ("segmented_mean", "backward")
        args = {"x": rng.standard_normal((n, *f))}
        if pas == "backward":
            args["g_out"] = rng.standard_normal((s, *f))
        reqs.append((op, pas, encode(args, idx, s, MSGPACK, "float64")))
    want = run_all(alone.url, reqs, 4)
    got = run_all(batched.url, reqs, 48)
    for i, (w, g) in enumerate(zip(want, got)):
        assert w[0] == 200 and g[0] == 200, (i, w[0], g[0], g[1][:200])
        wm, gm = msgpack.unpackb(w[1]), msgpack.unpackb(g[1])
        assert wm == gm, f"request {i} ({reqs[i][0]}/{reqs[i][1]}, F = {feats[i % len(feats)]}) differs when batched"
    t = request(batched.url, "GET", "/metrics")[2].decode()
    calls, joined = metric(t, "segops_batch_size_count"), metric(t, "segops_batch_size_sum")
    assert joined == len(reqs), (joined, len(reqs))
    assert calls < joined, f"no batch formed ({calls} backend calls for {joined} requests)"


def test_large_requests_run_alone(daemon_factory):
    """Requests past 2^14 rows never join a batch (batching copies every input and output on the
    host, which costs more than it saves at that size); smaller ones waiting beside them do."""
    d = daemon_factory("--max-batch-elements", "1000000", "--max-queue-delay-us", "2000",
                       env={"SEGOPS_TEST_DELAY_MS": "3"}, test_build=True)
    rng = np.random.default_rng(3)

    def body(n):
        x = rng.standard_normal((n, 3))
        return encode({"x": x}, np.sort(rng.integers(0, 16, n)).astype(np.int32), 16, MSGPACK, "float64")

    big = [("segmented_sum", "forward", body((1 << 14) + 1)) for _ in range(12)]
    got = run_all(d.url, big, 12)
    assert all(st == 200 for st, _ in got)
    t = request(d.url, "GET", "/metrics")[2].decode()
    assert metric(t, "segops_batch_size_sum") == 12
    assert metric(t, "segops_batch_size_count") == 12, "a request past 2^14 rows joined a batch"
    small = [("segmented_sum", "forward", body(1 << 14)) for _ in range(12)]
    got = run_all(d.url, small, 12)
    assert all(st == 200 for st, _ in got)
    t = request(d.url, "GET", "/metrics")[2].decode()
    assert metric(t, "segops_batch_size_sum") == 24
    assert metric(t, "segops_batch_size_count") < 24, "no batch formed of requests of 2^14 rows"

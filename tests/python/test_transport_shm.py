"""test_transport_shm.py: segops.Client over shared memory (clients/python/README.md) against the real daemon:
every function bit-identical to HTTP bodies, results that never alias the region, arrays from
Client.empty() sent without a copy, regions grown, released on close and at exit, threads,
errors, the torch functions, and auto's fall-back when no region can be registered.
Skipped (77 via run_pytest.py --skip-if-all-skipped) while the daemon has no shm endpoints."""

import gc
import http.client
import json
import os
import subprocess
import sys
import threading

import numpy as np
import pytest

import segops
from segops import _shm, _table
from segref import FORWARD_INPUTS, WIDTHS, shape_of


def _status(url):
    host, port = url.split("//")[1].split(":")
    c = http.client.HTTPConnection(host, int(port), timeout=10)
    c.request("GET", "/v2/systemsharedmemory/status")
    r = c.getresponse()
    body = r.read()
    c.close()
    return r.status, (json.loads(body) if r.status == 200 else body)


@pytest.fixture(scope="module")
def shm_url(server_url):
    if _status(server_url)[0] != 200:
        pytest.skip("this segopsd has no /v2/systemsharedmemory endpoints yet")
    return server_url


@pytest.fixture(scope="module")
def shm_client(shm_url):
    c = segops.Client(shm_url, transport="shm")
    yield c
    c.close()


def _ours(url, client, others=()):
    """This process's regions, less `others` (those of clients a test did not make, e.g. shm_client)."""
    return [r for r in _status(url)[1] if r["name"].startswith(f"segops-{os.getpid()}-") and r["name"] not in others]


def _existing(url):
    return {r["name"] for r in _ours(url, None)}


def _args(op, pass_, dtype, width, n=50, s=7, seed=0):
    rng = np.random.default_rng(seed)
    idx = np.sort(rng.integers(0, s, n)).astype(np.int32)
    a = {}
    for name, _use in _table.FUNCS[(op, pass_)][0]:
        a[name] = rng.standard_normal(shape_of(op, name, width, n, s)).astype(dtype)
    a["idx"] = idx
    a["num_segments"] = s
    return a


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_every_function_bit_identical_to_http(shm_url, shm_client, dtype):
    assert shm_client.transport_used == "shm"
    with segops.Client(shm_url, transport="http") as h:
        for (op, pass_) in _table.FUNCS:
            for width in WIDTHS[op]:
                args = _args(op, pass_, dtype, width)
                a = shm_client.call(op, pass_, dict(args))
                b = h.call(op, pass_, dict(args))
                assert sorted(a) == sorted(b) == sorted(_table.output_names(op, pass_)), (op, pass_)
                for k in a:
                    assert a[k].dtype == b[k].dtype and a[k].shape == b[k].shape, (op, pass_, k)
                    assert np.array_equal(a[k], b[k]), (op, pass_, k)


def test_output_subset_and_omitted_inputs(shm_client):
    args = _args("segmented_dot", "double_backward", "float64", 3)
    only = shm_client.call("segmented_dot", "double_backward", dict(args), outputs=["grad_y"])
    full = shm_client.call("segmented_dot", "double_backward", dict(args))
    assert list(only) == ["grad_y"] and np.array_equal(only["grad_y"], full["grad_y"])
    # sum double backward without g_out and x: grad_g_out's shape comes from gg_x
    gg = np.ones((10, 3))
    out = shm_client.segmented_sum_double_backward(gg, None, None, np.zeros(10, np.int32), 2)
    np.testing.assert_array_equal(out, [[10, 10, 10], [0, 0, 0]])


def test_every_output_is_placed_in_the_region(shm_client):
    """Every output of every function comes back through the region, also when the inputs the
    formula does not read are omitted (as segops.torch sends them): sum's and mean's backward
    then know grad_x's shape from idx and g_out alone."""
    sess = shm_client._shm
    for (op, pass_), (ins, _outs) in _table.FUNCS.items():
        for width in WIDTHS[op]:
            args = _args(op, pass_, "float64", width)
            for name, use in ins:
                if use == _table.UNR:
                    del args[name]
            before = sess.outputs_inline
            res = shm_client.call(op, pass_, args)
            assert sorted(res) == sorted(_table.output_names(op, pass_)), (op, pass_)
            assert sess.outputs_inline == before, (op, pass_, width, "answered inline")


@pytest.mark.parametrize("lend", [0, 8])
def test_results_do_not_alias_the_region(shm_client, monkeypatch, lend):
    """Results stay valid and private: a later call never writes where an earlier result lives,
    and writing into a result changes no later answer (results are views into their call's
    region, which is not reused while any of them lives, or copies past the lending cap)."""
    monkeypatch.setattr(_shm, "_MAX_LENT", lend)
    idx = np.zeros(4, np.int32)
    r1 = shm_client.segmented_sum(np.ones(4), idx, 1)
    r2 = shm_client.segmented_sum(np.full(4, 2.0), idx, 1)
    assert r1[0] == 4.0 and r2[0] == 8.0
    r1[0] = 99.0  # writable, and nobody else's memory
    assert shm_client.segmented_sum(np.ones(4), idx, 1)[0] == 4.0
    assert r1[0] == 99.0 and r2[0] == 8.0
    many = [shm_client.segmented_sum(np.full(4, float(k)), idx, 1) for k in range(24)]
    assert [float(r[0]) for r in many] == [4.0 * k for k in range(24)]


def test_results_are_lent_views_and_regions_come_back(shm_client, monkeypatch):
    """With lending on (the default; SEGOPS_SHM_MAX_LENT), results placed in the region come back
    without a copy (views into it); once they and everything made from them are gone, the region
    serves the next call (no new registration). Off (0), they are copies."""
    sess = shm_client._shm
    idx0 = np.zeros(1 << 14, np.int32)
    assert _shm._MAX_LENT == 8 or "SEGOPS_SHM_MAX_LENT" in os.environ  # on by default
    monkeypatch.setattr(_shm, "_MAX_LENT", 0)  # off
    off = shm_client.call("segmented_sum", "backward", {"g_out": np.ones((1, 3)), "idx": idx0, "num_segments": 1})
    assert off["grad_x"].flags.owndata  # off: a copy
    monkeypatch.setattr(_shm, "_MAX_LENT", 8)
    x, idx = np.ones((1 << 14, 3)), np.zeros(1 << 14, np.int32)
    gc.collect()
    shm_client.segmented_sum(x, idx, 1)  # returns any region lent before, primes an idle one
    gc.collect()
    lent0, regions0 = sess.outputs_lent, len(sess._all)
    res = shm_client.call("segmented_sum", "backward", {"g_out": np.full((1, 3), 2.0), "idx": idx, "num_segments": 1})
    g = res["grad_x"]
    assert sess.outputs_lent == lent0 + 1
    assert isinstance(g.base, np.ndarray) and not g.flags.owndata  # a view, not a copy
    assert float(g.sum()) == 2.0 * 3 * (1 << 14)
    # the lent region is not reused while g lives: the next call takes another one
    res2 = shm_client.call("segmented_sum", "backward", {"g_out": np.full((1, 3), 5.0), "idx": idx, "num_segments": 1})
    assert float(g[0, 0]) == 2.0 and float(res2["grad_x"][0, 0]) == 5.0
    assert len(sess._all) >= regions0  # (it may have been an idle one)
    del g, res, res2
    gc.collect()
    regions1 = len(sess._all)
    for _ in range(4):
        shm_client.call("segmented_sum", "backward", {"g_out": np.ones((1, 3)), "idx": idx, "num_segments": 1})
        gc.collect()
    assert len(sess._all) <= regions1  # regions came back: no new ones registered
    assert sess._lent <= 1


def test_empty_arrays_go_by_reference(shm_url, shm_client):
    n = 1 << 16
    x = shm_client.empty((n, 3), np.float32)
    x[:] = 1.0
    idx = np.zeros(n, np.int32)
    sess = shm_client._shm
    before = sess.bytes_copied
    out = shm_client.segmented_sum(x, idx, 1)
    np.testing.assert_array_equal(out, [[n, n, n]])
    assert sess.bytes_copied - before == idx.nbytes  # idx copied, x not
    names = {r["name"] for r in _ours(shm_url, shm_client)}
    del x
    shm_client.segmented_sum(np.ones(3), np.zeros(3, np.int32), 1)  # reaps the dead array's region
    assert len({r["name"] for r in _ours(shm_url, shm_client)}) == len(names) - 1


def test_regions_of_two_sizes_are_both_reused(shm_url):
    """A call too large for the idle region gets a larger one, and the small one stays for the
    small calls (a step's calls alternate sizes): no registration after the first two calls."""
    others = _existing(shm_url)
    with segops.Client(shm_url, transport="shm") as c:
        c.segmented_sum(np.ones(3), np.zeros(3, np.int32), 1)
        small = _ours(shm_url, c, others)
        assert len(small) == 1
        n = 1 << 18  # 6 MiB of float64 vec3: more than the first region
        x = np.ones((n, 3))
        for _ in range(3):
            np.testing.assert_array_equal(c.segmented_sum(x, np.zeros(n, np.int32), 1), [[n, n, n]])
            np.testing.assert_array_equal(c.segmented_sum(np.ones(3), np.zeros(3, np.int32), 1), [3])
        both = _ours(shm_url, c, others)
        assert len(both) == 2 and small[0] in both
        assert {r["byte_size"] for r in both} == {small[0]["byte_size"], 8 << 20}
    assert _ours(shm_url, None, others) == []


def test_idle_regions_past_the_pool_cap_are_dropped(shm_url, monkeypatch):
    """Past _POOL_MAX_BYTES the smallest idle regions are unregistered when a larger one is made."""
    monkeypatch.setattr(_shm, "_POOL_MAX_BYTES", 8 << 20)
    others = _existing(shm_url)
    with segops.Client(shm_url, transport="shm") as c:
        c.segmented_sum(np.ones(3), np.zeros(3, np.int32), 1)
        small = _ours(shm_url, c, others)
        n = 1 << 18
        np.testing.assert_array_equal(c.segmented_sum(np.ones((n, 3)), np.zeros(n, np.int32), 1), [[n, n, n]])
        big = _ours(shm_url, c, others)
        assert len(big) == 1 and big[0]["byte_size"] == 8 << 20 and big[0]["name"] != small[0]["name"]
    assert _ours(shm_url, None, others) == []


def test_close_unregisters_and_unlinks(shm_url):
    others = _existing(shm_url)
    c = segops.Client(shm_url, transport="shm")
    c.segmented_sum(np.ones(3), np.zeros(3, np.int32), 1)
    keep = c.empty(5)
    names = [r["name"] for r in _ours(shm_url, c, others)]
    assert len(names) == 2 and all(os.path.exists("/dev/shm/" + n) for n in names)
    c.close()
    assert _ours(shm_url, c, others) == []
    assert not any(os.path.exists("/dev/shm/" + n) for n in names)
    keep[:] = 1.0  # the array stays usable here after close


def test_exit_without_close_cleans_up(shm_url):
    code = (
        "import sys, numpy as np, segops\n"
        f"c = segops.Client({shm_url!r}, transport='shm')\n"
        "c.segmented_sum(np.ones(3), np.zeros(3, np.int32), 1)\n"
        "print(c._shm and list(c._shm._all))\n"
    )
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert out.returncode == 0, out.stderr
    names = eval(out.stdout.strip())
    assert names
    regions = {r["name"] for r in _status(shm_url)[1]}
    for n in names:
        assert n not in regions and not os.path.exists("/dev/shm/" + n)


def test_dropped_client_leaves_no_region(shm_url):
    """A Client dropped without close(): its region files go when it is collected, and the daemon
    unregisters them when the process exits."""
    code = (
        "import gc, os, numpy as np, segops\n"
        f"c = segops.Client({shm_url!r}, transport='shm')\n"
        "n = 1 << 16\n"
        "c.segmented_sum(np.ones((n, 3)), np.zeros(n, np.int32), 1)\n"
        "names = list(c._shm._all)\n"
        "del c\n"
        "gc.collect()\n"
        "print(names, [x for x in names if os.path.exists('/dev/shm/' + x)])\n"
    )
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert out.returncode == 0, out.stderr
    names, left = eval(out.stdout.strip().replace("] [", "], ["))
    assert names and left == []
    regions = {r["name"] for r in _status(shm_url)[1]}
    assert not regions & set(names)


def test_threads_get_their_own_regions(shm_client):
    errors = []

    def work(k):
        try:
            rng = np.random.default_rng(k)
            for _ in range(30):
                n = int(rng.integers(1, 3000))
                x = rng.standard_normal((n, 3))
                idx = np.sort(rng.integers(0, 5, n)).astype(np.int32)
                ref = np.zeros((5, 3))
                np.add.at(ref, idx, x)
                np.testing.assert_allclose(shm_client.segmented_sum(x, idx, 5), ref, rtol=1e-12, atol=1e-12)
        except Exception as e:  # reported below
            errors.append(e)

    ts = [threading.Thread(target=work, args=(k,)) for k in range(8)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors, errors[0]


def test_errors_name_op_and_argument(shm_client):
    with pytest.raises(segops.InvalidArgument) as ei:
        shm_client.segmented_mul(np.ones(4), np.ones(3), np.zeros(4, np.int32), 4)
    assert "segmented_mul" in ei.value.message and "num_segments" in ei.value.message
    with pytest.raises(segops.InvalidArgument) as ei:
        shm_client.segmented_sum(np.ones(4), np.array([0, 1, 2, 9], np.int32), 3)
    assert "idx" in ei.value.message
    # the client still works, the region was given back
    assert shm_client.segmented_sum(np.ones(2), np.zeros(2, np.int32), 1)[0] == 2.0


def test_torch_step_through_shm(shm_url, shm_client):
    torch = pytest.importorskip("torch")
    import segops.torch as st

    with segops.Client(shm_url, transport="http") as h:
        grads = []
        for c in (shm_client, h):
            g = torch.Generator().manual_seed(3)
            v = torch.randn(64, 3, dtype=torch.float64, generator=g, requires_grad=True)
            m = torch.randn(4, 3, 3, dtype=torch.float64, generator=g, requires_grad=True)
            idx = torch.sort(torch.randint(0, 4, (64,), generator=g)).values
            out = st.segmented_matvec(v, m, idx, 4, client=c)
            gv, gm = torch.autograd.grad((out**2).sum(), (v, m), create_graph=True)
            ((gv**2).sum() + (gm**2).sum()).backward()
            grads.append((v.grad.clone(), m.grad.clone()))
        assert torch.equal(grads[0][0], grads[1][0]) and torch.equal(grads[0][1], grads[1][1])


def test_auto_falls_back_when_registration_is_refused(start_daemon, own_daemons):
    d = start_daemon(["--max-shm-bytes", "4096"])  # below the client's first region
    try:
        if _status(d.url)[0] != 200:
            pytest.skip("this segopsd has no shm endpoints")
        with segops.Client(d.url) as c:
            assert c.segmented_sum(np.ones(3), np.zeros(3, np.int32), 1)[0] == 3.0
            assert c.transport_used == "http"
        with segops.Client(d.url, transport="shm") as c:
            with pytest.raises(segops.SegopsError):
                c.segmented_sum(np.ones(3), np.zeros(3, np.int32), 1)
    finally:
        d.stop_and_check()


def test_step_inputs_are_kept_for_its_backward(shm_url):
    """segops.torch copies a forward's idx and the inputs its backward reads into regions kept for
    them (tokens: the tensor and its version counter); the step's backward and double backward
    send them by reference instead of copying them again. Every forward copies afresh, so values
    changed between steps without a version bump (through numpy) are never sent stale."""
    torch = pytest.importorskip("torch")
    import segops.torch as st

    with segops.Client(shm_url, transport="shm") as c:
        n, s = 1 << 15, 64
        g = torch.Generator().manual_seed(5)
        xn = torch.randn(n, 3, dtype=torch.float64, generator=g).numpy()
        x = torch.from_numpy(xn).requires_grad_(True)  # shares memory with xn
        y = torch.randn(n, 3, dtype=torch.float64, generator=g, requires_grad=True)
        idx = torch.sort(torch.randint(0, s, (n,), generator=g)).values
        xb, ib = x.numel() * 8, idx.numel() * 8

        def counters():
            sess = c._shm  # made by the first call
            return (sess.bytes_copied, sess.bytes_kept) if sess is not None else (0, 0)

        def step():
            x.grad = y.grad = None
            copied, kept = counters()
            out = st.segmented_dot(x, y, idx, s, client=c)
            gx, gy = torch.autograd.grad((out**2).sum(), (x, y), create_graph=True)
            ((gx**2).sum() + (gy**2).sum()).backward()
            xd, yd = x.detach(), y.detach()
            want = torch.zeros(s, dtype=torch.float64).index_add_(0, idx, (xd * yd).sum(1))
            assert torch.allclose(out.detach(), want, rtol=1e-12, atol=1e-12)
            # d/dx of sum_s (2 out_s y_i)^2 ... checked against the same step in plain torch
            xl, yl = xd.clone().requires_grad_(True), yd.clone().requires_grad_(True)
            o = torch.zeros(s, dtype=torch.float64).index_add(0, idx, (xl * yl).sum(1))
            a, b = torch.autograd.grad((o**2).sum(), (xl, yl), create_graph=True)
            ((a**2).sum() + (b**2).sum()).backward()
            assert torch.allclose(x.grad, xl.grad, rtol=1e-10) and torch.allclose(y.grad, yl.grad, rtol=1e-10)
            now = counters()
            return now[0] - copied, now[1] - kept

        step()
        copied, kept = step()
        # x, y and idx: copied by the forward, then by reference in the backward, the double
        # backward and the backward of g_out's cotangent.
        assert kept >= 3 * (2 * xb + ib), (copied, kept)
        # the forward's copies of x, y, idx plus the cotangents (gg_x, gg_y: each N x 3) and the
        # per-segment g_outs: less than the 4 calls' x, y and idx each
        assert copied < 4 * (2 * xb + ib), (copied, kept)
        xn += 1.0  # through numpy: x's version does not change
        assert x._version == 0
        step()  # the forward copies x afresh: the answer and gradients follow the new values
        idx[: n // 2] = 0  # in place through torch: the version changes
        step()
def test_kept_inputs_of_new_tensors_reuse_the_pool(shm_url):
    """A training loop: new x every step, each kept for its step's calls. Kept regions come from
    the client's pool and go back to it, so after the first steps no step registers a region."""
    torch = pytest.importorskip("torch")
    import segops.torch as st

    with segops.Client(shm_url, transport="shm") as c:
        n = 1 << 15
        idx = torch.sort(torch.randint(0, 64, (n,), generator=torch.Generator().manual_seed(1))).values
        for step in range(12):
            x = torch.full((n, 3), float(step), dtype=torch.float64, requires_grad=True)
            out = st.segmented_dot(x, x.detach() + 1, idx, 64, client=c)
            (g,) = torch.autograd.grad((out**2).sum(), (x,), create_graph=True)
            (g**2).sum().backward()
            if step == 3:
                regs = c._shm.registrations
            want = torch.zeros(64, dtype=torch.float64).index_add_(0, idx, (x.detach() * (x.detach() + 1)).sum(1))
            assert torch.equal(out.detach(), want)
        assert c._shm.registrations == regs
        assert c._shm.bytes_kept > 0


def test_kept_inputs_in_flight_are_not_dropped(shm_url, monkeypatch):
    """Threads calling with more distinct kept idx tensors than a client keeps: the least
    recently used are dropped, but never one that a call in flight names (every answer right)."""
    torch = pytest.importorskip("torch")
    import segops.torch as st

    monkeypatch.setattr(_shm, "_KEEP_MAX", 2)
    with segops.Client(shm_url, transport="shm") as c:
        n = 1 << 15
        x = torch.ones(n, 3, dtype=torch.float64)
        idxs = [torch.full((n,), k % 3, dtype=torch.int32) for k in range(6)]
        errors = []

        def work(t):
            try:
                for r in range(30):
                    k = (t + r) % len(idxs)
                    out = st.segmented_sum(x, idxs[k], 3, client=c)
                    want = [[0.0] * 3] * 3
                    want[k % 3] = [float(n)] * 3
                    assert out.tolist() == want, (t, r, k)
            except Exception as e:  # reported below
                errors.append(e)

        ts = [threading.Thread(target=work, args=(t,)) for t in range(4)]
        for t in ts:
            t.start()
        for t in ts:
            t.join(120)
        assert not errors, errors[:3]
        sess = c._shm
        assert len([k for k in sess._kept.values() if k.region is not None]) <= 2
        assert all(k.busy == 0 for k in sess._kept.values())

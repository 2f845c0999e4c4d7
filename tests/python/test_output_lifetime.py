"""test_output_lifetime.py: an output the native channel hands back in the client's shared pool
memory (a numpy array, a segops.torch tensor) stays the caller's for its whole life: 1,000 of them
kept across 10,000 later calls, whose own outputs come and go in the same pools, and across a daemon
restart, each still holding its own values, in the pools, at its own address."""

import os
import signal
import socket

import numpy as np
import pytest

import segops
from segopsd_proc import Daemon

needs_native = pytest.mark.skipif(not segops.native_available(), reason="segops' C extension is not in use")
KEPT, LATER, N, S = 1000, 10_000, 96, 8


def in_memfd_ranges():
    """The address ranges of this process's segops memfd mappings (/proc/self/maps)."""
    out = []
    with open("/proc/self/maps") as f:
        for line in f:
            if "/memfd:segops" in line:
                out.append(tuple(int(v, 16) for v in line.split()[0].split("-")))
    return out


def inside(address, ranges):
    return any(lo <= address < hi for lo, hi in ranges)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def restart(segopsd_path, d, listen):
    d.proc.send_signal(signal.SIGTERM)
    d.proc.wait(30)
    return Daemon(segopsd_path, ["--threads", "1", "--backend", "cpu"], listen=listen)


def later_calls(call, k):
    """k calls whose outputs are dropped at once (their pool memory goes back and is reused)."""
    for j in range(k):
        call(j)


@needs_native
@pytest.mark.parametrize("kind", ["numpy", "torch"])
def test_kept_outputs_stay_valid_across_later_calls_and_a_restart(segopsd_path, kind):
    if kind == "torch":
        torch = pytest.importorskip("torch")
        import segops.torch as st
    listen = f"127.0.0.1:{free_port()}"
    d = Daemon(segopsd_path, ["--threads", "1", "--backend", "cpu"], listen=listen)
    c = segops.Client(d.url, timeout=30)
    rng = np.random.default_rng(11)
    idx = np.sort(rng.integers(0, S, N)).astype(np.int32)
    base = rng.standard_normal((N, 3))
    try:
        kept, want = [], []
        if kind == "numpy":
            for k in range(KEPT):
                kept.append(c.segmented_sum(base * (k + 1), idx, S))
            later = lambda j: c.segmented_sum(base * -(j + 1), idx, S)  # noqa: E731
            addr = [a.ctypes.data for a in kept]
            values = lambda: [a.copy() for a in kept]  # noqa: E731
        else:
            x, ti = torch.from_numpy(base), torch.from_numpy(idx)
            with torch.no_grad():
                for k in range(KEPT):
                    kept.append(st.segmented_sum(x * (k + 1), ti, S, client=c))
            def later(j):
                with torch.no_grad():
                    st.segmented_sum(x * -(j + 1), ti, S, client=c)
            addr = [t.data_ptr() for t in kept]
            values = lambda: [t.numpy().copy() for t in kept]  # noqa: E731
        assert c.transport_used == "native"
        ref = np.zeros((S, 3))
        np.add.at(ref, idx, base)
        want = [ref * (k + 1) for k in range(KEPT)]
        ranges = in_memfd_ranges()
        assert all(inside(a, ranges) for a in addr), "the outputs were not handed back in pool memory"
        assert len(set(addr)) == KEPT
        for got, w in zip(values(), want):
            np.testing.assert_allclose(got, w, rtol=1e-12)

        later_calls(later, LATER // 2)
        d = restart(segopsd_path, d, listen)
        later_calls(later, LATER // 2)  # the first reopens the channel to the new daemon
        assert c.transport_used == "native"

        assert [t.ctypes.data if kind == "numpy" else t.data_ptr() for t in kept] == addr
        bad = [k for k, (got, w) in enumerate(zip(values(), want)) if not np.allclose(got, w, rtol=1e-12)]
        assert not bad, f"{len(bad)} of {KEPT} kept outputs changed (first: {bad[:5]})"
    finally:
        c.close()
        d.kill()
    # closed client: the kept outputs still hold the client's memory and their values
    for got, w in zip(values(), want):
        np.testing.assert_allclose(got, w, rtol=1e-12)
    del kept
    assert os.getpid()  # the memory went back without a crash when the last view died

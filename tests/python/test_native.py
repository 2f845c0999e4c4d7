"""test_native.py: segops' C extension (segops._native, on libsegops) against the real daemon: which
client is in use and why (native_available(), the warning at import, SEGOPS_NO_NATIVE), the
transport "auto" picks (the native channel for http://127.0.0.1:PORT), "local" giving the daemon's
bits in-process, "shm" as a deprecated alias of "native", typed errors for what cannot be sent, a
client used in four forked children beside its parent, a daemon SIGKILLed and restarted under calls
in flight, outputs and Client.empty() in the client's shared memory with its size flat over 10^5
allocations. Without the extension (the nonative run) the tests of it skip, and the ones of the
fallback run."""

import os
import signal
import socket
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

import segops
from segops import _table
from segopsd_proc import Daemon
from segref import WIDTHS, idx_from_lengths, shape_of

NATIVE = segops.native_available()
needs_native = pytest.mark.skipif(not NATIVE, reason="segops' C extension is not in use")
SRC = os.path.dirname(os.path.dirname(os.path.abspath(segops.__file__)))
X = np.arange(1.0, 7.0)
IDX = np.array([0, 0, 1, 1, 1, 2], np.int32)


def memfd_bytes():
    """Bytes of this process's memfds (libsegops' pools and rings), from /proc/self/fd."""
    total = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{fd}").startswith("/memfd:segops"):
                total += os.fstat(int(fd)).st_size
        except OSError:
            pass
    return total


def in_memfd(address):
    """Whether address lies in a mapping of one of this process's memfds (/proc/self/maps)."""
    with open("/proc/self/maps") as f:
        for line in f:
            if "/memfd:segops" in line:
                lo, hi = (int(v, 16) for v in line.split()[0].split("-"))
                if lo <= address < hi:
                    return True
    return False


# ---- which client, and why ----


def test_native_available_says_which_client():
    if os.environ.get("SEGOPS_NO_NATIVE") == "1":
        assert not NATIVE
        assert isinstance(segops.Client("http://127.0.0.1:1")._py, segops._http.HTTPClient)
    elif os.environ.get("SEGOPS_REQUIRE_NATIVE") == "1":
        assert NATIVE, f"the extension is required here but not in use: {segops._ext.why_not}"
    if NATIVE:
        assert segops.Client("http://127.0.0.1:1")._nc is not None


def _import_segops(env, cwd):
    env = dict({k: v for k, v in os.environ.items() if not k.startswith("SEGOPS_")}, **env)
    code = "import warnings, sys; warnings.simplefilter('always'); import segops; print(segops.native_available())"
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=cwd, timeout=60)


def test_warning_at_import_names_what_is_missing(tmp_path):
    r = _import_segops({"PYTHONPATH": SRC, "SEGOPS_NATIVE_LIB": str(tmp_path / "nowhere.so")}, str(tmp_path))
    assert r.returncode == 0 and r.stdout.strip() == "False", r.stderr
    assert "ExtensionWarning" in r.stderr and "segops._native is not available" in r.stderr, r.stderr
    assert "nowhere.so" in r.stderr and "pure-Python client" in r.stderr, r.stderr
    # a package installed without it carries setup.py's reason, which the warning repeats
    import shutil

    pkg = tmp_path / "pkg"
    shutil.copytree(os.path.join(SRC, "segops"), pkg / "segops", ignore=shutil.ignore_patterns("_native*.so"))
    (pkg / "segops" / "_native_missing.txt").write_text("libcurl's development files are not installed\n")
    r = _import_segops({"PYTHONPATH": str(pkg)}, str(tmp_path))
    assert r.stdout.strip() == "False" and "libcurl's development files are not installed" in r.stderr, r.stderr
    # asked for on purpose: no warning
    r = _import_segops({"PYTHONPATH": SRC, "SEGOPS_NO_NATIVE": "1"}, str(tmp_path))
    assert r.stdout.strip() == "False" and "Warning" not in r.stderr, r.stderr


def test_fallback_refuses_what_needs_the_extension():
    if NATIVE:
        pytest.skip("the extension is in use")
    for kw in ({"transport": "native"}, {"transport": "local"}, {"transport": "shm"}):
        with pytest.raises(ValueError, match="needs segops' C extension"):
            with pytest.warns(DeprecationWarning) if kw["transport"] == "shm" else _nothing():
                segops.Client("http://127.0.0.1:1", **kw)
    with pytest.raises(ValueError, match="needs segops' C extension"):
        segops.Client("local")


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


# ---- transports ----


@needs_native
def test_auto_is_the_native_channel_on_this_host(server_url):
    assert server_url.startswith("http://127.0.0.1:")
    with segops.Client(server_url) as c:
        np.testing.assert_array_equal(c.segmented_sum(X, IDX, 3), [3, 12, 6])
        assert c.transport_used == "native"
    with segops.Client(server_url, transport="http") as c:
        np.testing.assert_array_equal(c.segmented_sum(X, IDX, 3), [3, 12, 6])
        assert c.transport_used == "http"
    with segops.Client("local") as c:
        assert c.transport_used == "local"  # found by an empty call before any call of its own
        np.testing.assert_array_equal(c.segmented_sum(X, IDX, 3), [3, 12, 6])
        assert c.health().ok and c.ready().ok and c.info()["backend"] == "cpu"


@needs_native
def test_segops_url_local(monkeypatch):
    monkeypatch.setenv("SEGOPS_URL", "local")
    prev = segops.set_default_client(None)
    try:
        np.testing.assert_array_equal(segops.segmented_sum(X, IDX, 3), [3, 12, 6])
        assert segops.default_client().transport_used == "local"
    finally:
        c = segops.set_default_client(prev)
        if c is not None:
            c.close()


@needs_native
def test_shm_is_a_deprecated_alias_of_native(server_url):
    with pytest.warns(DeprecationWarning, match="transport='shm' is deprecated"):
        c = segops.Client(server_url, transport="shm")
    np.testing.assert_array_equal(c.segmented_sum(X, IDX, 3), [3, 12, 6])
    assert c.transport_used == "native"
    c.close()


def _calls(op, pass_, width, dtype, seed):
    rng = np.random.default_rng(seed)
    idx = idx_from_lengths([5, 0, 3, 9, 1], rng)
    s = 5
    args = {n: rng.standard_normal(shape_of(op, n, width, len(idx), s)).astype(dtype)
            for n in _table.input_names(op, pass_)}
    return dict(args, idx=idx, num_segments=s)


@needs_native
def test_local_gives_the_daemons_bits(server_url):
    """Every function, float32 and float64, scalar and vec3: Client("local") and the daemon (over
    its native channel and over HTTP) give the same bytes when the daemon's backend is the CPU's
    (bit-identical holds on one backend); with another backend the daemon's two transports give the
    same bytes and local agrees within the tolerance proto/API.md states."""
    clients = [segops.Client("local"), segops.Client(server_url), segops.Client(server_url, transport="http")]
    same_backend = clients[1].info()["backend"] == "cpu"
    try:
        for (op, pass_) in _table.FUNCS:
            for w in WIDTHS[op]:
                for dtype in ("float32", "float64"):
                    args = _calls(op, pass_, w, dtype, hash((op, pass_, w, dtype)) & 0xFFFF)
                    got = [c.call(op, pass_, args) for c in clients]
                    for name in _table.output_names(op, pass_):
                        a = got[0 if same_backend else 1][name]
                        for other in got[1 if same_backend else 2:]:
                            b = other[name]
                            assert a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes(), \
                                (op, pass_, w, dtype, name)
                        if not same_backend:
                            tol = 1e-12 if dtype == "float64" else 1e-5
                            np.testing.assert_allclose(got[0][name], a, rtol=tol, atol=tol, err_msg=f"{op} {pass_}")
        assert [c.transport_used for c in clients] == ["local", "native", "http"]
    finally:
        for c in clients:
            c.close()


# ---- what cannot be sent, and errors ----


@needs_native
def test_what_cannot_be_sent_fails_fast(client):
    with pytest.raises(segops.InvalidArgument, match=r"x has dtype float16, which cannot be sent"):
        client.segmented_sum(X.astype(np.float16), IDX, 3)
    with pytest.raises(segops.InvalidArgument, match="idx has dtype uint32"):
        client.segmented_sum(X, IDX.astype(np.uint32), 3)
    with pytest.raises(segops.InvalidArgument, match="num_segments must be an integer"):
        client.segmented_sum(X, IDX, 3.0)
    with pytest.raises(segops.InvalidArgument, match="x has 7 dimensions; at most 6 can be sent"):
        client.segmented_sum(np.ones((6, 1, 1, 1, 1, 1, 3)), IDX, 3)
    with pytest.raises(segops.NotFound):
        client.call("segmented_nope", "forward", {"x": X, "idx": IDX, "num_segments": 3})
    with pytest.raises(segops.InvalidArgument, match="no output 'grad_z'"):
        client.segmented_dot_backward(np.ones(3), X, X, IDX, 3, outputs=["grad_z"])
    # the daemon's own rules come back verbatim, as over HTTP
    with pytest.raises(segops.InvalidArgument, match=r"^invalid_argument \(400\): segmented_mul: num_segments"):
        client.segmented_mul(X, np.ones(2), IDX, 3)


# ---- fork, restart ----


@needs_native
def test_four_forked_children_call_beside_the_parent(server_url):
    """A client used before fork: each child opens its own channel on its first call, and parent
    and children call at once with every result right."""
    c = segops.Client(server_url, timeout=30)
    rng = np.random.default_rng(7)
    x = rng.standard_normal((2000, 3))
    idx = np.sort(rng.integers(0, 16, 2000)).astype(np.int32)
    want = np.zeros((16, 3))
    np.add.at(want, idx, x)
    assert np.allclose(c.segmented_sum(x, idx, 16), want, rtol=1e-12) and c.transport_used == "native"
    kids = []
    for _ in range(4):
        pid = os.fork()
        if pid == 0:  # the child: nothing of pytest's, only the calls and its exit status
            ok = True
            try:
                for _ in range(200):
                    ok &= bool(np.allclose(c.segmented_sum(x, idx, 16), want, rtol=1e-12))
                ok &= c.transport_used == "native"
            except BaseException:  # noqa: BLE001 - any failure is the child's exit status
                ok = False
            os._exit(0 if ok else 1)
        kids.append(pid)
    for _ in range(200):
        assert np.allclose(c.segmented_sum(x, idx, 16), want, rtol=1e-12)
    for pid in kids:
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
    c.close()


def _free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


@needs_native
def test_sigkill_restart_over_the_native_channel_loses_no_call(segopsd_path, own_daemons):
    listen = f"127.0.0.1:{_free_port()}"
    d = Daemon(segopsd_path, ["--threads", "2", "--backend", "cpu"], listen=listen)
    c = segops.Client(d.url, timeout=30)
    rng = np.random.default_rng(3)
    x = rng.standard_normal((4000, 3))
    idx = np.sort(rng.integers(0, 32, 4000)).astype(np.int32)
    want = np.zeros((32, 3))
    np.add.at(want, idx, x)
    done, errors, stop = [0], [], threading.Event()

    def work():
        while not stop.is_set():
            try:
                if not np.allclose(c.segmented_sum(x, idx, 32), want, rtol=1e-12):
                    errors.append("wrong result")
                done[0] += 1
            except Exception as e:  # noqa: BLE001 - every failure counts
                errors.append(repr(e)[:300])

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    try:
        deadline = time.time() + 20
        while done[0] < 50 and time.time() < deadline:
            time.sleep(0.01)
        d.proc.send_signal(signal.SIGKILL)  # calls in flight lose their daemon
        d.proc.wait(10)
        before = done[0]
        d = Daemon(segopsd_path, ["--threads", "2", "--backend", "cpu"], listen=listen)
        while done[0] < before + 100 and time.time() < deadline + 20:
            time.sleep(0.01)
    finally:
        stop.set()
        for t in threads:
            t.join(60)
        d.kill()
    assert not errors, errors[:5]
    assert done[0] >= before + 100 and c.transport_used == "native"
    c.close()


# ---- memory ----


@needs_native
def test_outputs_and_empty_live_in_the_clients_memory(client):
    x = client.empty((6,), np.float64)
    x[:] = X
    assert in_memfd(x.ctypes.data) and x.flags.writeable and x.flags.c_contiguous
    out = client.segmented_sum(x, IDX, 3)
    np.testing.assert_array_equal(out, [3, 12, 6])
    assert in_memfd(out.ctypes.data)  # the answer was written where the caller reads it
    out += 1  # the caller's to change
    np.testing.assert_array_equal(client.segmented_sum(x, IDX, 3), [3, 12, 6])
    assert client.empty(0, np.int32).shape == (0,) and client.empty((2, 3), "float32").dtype == np.float32


@needs_native
def test_memory_stays_flat_over_many_allocations(client):
    """10^5 Client.empty() blocks and 3000 calls whose outputs are dropped: the client's memfds keep
    their size (every block goes back when its last array dies)."""
    for _ in range(200):  # warm: the pools the loop needs
        a = client.empty((1024, 3))
        client.segmented_sum(a, np.zeros(1024, np.int32), 4)
    before = memfd_bytes()
    assert before > 0
    for k in range(100_000):
        a = client.empty((1 + k % 1024, 3))
        del a
    idx = np.zeros(1024, np.int32)
    a = client.empty((1024, 3))
    for _ in range(3_000):
        client.segmented_sum(a, idx, 4)
    assert memfd_bytes() == before


@needs_native
def test_torch_outputs_view_the_clients_memory_and_stay_flat(client):
    torch = pytest.importorskip("torch")
    import segops.torch as st

    x = st.empty((1024, 3), dtype=torch.float64, client=client)
    x.copy_(torch.randn(1024, 3, dtype=torch.float64))
    idx = torch.zeros(1024, dtype=torch.int64)
    assert in_memfd(x.data_ptr())
    out = st.segmented_sum(x, idx, 4, client=client)
    assert in_memfd(out.data_ptr()) and torch.allclose(out[0], x.sum(0), rtol=1e-12)
    x.requires_grad_(True)
    for _ in range(50):
        st.segmented_sum(x, idx, 4, client=client).sum().backward()
    before = memfd_bytes()
    for _ in range(300):
        x.grad = None
        st.segmented_sum(x, idx, 4, client=client).sum().backward()
    for _ in range(20_000):
        st.empty((1024, 3), dtype=torch.float32, client=client)
    assert memfd_bytes() == before

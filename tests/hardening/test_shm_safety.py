"""test_shm_safety.py: the second hostile-client run's findings that one uid can reproduce,
against the real daemon: one object under two names defeats no overlap check (9); registrations
hold no descriptors and a daemon at its open-files limit still accepts (5); a name of 128
characters, an OIP output place past its region, a second or signed Inference-Header-Content-Length,
ragged OIP data, an early 401 before a body, a token file others can read, unix socket paths told
to other hosts, a socket mode set through a symlink, a full /dev/shm (10); a peer of unknown uid gets
no shared memory (2). The findings that need a second uid are in test_shm_users.py."""
import json
import os
import socket
import subprocess
import sys
import tempfile
import time

import msgpack
import numpy as np
import pytest

from conftest import serving

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "http"))
from client import MSGPACK, decode, request, tensor_msgpack  # noqa: E402
from shm_util import ShmObject, register, shm_call  # noqa: E402
from segopsd_proc import Daemon  # noqa: E402


@pytest.fixture
def objects():
    made = []

    def make(size):
        o = ShmObject(size)
        made.append(o)
        return o

    yield make
    for o in made:
        o.close()


def ref(region, offset, a):
    return {"dtype": str(a.dtype), "shape": list(a.shape), "shm": {"region": region, "offset": offset}}


def post_msgpack(url, path, body):
    st, hd, data = request(url, "POST", path, msgpack.packb(body), {"Content-Type": MSGPACK})
    return st, data


# ---- 9: aliasing through two names ---------------------------------------------------------------


def test_one_object_under_two_names_is_one_object(daemon, objects):
    """matvec's out placed over m through a second name of the same object: out must be computed
    aside (the right numbers), and two outputs over the same bytes through two names refused."""
    d = daemon()
    obj = objects(1 << 16)
    assert register(d.url, "a", obj.key, 1 << 16) == (200, {})
    assert register(d.url, "b", obj.key, 1 << 16) == (200, {})
    rng = np.random.default_rng(3)
    n, s = 64, 4
    v = rng.standard_normal((n, 3))
    m = rng.standard_normal((s, 3, 3))
    idx = np.sort(rng.integers(0, s, n)).astype(np.int32)
    want = np.einsum("ijk,ij->ik", m[idx], v)
    obj.write(0, m.tobytes())  # m at 0 (64-byte aligned: out would be computed in place there)
    body = {"m": ref("a", 0, m), "v": tensor_msgpack(v), "idx": tensor_msgpack(idx), "num_segments": s,
            "outputs_shm": {"out": {"region": "b", "offset": 0}}}
    st, data = post_msgpack(d.url, "/v1/segmented_matvec/forward", body)
    assert st == 200, data
    got = np.frombuffer(obj.read(0, want.nbytes), np.float64).reshape(want.shape)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    # Two outputs over the same bytes through two names.
    x, y = rng.standard_normal((n, 3)), rng.standard_normal((n, 3))
    g = rng.standard_normal(s)
    body = {"x": tensor_msgpack(x), "y": tensor_msgpack(y), "g_out": tensor_msgpack(g), "idx": tensor_msgpack(idx),
            "num_segments": s, "outputs_shm": {"grad_x": {"region": "a", "offset": 4096},
                                               "grad_y": {"region": "b", "offset": 4096 + 8}}}
    st, data = post_msgpack(d.url, "/v1/segmented_dot/backward", body)
    assert st == 400 and "grad_x and grad_y overlap" in json.loads(data)["error"]["message"], data


# ---- 5: descriptors --------------------------------------------------------------------------------


def _fds(pid):
    return len(os.listdir(f"/proc/{pid}/fd"))


def _cpu_s(pid):
    with open(f"/proc/{pid}/stat") as f:
        parts = f.read().rsplit(")", 1)[1].split()
    return (int(parts[11]) + int(parts[12])) / os.sysconf("SC_CLK_TCK")


def test_registrations_hold_no_descriptors(objects):
    """At an open-files limit of 256 (soft = hard: nothing to raise), 400 registrations of one
    byte each all succeed, hold no descriptor, and the daemon still accepts, without spinning."""
    binary = os.environ.get("SEGOPSD")
    if not binary:
        pytest.skip("$SEGOPSD does not name a built segopsd")
    d = Daemon(binary, ["--threads", "2", "--max-connections", "64"], wrapper=["prlimit", "--nofile=256:256"])
    try:
        obj = objects(4096)
        fds0 = _fds(d.proc.pid)
        failed = []
        c = d.conn()
        for k in range(400):
            body = json.dumps({"key": obj.key, "offset": 0, "byte_size": 1}).encode()
            c.request("POST", f"/v2/systemsharedmemory/region/r{k}/register", body)
            r = c.getresponse()
            out = r.read()
            if r.status != 200:
                failed.append((k, r.status, out[:200]))
        c.close()
        assert not failed, failed[:3]
        assert _fds(d.proc.pid) < fds0 + 16, (fds0, _fds(d.proc.pid))
        cpu0 = _cpu_s(d.proc.pid)
        conns = [d.sock() for _ in range(20)]  # new connections are accepted
        assert serving(d)
        time.sleep(1.0)
        assert _cpu_s(d.proc.pid) - cpu0 < 0.5, "the daemon spins"
        for s in conns:
            s.close()
    finally:
        d.stop_and_check()


# ---- 10: the smaller ones ------------------------------------------------------------------------


def test_a_region_name_of_128_characters(daemon, objects):
    d = daemon()
    obj = objects(4096)
    name = "n" * 128
    assert register(d.url, name, obj.key, 4096) == (200, {})
    st, body = shm_call(d.url, "GET", f"/region/{name}/status")
    assert st == 200 and body[0]["name"] == name
    st, body = register(d.url, "n" * 129, obj.key, 4096)
    assert st == 404  # longer than any name: no such route


OIP_SUM = "/v2/models/segmented_sum_forward/infer"


def _oip(inputs, outputs=None):
    h = {"inputs": inputs}
    if outputs is not None:
        h["outputs"] = outputs
    return h


def _ns(n=3):
    return {"name": "num_segments", "datatype": "INT64", "shape": [1], "data": [n]}


def test_oip_output_place_must_lie_in_its_region(daemon, objects):
    d = daemon()
    obj = objects(4096)
    assert register(d.url, "io", obj.key, 128) == (200, {})
    x = {"name": "x", "datatype": "FP64", "shape": [3], "data": [1, 2, 3]}
    idx = {"name": "idx", "datatype": "INT32", "shape": [3], "data": [0, 1, 2]}
    for size, ok in [(24, True), (128, True), (129, False), (1 << 20, False)]:
        out = [{"name": "out", "parameters": {"shared_memory_region": "io", "shared_memory_byte_size": size}}]
        st, _, data = request(d.url, "POST", OIP_SUM, json.dumps(_oip([x, idx, _ns()], out)).encode())
        assert (st == 200) == ok, (size, st, data)
        if not ok:
            assert "outside shared-memory region 'io'" in json.loads(data)["error"], data


def test_inference_header_length_is_one_plain_count(daemon):
    d = daemon()
    head = json.dumps(_oip([{"name": "x", "datatype": "FP64", "shape": [3], "parameters": {"binary_data_size": 24}},
                            {"name": "idx", "datatype": "INT32", "shape": [3], "data": [0, 1, 2]}, _ns()])).encode()
    body = head + np.array([1.0, 2.0, 3.0]).tobytes()
    hl = str(len(head)).encode()
    base = b"POST " + OIP_SUM.encode() + b" HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n" % len(body)
    for extra, want in [(b"Inference-Header-Content-Length: " + hl + b"\r\n", 200),
                        (b"Inference-Header-Content-Length: +" + hl + b"\r\n", 400),
                        (b"Inference-Header-Content-Length: " + hl + b"\r\nInference-Header-Content-Length: 1\r\n",
                         400),
                        (b"Inference-Header-Content-Length: " + hl + b"\r\nInference-Header-Content-Length: "
                         + hl + b"\r\n", 400),
                        (b"Inference-Header-Content-Length:  " + hl + b"x\r\n", 400)]:
        s = d.sock()
        s.sendall(base + extra + b"\r\n" + body)
        s.settimeout(10)
        data = s.recv(65536)
        s.close()
        assert data.startswith(b"HTTP/1.1 %d" % want), (extra, data[:300])


def test_ragged_oip_data_is_refused(daemon):
    d = daemon()
    idx = {"name": "idx", "datatype": "INT32", "shape": [3], "data": [0, 1, 2]}
    for data, shape, ok in [([[1, 2], [3]], [3], False), ([1, [2, 3]], [3], False), ([[1, 2, 3]], [3], False),
                            ([1, 2, 3], [3], True), ([[1, 2, 3], [4, 5, 6]], [2, 3], True),
                            ([[1, 2], [3, 4], [5, 6]], [2, 3], False)]:
        x = {"name": "x", "datatype": "FP64", "shape": shape, "data": data}
        i = idx if shape == [3] else {"name": "idx", "datatype": "INT32", "shape": [2], "data": [0, 1]}
        st, _, body = request(d.url, "POST", OIP_SUM, json.dumps(_oip([x, i, _ns()])).encode())
        assert (st == 200) == ok, (data, shape, st, body)
        if not ok:
            assert st == 400 and "ragged" in json.loads(body)["error"], body


def test_early_401_is_read_not_a_broken_pipe(daemon):
    """An unauthenticated POST with a body larger than the socket buffers: the client, still
    sending, must read the 401 (a plain http.client sent its body and got a broken pipe)."""
    import http.client

    d = daemon(env={"SEGOPS_TOKEN": "right-token-1"})
    body = b"[" + b"1," * (4 << 20) + b"1]"
    for _ in range(3):
        c = http.client.HTTPConnection(d.host, d.port, timeout=30)
        c.request("POST", "/v1/segmented_sum/forward", body, {"Content-Type": "application/json"})
        r = c.getresponse()
        assert r.status == 401 and json.loads(r.read())["error"]["code"] == "unauthenticated"
        c.close()


def test_token_file_readable_by_others_is_warned_about(daemon, tmp_path):
    tok = tmp_path / "token"
    tok.write_text("a-long-enough-token\n")
    tok.chmod(0o644)
    d = daemon("--token-file", str(tok))
    time.sleep(0.2)
    assert "can read the token" in d.stderr_text() or "may read the token" in d.stderr_text(), d.stderr_text()
    tok.chmod(0o600)
    d2 = daemon("--token-file", str(tok))
    time.sleep(0.2)
    assert "read the token" not in d2.stderr_text()


def _non_loopback_address():
    """An address of this host other than loopback, or None."""
    try:
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.connect(("192.0.2.1", 9))  # no packet is sent: this only picks the outgoing interface
        addr = s.getsockname()[0]
        s.close()
        return None if addr.startswith("127.") else addr
    except OSError:
        return None


def test_other_hosts_get_no_unix_paths_and_no_shared_memory(objects, tmp_path):
    addr = _non_loopback_address()
    if addr is None:
        pytest.skip("this host has no address but loopback")
    binary = os.environ.get("SEGOPSD")
    if not binary:
        pytest.skip("$SEGOPSD does not name a built segopsd")
    sock = str(tmp_path / "s.sock")
    d = Daemon(binary, ["--listen", f"unix:{sock}", "--allow-unauthenticated"], listen="0.0.0.0:0")
    try:
        _other_hosts(d, addr, objects)
    finally:
        d.stop_and_check()


def _other_hosts(d, addr, objects):
    obj = objects(4096)
    url_local, url_remote = f"http://127.0.0.1:{d.port}", f"http://{addr}:{d.port}"
    st, _, body = request(url_local, "GET", "/v1/info")
    assert st == 200 and any(u.startswith("unix:") for u in json.loads(body)["listeners"])
    st, _, body = request(url_remote, "GET", "/v1/info")
    assert st == 200 and not any(u.startswith("unix:") for u in json.loads(body)["listeners"]), body
    # A peer whose uid the kernel does not report gets no shared memory.
    st, body = register(url_remote, "r", obj.key, 4096)
    assert st == 400 and "whose uid the kernel reports" in body["error"], body
    assert register(url_local, "r", obj.key, 4096) == (200, {})
    assert shm_call(url_remote, "GET", "/status") == (200, [])
    b = {"x": ref("r", 0, np.zeros(3)), "idx": tensor_msgpack(np.zeros(3, np.int32)), "num_segments": 1}
    st, data = post_msgpack(url_remote, "/v1/segmented_sum/forward", b)
    assert st == 400 and "whose uid the kernel reports" in json.loads(data)["error"]["message"], data


CHMOD_SWAP = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
/* The race of finding 10, made certain: whoever can write the socket's directory swaps the new
 * socket for a symlink to a victim file before the daemon's chmod runs. */
int chmod(const char *path, mode_t mode) {
  const char *victim = getenv("SWAP_VICTIM");
  size_t n = strlen(path);
  if (victim && n > 5 && !strcmp(path + n - 5, ".sock")) {
    unlink(path);
    if (symlink(victim, path) != 0) return -1;
  }
  int (*real)(const char *, mode_t) = (int (*)(const char *, mode_t))dlsym(RTLD_NEXT, "chmod");
  return real(path, mode);
}
"""


def test_unix_socket_mode_is_set_without_chmod(tmp_path):
    """The socket's mode comes with its creation: a chmod after bind (which a symlink put in the
    socket's place redirects to any file) is never made."""
    binary = os.environ.get("SEGOPSD")
    if not binary:
        pytest.skip("$SEGOPSD does not name a built segopsd")
    src, lib = tmp_path / "swap.c", tmp_path / "swap.so"
    src.write_text(CHMOD_SWAP)
    if subprocess.run(["cc", "-shared", "-fPIC", "-o", str(lib), str(src), "-ldl"]).returncode != 0:
        pytest.skip("no C compiler to build the interposer")
    if os.environ.get("SEGOPS_SANITIZED") == "1":
        pytest.skip("sanitizer build: the ASan runtime must come first in LD_PRELOAD")
    victim = tmp_path / "victim"
    victim.write_text("secret")
    victim.chmod(0o600)
    sock = tmp_path / "d.sock"
    d = Daemon(binary, ["--listen", f"unix:{sock}", "--socket-mode", "0666"],
               env={"LD_PRELOAD": str(lib), "SWAP_VICTIM": str(victim)})
    try:
        assert (victim.stat().st_mode & 0o777) == 0o600, oct(victim.stat().st_mode)
        st = os.lstat(sock)
        assert (st.st_mode & 0o777) == 0o666 and not os.path.islink(sock), oct(st.st_mode)
    finally:
        d.stop_and_check()


FULL_SHM = r"""
import json, os, sys, subprocess
sys.path[:0] = sys.argv[2:]
import numpy as np, msgpack
from segopsd_proc import Daemon
from client import request
d = Daemon(sys.argv[1], [])
key = "/segops-full-test"
fd = os.open("/dev/shm" + key, os.O_CREAT | os.O_RDWR, 0o600)
os.ftruncate(fd, 8 << 20)  # sparse: the filesystem has room for 1 MiB of it
body = json.dumps({"key": key, "byte_size": 8 << 20}).encode()
st, _, out = request(d.url, "POST", "/v2/systemsharedmemory/region/big/register", body)
assert st == 200, out
n = 1 << 18  # out (N, 3) float64 = 6 MiB into the region: more than /dev/shm holds
req = {"g_out": {"dtype": "float64", "shape": [1, 3], "data": np.ones((1, 3)).tobytes()},
       "idx": {"dtype": "int32", "shape": [n], "data": np.zeros(n, np.int32).tobytes()}, "num_segments": 1,
       "outputs_shm": {"grad_x": {"region": "big", "offset": 0}}}
st, _, out = request(d.url, "POST", "/v1/segmented_sum/backward", msgpack.packb(req),
                     {"Content-Type": "application/msgpack"})
print(json.dumps({"status": st, "body": out.decode(errors="replace"), "alive": d.proc.poll() is None}))
d.stop_and_check()
os.unlink("/dev/shm" + key)
"""


def test_full_dev_shm_is_not_called_a_truncation(tmp_path):
    """A daemon writing an output into a region whose pages /dev/shm has no room for says so (the
    object was not truncated by its owner). Runs in a mount namespace of its own with a 1 MiB
    /dev/shm (root only)."""
    binary = os.environ.get("SEGOPSD")
    if not binary or os.geteuid() != 0:
        pytest.skip("needs root and $SEGOPSD (a private /dev/shm in a mount namespace)")
    script = tmp_path / "full.py"
    script.write_text(FULL_SHM)
    here = os.path.dirname(os.path.abspath(__file__))
    cmd = ["unshare", "-m", "--propagation", "private", "sh", "-c",
           'mount -t tmpfs -o size=1m tmpfs /dev/shm && exec "$@"', "sh", sys.executable, str(script), binary,
           os.path.join(here, ".."), os.path.join(here, "..", "http")]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    if r.returncode != 0 and ("Operation not permitted" in r.stderr or "unshare failed" in r.stderr):
        pytest.skip(f"no private mount namespace here: {r.stderr[-300:]}")
    assert r.returncode == 0, r.stderr[-3000:]
    res = json.loads(r.stdout.strip().splitlines()[-1])
    assert res["alive"] and res["status"] == 400, res
    msg = json.loads(res["body"])["error"]["message"]
    assert "/dev/shm) is full" in msg and "truncated" not in msg, msg

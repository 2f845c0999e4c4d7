"""test_cotenant.py: the native channel among co-tenants (other uids on the daemon's host), as real
processes: a second uid (setpriv, as root) plays the hostile co-tenant against the real segopsd and
segops' own client (the C extension, libsegops). Each case is one rule of proto/native.md, Trust.
Skipped where no second uid can be run (not root, no setpriv) or the extension is not built."""
import json
import os
import socket
import subprocess
import sys
import time

import numpy as np
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # tests/: shared modules
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "clients", "python", "src"))
from as_user import OTHER_UID, THIRD_UID, argv_as, python_for, run_as  # noqa: E402
from segopsd_proc import Daemon  # noqa: E402

import segops  # noqa: E402

TOKEN = "cotenant-secret-0123456789"


@pytest.fixture(scope="module")
def py():
    p = python_for(OTHER_UID)
    if not p:
        pytest.skip("needs root and setpriv to run a client as a second uid")
    return p


@pytest.fixture
def binary():
    path = os.environ.get("SEGOPSD")
    if not path or not os.path.exists(path):
        pytest.skip("$SEGOPSD does not name a built segopsd")
    return path


def need_native():
    if not segops.native_available():
        pytest.skip("segops' C extension (libsegops) is not built here")


def info(d, token=None):
    c = d.conn()
    c.request("GET", "/v1/info", headers={"Authorization": f"Bearer {token}"} if token else {})
    r = c.getresponse()
    body = r.read()
    c.close()
    assert r.status == 200, body
    return json.loads(body)


X = np.arange(1.0, 7.0)
IDX = np.array([0, 0, 1, 1, 1, 2], np.int32)


# ---- identity before secrets ----------------------------------------------------------------------

# An impostor: binds the path as soon as it is free, accepts for `seconds`, and reports every byte
# and descriptor its peers sent it (it answers nothing).
IMPOSTOR = r"""
path, seconds = sys.argv[1], float(sys.argv[2])
s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
while True:
    try:
        s.bind(path)
        break
    except OSError:
        time.sleep(0.002)
os.chmod(path, 0o666)
s.listen(64)
print("bound", flush=True)
s.settimeout(0.05)
got = conns = fds = 0
end = time.time() + seconds
while time.time() < end:
    try:
        c, _ = s.accept()
    except socket.timeout:
        continue
    conns += 1
    c.settimeout(0.5)
    try:
        while True:
            msg, anc, _, _ = c.recvmsg(65536, socket.CMSG_SPACE(64))
            if not msg and not anc:
                break
            got += len(msg)
            fds += len(anc)
    except (socket.timeout, OSError):
        pass
    c.close()
os.unlink(path)
print(json.dumps({"conns": conns, "bytes": got, "fds": fds}), flush=True)
"""


def test_an_impostor_on_the_socket_gets_nothing(py, binary, tmp_path):
    """N3: the daemon restarts; another uid binds its native socket path (in /tmp, world-writable,
    as --native-socket allows) first. libsegops reconnects there and must check the peer before it
    sends the token, its ring or any pool: the impostor receives no byte and no descriptor."""
    need_native()
    path = f"/tmp/segops-cotenant-{os.getpid()}.sock"
    env = {"SEGOPS_TOKEN": TOKEN}
    d = Daemon(binary, ["--native-socket", path, "--socket-mode", "0666"], env=env)
    imp = None
    try:
        c = segops.Client(d.url, token=TOKEN, timeout=1.5)
        assert c.segmented_sum(X, IDX, 3).tolist() == [3.0, 12.0, 6.0]
        assert c.transport_used == "native"
        imp = subprocess.Popen(argv_as(OTHER_UID, py, IMPOSTOR, path, "3.5"), stdout=subprocess.PIPE, text=True)
        assert d.stop() == 0  # SIGTERM: the socket file goes, the impostor binds the path
        assert imp.stdout.readline().strip() == "bound"
        for _ in range(2):  # every call reconnects (the native channel, then /v1/info over HTTP)
            with pytest.raises(segops.SegopsError):
                c.segmented_sum(X, IDX, 3)
        c.close()
        out, _ = imp.communicate(timeout=30)
        seen = json.loads(out.strip().splitlines()[-1])
        assert seen["bytes"] == 0 and seen["fds"] == 0, seen
    finally:
        if imp and imp.poll() is None:
            imp.kill()
            imp.wait()
        if d.proc.poll() is None:
            d.stop_and_check()
        if os.path.exists(path):
            os.unlink(path)


def test_the_default_socket_is_in_a_directory_of_the_daemons_own(py, binary):
    """N3: by default the socket lives in a directory only the daemon's user (or root) can write:
    another uid can neither bind a socket there nor replace it; two daemons on one port (two
    addresses) get a socket each; the directory goes with the daemon."""
    d = Daemon(binary, [])
    d2 = None
    try:
        path = info(d)["native"]["socket"]
        parent = os.path.dirname(path)
        st = os.stat(parent)
        assert st.st_uid == os.geteuid() and (st.st_mode & 0o7777) == 0o711, (parent, oct(st.st_mode))
        out = run_as(OTHER_UID, py, r"""
d = sys.argv[1]
for name in ("native.sock", "x.sock"):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        if name == "native.sock":
            os.unlink(os.path.join(d, name))
        s.bind(os.path.join(d, name))
        print("bound", name)
    except PermissionError:
        print("refused", name)
""", parent)
        assert out.split() == ["refused", "native.sock", "refused", "x.sock"], out
        d2 = Daemon(binary, [], listen=f"127.0.0.2:{d.port}")
        path2 = info(d2).get("native", {}).get("socket")
        assert path2 and path2 != path and os.path.exists(path2), (path, path2, d2.stderr_text()[-2000:])
    finally:
        if d2:
            d2.stop_and_check()
        d.stop_and_check()
    assert not os.path.exists(parent), parent


# ---- memory the daemon touches is memory the client paid for ----------------------------------------

# A raw native-channel client (proto/native.md, Messages): HELLO, the ring, then each pool given in
# argv as "kind:bytes" ("hugetlb", "sparse", "backed"); prints the daemon's answer to each pool
# (OK, or the ERROR's message), one JSON line.
RAW_POOLS = r"""
import fcntl, struct
MAGIC, VER = 0x4E474553, int(sys.argv[2])
HELLO, WELCOME, RING, POOL, OK, ERROR = 1, 2, 3, 4, 5, 6
def head(t, size):
    return struct.pack("<IIII", MAGIC, VER, t, size)
import ctypes, select
libc = ctypes.CDLL(None, use_errno=True)
def ring_doorbell(ring):  # the daemon reads control messages when it wakes (proto/native.md)
    bell = ctypes.c_uint32.from_buffer(ring, 64)
    bell.value += 1
    libc.syscall(202, ctypes.byref(bell), 1, 1, None, None, 0)  # futex(FUTEX_WAKE, 1)
    del bell
def answer(s, ring=None):
    for _ in range(200):
        if ring is not None:
            ring_doorbell(ring)
        if select.select([s], [], [], 0.05)[0]:
            break
    m = s.recv(4096)
    t = struct.unpack_from("<IIII", m)[2]
    if t == ERROR:
        return m[16 + 8 + 40:].split(b"\0")[0].decode()
    return "OK" if t in (OK, WELCOME) else f"type {t}"
def memfd(size, kind):
    flags = os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING
    if kind == "hugetlb":
        try:
            fd = os.memfd_create("h", flags | os.MFD_HUGETLB)
            os.ftruncate(fd, size)
        except OSError as e:
            return None, f"no hugetlb memfd here: {e}"
    else:
        fd = os.memfd_create("p", flags)
        os.ftruncate(fd, size)
        if kind != "sparse":
            os.posix_fallocate(fd, 0, size)
    fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK)
    return fd, None
s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
s.connect(sys.argv[1])
s.send(head(HELLO, 1048) + struct.pack("<II", 0, 0) + bytes(1024))
out = {"hello": answer(s)}
slots = 4
rfd, _ = memfd(256 + slots * 2048, "backed")
m = mmap.mmap(rfd, 256 + slots * 2048)
m[:24] = struct.pack("<QIIII", 0x474E4952504F4753, VER, slots, 2048, 256)
socket.send_fds(s, [head(RING, 24) + struct.pack("<II", slots, 0)], [rfd])
out["ring"] = answer(s)
pid = 0
for spec in sys.argv[3:]:
    kind, size = spec.split(":")
    fd, why = memfd(int(size), kind)
    if fd is None:
        out[spec] = "SKIP " + why
        continue
    socket.send_fds(s, [head(POOL, 32) + struct.pack("<IIQ", pid, 0, int(size))], [fd])
    out[spec] = answer(s, ring=m)
    if out[spec] == "OK":
        pid += 1
print(json.dumps(out))
"""


def native_version():
    here = os.path.dirname(os.path.abspath(__file__))
    with open(os.path.join(here, "..", "..", "proto", "segops_ring.h")) as f:
        for line in f:
            if line.startswith("#define SEGOPS_NATIVE_VERSION"):
                return str(int(line.split()[2].rstrip("u")))
    raise AssertionError("no SEGOPS_NATIVE_VERSION")


@pytest.fixture
def open_dir():
    """A directory every uid can reach (pytest's tmp_path is not: its parent is 0700)."""
    import shutil
    import tempfile

    d = tempfile.mkdtemp(prefix="segops-cotenant-")
    os.chmod(d, 0o755)
    yield d
    shutil.rmtree(d, ignore_errors=True)


def test_pools_must_be_backed_and_not_hugetlb(py, binary, open_dir):
    """N1, N2: another uid hands the daemon a hugetlb memfd (whose huge pages may be gone when the
    daemon reads it: SIGBUS) and a sparse one (the daemon would be charged for the pages it writes):
    both refused at the hand-over, naming the rule; a fully backed pool after them is taken."""
    sock = os.path.join(open_dir, "n.sock")
    d = Daemon(binary, ["--native-socket", sock, "--socket-mode", "0666"])
    try:
        out = json.loads(run_as(OTHER_UID, py, RAW_POOLS, sock, native_version(), "hugetlb:2097152",
                                "sparse:4194304", "backed:65536"))
        assert out["hello"] == "OK" and out["ring"] == "OK", out
        assert "not fully backed" in out["sparse:4194304"], out
        assert out["backed:65536"] == "OK", out
        if out["hugetlb:2097152"].startswith("SKIP"):
            pytest.skip(out["hugetlb:2097152"])  # the other two cases passed above
        assert "hugetlb" in out["hugetlb:2097152"], out
    finally:
        d.stop_and_check()


def _own_pool_fds():
    fds = []
    for name in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{name}").startswith("/memfd:segops-pool"):
                fds.append(int(name))
        except OSError:
            pass
    return fds


def test_a_hole_punched_after_the_hand_over_refuses_the_call(binary):
    """N2: a client punches holes in its pools after handing them over (FALLOC_FL_PUNCH_HOLE on
    libsegops' own memfds); its next call is refused, naming the pool and the rule, instead of the
    daemon faulting in (and paying for) the pages, and reading zeros as the input."""
    need_native()
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    d = Daemon(binary, [])
    try:
        c = segops.Client(d.url, timeout=10, transport="native")
        x = c.empty(1 << 16, np.float64)
        x[:] = 1.0
        idx = np.zeros(1 << 16, np.int32)
        assert c.segmented_sum(x, idx, 1).tolist() == [65536.0]
        pools = _own_pool_fds()
        assert pools
        for fd in pools:
            size = os.fstat(fd).st_size
            assert libc.fallocate(fd, 3, ctypes.c_long(0), ctypes.c_long(size)) == 0, ctypes.get_errno()  # PUNCH|KEEP
        with pytest.raises(segops.InvalidArgument, match="no memory at byte"):
            c.segmented_sum(x, idx, 1)
        c.close()
        c2 = segops.Client(d.url, timeout=10, transport="native")  # the daemon serves on
        assert c2.segmented_sum(np.ones(1 << 16), idx, 1).tolist() == [65536.0]
        c2.close()
    finally:
        d.stop_and_check()


# ---- the accept path never waits on a peer -----------------------------------------------------------

SILENT = r"""
path, n, seconds = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
held = []
for _ in range(n):  # connects that never send a byte, queued on the daemon's socket
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    s.setblocking(False)
    try:
        s.connect(path)
    except BlockingIOError:
        pass
    except OSError:
        s.close()
        continue
    held.append(s)
print("held", len(held), flush=True)
time.sleep(seconds)
"""


def test_silent_connects_of_one_uid_do_not_delay_another(py, binary, open_dir):
    """N4: a uid at its channel limit queues hundreds of silent connects on the native socket. The
    accept path refuses each without waiting for it, and libsegops' "auto" gives the native
    attempt only a share of the call's deadline: another uid's call is answered in time."""
    need_native()
    sock = os.path.join(open_dir, "n.sock")
    d = Daemon(binary, ["--native-socket", sock, "--socket-mode", "0666", "--native-max-channels-per-uid", "1"])
    hog = None
    try:
        hog = subprocess.Popen(argv_as(OTHER_UID, py, SILENT, sock, "400", "30"), stdout=subprocess.PIPE, text=True)
        line = hog.stdout.readline().split()
        assert line[:1] == ["held"] and int(line[1]) >= 100, line
        t0 = time.monotonic()
        c = segops.Client(d.url, timeout=4)
        assert c.segmented_sum(X, IDX, 3).tolist() == [3.0, 12.0, 6.0]
        took = time.monotonic() - t0
        used = c.transport_used
        c.close()
        assert took < 3.0, (took, used)
    finally:
        if hog:
            hog.kill()
            hog.wait()
        d.stop_and_check()


# ---- a file size limit below a pool ------------------------------------------------------------------

FSIZE = r"""
import resource
resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, 1 << 20))
sys.path.insert(0, sys.argv[2])
import numpy as np, segops
c = segops.Client(sys.argv[1], timeout=10)
got = c.segmented_sum(np.arange(1.0, 7.0), np.array([0, 0, 1, 1, 1, 2], np.int32), 3)
print(json.dumps({"got": got.tolist(), "used": c.transport_used}))
"""


def test_a_file_size_limit_below_a_pool_falls_back_to_http(binary):
    """N10: a client whose RLIMIT_FSIZE (ulimit -f) is below the native channel's memfds is neither
    killed by SIGXFSZ nor refused: "auto" uses HTTP."""
    need_native()
    d = Daemon(binary, [])
    try:
        src = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "clients", "python", "src")
        r = subprocess.run([sys.executable, "-c", "import json, os, sys\n" + FSIZE, d.url, src], capture_output=True,
                           text=True, timeout=60, env=os.environ)
        assert r.returncode == 0, (r.returncode, r.stderr[-2000:])
        out = json.loads(r.stdout.strip().splitlines()[-1])
        assert out["got"] == [3.0, 12.0, 6.0] and out["used"] in ("http", "unix"), out
    finally:
        d.stop_and_check()


def test_transport_used_never_raises():
    """Client.transport_used on a client whose daemon is not there answers "" instead of raising."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now
    c = segops.Client(f"http://127.0.0.1:{port}", timeout=1)
    assert c.transport_used == ""
    c.close()


# ---- per-uid shares ------------------------------------------------------------------------------------

FLOOD = r"""
import threading
url, seconds, n = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
body = {"x": list(range(64)), "idx": [0] * 64, "num_segments": 1}
codes = {}
end = time.time() + seconds
def hammer():
    while time.time() < end:
        try:
            st, _ = req(url, "POST", "/v1/segmented_sum/forward", body, {"Content-Type": "application/json"})
        except OSError:
            st = 0
        codes[st] = codes.get(st, 0) + 1
ts = [threading.Thread(target=hammer) for _ in range(n)]
for t in ts:
    t.start()
for t in ts:
    t.join()
print(json.dumps(codes))
"""


def test_one_uid_cannot_fill_the_queue_for_another(py):
    """N5: one uid keeps far more calls waiting than the queue holds (a slow backend, 16 callers);
    it gets 503 for its share (--max-queue-per-uid, half of --max-queue by default), and another
    uid's calls, with none of its own waiting, are taken and answered."""
    binary = os.environ.get("SEGOPSD_TEST")
    if not binary or not os.path.exists(binary):
        pytest.skip("$SEGOPSD_TEST does not name the test build")
    d = Daemon(binary, ["--max-queue", "8", "--max-connections-per-peer", "64"], env={"SEGOPS_TEST_DELAY_MS": "40"})
    flood = None
    try:
        flood = subprocess.Popen(argv_as(OTHER_UID, py, FLOOD, d.url, "6", "16"), stdout=subprocess.PIPE, text=True)
        time.sleep(1.5)
        got = []
        for _ in range(8):
            c = d.conn(timeout=30)
            c.request("POST", "/v1/segmented_sum/forward", json.dumps({"x": [1.0, 2.0], "idx": [0, 0], "num_segments": 1}),
                      {"Content-Type": "application/json"})
            r = c.getresponse()
            got.append((r.status, r.read()[:200]))
            c.close()
        out, _ = flood.communicate(timeout=60)
        theirs = json.loads(out.strip().splitlines()[-1])
        assert theirs.get("503", 0) > 0, theirs  # the flood did fill its share
        assert all(st == 200 for st, _ in got), got
        assert info(d)["limits"]["max_queue_per_uid"] == 4
    finally:
        if flood and flood.poll() is None:
            flood.kill()
            flood.wait()
        d.stop_and_check()


def test_one_uid_cannot_take_every_shm_byte(py, binary):
    """N7: --max-shm-bytes is shared: one uid may register at most half of it (an unwritten object
    costs that uid nothing), so another uid's registration still finds room."""
    d = Daemon(binary, ["--max-shm-bytes", "1m"])
    keys = []
    try:
        out = json.loads(run_as(OTHER_UID, py, r"""
url = sys.argv[1]
got = []
for name, size in (("hog-all", 1 << 20), ("hog-half", 1 << 19), ("hog-more", 4096)):
    key, m = shm_object(size, 0o600, name)
    st, body = req(url, "POST", f"/v2/systemsharedmemory/region/{name}/register", {"key": key, "byte_size": size})
    got.append([st, body[:300], key])
print(json.dumps(got))
""", d.url))
        keys += [k for _, _, k in out]
        assert [st for st, _, _ in out] == [400, 200, 400], out
        assert "share of --max-shm-bytes" in out[0][1], out
        fd = os.open("/dev/shm/segops-cotenant-mine", os.O_CREAT | os.O_RDWR, 0o600)
        os.ftruncate(fd, 4096)
        os.close(fd)
        keys.append("/segops-cotenant-mine")
        c = d.conn()
        c.request("POST", "/v2/systemsharedmemory/region/mine/register",
                  json.dumps({"key": "/segops-cotenant-mine", "byte_size": 4096}), {"Content-Type": "application/json"})
        r = c.getresponse()
        body = r.read()
        c.close()
        assert r.status == 200, body
        assert info(d)["shm"]["max_shm_bytes_per_uid"] == 1 << 19
    finally:
        d.stop_and_check()
        for k in keys:
            if os.path.exists("/dev/shm" + k):
                os.unlink("/dev/shm" + k)


def test_one_uid_cannot_fill_the_guard_table(py, binary, open_dir):
    """N6: the daemon guards at most 8192 mapped objects (shm regions, native rings and pools) in
    one table; one uid may hold at most half of it. A uid that hands over pools until it is refused
    gets an error naming the guard table and its share, not the region cap."""
    sock = os.path.join(open_dir, "n.sock")
    d = Daemon(binary, ["--native-socket", sock, "--socket-mode", "0666", "--native-max-channels-per-uid", "32"])
    try:
        out = json.loads(run_as(OTHER_UID, py, RAW_POOLS.replace("print(json.dumps(out))", "") + r"""
import resource
resource.setrlimit(resource.RLIMIT_NOFILE, (8192, 8192))
chans, last = [], ""
while len(chans) < 32 and not last:
    c = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    c.connect(sys.argv[1])
    c.send(head(HELLO, 1048) + struct.pack("<II", 0, 0) + bytes(1024))
    answer(c)
    rfd, _ = memfd(256 + 4 * 2048, "backed")
    rm = mmap.mmap(rfd, 256 + 4 * 2048)
    rm[:24] = struct.pack("<QIIII", 0x474E4952504F4753, VER, 4, 2048, 256)
    socket.send_fds(c, [head(RING, 24) + struct.pack("<II", 4, 0)], [rfd])
    os.close(rfd)
    a = answer(c)
    if a != "OK":
        last = a
        break
    chans.append((c, rm))
    for k in range(255):
        fd, _ = memfd(4096, "backed")
        socket.send_fds(c, [head(POOL, 32) + struct.pack("<IIQ", k, 0, 4096)], [fd])
        os.close(fd)
        a = answer(c, ring=rm)
        if a != "OK":
            last = a
            break
print(json.dumps({"last": last, "channels": len(chans)}))
""", sock, native_version(), timeout=240))
        assert "guard table" in out["last"] and "share" in out["last"], out
        # Another uid (root here) still maps memory: a native call and a shm registration.
        need_native()
        c = segops.Client(d.url, timeout=30, transport="native")
        assert c.segmented_sum(X, IDX, 3).tolist() == [3.0, 12.0, 6.0]
        c.close()
    finally:
        d.stop_and_check()


# ---- what one uid learns of another's calls ------------------------------------------------------------

def _idx_hits(d):
    c = d.conn()
    c.request("GET", "/metrics")
    text = c.getresponse().read().decode()
    c.close()
    for line in text.splitlines():
        if line.startswith('segops_idx_cache_lookups_total{result="hit"}'):
            return int(line.split()[-1])
    raise AssertionError("no idx cache counter in /metrics")


GUESS = r"""
sys.path.insert(0, sys.argv[2])
import numpy as np, segops
c = segops.Client(sys.argv[1], timeout=30, transport="native")
n = 1 << 15
x = c.empty(n, np.float64)
x[:] = 1.0
idx = c.empty(n, np.int32)
idx[:] = np.arange(n, dtype=np.int32) // 64  # the guessed batch layout
got = c.segmented_sum(x, idx, n // 64)
print(json.dumps({"ok": bool((got == 64.0).all())}))
"""


def test_the_idx_cache_tells_no_uid_of_another_uids_calls(py, binary):
    """N11: the validated-idx cache is keyed per uid: a uid that sends exactly the idx another uid
    sent (a guessed batch layout) does not hit that uid's entry, so /metrics' hit counter (open
    without a token) does not tell it that someone ran that layout."""
    need_native()
    d = Daemon(binary, ["--socket-mode", "0666"])
    try:
        src = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "clients", "python", "src")
        c = segops.Client(d.url, timeout=30, transport="native")
        n = 1 << 15
        x = c.empty(n, np.float64)
        x[:] = 1.0
        idx = c.empty(n, np.int32)
        idx[:] = np.arange(n, dtype=np.int32) // 64
        for _ in range(2):
            assert (c.segmented_sum(x, idx, n // 64) == 64.0).all()
        before = _idx_hits(d)
        assert before >= 1  # the victim's own second call hit its entry
        out = json.loads(run_as(OTHER_UID, py, GUESS, d.url, os.path.abspath(src)).strip().splitlines()[-1])
        assert out["ok"]
        assert _idx_hits(d) == before, "another uid's call hit this uid's validated idx"
        c.close()
    finally:
        d.stop_and_check()


def test_connections_log_at_debug_and_refusals_once_a_second(py, binary, open_dir):
    """N9: every native connection used to be logged at info (and every refusal warned): a uid
    opening connections in a loop flooded the log. Connections log at debug now, and one uid's
    refusals are warned at most once a second (with the count of those not logged)."""
    sock = os.path.join(open_dir, "n.sock")
    d = Daemon(binary, ["--native-socket", sock, "--socket-mode", "0666", "--native-max-channels-per-uid", "1",
                        "--log-level", "info"])
    try:
        run_as(OTHER_UID, py, r"""
held = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
held.connect(sys.argv[1])  # its one channel
end = time.time() + 1.5
n = 0
while time.time() < end:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        s.connect(sys.argv[1])
        s.recv(4096)  # the refusal
    except OSError:
        pass
    s.close()
    n += 1
print(n)
""", sock)
        time.sleep(0.2)
        err = d.stderr_text()
        opened = [ln for ln in err.splitlines() if "native channel" in ln and " from pid " in ln and "refused" not in ln]
        refused = [ln for ln in err.splitlines() if "refused" in ln and "native channel" in ln]
        assert not opened, opened[:3]
        assert 1 <= len(refused) <= 3, refused[:5]
    finally:
        d.stop_and_check()


# ---- every uid's share of the workers, of mapped memory and of the guard table ----------------------

STAGGERED = r"""
import threading
url, seconds, n, gap = sys.argv[1], float(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
body = {"x": list(range(64)), "idx": [0] * 64, "num_segments": 1}
codes = {}
end = time.time() + seconds
def hammer(k):
    time.sleep(k * gap)  # the callers' calls start (and end) a gap apart
    while time.time() < end:
        st, _ = req(url, "POST", "/v1/segmented_sum/forward", body, {"Content-Type": "application/json"})
        codes[st] = codes.get(st, 0) + 1
ts = [threading.Thread(target=hammer, args=(k,)) for k in range(n)]
for t in ts:
    t.start()
for t in ts:
    t.join()
print(json.dumps(codes))
"""


def test_one_uid_cannot_keep_every_worker_while_another_waits(py):
    """One uid keeps all four workers busy (a slow backend, its calls ending 0.3 s apart) and more
    calls waiting. Another uid sends two calls at once: the first worker that frees up takes the
    first; the second no longer waits for the busy uid's turn in the round-robin, because that uid
    runs more than its share (--max-running-per-uid, half of the workers): it takes the next
    worker, one gap later, not two."""
    binary = os.environ.get("SEGOPSD_TEST")
    if not binary or not os.path.exists(binary):
        pytest.skip("$SEGOPSD_TEST does not name the test build")
    d = Daemon(binary, ["--threads", "4", "--max-connections-per-peer", "64"], env={"SEGOPS_TEST_DELAY_MS": "1200"})
    flood = None
    try:
        assert info(d)["limits"]["max_running_per_uid"] == 2
        flood = subprocess.Popen(argv_as(OTHER_UID, py, STAGGERED, d.url, "5", "6", "0.3"), stdout=subprocess.PIPE,
                                 text=True)
        time.sleep(2.5)  # its four running calls end 0.3 s apart, two more wait
        import threading

        done = {}

        def call(k):
            c = d.conn(timeout=30)
            c.request("POST", "/v1/segmented_sum/forward", json.dumps({"x": [1.0, 2.0], "idx": [0, 0], "num_segments": 1}),
                      {"Content-Type": "application/json"})
            r = c.getresponse()
            r.read()
            done[k] = (r.status, time.monotonic())
            c.close()

        ts = [threading.Thread(target=call, args=(k,)) for k in range(2)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        assert [done[k][0] for k in range(2)] == [200, 200], done
        apart = abs(done[1][1] - done[0][1])
        # One gap (0.3 s) with the share; two (0.6 s) when the busy uid's turn came in between.
        assert apart < 0.45, f"the waiting uid's two calls ended {apart:.2f} s apart"
        out, _ = flood.communicate(timeout=60)
        assert json.loads(out.strip().splitlines()[-1]).get("200", 0) > 0
    finally:
        if flood and flood.poll() is None:
            flood.kill()
            flood.wait()
        d.stop_and_check()


def _raw_pools(py, sock, *specs, slots=4, channels=1):
    """Runs RAW_POOLS as OTHER_UID: `channels` channels of `slots` slots each, then the pools."""
    code = RAW_POOLS
    if slots != 4 or channels != 1:
        code = code.replace("slots = 4\n", f"slots = {slots}\n")
        code = code.replace('out = {"hello": answer(s)}\n', 'out = {"hello": answer(s)}\n' + r"""
held = []
for k in range(%d - 1):
    c2 = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    c2.connect(sys.argv[1])
    c2.send(head(HELLO, 1048) + struct.pack("<II", 0, 0) + bytes(1024))
    answer(c2)
    rfd, _ = memfd(256 + %d * 2048, "backed")
    rm = mmap.mmap(rfd, 256 + %d * 2048)
    rm[:24] = struct.pack("<QIIII", 0x474E4952504F4753, VER, %d, 2048, 256)
    socket.send_fds(c2, [head(RING, 24) + struct.pack("<II", %d, 0)], [rfd])
    out["ring%%d" %% k] = answer(c2)
    held.append((c2, rm))
""" % (channels, slots, slots, slots, slots))
    return json.loads(run_as(OTHER_UID, py, code, sock, native_version(), *specs, timeout=120))


def test_one_uid_cannot_map_all_memory_for_another(py, binary, open_dir):
    """One uid's channels may map at most its share of --max-mapped-bytes (half by default): rings,
    pools and the daemon's bookkeeping for their slots. The pool past the share is refused naming the
    option; another uid still gets its channel and its pools. Channels of 256 slots cost about 1 MiB
    of the daemon's memory each: that counts too, so a uid cannot open them without bound."""
    sock = os.path.join(open_dir, "n.sock")
    d = Daemon(binary, ["--native-socket", sock, "--socket-mode", "0666", "--max-mapped-bytes", "48m"])
    try:
        lim = info(d)["limits"]
        assert lim["max_mapped_bytes"] == 48 << 20 and lim["max_mapped_bytes_per_uid"] == 24 << 20
        specs = ["backed:%d" % ((4 << 20) + 4096 * k) for k in range(7)]
        out = _raw_pools(py, sock, *specs)
        got = [out[s] for s in ["ring"] + specs]
        assert got[:6] == ["OK"] * 6, out  # the ring and five pools: 20 MiB and a little
        assert "--max-mapped-bytes-per-uid" in got[6] and "--max-mapped-bytes-per-uid" in got[7], out
        need_native()
        c = segops.Client(d.url, timeout=30, transport="native")
        x = c.empty(1 << 20, np.float64)  # 8 MiB in this uid's pools
        x[:] = 1.0
        assert c.segmented_sum(x, np.zeros(1 << 20, np.int32), 1).tolist() == [float(1 << 20)]
        assert c.transport_used == "native"
        c.close()
    finally:
        d.stop_and_check()
    d = Daemon(binary, ["--native-socket", sock, "--socket-mode", "0666", "--max-mapped-bytes", "8m"])
    try:
        out = _raw_pools(py, sock, slots=256, channels=4)
        rings = [out.get("ring%d" % k) for k in range(3)] + [out["ring"]]
        assert rings[0] == "OK" and rings[1] == "OK", out  # two channels' bookkeeping fit 4 MiB
        assert any("--max-mapped-bytes-per-uid" in (r or "") for r in rings[2:]), out
    finally:
        d.stop_and_check()


def test_the_shares_are_configurable(py, binary, open_dir):
    """The guard table's per-uid share (--max-mappings-per-uid) and the shm shares
    (--max-shm-bytes-per-uid, --max-shm-regions, --max-shm-regions-per-uid) are options, reported by
    /v1/info; a refusal names the option to raise."""
    sock = os.path.join(open_dir, "n.sock")
    d = Daemon(binary, ["--native-socket", sock, "--socket-mode", "0666", "--max-mappings-per-uid", "4",
                        "--max-shm-regions-per-uid", "1", "--max-shm-bytes-per-uid", "64k"])
    keys = []
    try:
        i = info(d)
        assert i["limits"]["max_mappings_per_uid"] == 4 and i["limits"]["max_mappings"] == 8192
        assert i["shm"]["max_regions_per_uid"] == 1 and i["shm"]["max_shm_bytes_per_uid"] == 64 << 10
        assert i["settings"]["max-mappings-per-uid"] == 4
        out = _raw_pools(py, sock, "backed:4096", "backed:8192", "backed:12288", "backed:16384")
        assert [out[k] for k in ("ring", "backed:4096", "backed:8192", "backed:12288")] == ["OK"] * 4, out
        assert "guard table" in out["backed:16384"] and "--max-mappings-per-uid" in out["backed:16384"], out
        got = json.loads(run_as(OTHER_UID, py, r"""
url = sys.argv[1]
got = []
for name, size in (("big", 1 << 17), ("one", 4096), ("two", 4096)):
    key, m = shm_object(size, 0o600, name)
    st, body = req(url, "POST", f"/v2/systemsharedmemory/region/{name}/register", {"key": key, "byte_size": size})
    got.append([st, body[:300], key])
print(json.dumps(got))
""", d.url))
        keys += [k for _, _, k in got]
        assert [st for st, _, _ in got] == [400, 200, 503], got
        assert "--max-shm-bytes-per-uid" in got[0][1] and "--max-shm-regions-per-uid" in got[2][1], got
    finally:
        d.stop_and_check()
        for k in keys:
            if os.path.exists("/dev/shm" + k):
                os.unlink("/dev/shm" + k)


# RAW_POOLS with the daemon's URL first (argv[3]): after its pools, prints /metrics' pinned bytes
# while it holds them; with HOLD, then waits for its stdin to close before it lets them go.
PINNED_POOLS = RAW_POOLS.replace("for spec in sys.argv[3:]:", "for spec in sys.argv[4:]:").replace(
    "print(json.dumps(out))\n", r"""
st, text = req(sys.argv[3], "GET", "/metrics")
out["pinned"] = [int(float(l.split()[1])) for l in text.splitlines() if l.startswith("segops_native_pinned_bytes ")][0]
print(json.dumps(out), flush=True)
if "HOLD" in sys.argv[4:]:
    sys.stdin.read()
""").replace('for spec in sys.argv[4:]:\n    kind, size', 'for spec in [a for a in sys.argv[4:] if a != "HOLD"]:\n    kind, size')


def test_one_uid_cannot_pin_all_memory_for_another(py, binary, open_dir):
    """Pinned memory (CUDA: client pools registered for direct device copies) is shared per uid:
    one uid's pools are pinned up to --max-pinned-bytes-per-uid (half of --max-pinned-bytes by
    default) and used unpinned beyond it, so a second uid still gets pinned pools while the first
    holds its share. Needs the CUDA backend (the CPU backend pins nothing): skipped without a GPU,
    failed there with SEGOPS_REQUIRE_CUDA=1."""
    sock = os.path.join(open_dir, "n.sock")
    try:
        d = Daemon(binary, ["--backend", "cuda", "--native-socket", sock, "--socket-mode", "0666",
                            "--max-pinned-bytes", "16m"])
    except AssertionError as e:
        if os.environ.get("SEGOPS_REQUIRE_CUDA") == "1":
            raise
        pytest.skip(f"no CUDA backend here: {str(e)[:200]}")
    holder = None
    try:
        assert info(d)["limits"]["max_pinned_bytes_per_uid"] == 8 << 20
        mib4 = "backed:%d" % (4 << 20)
        holder = subprocess.Popen(argv_as(OTHER_UID, py, PINNED_POOLS, sock, native_version(), d.url,
                                          mib4, mib4, mib4, "HOLD"),
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        a = json.loads(holder.stdout.readline() or "{}")
        assert [a.get(k) for k in ("ring", mib4)] == ["OK", "OK"], (a, holder.stderr.read() if not a else "")
        # three pools of 4 MiB, all accepted; two pinned (8 MiB: the uid's share), the third unpinned
        assert a["pinned"] == 8 << 20, a
        b = json.loads(run_as(THIRD_UID, py, PINNED_POOLS, sock, native_version(), d.url, mib4, mib4, mib4))
        assert b[mib4] == "OK", b
        assert b["pinned"] == 16 << 20, (a, b)  # the second uid's share, while the first holds its own
    finally:
        if holder:
            holder.communicate(timeout=30)
        d.stop_and_check()

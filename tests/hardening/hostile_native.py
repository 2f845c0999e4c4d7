"""hostile_native.py: hostile native-channel clients for the soak (soak.py --hostile), the classes of
the co-tenant findings (proto/native.md, Trust), each against the daemon's native socket with its
answer checked: a sparse pool (refused: not fully backed), a hole punched in a pool after its
hand-over (the next call refused, by a client process of its own), many pools on one channel (the
257th refused), many silent connects (nothing sent; the daemon must neither wait on them nor keep
them). No pytest here."""
import ctypes
import fcntl
import mmap
import os
import select
import socket
import struct
import subprocess
import sys

MAGIC = 0x4E474553
HELLO, WELCOME, RING, POOL, OK, ERROR = 1, 2, 3, 4, 5, 6
SLOTS = 4
_libc = ctypes.CDLL(None, use_errno=True)
_SRC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "clients", "python", "src")


def native_version():
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "proto", "segops_ring.h")) as f:
        for line in f:
            if line.startswith("#define SEGOPS_NATIVE_VERSION"):
                return int(line.split()[2].rstrip("u"))
    raise AssertionError("no SEGOPS_NATIVE_VERSION")


VER = native_version()


def _head(t, size):
    return struct.pack("<IIII", MAGIC, VER, t, size)


def _ring_doorbell(ring):  # the daemon reads control messages when it wakes (proto/native.md)
    bell = ctypes.c_uint32.from_buffer(ring, 64)
    bell.value += 1
    _libc.syscall(202, ctypes.byref(bell), 1, 1, None, None, 0)  # futex(FUTEX_WAKE, 1)
    del bell


def _answer(s, ring=None):
    for _ in range(200):
        if ring is not None:
            _ring_doorbell(ring)
        if select.select([s], [], [], 0.05)[0]:
            break
    m = s.recv(4096)
    if not m:
        return "closed"
    t = struct.unpack_from("<IIII", m)[2]
    if t == ERROR:
        return m[16 + 8 + 40:].split(b"\0")[0].decode(errors="replace")
    return "OK" if t in (OK, WELCOME) else f"type {t}"


def _memfd(size, sparse=False):
    fd = os.memfd_create("hostile", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    os.ftruncate(fd, size)
    if not sparse:
        os.posix_fallocate(fd, 0, size)
    fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK)
    return fd


def _channel(sock):
    """A channel through HELLO and RING: (socket, ring mapping), or (None, what was wrong)."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    s.settimeout(15)
    s.connect(sock)
    s.send(_head(HELLO, 1048) + struct.pack("<II", 0, 0) + bytes(1024))
    a = _answer(s)
    if a != "OK":
        s.close()
        return None, f"HELLO answered {a!r}"
    size = 256 + SLOTS * 2048
    rfd = _memfd(size)
    ring = mmap.mmap(rfd, size)
    ring[:24] = struct.pack("<QIIII", 0x474E4952504F4753, VER, SLOTS, 2048, 256)
    socket.send_fds(s, [_head(RING, 24) + struct.pack("<II", SLOTS, 0)], [rfd])
    os.close(rfd)
    a = _answer(s)
    if a != "OK":
        s.close()
        return None, f"RING answered {a!r}"
    return s, ring


def _pool(s, ring, pid, size, sparse=False):
    fd = _memfd(size, sparse)
    socket.send_fds(s, [_head(POOL, 32) + struct.pack("<IIQ", pid, 0, size)], [fd])
    os.close(fd)
    return _answer(s, ring=ring)


def _sparse_pool(sock, url, rng):
    s, ring = _channel(sock)
    if s is None:
        return ring
    try:
        a = _pool(s, ring, 0, 1 << 20, sparse=True)
        return None if "not fully backed" in a else f"a sparse pool answered {a!r}"
    finally:
        s.close()


def _many_pools(sock, url, rng):
    s, ring = _channel(sock)
    if s is None:
        return ring
    try:
        for k in range(257):
            a = _pool(s, ring, k, 4096)
            if k < 256 and a != "OK":
                return f"pool {k} answered {a!r}"
        return None if "256 pools at most" in a else f"pool 257 answered {a!r}"
    finally:
        s.close()


def _silent_connects(sock, url, rng):
    held = []
    for _ in range(rng.randrange(16, 96)):
        c = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            c.connect(sock)
        except (BlockingIOError, ConnectionRefusedError):  # the backlog is full: refused, never waited on
            c.close()
            break
        held.append(c)
    select.select([], [], [], rng.random() * 0.5)
    for c in held:
        c.close()
    return None


# A client of its own (libsegops' C extension) punches holes in its pools after the hand-over; its
# next call must be refused naming the rule, and the one after a new client's must succeed.
_PUNCH = r"""
import ctypes, os, sys
sys.path.insert(0, sys.argv[2])
import numpy as np, segops
libc = ctypes.CDLL(None, use_errno=True)
c = segops.Client(sys.argv[1], timeout=20, transport="native")
x = c.empty(1 << 14, np.float64)
x[:] = 1.0
idx = np.zeros(1 << 14, np.int32)
assert c.segmented_sum(x, idx, 1).tolist() == [16384.0]
for name in os.listdir("/proc/self/fd"):
    try:
        if os.readlink(f"/proc/self/fd/{name}").startswith("/memfd:segops-pool"):
            fd = int(name)
            libc.fallocate(fd, 3, ctypes.c_long(0), ctypes.c_long(os.fstat(fd).st_size))  # PUNCH_HOLE|KEEP_SIZE
    except OSError:
        pass
try:
    c.segmented_sum(x, idx, 1)
    print("the call after the hole was answered")
except segops.InvalidArgument as e:
    print("refused" if "no memory at byte" in str(e) else f"refused otherwise: {e}")
"""


def _hole_punched(sock, url, rng):
    r = subprocess.run([sys.executable, "-c", _PUNCH, url, os.path.abspath(_SRC)], capture_output=True, text=True,
                       timeout=60)
    out = r.stdout.strip()
    return None if r.returncode == 0 and out == "refused" else f"exit {r.returncode}: {out} {r.stderr[-300:]}"


CLASSES = [
    ("native sparse pool", _sparse_pool),
    ("native many pools", _many_pools),
    ("native silent connects", _silent_connects),
    ("native hole punched", _hole_punched),
]


def native_once(sock, url, rng):
    """One hostile native exchange of a random class. Returns (class name, None or what was wrong)."""
    name, what = CLASSES[rng.randrange(len(CLASSES))]
    try:
        return name, what(sock, url, rng)
    except (OSError, subprocess.TimeoutExpired) as e:
        return name, f"error: {e!r}"

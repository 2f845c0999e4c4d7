"""hostile.py: hostile-client traffic shared by test_mutation.py and soak.py (issues 11 and 37): random
mutations of valid requests, and the raw-socket classes of the red-team runs (dead uploads, slow
bodies, bad framing, smuggling, huge heads and queries, amplification, shared-memory registration
garbage; answers never read or taken slowly, idle connections, regions that are not the client's,
many registrations, a second Inference-Header-Content-Length, ragged OIP data), each with the check
of what the daemon may answer. No pytest here: soak.py runs standalone."""
import itertools
import json
import mmap
import os
import random
import socket
import time

GOOD = b'{"x":[1,2,3,4,5,6],"idx":[0,0,1,1,1,2],"num_segments":3}'
OP = b"/v1/segmented_sum/forward"

SEEDS = [
    b"POST /v1/segmented_sum/forward HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
    b"Content-Length: %d\r\n\r\n%s" % (len(GOOD), GOOD),
    b"POST /v1/segmented_mul/backward HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
    b"Transfer-Encoding: chunked\r\n\r\n5\r\n{\"x\":\r\n0\r\n\r\n",
    b"GET /v1/info HTTP/1.1\r\nHost: x\r\nAccept: */*\r\n\r\n",
    b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n",
    b"POST /v2/models/segmented_sum_forward/infer HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
    b"Content-Length: 2\r\n\r\n{}",
]
ALLOWED = {200, 400, 401, 404, 405, 406, 413, 414, 415, 431, 501, 503, 505}  # 505: an unknown HTTP version


def mutate(rng, b):
    b = bytearray(b)
    for _ in range(rng.randint(1, 4)):
        k = rng.randrange(5)
        i = rng.randrange(len(b)) if b else 0
        if k == 0 and b:
            b[i] = rng.randrange(256)
        elif k == 1:
            b[i:i] = bytes(rng.choice([b"\0", b"%00", b"\r\n", b":", b",", b" ", b"9" * 20, b"%2F", b"\xff"]))
        elif k == 2 and b:
            del b[i:i + rng.randint(1, 8)]
        elif k == 3:
            b = b[:i]
        else:
            b[i:i] = b[i:i + rng.randint(1, 40)] * rng.randint(1, 50)
    return bytes(b)


def check_answer(data):
    if not data:
        return  # closed without an answer: a head libmicrohttpd could not parse at all
    assert data.startswith(b"HTTP/1.1 "), data[:200]
    hend = data.find(b"\r\n\r\n")
    assert hend > 0, data[:200]
    status = int(data[9:12])
    assert status in ALLOWED, data[:300]
    if status >= 400 and b"Content-Type: application/json" in data[:hend]:
        n = int(data[:hend].lower().split(b"content-length:")[1].split(b"\r\n")[0])
        body = json.loads(data[hend + 4:hend + 4 + n])
        assert "error" in body




def read_until_close(s, timeout):
    """What the server sends on s until it closes (or resets) the connection, or stays silent
    for `timeout`. Returns (bytes, closed_by_server)."""
    s.settimeout(timeout)
    data = b""
    try:
        while True:
            chunk = s.recv(65536)
            if not chunk:
                return data, True
            data += chunk
    except socket.timeout:
        return data, False
    except (ConnectionResetError, BrokenPipeError):
        return data, True


def exchange(addr, req, timeout, half_close=True):
    """Sends req on a new connection, half-closes, reads until the server closes.
    Returns (bytes, closed_by_server)."""
    s = socket.create_connection(addr, timeout=timeout)
    try:
        try:
            s.sendall(req)
            if half_close:
                s.shutdown(socket.SHUT_WR)
        except OSError:
            pass  # answered and closed before all was sent (431, 413): read what came back
        return read_until_close(s, timeout)
    finally:
        s.close()


def _post(path, body, extra=b"", cl=None):
    cl = len(body) if cl is None else cl
    return (b"POST " + path + b" HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n" + extra
            + b"Content-Length: %d\r\n\r\n" % cl + body)


def _dead_upload(addr, rng):
    s = socket.create_connection(addr, timeout=10)
    s.sendall(_post(OP, b"{", cl=268435456))
    s.close()  # gone: the budget it reserved must come back at once
    return None


def _slow_body(addr, rng):
    s = socket.create_connection(addr, timeout=10)
    try:
        s.sendall(_post(OP, b"", cl=len(GOOD)))
        for b in GOOD[:rng.randint(1, 4)]:
            s.sendall(bytes([b]))
            time.sleep(0.3)
    except OSError:
        pass
    s.close()
    return None


def _small_window(addr):
    """A connection whose receive window stays small (set before connecting): an answer waits in
    the daemon, not in the kernel's buffers."""
    s = socket.socket(socket.AF_INET6 if ":" in addr[0] else socket.AF_INET)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.settimeout(10)
    s.connect(addr)
    return s


def _big_answer(n):
    body = b'{"x":[],"idx":[],"num_segments":%d}' % n
    return _post(OP, body, extra=b"Accept: application/msgpack\r\n")


def _unread_answer(addr, rng):
    s = _small_window(addr)  # an 8 MiB answer, never read: its memory comes back at the stall timeout
    try:
        s.sendall(_big_answer(1 << 20))
        time.sleep(rng.uniform(0.2, 1.5))
    except OSError:
        pass
    s.close()
    return None


def _slow_reader(addr, rng):
    s = _small_window(addr)
    try:
        s.sendall(_big_answer(1 << 20))
        end = time.time() + rng.uniform(0.5, 2.0)
        while time.time() < end and s.recv(2048):
            time.sleep(0.05)
    except OSError:
        pass
    s.close()
    return None


def _idle_connections(addr, rng):
    socks = []
    try:
        for _ in range(rng.randint(4, 16)):
            socks.append(socket.create_connection(addr, timeout=5))
        time.sleep(rng.uniform(0.2, 1.0))
    except OSError:
        pass
    for s in socks:
        s.close()
    return None


_seq = itertools.count()


def _many_registrations(addr, rng):
    """Registers dozens of one-byte regions of an object of its own, then unregisters them by name:
    every answer 200 (descriptors are not held, names are the caller's)."""
    key = f"/segops-hostile-{os.getpid()}-{next(_seq)}"
    fd = os.open("/dev/shm" + key, os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o600)
    try:
        os.ftruncate(fd, 4096)
        names = [f"hostile-{os.getpid()}-{next(_seq)}" for _ in range(rng.randint(8, 48))]
        for path, body in [(f"/v2/systemsharedmemory/region/{n}/register",
                            json.dumps({"key": key, "offset": rng.randrange(4096), "byte_size": 1}).encode())
                           for n in names] + [(f"/v2/systemsharedmemory/region/{n}/unregister", b"") for n in names]:
            data, _ = exchange(addr, _post(path.encode(), body), 15)
            if not data.startswith(b"HTTP/1.1 200"):
                return f"{path}: {data[:200]!r}"
    finally:
        os.close(fd)
        os.unlink("/dev/shm" + key)
    return None


OIP_SUM = b"/v2/models/segmented_sum_forward/infer"
_OIP_HEAD = (b'{"inputs":[{"name":"x","datatype":"FP64","shape":[3],"parameters":{"binary_data_size":24}},'
             b'{"name":"idx","datatype":"INT32","shape":[3],"data":[0,1,1]},'
             b'{"name":"num_segments","datatype":"INT64","shape":[1],"data":[2]}]}')
_OIP_BIN = _OIP_HEAD + b"\0" * 24
_RAGGED = (b'{"inputs":[{"name":"x","datatype":"FP64","shape":[3],"data":[[1,2],[3]]},'
           b'{"name":"idx","datatype":"INT32","shape":[3],"data":[0,1,1]},'
           b'{"name":"num_segments","datatype":"INT64","shape":[1],"data":[2]}]}')
_FOREIGN = b'{"x":{"dtype":"float64","shape":[3],"shm":{"region":"someone-elses","offset":0}},"idx":[0,0,0],' \
           b'"num_segments":1}'

# (name, request bytes / a function doing the exchange / None for a random mutation, the status
# it must get or None for "any allowed")
CLASSES = [
    ("mutation", None, None),
    ("dead upload", _dead_upload, None),
    ("slow body", _slow_body, None),
    ("two Content-Lengths", _post(OP, GOOD, extra=b"Content-Length: 7\r\n"), 400),
    ("CL and chunked", _post(OP, GOOD, extra=b"Transfer-Encoding: chunked\r\n"), 400),
    ("gzip, chunked", b"POST /v1/segmented_sum/forward HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", 501),
    ("no Host", b"GET /healthz HTTP/1.1\r\n\r\n", 400),
    ("%00 in path", b"GET /healthz%00/v1/info HTTP/1.1\r\nHost: x\r\n\r\n", 400),
    # ~200 KB of query string: past the 64 KiB connection memory (server/http/http_connmem.h)
    ("huge query", b"GET /healthz?" + b"&".join(b"a%d=1" % i for i in range(25000)) + b" HTTP/1.1\r\nHost: x\r\n\r\n", 414),
    ("many headers", b"GET /healthz HTTP/1.1\r\nHost: x\r\n" + b"".join(b"X%d: y\r\n" % i for i in range(8000)) + b"\r\n", 431),
    ("amplification", _post(OP, b'{"x":[],"idx":[],"num_segments":67108864}'), 413),
    ("100-continue over the cap", _post(OP, b"", extra=b"Expect: 100-continue\r\n", cl=1 << 40), 413),
    ("shm register garbage", _post(b"/v2/systemsharedmemory/region/x/register", b'{"key":"../../etc/passwd","offset":-1}'), 400),
    ("shm register huge", _post(b"/v2/systemsharedmemory/region/x/register",
                                b'{"key":"/segops-absent","offset":0,"byte_size":18446744073709551615}'), 400),
    ("oip garbage", _post(b"/v2/models/segmented_sum_forward/infer", b'{"inputs":[{"name":"x","datatype":"FP32","shape":[-1]}]}'), 400),
    # the second hostile-client run
    ("unread answer", _unread_answer, None),
    ("slow reader", _slow_reader, None),
    ("idle connections", _idle_connections, None),
    ("many registrations", _many_registrations, None),
    ("region not registered", _post(OP, _FOREIGN), 404),
    ("two header lengths", _post(OIP_SUM, _OIP_BIN, extra=b"Inference-Header-Content-Length: %d\r\n"
                                 b"Inference-Header-Content-Length: 1\r\n" % len(_OIP_HEAD)), 400),
    ("signed header length", _post(OIP_SUM, _OIP_BIN, extra=b"Inference-Header-Content-Length: +%d\r\n"
                                   % len(_OIP_HEAD)), 400),
    ("ragged oip data", _post(OIP_SUM, _RAGGED), 400),
    ("region name of 129", _post(b"/v2/systemsharedmemory/region/" + b"n" * 129 + b"/register", b"{}"), 404),
]


def hostile_once(addr, rng, timeout=15.0):
    """One hostile exchange of a random class. Returns (class name, None or what was wrong)."""
    name, what, want = CLASSES[rng.randrange(len(CLASSES))]
    try:
        if callable(what):
            return name, what(addr, rng)
        req = mutate(rng, rng.choice(SEEDS)) if what is None else what
        data, closed = exchange(addr, req, timeout)
        if not closed:
            return name, f"connection still open {timeout} s after the client's FIN"
        check_answer(data)
        if want is not None:
            if not data:
                return name, f"no answer (want {want})"
            status = int(data[9:12])
            if status != want:
                return name, f"status {status}, want {want}: {data[:200]!r}"
            if want not in (414, 431) and b"Content-Type: application/json" not in data[:data.find(b"\r\n\r\n")]:
                return name, f"no JSON body: {data[:200]!r}"  # (414, 431 for a head too big: libmicrohttpd's own)
        return name, None
    except AssertionError as e:
        return name, f"bad answer: {str(e)[:300]}"
    except OSError as e:
        return name, f"connection error: {e!r}"

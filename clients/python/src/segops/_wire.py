"""_wire.py: msgpack request bodies built around the arrays' own buffers, and a streaming
response decoder that reads each tensor's bytes straight into an aligned numpy array."""

import contextlib
import struct
import sys

import msgpack
import numpy as np

from .errors import ProtocolError

# Below this many bytes a body is joined into one buffer (one send, no Nagle stall; the copy
# costs less than a second syscall). Above it, array buffers are sent as they are.
JOIN_BELOW = 64 * 1024
_READ_CHUNK = 64 * 1024

WIRE_DTYPES = {"float32": "<f4", "float64": "<f8", "int32": "<i4", "int64": "<i8"}
# The most dimensions a tensor may have, inputs and answers alike ((N, *F) with up to five
# trailing dimensions; SEGOPS_MAX_NDIM of libsegops, the daemon and the native ring).
MAX_NDIM = 6


@contextlib.contextmanager
def answer_checked(status=200):
    """Decoding an answer: whatever shape of it the decoders did not foresee (a shape that is no
    list of integers, data that does not fill it, text that is no UTF-8) is a ProtocolError."""
    try:
        yield
    except ProtocolError:
        raise
    except (ValueError, TypeError, KeyError, AttributeError, OverflowError, IndexError) as e:
        raise ProtocolError(status, "protocol_error", f"segops: the daemon's answer is malformed: {e}") from None
_LITTLE = sys.byteorder == "little"

_packb = msgpack.packb
_K_DTYPE = _packb("dtype")
_K_SHAPE = _packb("shape")
_K_DATA = _packb("data")
_MAP3 = b"\x83"


def _map_header(n):
    if n < 16:
        return bytes((0x80 | n,))
    return b"\xde" + struct.pack(">H", n)


def _bin_header(n):
    if n < 0x100:
        return bytes((0xC4, n))
    if n < 0x10000:
        return b"\xc5" + struct.pack(">H", n)
    if n < 0x100000000:
        return b"\xc6" + struct.pack(">I", n)
    raise ValueError(f"segops: a tensor of {n} bytes cannot be sent (msgpack bin is limited to 4 GiB)")


def wire_array(a, name):
    """a as a C-contiguous little-endian numpy array: `a` itself when it already is one.

    The client validates nothing the server validates (dtype names, shapes); it only refuses
    what cannot be put on the wire at all (objects, strings, ...)."""
    arr = np.asarray(a)
    dt = arr.dtype
    if dt.kind not in "biufc":
        raise TypeError(f"segops: argument {name!r} has dtype {dt}, which cannot be sent as a tensor")
    bo = dt.byteorder
    if bo == ">" or (bo == "=" and not _LITTLE):
        arr = arr.astype(dt.newbyteorder("<"))
    if not arr.flags.c_contiguous:
        arr = np.ascontiguousarray(arr)
    return arr


_NAMES = {}  # np.dtype -> its name (numpy computes dtype.name in Python on every access)
_DTYPE_NAMES = {}  # np.dtype -> packed name


def dtype_name(dt):
    """dt.name, cached."""
    n = _NAMES.get(dt)
    if n is None:
        n = _NAMES[dt] = dt.name
    return n

_KEYS = {}  # argument name -> packed name


def _key(name):
    k = _KEYS.get(name)
    if k is None:
        k = _packb(name)
        if len(_KEYS) < 256:
            _KEYS[name] = k
    return k


def _tensor_head(arr):
    """msgpack of {"dtype": ..., "shape": [...], "data": <bin header>}: the tensor minus its bytes."""
    dn = _DTYPE_NAMES.get(arr.dtype)
    if dn is None:
        dn = _DTYPE_NAMES[arr.dtype] = _packb(dtype_name(arr.dtype))
    return b"".join((_MAP3, _K_DTYPE, dn, _K_SHAPE, _packb(arr.shape), _K_DATA, _bin_header(arr.nbytes)))


def _scalar(v, name):
    """num_segments and other non-tensor values: Python ints (numpy integers included)."""
    if isinstance(v, (bool, np.bool_)):
        return bool(v)
    if isinstance(v, (int, np.integer)):
        return int(v)
    if isinstance(v, (float, np.floating)):
        return float(v)  # the server names the rule it breaks
    if isinstance(v, (list, tuple, str)):
        return v
    raise TypeError(f"segops: argument {name!r} of type {type(v).__name__} cannot be sent")


def encode_request(args, outputs=None):
    """Body of POST /v1/{op}/{pass} as (body, total_length).

    args: name -> array-like, or for num_segments an int; None values are left out.
    body is one bytes-like object for small bodies, else a list of bytes pieces and memoryviews
    that borrow the arrays' buffers (the arrays must stay alive until the body is sent)."""
    items = []
    data_bytes = 0
    for name, v in args.items():
        if v is None:
            continue
        if name == "num_segments" or isinstance(v, (int, np.integer, float)):
            items.append((name, None, _packb(_scalar(v, name))))
        else:
            arr = wire_array(v, name)
            data_bytes += arr.nbytes
            items.append((name, arr, _tensor_head(arr)))
    if outputs is not None:
        items.append(("outputs", None, _packb(list(outputs))))
    head = bytearray(_map_header(len(items)))
    if data_bytes < JOIN_BELOW:  # one buffer: the small copy costs less than another send
        for name, arr, packed in items:
            head += _key(name)
            head += packed
            if arr is not None:
                head += arr.tobytes()
        return head, len(head)
    pieces = []
    total = 0
    for name, arr, packed in items:
        head += _key(name)
        head += packed
        if arr is not None and arr.nbytes:
            pieces.append(bytes(head))
            total += len(head)
            head = bytearray()
            mv = memoryview(arr.reshape(-1)).cast("B")
            pieces.append(mv)
            total += mv.nbytes
    if head:
        pieces.append(bytes(head))
        total += len(head)
    return pieces, total


class _Reader:
    """Reads a msgpack body from an HTTP response in chunks; bin payloads of size n go into a
    fresh np.empty(n, uint8) (aligned, writable) with the bulk read straight from the socket."""

    __slots__ = ("resp", "left", "buf", "pos")

    def __init__(self, resp, length, preread=b""):
        self.resp = resp
        self.left = length  # bytes still to read from resp (None: unknown, all in preread)
        self.buf = preread
        self.pos = 0

    def _read_exact(self, mv):
        got = 0
        n = len(mv)
        while got < n:
            k = self.resp.readinto(mv[got:])
            if not k:
                raise ProtocolError(200, "protocol_error", "segops: response body truncated")
            got += k
        self.left -= n

    def take(self, n):
        avail = len(self.buf) - self.pos
        if avail < n:
            if not self.left or n - avail > self.left:
                raise ProtocolError(200, "protocol_error", "segops: response body truncated")
            want = min(self.left, max(n - avail, _READ_CHUNK))
            chunk = bytearray(want)
            self._read_exact(memoryview(chunk))
            self.buf = bytes(self.buf[self.pos :]) + bytes(chunk)
            self.pos = 0
        b = self.buf[self.pos : self.pos + n]
        self.pos += n
        return b

    def bin(self, n):
        avail = len(self.buf) - self.pos
        if n > avail + (self.left or 0):  # before allocating: a declared size the body cannot hold
            raise ProtocolError(200, "protocol_error", "segops: response body truncated")
        out = np.empty(n, dtype=np.uint8)
        mv = memoryview(out)
        k = min(avail, n)
        if k:
            mv[:k] = self.buf[self.pos : self.pos + k]
            self.pos += k
        if k < n:
            if not self.left or n - k > self.left:
                raise ProtocolError(200, "protocol_error", "segops: response body truncated")
            self._read_exact(mv[k:])
        return out

    def obj(self, depth=0):
        if depth > 32:
            raise ProtocolError(200, "protocol_error", "segops: response nested too deeply")
        b = self.take(1)[0]
        if b <= 0x7F:
            return b
        if b >= 0xE0:
            return b - 0x100
        if 0x80 <= b <= 0x8F:
            return self._map(b & 0x0F, depth)
        if 0x90 <= b <= 0x9F:
            return [self.obj(depth + 1) for _ in range(b & 0x0F)]
        if 0xA0 <= b <= 0xBF:
            return self.take(b & 0x1F).decode("utf-8")
        if b == 0xC0:
            return None
        if b == 0xC2:
            return False
        if b == 0xC3:
            return True
        fmt = _FIXED.get(b)
        if fmt is not None:
            return struct.unpack(fmt, self.take(struct.calcsize(fmt)))[0]
        if b in (0xC4, 0xC5, 0xC6):
            return self.bin(self._len(b - 0xC4))
        if b in (0xD9, 0xDA, 0xDB):
            return self.take(self._len(b - 0xD9)).decode("utf-8")
        if b in (0xDC, 0xDD):
            return [self.obj(depth + 1) for _ in range(self._len(b - 0xDC + 1))]
        if b in (0xDE, 0xDF):
            return self._map(self._len(b - 0xDE + 1), depth)
        raise ProtocolError(200, "protocol_error", f"segops: unexpected msgpack type 0x{b:02x} in response")

    def _len(self, k):  # k: 0 -> 1 byte, 1 -> 2 bytes, 2 -> 4 bytes, big-endian
        return struct.unpack((">B", ">H", ">I")[k], self.take((1, 2, 4)[k]))[0]

    def _map(self, n, depth):
        d = {}
        for _ in range(n):
            k = self.obj(depth + 1)
            d[k] = self.obj(depth + 1)
        return d


_FIXED = {
    0xCA: ">f",
    0xCB: ">d",
    0xCC: ">B",
    0xCD: ">H",
    0xCE: ">I",
    0xCF: ">Q",
    0xD0: ">b",
    0xD1: ">h",
    0xD2: ">i",
    0xD3: ">q",
}


def _shape(name, v):
    """An answer's shape: a list of at most MAX_NDIM non-negative integers."""
    if not isinstance(v, (list, tuple)) or len(v) > MAX_NDIM or not all(isinstance(d, int) and d >= 0 for d in v):
        raise ProtocolError(200, "protocol_error", f"segops: output {name!r} has a bad shape {str(v)[:80]}")
    return tuple(v)


def _tensor(name, t):
    if isinstance(t, dict) and "dtype" in t and "data" in t:
        dt = WIRE_DTYPES.get(t["dtype"])
        if dt is None:
            raise ProtocolError(200, "protocol_error", f"segops: output {name!r} has unknown dtype {t['dtype']!r}")
        shape = _shape(name, t.get("shape", ()))
        data = t["data"]
        if isinstance(data, np.ndarray):  # msgpack bin: reinterpret in place
            count = 1
            for d in shape:
                count *= d
            if data.nbytes != count * np.dtype(dt).itemsize:
                raise ProtocolError(200, "protocol_error", f"segops: output {name!r}: data length does not fit shape {shape}")
            return data.view(dt).reshape(shape)
        return np.asarray(data, dtype=dt).reshape(shape)  # JSON list
    if isinstance(t, list):
        return np.asarray(t, dtype=np.float64)
    raise ProtocolError(200, "protocol_error", f"segops: output {name!r} is not a tensor")


def decode_msgpack(resp, length, preread=b""):
    """Reads a response map {name: tensor} from resp; returns {name: np.ndarray}."""
    with answer_checked():
        return _decode_msgpack(resp, length, preread)


def _decode_msgpack(resp, length, preread):
    r = _Reader(resp, length, preread)
    top = r.obj()
    if not isinstance(top, dict):
        raise ProtocolError(200, "protocol_error", "segops: response is not a map")
    if r.left or r.pos != len(r.buf):
        raise ProtocolError(200, "protocol_error", "segops: trailing bytes after the response map")
    return {k: _tensor(k, v) for k, v in top.items()}


def unpack_map(body):
    """A small msgpack response held in memory, as a dict (msgpack's C decoder)."""
    try:
        top = msgpack.unpackb(body, raw=False, strict_map_key=False)
    except Exception as e:
        raise ProtocolError(200, "protocol_error", f"segops: response is not valid msgpack: {e}") from None
    if not isinstance(top, dict):
        raise ProtocolError(200, "protocol_error", "segops: response is not a map")
    return top


def inline_tensor(name, t):
    """An output that carries its data: one copy of the (small) payload into its own aligned,
    writable array."""
    if isinstance(t, dict) and isinstance(t.get("data"), bytes):
        t = dict(t, data=np.frombuffer(t["data"], dtype=np.uint8).copy())
    return _tensor(name, t)


def decode_msgpack_bytes(body):
    """Decodes a small response held in memory."""
    with answer_checked():
        return {k: inline_tensor(k, t) for k, t in unpack_map(body).items()}


def decode_json_outputs(obj):
    if not isinstance(obj, dict):
        raise ProtocolError(200, "protocol_error", "segops: response is not a map")
    with answer_checked():
        return {k: _tensor(k, v) for k, v in obj.items()}

"""_wire.py: the pure-Python client's bodies (proto/API.md): a request as msgpack, an answer's tensors
(msgpack or JSON) as numpy arrays; whatever in an answer does not fit is a ProtocolError."""

import contextlib
import json
import math
import sys

import msgpack
import numpy as np

from .errors import ProtocolError

WIRE_DTYPES = {"float32": "<f4", "float64": "<f8", "int32": "<i4", "int64": "<i8"}
# The most dimensions a tensor may have, inputs and answers alike ((N, *F) with up to five
# trailing dimensions; SEGOPS_MAX_NDIM of libsegops, the daemon and the native ring).
MAX_NDIM = 6
_LITTLE = sys.byteorder == "little"


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


def wire_array(a, name):
    """a as a C-contiguous little-endian numpy array (`a` itself when it already is one). The client
    validates nothing the server validates (dtype names, shapes); it only refuses what cannot be put
    on the wire at all (objects, strings, ...)."""
    arr = np.asarray(a)
    dt = arr.dtype
    if dt.kind not in "biufc":
        raise TypeError(f"segops: argument {name!r} has dtype {dt}, which cannot be sent as a tensor")
    if dt.byteorder == ">" or (dt.byteorder == "=" and not _LITTLE):
        arr = arr.astype(dt.newbyteorder("<"))
    return np.ascontiguousarray(arr)


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


def _value(v, name):
    """A tensor as its wire map, around the array's own buffer; num_segments as a scalar."""
    if name == "num_segments" or isinstance(v, (int, np.integer, float)):
        return _scalar(v, name)
    arr = wire_array(v, name)
    return {"dtype": arr.dtype.name, "shape": list(arr.shape), "data": memoryview(arr.reshape(-1)).cast("B")}


def encode_request(args, outputs=None):
    """The msgpack body of POST /v1/{op}/{pass}: args maps names to arrays (or, num_segments, an int);
    None values are left out; outputs: the names asked for (None: all)."""
    body = {name: _value(v, name) for name, v in args.items() if v is not None}
    if outputs is not None:
        body["outputs"] = list(outputs)
    return msgpack.packb(body)


def _shape(name, v):
    """An answer's shape: a list of at most MAX_NDIM non-negative integers."""
    if not isinstance(v, (list, tuple)) or len(v) > MAX_NDIM or not all(isinstance(d, int) and d >= 0 for d in v):
        raise ProtocolError(200, "protocol_error", f"segops: output {name!r} has a bad shape {str(v)[:80]}")
    return tuple(v)


def _tensor(name, t):
    if isinstance(t, list):
        return np.asarray(t, dtype=np.float64)
    if not isinstance(t, dict) or "dtype" not in t or "data" not in t:
        raise ProtocolError(200, "protocol_error", f"segops: output {name!r} is not a tensor")
    dt = WIRE_DTYPES.get(t["dtype"])
    if dt is None:
        raise ProtocolError(200, "protocol_error", f"segops: output {name!r} has unknown dtype {t['dtype']!r}")
    shape, data = _shape(name, t.get("shape", ())), t["data"]
    if isinstance(data, bytes):  # msgpack bin: its own aligned, writable array
        if len(data) != math.prod(shape) * np.dtype(dt).itemsize:
            raise ProtocolError(200, "protocol_error", f"segops: output {name!r}: data length does not fit shape {shape}")
        return np.frombuffer(data, dtype=dt).reshape(shape).copy()
    return np.asarray(data, dtype=dt).reshape(shape)  # JSON list


def decode_outputs(raw, json_body):
    """{output name: np.ndarray} of an answer's body (msgpack, or JSON when json_body)."""
    with answer_checked():
        try:
            top = json.loads(raw) if json_body else msgpack.unpackb(raw, raw=False, strict_map_key=False)
        except Exception as e:  # noqa: BLE001 - whatever the decoder says of bytes it cannot read
            what = "JSON" if json_body else "msgpack"
            raise ProtocolError(200, "protocol_error", f"segops: the answer is not valid {what}: {e}") from None
        if not isinstance(top, dict):
            raise ProtocolError(200, "protocol_error", "segops: response is not a map")
        return {k: _tensor(k, v) for k, v in top.items()}

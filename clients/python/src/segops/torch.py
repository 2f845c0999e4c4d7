"""segops.torch: the segment ops of the op table on torch tensors, differentiable to second order;
the forward, the backward and the double backward each run on the segops server (the formulas:
proto/API.md, "Formulas").

    import segops.torch as st
    e = st.segmented_sum(st.segmented_dot(x, x, idx, S), ...)

Each function is a torch.library custom op (`torch.ops.segops.<op>_<pass>`, one per function of
the table) with a fake implementation and registered autograd, so `torch.compile(model,
fullgraph=True)` keeps the calls as opaque nodes, and torch.func.grad / vjp / jacrev / vmap work
(a vmapped call is one server call). Forward-mode AD (jvp, jacfwd) is not available. A third
derivative raises.

Tensors go to the server from CPU memory (a GPU tensor is copied to pinned memory first) and
results come back on the inputs' device. idx and num_segments receive no gradient.

The server: `client=` on a call (a segops.Client or a URL string), else the one set with
set_client() / use_client(), else segops.default_client() ($SEGOPS_URL).
"""

from __future__ import annotations

import contextlib
import threading
from typing import Iterator, Union

import numpy as np
import torch

from . import Client, _table, default_client
from . import client as _client_mod

_MIN_TORCH = (2, 4)


def _torch_version():
    try:
        return tuple(int(p) for p in torch.__version__.split("+")[0].split(".")[:2])
    except ValueError:
        return (0, 0)


if _torch_version() < _MIN_TORCH or not all(
    hasattr(torch.library, f) for f in ("custom_op", "register_fake", "register_autograd")
):
    raise ImportError(
        f"segops.torch needs torch >= {_MIN_TORCH[0]}.{_MIN_TORCH[1]} (torch.library.custom_op, "
        f"register_fake, register_autograd); this is torch {torch.__version__}. Upgrade torch "
        "(pip install 'torch>=2.4'), or use the numpy functions of `segops`."
    )

from . import _torch_eager, _torch_func, _torch_ops  # noqa: E402  (registers torch.ops.segops.*)

Tensor = torch.Tensor
ClientLike = Union[Client, str, None]  # a Client, a URL string, or None (the current client)
SegmentCount = Union[int, torch.SymInt, torch.Tensor]

__all__ = [*_table.OPS, "set_client", "get_client", "use_client", "empty"]  # one function per op of the table

# ---- which server: custom ops take a string key, resolved when the op runs ----

_lock = threading.Lock()
_current = None  # the client set with set_client / use_client (None: segops.default_client())
_objects = _client_mod._live  # "obj:<id>" -> a Client (each registers itself) or another object passed as client=
_by_url = {}  # URL -> Client made for client="http://..."


def _as_client(client):
    if client is None or isinstance(client, Client) or hasattr(client, "call"):
        return client
    if isinstance(client, str):
        with _lock:
            c = _by_url.get(client)
            if c is None:
                c = _by_url[client] = Client(client)
        return c
    raise TypeError(f"segops.torch: client must be a segops.Client, a URL string or None, not {type(client).__name__}")


def set_client(client: ClientLike) -> Client | None:
    """Sets the server segops.torch uses when a call passes no client= (a segops.Client, a URL
    string, or None for segops.default_client()). Process-wide, not per thread: the backward of
    a GPU graph runs on autograd's own threads. Returns the previous setting."""
    global _current
    client = _as_client(client)
    with _lock:
        prev, _current = _current, client
    return prev


def get_client() -> Client:
    """The client a call without client= uses now."""
    c = _current
    return c if c is not None else default_client()


@contextlib.contextmanager
def use_client(client: ClientLike) -> Iterator[Client | None]:
    """with segops.torch.use_client(c): ...: set_client(c) for the block (process-wide)."""
    prev = set_client(client)
    try:
        yield _current
    finally:
        set_client(prev)


@torch.compiler.assume_constant_result
def _key_of_object(client):
    key = f"obj:{id(client)}"
    if _objects.get(key) is not client:  # (a lookup costs less than storing it again)
        _objects[key] = client
    return key


def _client_key(client):
    """The key a custom op carries: "" for the current client, a URL, or "obj:<id>"."""
    if client is None:
        return ""
    if isinstance(client, str):
        return client
    if isinstance(client, Client):
        return client._torch_key  # a str attribute: a constant to torch.compile, no call traced
    if hasattr(client, "call"):
        return _key_of_object(client)
    raise TypeError(f"segops.torch: client must be a segops.Client, a URL string or None, not {type(client).__name__}")


def _resolve(key):
    if key.__class__ is not str:  # an eager call's Client itself (_apply)
        return key
    if key == "":
        return get_client()
    if key.startswith("obj:"):
        c = _objects.get(key)
        if c is None:
            raise RuntimeError(
                "segops.torch: the Client this call (or compiled graph) was made with no longer "
                "exists; keep a reference to it, or pass client= as a URL string"
            )
        return c
    return _as_client(key)


_torch_ops.resolve_client = _resolve

# ---- friendly checks, before anything is traced or sent ----

_SENDABLE = (torch.float32, torch.float64)
_INDEX = (torch.int32, torch.int64)


def _index(idx, like):
    """idx as a tensor: a numpy array or list of integers is taken as it is (idx receives no
    gradient), on the device of the first float input."""
    if isinstance(idx, (np.ndarray, list, tuple)):
        arr = np.asarray(idx)
        if arr.dtype.kind not in "iu":
            raise TypeError(f"idx has dtype {arr.dtype}; it must hold integers (int32 or int64)")
        dev = like.device if isinstance(like, torch.Tensor) else None
        return torch.as_tensor(arr.astype(np.int64, copy=False) if arr.dtype.kind == "u" else arr, device=dev)
    return idx


def _check(fname, names, values, idx):
    dev = None
    for name, t in list(zip(names, values)) + [("idx", idx)]:
        if isinstance(t, np.ndarray):
            alt = "torch.from_numpy(" + name + ")"
            raise TypeError(
                f"segops.torch.{fname}: {name} is a numpy array; pass a torch.Tensor ({alt}), "
                f"or call segops.{fname} for numpy arrays"
            )
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"segops.torch.{fname}: {name} must be a torch.Tensor, not {type(t).__name__}")
        if name == "idx":
            if t.dtype not in _INDEX:
                raise TypeError(f"segops.torch.{fname}: idx has dtype {t.dtype}; it must be torch.int32 or torch.int64")
        elif t.dtype not in _SENDABLE:
            hint = f" (convert with {name}.float() or {name}.double())" if t.is_floating_point() or t.is_complex() else ""
            raise TypeError(
                f"segops.torch.{fname}: {name} has dtype {t.dtype}; segops computes in torch.float32 "
                f"or torch.float64{hint}"
            )
        if dev is None:
            dev, first = t.device, name
        elif t.device != dev:
            raise ValueError(
                f"segops.torch.{fname}: {name} is on {t.device} but {first} is on {dev}; "
                "all tensors of one call must be on one device"
            )


def _segments(fname, num_segments):
    if num_segments.__class__ is int:
        return num_segments
    if isinstance(num_segments, torch.Tensor):
        if num_segments.numel() != 1 or num_segments.is_floating_point():
            raise TypeError(f"segops.torch.{fname}: num_segments must be an integer (or a one-element integer tensor)")
        return int(num_segments.item())
    if isinstance(num_segments, (bool, float)) or not isinstance(num_segments, (int, np.integer, torch.SymInt)):
        raise TypeError(f"segops.torch.{fname}: num_segments must be an integer, not {type(num_segments).__name__}")
    return num_segments if isinstance(num_segments, (int, torch.SymInt)) else int(num_segments)


_NO_TRANSFORMS = frozenset()


def _transforms():
    """Names of the torch.func transforms active around this call ("Grad", "Jvp", "Vmap", ...)."""
    try:
        stack = torch._C._functorch.get_interpreter_stack()
        if not stack:
            return _NO_TRANSFORMS
        return {str(i.key()).rsplit(".", 1)[-1] for i in stack}
    except (AttributeError, RuntimeError):
        return set()


try:
    from torch.autograd import forward_ad as _fwd_ad
except ImportError:
    _fwd_ad = None


def _forward_ad(fname, names, inputs):
    try:
        forward_ad = _fwd_ad
        if forward_ad is None or forward_ad._current_level < 0:
            return
        for name, t in zip(names, inputs):
            if forward_ad.unpack_dual(t).tangent is not None:
                raise NotImplementedError(
                    f"segops.torch.{fname}: {name} carries a forward-mode tangent; the server computes "
                    "reverse-mode derivatives only (use torch.autograd.grad, torch.func.vjp or jacrev)"
                )
    except (ImportError, AttributeError):
        pass


def _plain(inputs, idx):
    """True when every input is a float32/float64 CPU tensor and idx an int32/int64 CPU tensor: what
    _check would pass without a word, found with less work (the common case of every call)."""
    for t in inputs:
        if t.__class__ is not Tensor or t.dtype not in _SENDABLE or not t.is_cpu:
            return False
    return idx.__class__ is Tensor and idx.dtype in _INDEX and idx.is_cpu


def _grad_needed(inputs):
    if not torch.is_grad_enabled():
        return False
    for t in inputs:
        if t.requires_grad:
            return True
    return False


# The torch.func transforms around a call (falsy: none); where torch cannot say, every call takes
# the checked way.
_interpreters = getattr(getattr(torch._C, "_functorch", None), "get_interpreter_stack", None) or (lambda: True)


_is_compiling = torch.compiler.is_compiling
_grad_enabled = torch.is_grad_enabled
_EAGER = _torch_eager.FORWARD  # op -> its eager forward Function's apply
_BODY = {op: _torch_ops.IMPLS[(op, "forward")] for op in _table.OPS}  # op -> its forward's body


def _apply(op, inputs, idx, num_segments, client):
    # The common call first (plain eager autograd on CPU tensors, an int num_segments, no transform,
    # no forward-mode AD, not compiling): _plain's checks and the others, each answered with the
    # least work, inline.
    if (
        num_segments.__class__ is int
        and idx.__class__ is Tensor
        and idx.dtype in _INDEX
        and idx.is_cpu
        and not _is_compiling()
        and not _interpreters()
        and (_fwd_ad is None or _fwd_ad._current_level < 0)
    ):
        grad = False
        for t in inputs:
            if t.__class__ is not Tensor or t.dtype not in _SENDABLE or not t.is_cpu:
                break
            grad = grad or t.requires_grad
        else:
            key = "" if client is None else client if client.__class__ is Client else _eager_key(client)
            if grad and _grad_enabled():
                return _EAGER[op](*inputs, idx, num_segments, key)
            return _BODY[op](*inputs, idx, num_segments, key)
    return _apply_checked(op, inputs, idx, num_segments, client)


def _eager_key(client):
    return client if isinstance(client, Client) or hasattr(client, "call") else _client_key(client)


def _apply_checked(op, inputs, idx, num_segments, client):
    names = _table.OPS[op][0]
    if not _plain(inputs, idx):
        try:
            idx = _index(idx, inputs[0])
        except TypeError as e:
            raise TypeError(f"segops.torch.{op}: {e}") from None
        _check(op, names, inputs, idx)
    s = _segments(op, num_segments)
    if torch.compiler.is_compiling():
        return _torch_ops.OPS[(op, "forward")](*inputs, idx, s, _client_key(client))
    tf = _transforms()
    if "Jvp" in tf:
        raise NotImplementedError(
            f"segops.torch.{op}: forward-mode AD (torch.func.jvp, jacfwd) is not supported: the server "
            "computes reverse-mode derivatives only (use torch.func.vjp, jacrev or hessian = jacrev(jacrev))"
        )
    _forward_ad(op, names, inputs)
    if "Grad" in tf:
        return _torch_func.forward(op, *inputs, idx, s, _client_key(client))
    if tf:
        return _torch_ops.OPS[(op, "forward")](*inputs, idx, s, _client_key(client))
    # Plain eager autograd: the same bodies and plumbing, without the custom op's dispatch; the call
    # carries the Client itself (custom ops and compiled graphs carry a string key).
    key = "" if client is None else _eager_key(client)
    if not _grad_needed(inputs):  # nothing to differentiate: the body alone
        return _torch_ops.IMPLS[(op, "forward")](*inputs, idx, s, key)
    return _EAGER[op](*inputs, idx, s, key)


def segmented_sum(x: Tensor, idx: Tensor, num_segments: SegmentCount, *, client: ClientLike = None) -> Tensor:
    """out[s] = sum of x[i] over idx[i] == s; x (N, *F) -> (S, *F)."""
    return _apply("segmented_sum", (x,), idx, num_segments, client)


def segmented_dot(
    x: Tensor, y: Tensor, idx: Tensor, num_segments: SegmentCount, *, client: ClientLike = None
) -> Tensor:
    """out[s] = sum over idx[i] == s of x[i] . y[i] (over all trailing elements); x, y (N, *F) -> (S,)."""
    return _apply("segmented_dot", (x, y), idx, num_segments, client)


def segmented_mul(
    x: Tensor, y: Tensor, idx: Tensor, num_segments: SegmentCount, *, client: ClientLike = None
) -> Tensor:
    """out[i] = x[i] * y[idx[i]]; x (N, *F), y (S,) (scales each row) or (S, *F) (element-wise) -> like x."""
    return _apply("segmented_mul", (x, y), idx, num_segments, client)


def segmented_mean(x: Tensor, idx: Tensor, num_segments: SegmentCount, *, client: ClientLike = None) -> Tensor:
    """out[s] = mean of x[i] over idx[i] == s (0 for an empty segment); x (N, *F) -> (S, *F)."""
    return _apply("segmented_mean", (x,), idx, num_segments, client)


def segmented_rms_norm(x: Tensor, idx: Tensor, num_segments: SegmentCount, *, client: ClientLike = None) -> Tensor:
    """out[s] = sqrt(mean of |x[i]|^2 over idx[i] == s), 0 for an empty or all-zero segment (with
    gradient 0), |x[i]|^2 over all trailing elements; x (N, *F) -> (S,)."""
    return _apply("segmented_rms_norm", (x,), idx, num_segments, client)


def segmented_matvec(
    v: Tensor, m: Tensor, idx: Tensor, num_segments: SegmentCount, *, client: ClientLike = None
) -> Tensor:
    """out[i] = m[idx[i]]^T v[i]; v (N,3), m (S,3,3) -> (N,3)."""
    return _apply("segmented_matvec", (v, m), idx, num_segments, client)


def segmented_max(x: Tensor, idx: Tensor, num_segments: SegmentCount, *, client: ClientLike = None) -> Tensor:
    """out[s] = max of x[i] over idx[i] == s, per component (0 for an empty segment, NaN if the
    segment holds one); x (N, *F) -> (S, *F). The gradient goes to one element per segment and
    component: the lowest index among the tied maxima (torch.amax splits it among them)."""
    return _apply("segmented_max", (x,), idx, num_segments, client)


def segmented_min(x: Tensor, idx: Tensor, num_segments: SegmentCount, *, client: ClientLike = None) -> Tensor:
    """out[s] = min of x[i] over idx[i] == s, per component (0 for an empty segment, NaN if the
    segment holds one); x (N, *F) -> (S, *F). The gradient goes to one element per segment and
    component: the lowest index among the tied minima (torch.amin splits it among them)."""
    return _apply("segmented_min", (x,), idx, num_segments, client)


_DTYPE_CODES = {torch.float32: 0, torch.float64: 1, torch.int32: 2, torch.int64: 3}  # segops_dtype


def empty(shape, *, dtype: torch.dtype | None = None, client: ClientLike = None) -> Tensor:
    """An uninitialised CPU tensor in the client's memory (Client.empty): with segops' C extension,
    memory its native channel shares with the daemon, so the tensor (and any contiguous view of it)
    is sent without a copy; freed when the tensor and its views are gone. Without the extension,
    torch.empty."""
    dtype = torch.get_default_dtype() if dtype is None else dtype
    c = _as_client(client) or get_client()
    nc = getattr(c, "_nc", None)
    if nc is None or dtype not in _DTYPE_CODES:
        return torch.empty(shape, dtype=dtype)
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    return nc.empty(_DTYPE_CODES[dtype], shape, True)


def _define(op, names):
    """The function of an op of the table that has none written out above (a new op's, until
    one with its types and formula is): the same signature, made as namedtuple makes its classes,
    so that torch.compile traces it as it traces the others."""
    params = ", ".join(names)
    src = (f"def {op}({params}, idx, num_segments, *, client=None):\n"
           f"    return _apply({op!r}, ({params},), idx, num_segments, client)\n")
    ns = {"_apply": _apply}
    exec(compile(src, f"<segops.torch.{op}>", "exec"), ns)  # noqa: S102 (names from the op table)
    fn = ns[op]
    fn.__doc__ = f"{op} on torch tensors (proto/API.md, Formulas); forward inputs {', '.join(names)}."
    fn.__module__ = __name__
    return fn


for _op, (_names, _vec3) in _table.OPS.items():
    if _op not in globals():
        globals()[_op] = _define(_op, _names)

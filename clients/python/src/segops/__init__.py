"""segops: Python client of the segops daemon (distribution `segops-client`, import `segops`):
segment operations on numpy arrays, run by a server; `segops.torch` adds torch autograd to
second order. The wire contract and every formula: proto/API.md.

    import segops
    out = segops.segmented_sum(x, idx, num_segments)          # default client ($SEGOPS_URL)
    c = segops.Client("http://gpu-node:8080", token="...")    # or an explicit one
    grad_x, grad_y = c.segmented_dot_backward(g_out, x, y, idx, num_segments)
"""

import threading

from . import _table
from ._status import Status
from .client import DEFAULT_URL, METHOD_NAMES, Client
from .errors import (
    DeadlineExceeded,
    Internal,
    InvalidArgument,
    MalformedBody,
    MethodNotAllowed,
    NotAcceptable,
    NotFound,
    ProtocolError,
    ResourceExhausted,
    SegopsConnectionError,
    SegopsError,
    SegopsTimeout,
    ShmRegionUnknown,
    TooLarge,
    Unauthenticated,
    Unavailable,
    UnsupportedMediaType,
)

__version__ = "0.2.0"  # the repository's version: CMakeLists.txt project(VERSION) says the same

OPS = tuple(_table.OPS)
PASSES = _table.PASSES

_default = None
_default_lock = threading.Lock()


def default_client():
    """The module's shared Client, made on first use from $SEGOPS_URL / $SEGOPS_TOKEN."""
    global _default
    c = _default
    if c is None:
        with _default_lock:
            if _default is None:
                _default = Client()
            c = _default
    return c


def set_default_client(client):
    """Replaces the shared Client used by the module-level functions (None: make a new one
    from the environment on next use). Returns the previous one (not closed)."""
    global _default
    with _default_lock:
        prev, _default = _default, client
    return prev


def _module_function(name):
    meth = getattr(Client, name)

    def f(*args, **kwargs):
        return meth(default_client(), *args, **kwargs)

    f.__name__ = f.__qualname__ = name
    f.__doc__ = meth.__doc__ + "\n\nUses segops.default_client()."
    return f


for _name in METHOD_NAMES:
    globals()[_name] = _module_function(_name)
del _name


def call(op, pass_, args, *, outputs=None):
    """Client.call on the default client."""
    return default_client().call(op, pass_, args, outputs=outputs)


def info() -> dict:
    """Client.info on the default client."""
    return default_client().info()


def health() -> Status:
    """Client.health on the default client."""
    return default_client().health()


def ready() -> Status:
    """Client.ready on the default client."""
    return default_client().ready()


__all__ = [
    "Client",
    "DEFAULT_URL",
    "OPS",
    "PASSES",
    "call",
    "default_client",
    "set_default_client",
    "info",
    "health",
    "ready",
    "Status",
    "SegopsError",
    "InvalidArgument",
    "MalformedBody",
    "Unauthenticated",
    "NotFound",
    "MethodNotAllowed",
    "NotAcceptable",
    "TooLarge",
    "UnsupportedMediaType",
    "Unavailable",
    "ResourceExhausted",
    "DeadlineExceeded",
    "Internal",
    "ShmRegionUnknown",
    "SegopsConnectionError",
    "SegopsTimeout",
    "ProtocolError",
] + list(METHOD_NAMES)

"""segops: Python client of the segops daemon (distribution `segops-client`, import `segops`):
segment operations on numpy arrays, run by a server; `segops.torch` adds torch autograd to
second order. The wire contract and every formula: proto/API.md.

    import segops
    out = segops.segmented_sum(x, idx, num_segments)          # default client ($SEGOPS_URL)
    c = segops.Client("http://gpu-node:8080", token="...")    # or an explicit one
    grad_x, grad_y = c.segmented_dot_backward(g_out, x, y, idx, num_segments)

segops.native_available() says whether the C extension (libsegops: the native channel, `local`) is in
use; without it a warning at import names what is missing and the pure-Python client speaks HTTP.
"""

from typing import Any, Dict, Mapping, Optional, Sequence

import numpy as np

from . import _ext, _table
from ._ext import ExtensionWarning
from ._default import default_client, set_default_client
from ._functions import *  # noqa: F401,F403 (segmented_sum, ... : the 24 functions on the default client)
from ._functions import NAMES as _FUNCTION_NAMES
from ._status import Status
from .client import DEFAULT_URL, METHOD_NAMES, Client, native_available
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
    Unimplemented,
    UnsupportedMediaType,
)

__version__ = "0.2.0"  # the repository's version: CMakeLists.txt project(VERSION) says the same

OPS = tuple(_table.OPS)
PASSES = _table.PASSES

assert tuple(METHOD_NAMES) == _FUNCTION_NAMES, "clients/python/gen_functions.py: regenerate"


def call(
    op: str, pass_: str, args: Mapping[str, Any], *, outputs: Optional[Sequence[str]] = None
) -> Dict[str, np.ndarray]:
    """Client.call on the default client."""
    return default_client().call(op, pass_, args, outputs=outputs)


def info() -> Dict[str, Any]:
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
    "native_available",
    "ExtensionWarning",
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
    "Unimplemented",
    "ShmRegionUnknown",
    "SegopsConnectionError",
    "SegopsTimeout",
    "ProtocolError",
] + list(METHOD_NAMES)

"""_default.py: the module's shared Client, which segops.<function>(...) and segops.info() use."""

import threading
from typing import Optional

from .client import Client

_default: Optional[Client] = None
_default_lock = threading.Lock()


def default_client() -> Client:
    """The module's shared Client, made on first use from $SEGOPS_URL / $SEGOPS_TOKEN."""
    global _default
    c = _default
    if c is None:
        with _default_lock:
            if _default is None:
                _default = Client()
            c = _default
    return c


def set_default_client(client: Optional[Client]) -> Optional[Client]:
    """Replaces the shared Client used by the module-level functions (None: make a new one
    from the environment on next use). Returns the previous one (not closed)."""
    global _default
    with _default_lock:
        prev, _default = _default, client
    return prev

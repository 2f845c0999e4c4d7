"""_ext.py: segops._native, the package's C extension (libsegops: the native channel, HTTP, `local`),
loaded once at import with the hooks it calls back (typed errors, numpy's conversions); or why it is
not there, said in a warning at import, after which segops.Client is the pure-Python client.

Environment: SEGOPS_NO_NATIVE=1 leaves the extension unused (no warning); SEGOPS_NATIVE_LIB=PATH
loads the extension module at PATH instead of the package's own (CMake's build of it for the
tests, so they never pick up a stale one). Imported from a source tree with no extension of its own,
the package uses CMake's build in the tree's build/ folder when there is one (the benchmarks' case)."""

import importlib
import importlib.util
import os
import sys
import warnings

import numpy as np

from . import _table
from .errors import InvalidArgument, ProtocolError, SegopsConnectionError, SegopsTimeout, error_for

# libsegops' client-side codes (segops.h): no answer from a daemon.
_E_CONNECTION, _E_TIMEOUT, _E_PROTOCOL = -16, -17, -18
_LITTLE = sys.byteorder == "little"
_SENDABLE = ("float32", "float64", "int32", "int64")
MISSING_NOTE = "_native_missing.txt"  # written by setup.py when it could not build the extension


class ExtensionWarning(RuntimeWarning):
    """segops' C extension is not available: the pure-Python client is used."""


def make_error(code, status, name, message, retry_after):
    """The typed exception for a libsegops error (segops.h's table: code, HTTP status, wire name)."""
    if code == _E_CONNECTION:
        err = SegopsConnectionError(0, name, message)
        err.unreachable = True
        return err
    if code == _E_TIMEOUT:
        return SegopsTimeout(0, name, message)
    if code == _E_PROTOCOL:
        return ProtocolError(0, name, message)
    return error_for(status, name, message, retry_after or None)


def coerce(obj, name, where):
    """obj as a C-contiguous little-endian ndarray of a dtype libsegops sends; the extension asks
    for it when obj is not one already (lists, strided or big-endian arrays, other dtypes)."""
    dt = getattr(obj, "dtype", None)
    if dt is not None and not isinstance(dt, np.dtype) and hasattr(obj, "data_ptr"):  # a torch tensor
        dname = str(dt).replace("torch.", "")
        raise InvalidArgument(400, "invalid_argument", f"segops: {where}: {name} has dtype {dname}, which cannot be "
                              "sent (float32 or float64 tensors; idx int32 or int64)")
    try:
        arr = np.asarray(obj)
    except (TypeError, ValueError) as e:
        raise TypeError(f"segops: {where}: {name} cannot be sent as a tensor: {e}") from None
    dt = arr.dtype
    if dt.kind not in "biufc":
        raise TypeError(f"segops: {where}: argument {name!r} has dtype {dt}, which cannot be sent as a tensor")
    if dt.byteorder == ">" or (dt.byteorder == "=" and not _LITTLE):
        arr = arr.astype(dt.newbyteorder("<"))
    if arr.dtype.name not in _SENDABLE:
        raise InvalidArgument(400, "invalid_argument", f"segops: {where}: {name} has dtype {dt.name}, which cannot "
                              "be sent (float32 or float64 tensors; idx int32 or int64)")
    return np.ascontiguousarray(arr)


def _missing_note():
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), MISSING_NOTE)
    try:
        with open(path) as f:
            return f.read().strip() or None
    except OSError:
        return None


def _tree_build():
    """In a source tree (clients/python/src/segops), the extension CMake built in ROOT/build."""
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.normpath(os.path.join(here, "..", "..", "..", ".."))
    path = os.path.join(root, "build", "clients", "python", "lib", "segops", "_native.abi3.so")
    if os.path.basename(os.path.dirname(here)) == "src" and os.path.isfile(path):
        return path
    return None


def _import():
    path = os.environ.get("SEGOPS_NATIVE_LIB")
    if not path:
        try:
            return importlib.import_module(__package__ + "._native")  # the package's own build
        except ModuleNotFoundError as e:
            path = _tree_build() if e.name == __package__ + "._native" else None
            if not path:
                raise
    spec = importlib.util.spec_from_file_location(__package__ + "._native", path)
    if spec is None or spec.loader is None:
        raise ImportError(f"SEGOPS_NATIVE_LIB={path} is no extension module")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    sys.modules[spec.name] = mod
    return mod


def _check_table(mod):
    """The extension's function table (libsegops' ids) is the package's (_table.py), row by row."""
    rows = mod.fn_table()
    mine = [(op, p, tuple(n for n, _ in ins), outs) for (op, p), (ins, outs) in _table.FUNCS.items()]
    if list(rows) != mine:
        raise ImportError("its function table differs from the package's (_table.py): a build of another version")


def _load():
    """(module or None, why not or None, disabled on purpose)."""
    if os.environ.get("SEGOPS_NO_NATIVE") == "1":
        return None, "SEGOPS_NO_NATIVE=1", True
    try:
        mod = _import()
        _check_table(mod)
    except ImportError as e:
        why = _missing_note()
        if why is None:
            why = str(e)
            if isinstance(e, ModuleNotFoundError) and e.name == __package__ + "._native":
                why = ("it was not built (`pip install ./clients/python` builds it; a source tree uses CMake's build "
                       "in build/, or SEGOPS_NATIVE_LIB)")
        return None, why, False
    mod.configure(make_error, coerce, np.asarray)
    return mod, None, False


native, why_not, disabled = _load()
if native is None and not disabled:
    warnings.warn(f"segops: the C extension segops._native is not available: {why_not}. segops.Client is the "
                  "pure-Python client: HTTP and unix sockets only, no native channel, no 'local'.",
                  ExtensionWarning, stacklevel=2)

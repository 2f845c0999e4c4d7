"""client.py: segops.Client, the numpy client of the segops daemon (clients/python/README.md). With the C
extension (segops._native, on libsegops) every call goes through libsegops: the native channel to a
daemon on this host, HTTP over its unix socket or TCP, or `local` (the CPU backend in this process),
with failover, deadlines and restarts handled there. Without it, the pure-Python client (_http.py)
speaks HTTP and unix sockets. Either way: typed errors, one method per function of the op table."""

import json
import os
import warnings
import weakref
from typing import Any, Dict, Mapping, Optional, Sequence, Union

import numpy as np

from . import _endpoints, _ext, _http, _table
from ._methods import FunctionMethods
from ._status import Status
from .errors import InvalidArgument, NotFound, ProtocolError

# Every live Client by its key "obj:<id>" (Client._torch_key): segops.torch's custom ops carry the
# key, a string, and find the client again when they run. Set at construction, so that a graph
# torch.compile traces reads the key as a constant attribute without calling anything.
_live = weakref.WeakValueDictionary()

DEFAULT_URL = "http://127.0.0.1:8080"
TRANSPORTS = ("auto", "native", "unix", "http", "local")  # and "shm", a deprecated alias of "native"
# How long a call polls for its answer before sleeping, in microseconds, when neither spin_us nor
# $SEGOPS_CLIENT_SPIN_US says: the native channel's budget (proto/native.md, Doorbells). The
# pure-Python client does not poll (its spin_us: 0).
DEFAULT_SPIN_US = 50

# Function ids: the op table's order, which is libsegops' (segops.h, SEGOPS_FN_*; _ext checks).
FN_IDS = {key: k for k, key in enumerate(_table.FUNCS)}
_ROWS = tuple((op, p, tuple(n for n, _ in ins), outs) for (op, p), (ins, outs) in _table.FUNCS.items())
_DTYPE_CODES = {"float32": 0, "float64": 1, "int32": 2, "int64": 3}  # segops_dtype
_EMPTY_F64, _EMPTY_I32 = np.empty(0), np.empty(0, np.int32)


def native_available() -> bool:
    """True when segops.Client runs on the C extension (libsegops), False when it is the pure-Python
    client (the extension is not built here, or SEGOPS_NO_NATIVE=1)."""
    return _ext.native is not None


def _transport(transport):
    if transport == "shm":
        warnings.warn("segops: transport='shm' is deprecated: segops' clients hand their memory to the daemon "
                      "over the native channel now; 'shm' means transport='native'", DeprecationWarning, stacklevel=3)
        return "native"
    if transport not in TRANSPORTS:
        raise ValueError(f"segops: transport must be one of {', '.join(TRANSPORTS)}, not {transport!r}")
    return transport


def _normal_url(url):
    """A URL as the client keeps it: host:port gets http://; unsupported schemes are refused."""
    if url == "local" or url.startswith("unix:"):
        return url
    if "://" not in url:
        url = "http://" + url
    scheme, _, rest = url.partition("://")
    if scheme not in ("http", "https") or not rest.split("/")[0]:
        raise ValueError(f"segops: unsupported server url {url!r} (want http://host:port, unix:///path or local)")
    return url


def _threads(threads):
    """CPU backend threads for `local`: given, else the CPUs this process may run on."""
    if threads is not None:
        return int(threads)
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return 0  # libsegops' default: the online CPUs


class Client(FunctionMethods):
    """A client of one segops daemon, of several, or of the CPU backend in this process.

    url: "http://host:port" (an optional path prefix is kept), "unix:///path/segops.sock", or
    "local" (no daemon: the same functions and bits in-process; needs the extension); default
    $SEGOPS_URL, then http://127.0.0.1:8080. A list of URLs, or one string of comma-separated URLs,
    makes a client of several daemons: calls go to a healthy one and move to another on a refused
    or dropped connection, a 503 or a drain (every function is pure).
    token: bearer token; default $SEGOPS_TOKEN when set.
    timeout: seconds one call may take in all: connecting, sending, waiting, reading, moving to
    another daemon, and waiting for a restarting one; the error then names every daemon's last
    failure.
    transport: "auto" (default): the native channel when the daemon is on this host (its /v1/info
    names the channel and it opens), else HTTP over its unix socket when it lists one that answers
    here, else HTTP over the URL; "native", "unix", "http" and "local" force one ("shm": deprecated,
    means "native"). The native channel, "local" and a daemon's unix socket found from its TCP URL
    need the extension (native_available()); without it, "auto" is the URL's own socket.
    spin_us: how long a call to this host polls for its answer before sleeping (0 to 100000;
    default $SEGOPS_CLIENT_SPIN_US, else 50; the pure-Python client does not poll: 0).
    threads: CPU backend threads of "local" (default: the CPUs this process may run on).
    wait: seconds a client that has never reached any of its daemons waits for one (default
    $SEGOPS_WAIT_S, else 1: a forgotten daemon or a typo in the URL fails at once, naming every URL
    and why); set it for a client started beside its daemon. A daemon the client has reached is
    waited for (a restart) within `timeout`, said once on the `segops` logger after a second.
    max_idle: idle keep-alive connections kept by the pure-Python client.

    Safe to share between threads, and a forked child makes its own connections. Methods take numpy
    arrays (or anything np.asarray takes) and return numpy arrays; arrays from `empty()` travel to a
    daemon on this host without a copy."""

    def __init__(
        self,
        url: Union[str, Sequence[str], None] = None,
        *,
        token: Optional[str] = None,
        timeout: float = 60.0,
        max_idle: int = 64,
        transport: str = "auto",
        spin_us: Optional[float] = None,
        threads: Optional[int] = None,
        wait: Optional[float] = None,
    ) -> None:
        self._nc = self._py = self._probes = None
        self._torch_key = f"obj:{id(self)}"
        _live[self._torch_key] = self
        wait_s = _endpoints.wait_seconds(wait)  # checked here, on either path
        spin = _endpoints.spin_us(spin_us)
        transport = _transport(transport)
        urls = [_normal_url(u) for u in _endpoints.split_urls(url or os.environ.get("SEGOPS_URL") or DEFAULT_URL)]
        self.url = ",".join(urls)
        self.timeout = timeout
        self._token = token
        self._want = transport
        if _ext.native is not None:
            self.spin_us = DEFAULT_SPIN_US if spin is None else spin
            # (libsegops reads $SEGOPS_WAIT_S itself: wait goes over only when given)
            more = {} if wait is None else {"wait": wait_s}
            self._nc = _ext.native.Client(self.url, token, float(timeout), transport, int(self.spin_us),
                                          _threads(threads), **more)
            self._run = self._nc.run  # what the function methods call: straight into C
            return
        if transport in ("native", "local") or "local" in urls:
            raise ValueError(f"segops: {'transport ' + repr(transport) if transport in ('native', 'local') else 'local'}"
                             f" needs segops' C extension, which is not available: {_ext.why_not}")
        self._py = _http.HTTPClient(urls, token=token, timeout=timeout, max_idle=max_idle, transport=transport,
                                    wait=wait_s)
        self.spin_us = 0.0  # (checked above: the pure-Python client does not poll)
        self._run = self._py_run

    def __repr__(self) -> str:
        return f"segops.Client({self.url!r})"

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Closes the connections and channels; arrays from this client stay valid."""
        for part in (self._nc, self._py, self._probes):
            if part is not None:
                part.close()

    # ---- calls ----

    def _py_run(self, fn, inputs, idx, num_segments, outputs):
        """The pure-Python client's side of the function methods (the extension's Client.run)."""
        op, pass_, names, outs = _ROWS[fn]
        values = dict(zip(names, inputs))
        values["idx"] = idx
        values["num_segments"] = num_segments
        return _pick(op, pass_, self._py.call(op, pass_, values, outputs=outputs), outs, outputs)

    def call(
        self,
        op: str,
        pass_: str,
        args: Mapping[str, Any],
        *,
        outputs: Optional[Sequence[str]] = None,
        versions: Optional[Mapping[str, tuple]] = None,
    ) -> Dict[str, np.ndarray]:
        """Runs one function by name: args maps argument names to arrays (None: left out), idx and
        num_segments included; outputs: the names to compute and return (default all). Returns
        {output name: np.ndarray}. versions is accepted for compatibility and not needed: memory
        from `empty()` travels without a copy, other arrays are copied once per call."""
        del versions
        if self._py is not None:
            return self._py.call(op, pass_, args, outputs=outputs)
        fn = FN_IDS.get((op, pass_))
        if fn is None:
            raise NotFound(404, "not_found", f"segops: there is no function {op}/{pass_} (the op table's functions: "
                           f"{', '.join(o + '/' + p for o, p in _table.FUNCS)})")
        names = _ROWS[fn][2]
        unknown = [k for k in args if k not in names and k not in ("idx", "num_segments")]
        if unknown:
            raise InvalidArgument(400, "invalid_argument", f"segops: {op} {pass_}: unknown argument {unknown[0]!r} "
                                  f"(it takes {', '.join(names)}, idx, num_segments)")
        if "num_segments" not in args:
            raise InvalidArgument(400, "invalid_argument", f"segops: {op} {pass_}: num_segments is required")
        got = self._nc.run(fn, tuple(args.get(n) for n in names), args.get("idx"), args["num_segments"], outputs)
        want = _ROWS[fn][3] if outputs is None else tuple(outputs)
        return dict(zip(want, (got,) if len(want) == 1 else got))

    def empty(self, shape: Union[int, Sequence[int]], dtype: Any = np.float64) -> np.ndarray:
        """An uninitialised C-contiguous array in this client's memory: with the extension, memory
        the native channel shares with the daemon (sent without a copy; freed when the array and
        its views are gone); else np.empty."""
        dt = np.dtype(dtype)
        if self._nc is None or dt.name not in _DTYPE_CODES:
            return np.empty(shape, dt)
        shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
        return self._nc.empty(_DTYPE_CODES[dt.name], shape, False)

    @property
    def transport_used(self) -> str:
        """"native", "unix", "http" or "local": what this client's calls use (found now with an
        empty call when no call has run yet); for several daemons, the one the last call used
        (the pure-Python client: each one's, from its URL, comma-separated). Never raises: "" when
        no daemon could be reached to find out."""
        if self._py is not None:
            return self._py.transport_used
        used = self._nc.transport_used
        if not used:
            try:
                self._nc.run(0, (_EMPTY_F64,), _EMPTY_I32, 0, None)  # segmented_sum forward, N = S = 0
            except Exception:  # noqa: BLE001 - a property that answers what is known
                return ""
            used = self._nc.transport_used
        return used or ""

    # ---- the daemon ----

    def info(self) -> Dict[str, Any]:
        """GET /v1/info: version, backend, devices, limits and the op table (a dict); for "local",
        the same document for the in-process backend."""
        if self._py is not None:
            return self._py.info()
        return json.loads(self._nc.info())

    def health(self) -> Status:
        """GET /healthz: Status(True, "ok", 200) while the daemon is alive ("local": always). No
        answer at all raises SegopsConnectionError / SegopsTimeout."""
        probes = self._probe_client()
        return Status(True, "ok", 200) if probes is None else probes.health()

    def ready(self) -> Status:
        """GET /readyz: Status(True, "ready", 200) when the backend can take work; ok=False with
        the reason ("starting", "draining", ...) while it cannot (503). Over several daemons: the
        first ready one's answer."""
        probes = self._probe_client()
        return Status(True, "ready", 200) if probes is None else probes.ready()

    def _probe_client(self):
        """The HTTP client that asks the daemons' /healthz and /readyz (libsegops has no such
        calls); None for "local" alone."""
        if self._py is not None:
            return self._py
        if self._probes is None:
            urls = [u for u in self.url.split(",") if u != "local"]
            if self._want == "local" or not urls:
                return None
            self._probes = _http.HTTPClient(urls, token=self._token, timeout=self.timeout, transport="http")
        return self._probes


class PurePythonClient(FunctionMethods, _http.HTTPClient):
    """The pure-Python client with the function methods, whatever the extension: what segops.Client
    runs on without it, made directly (its HTTP internals for tests and comparisons)."""

    def _run(self, fn, inputs, idx, num_segments, outputs):
        op, pass_, names, outs = _ROWS[fn]
        values = dict(zip(names, inputs))
        values["idx"] = idx
        values["num_segments"] = num_segments
        return _pick(op, pass_, self.call(op, pass_, values, outputs=outputs), outs, outputs)


def _pick(op, pass_, res, outs, outputs):
    """The outputs asked for from a {name: array} answer: one array, or a tuple in the order asked."""
    want = outs if outputs is None else tuple(outputs)
    try:
        got = tuple(res[k] for k in want)
    except KeyError as e:
        raise ProtocolError(200, "protocol_error", f"segops: {op}/{pass_}: response lacks output {e}") from None
    return got[0] if len(got) == 1 else got


# The 24 functions' names, in the op table's order (their methods: _methods.FunctionMethods).
METHOD_NAMES = tuple(_table.method_name(op, pass_) for op, pass_ in _table.FUNCS)

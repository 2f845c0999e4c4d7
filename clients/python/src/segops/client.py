"""client.py: segops.Client, the numpy client of the segops daemon (clients/python/README.md): a thread-safe
pool of keep-alive HTTP connections, msgpack bodies, typed errors, one method per op x pass."""

import http.client
import ipaddress
import json
import os
import socket
import threading
import time
import urllib.parse
import warnings

from typing import Any, Dict, Mapping, Optional, Sequence, Union

import numpy as np

from . import _endpoints, _shm, _table, _transport, _wire
from ._methods import FunctionMethods
from ._status import Status
from .errors import ProtocolError, SegopsConnectionError, SegopsError, SegopsTimeout, error_for

# Error answers and JSON answers are read whole into memory: at most this many bytes, whatever
# length the daemon declares (its own are a few hundred bytes, /v1/info a few dozen KiB).
ERROR_BODY_MAX = 64 << 10
JSON_BODY_MAX = 64 << 20
# What the daemon says when it will not map a process's region (proto/API.md, Shared memory).
_SHM_REFUSED = ("Permission denied", "not the requesting client's", "whose uid the kernel reports")

DEFAULT_URL = "http://127.0.0.1:8080"
_MSGPACK = "application/msgpack"
_USER_AGENT = "segops-python/0.1"

# Failures that mean no daemon is there to answer (yet): what a restarting one gives, before any
# answer. A client of one daemon waits them out within the call's timeout (_endpoints.wait_for).
_UNREACHABLE = (ConnectionRefusedError, FileNotFoundError, ConnectionResetError, BrokenPipeError,
                ConnectionAbortedError, http.client.RemoteDisconnected)


def _unreachable(err):
    err.unreachable = True
    return err


# Failures that mean a reused keep-alive connection was closed by the server while idle:
# the request is sent again once on a fresh connection (every segops call is idempotent).
_STALE = (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError, ConnectionAbortedError)
# How long a call to a daemon on this host polls for its answer before sleeping (microseconds;
# Client(spin_us=...), else $SEGOPS_CLIENT_SPIN_US, else this). 0: polling did not help 16 workers
# on a 16-core GPU host (bench/worker/worker_bench.py --worker-env SEGOPS_CLIENT_SPIN_US=0|200).
DEFAULT_SPIN_US = 0


def _spin_us(v):
    src = "spin_us"
    if v is None:
        v, src = os.environ.get("SEGOPS_CLIENT_SPIN_US"), "SEGOPS_CLIENT_SPIN_US"
        if v is None or v.strip() == "":
            return DEFAULT_SPIN_US
    try:
        f = float(v)
    except (TypeError, ValueError):
        f = None
    if f is None or not 0 <= f <= 100000:  # the comparison also refuses nan
        raise ValueError(f"segops: {src} must be a number of microseconds from 0 to 100000, not {v!r}")
    return f


def _is_loopback(host):
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class Client(FunctionMethods):
    """A client of one segops server, or of several.

    url: "http://host:port" (an optional path prefix is kept) or "unix:///path/segops.sock";
    default $SEGOPS_URL, then http://127.0.0.1:8080. A list of URLs, or one string of
    comma-separated URLs, makes a client of several daemons: calls go to the healthy one with
    the fewest calls in flight, and move to another on a refused or dropped connection, a 503 or
    a region the daemon no longer knows (see _endpoints.py).
    token: bearer token; default $SEGOPS_TOKEN when set.
    timeout: seconds one call may take in all: connecting, sending, waiting, reading, moving to
    another daemon, and waiting for a restarting one (a client of one daemon retries with back-off
    while it is unreachable or draining); the error then names every daemon's last failure.
    max_idle: idle keep-alive connections kept for reuse (one is in use per calling thread).
    transport: "auto" (default) picks, on the first call, shared memory when the daemon is on
    this host and can map this process's region, else its unix socket when it has one here,
    else HTTP bodies over the url (with shm, calls under 64 KiB of arrays still go as bodies:
    cheaper); "shm", "unix" and "http" force one (see `transport_used`).

    Safe to share between threads. Methods take numpy arrays (or anything np.asarray takes)
    and return numpy arrays (writable, aligned, owning their memory: with shared memory too,
    results are copied out of the region, never views of it). Arrays made by `empty()` are
    sent by reference when shared memory is in use, without a copy."""

    def __init__(
        self,
        url: Union[str, Sequence[str], None] = None,
        *,
        token: Optional[str] = None,
        timeout: float = 60.0,
        max_idle: int = 64,
        transport: str = "auto",
        spin_us: Optional[int] = None,
    ) -> None:
        if transport not in _transport.TRANSPORTS:
            raise ValueError(f"segops: transport must be one of {', '.join(_transport.TRANSPORTS)}, not {transport!r}")
        urls = _endpoints.split_urls(url or os.environ.get("SEGOPS_URL") or DEFAULT_URL)
        self._endpoints = None
        self._want = transport
        self._used = None  # the transport in use, once resolved (first call)
        self._shm = None  # _shm.ShmSession while shared memory is in use
        if len(urls) > 1:
            clients = [
                Client(u, token=token, timeout=timeout, max_idle=max_idle, transport=transport, spin_us=spin_us)
                for u in urls
            ]
            self._endpoints = _endpoints.EndpointSet(clients, budget=timeout)
            self.url, self.timeout = ",".join(c.url for c in clients), timeout
            return
        url = urls[0]
        self._unix = _transport.unix_path_of(url)
        if self._unix is not None:
            parts = urllib.parse.urlsplit("http://localhost")
        else:
            if "://" not in url:
                url = "http://" + url
            parts = urllib.parse.urlsplit(url)
            if parts.scheme not in ("http", "https") or not parts.hostname:
                raise ValueError(f"segops: unsupported server url {url!r} (want http://host:port or unix:///path)")
        self.url = url
        self._https = parts.scheme == "https"
        self._host = parts.hostname
        self._port = parts.port or (443 if self._https else 80)
        self._prefix = parts.path.rstrip("/")
        self._resolve_lock = threading.Lock()
        if token is None:
            token = os.environ.get("SEGOPS_TOKEN") or None
        self.timeout = timeout
        self._max_idle = max_idle
        self.spin_us = _spin_us(spin_us)
        # Polling for the answer (_transport.spin_wait) pays only on this host: a unix socket or a
        # loopback address, in plain HTTP (a TLS socket's bytes are not the answer's).
        local = self._unix is not None or (not self._https and _is_loopback(self._host))
        self._spin_s = self.spin_us * 1e-6 if local else 0.0
        self._headers = {"Content-Type": _MSGPACK, "Accept": _MSGPACK, "User-Agent": _USER_AGENT}
        if token:
            self._headers["Authorization"] = f"Bearer {token}"
        self._heads = {}  # (method, path) -> request header block up to Content-Length's value
        h = "localhost" if self._unix is not None else (f"[{self._host}]" if ":" in self._host else self._host)
        default_port = 443 if self._https else 80
        self._host_header = h if self._unix is not None or self._port == default_port else f"{h}:{self._port}"
        self._lock = threading.Lock()
        self._idle = []
        self._closed = False
        self.connections_opened = 0  # how many TCP connections this client has made

    def __repr__(self) -> str:
        return f"segops.Client({self.url!r})"

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Unregisters and removes the shared-memory regions, closes the idle connections;
        connections in use close when their call ends."""
        if self._endpoints is not None:
            return self._endpoints.close()
        shm, self._shm = self._shm, None
        if shm is not None:
            shm.close()
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for c in idle:
            c.close()

    # ---- transport ----

    @property
    def transport_used(self) -> str:
        """"shm", "unix" or "http": what this client's calls use (probed now if not yet); for
        a client of several daemons, each one's, comma-separated."""
        if self._endpoints is not None:
            return ",".join(ep.client.transport_used for ep in self._endpoints.endpoints)
        if self._used is None:
            self._resolve()
        return self._used

    def _resolve(self):
        with self._resolve_lock:
            if self._used is not None:
                return
            want = self._want
            if want != "http" and self._unix is None and not self._prefix and not self._https:
                path = self._discover_unix()
                if path is not None:
                    self._use_unix(path)
            if want == "unix" and self._unix is None:
                raise SegopsConnectionError(0, "connection_error", f"segops: transport='unix': {self.url} lists no unix listener that answers here")
            if want in ("auto", "shm"):
                session = _shm.ShmSession(self)
                try:
                    ok = _shm.probe_shm(session)
                    why = "the daemon did not compute from this process's region"
                except (SegopsError, OSError, _shm.NoRegion) as e:
                    cause = e.args[0] if isinstance(e, _shm.NoRegion) and e.args else e
                    if isinstance(cause, SegopsError) and _endpoints.waitable(cause):
                        session.close()
                        raise cause from None  # the daemon is not there yet: decide once it is
                    ok, why = False, str(e)
                if ok:
                    self._shm = session
                else:
                    session.close()
                    if want == "shm":
                        raise SegopsConnectionError(0, "connection_error", f"segops: transport='shm' with {self.url}: {why}")
                    if any(w in why for w in _SHM_REFUSED):
                        # Not silently: the daemon is here but will not map this process's memory.
                        warnings.warn(f"segops: {self.url}: shared memory refused, calls go as HTTP bodies: {why}",
                                      RuntimeWarning, stacklevel=4)
            self._used = "shm" if self._shm is not None else ("unix" if self._unix is not None else "http")

    def _discover_unix(self):
        """A unix listener of this daemon that answers here as the same daemon, or None."""
        try:
            listeners = self._roundtrip("GET", "/v1/info", read=self._read_json).get("listeners") or []
        except SegopsError as e:
            if _endpoints.waitable(e):
                raise  # the daemon is not there yet: decide once it is
            return None
        except AttributeError:
            return None
        for addr in listeners:
            path = _transport.unix_path_of(addr) if isinstance(addr, str) else None
            if not path or not os.path.exists(path):
                continue
            conn = _transport.UnixHTTPConnection(path, timeout=min(self.timeout, 5.0))
            try:
                conn.request("GET", "/v1/info", headers=self._headers)
                resp = conn.getresponse()
                same = resp.status == 200 and json.loads(resp.read()).get("listeners") == listeners
            except (OSError, http.client.HTTPException, ValueError):
                same = False
            finally:
                conn.close()
            if same:
                return path
        return None

    def _use_unix(self, path):
        self._unix = path
        with self._lock:
            idle, self._idle = self._idle, []
        for c in idle:
            c.close()

    def empty(self, shape: Union[int, Sequence[int]], dtype: Any = np.float64) -> np.ndarray:
        """An uninitialised C-contiguous array for inputs: inside a shared-memory region of
        its own when this client uses shared memory (then sent by reference, never copied;
        the region is released when the array and all its views are gone), else np.empty."""
        if self._endpoints is not None:
            return np.empty(shape, dtype)
        if self._used is None:
            self._resolve()
        shm = self._shm
        if shm is None:
            return np.empty(shape, dtype)
        return shm.empty(shape, dtype)

    # ---- connection pool ----

    def _acquire(self):
        with self._lock:
            if self._idle:
                return self._idle.pop(), True
            self.connections_opened += 1
        if self._unix is not None:
            conn = _transport.UnixHTTPConnection(self._unix, timeout=self.timeout)
            # always this host; _spin_s was set for the URL, before a unix listener may be found
            conn.spin_s = self.spin_us * 1e-6
            return conn, False
        cls = _transport.HTTPSConnection if self._https else _transport.HTTPConnection
        conn = cls(self._host, self._port, timeout=self.timeout)
        conn.spin_s = self._spin_s
        return conn, False

    def _release(self, conn):
        with self._lock:
            if not self._closed and len(self._idle) < self._max_idle:
                self._idle.append(conn)
                return
        conn.close()

    def _roundtrip(self, method, path, body=None, length=0, headers=None, read=None):
        """Sends one request and hands the response to read(resp) -> result, which must read
        the whole body. Raises the typed error for non-2xx answers. Retries once on a fresh
        connection when a reused one turns out to be closed."""
        if self._endpoints is not None:
            return self._endpoints.run(lambda c: c._roundtrip(method, path, body, length, headers, read))
        url = self._prefix + path
        head = None
        if headers is None:  # op calls: the header block built once per path
            prefix = self._heads.get((method, url))
            if prefix is None:
                prefix = _transport.request_head(method, url, self._host_header, self._headers)
                if len(self._heads) < 256:
                    self._heads[(method, url)] = prefix
            head = prefix + b"%d\r\n\r\n" % (length if body is not None else 0)
        else:
            hdrs = dict(self._headers)
            hdrs.update(headers)
            if body is not None:
                hdrs["Content-Length"] = str(length)
        deadline = _endpoints.current_deadline()
        if deadline is None:
            deadline = time.monotonic() + self.timeout
        for attempt in (0, 1):
            conn, reused = self._acquire()
            conn.set_deadline(deadline)
            early = False  # answered before the body was all sent: the connection is spent
            fast = False  # sent by request_prebuilt: its answer is read by read_response
            try:
                try:
                    fast = head is not None and conn.request_prebuilt(method, head, body)
                    if not fast:
                        if head is not None:
                            hdrs = dict(self._headers, **{"Content-Length": str(length if body is not None else 0)})
                        conn.pending_body = body  # sent with the header block (_BodyMixin.send)
                        conn.request(method, url, headers=hdrs)
                except _STALE:
                    # The server may have answered before reading the whole body (413, 401)
                    # and closed: that answer is still readable. Else the error stands.
                    resp = self._early_response(conn)
                    if resp is None:
                        raise
                    early = True
                else:
                    resp = _transport.read_response(conn) if fast else conn.getresponse()
            except _STALE as e:
                conn.close()
                if reused and attempt == 0:
                    continue
                raise _unreachable(SegopsConnectionError(0, "connection_error", f"{method} {self.url}{path}: {e}")) from e
            except socket.timeout as e:
                conn.close()
                raise SegopsTimeout(0, "timeout", f"{method} {self.url}{path}: no answer within the call's timeout "
                                    f"({self.timeout:g} s)") from e
            except (OSError, http.client.HTTPException) as e:
                conn.close()
                err = SegopsConnectionError(0, "connection_error", f"{method} {self.url}{path}: {e}")
                raise (_unreachable(err) if isinstance(e, _UNREACHABLE) else err) from e
            try:
                if 200 <= resp.status < 300:
                    result = read(resp)
                else:
                    raise self._error(resp)
            except SegopsError as e:
                if e.status and not early and not resp.will_close and resp.isclosed():
                    self._release(conn)  # a server-reported error, body fully read
                else:
                    conn.close()
                raise
            except socket.timeout as e:
                conn.close()
                raise SegopsTimeout(0, "timeout", f"{method} {self.url}{path}: the answer did not come within the "
                                    f"call's timeout ({self.timeout:g} s)") from e
            except BaseException as e:
                conn.close()
                if isinstance(e, (OSError, http.client.HTTPException)):
                    raise SegopsConnectionError(0, "connection_error", f"{method} {self.url}{path}: {e}") from e
                raise
            if resp.will_close or not resp.isclosed():
                conn.close()
            else:
                self._release(conn)
            return result
        raise AssertionError("unreachable")

    @staticmethod
    def _early_response(conn):
        """An error response the server sent while the request body was still going out."""
        try:
            resp = conn.getresponse()
        except (OSError, http.client.HTTPException):
            return None
        return resp if resp.status >= 400 else None

    @staticmethod
    def _error(resp):
        raw = _read_bounded(resp, ERROR_BODY_MAX, "error answer")
        code, message = None, raw.decode("utf-8", "replace").strip()[:2000] or resp.reason
        try:
            err = json.loads(raw)["error"]
            code, message = err.get("code"), err.get("message", message)
        except (ValueError, KeyError, TypeError, AttributeError):
            pass
        retry_after = resp.getheader("Retry-After")
        try:
            retry_after = float(retry_after) if retry_after is not None else None
        except ValueError:
            retry_after = None
        return error_for(resp.status, code, message, retry_after)

    @staticmethod
    def _read_outputs(resp):
        ctype = (resp.getheader("Content-Type") or "").split(";")[0].strip().lower()
        length = resp.length
        with _wire.answer_checked(resp.status):
            if "json" in ctype:
                return _wire.decode_json_outputs(json.loads(_read_bounded(resp, JSON_BODY_MAX, "JSON answer")))
            if length is None or length <= _wire.JOIN_BELOW:  # small, or no Content-Length
                return _wire.decode_msgpack_bytes(resp.read(_wire.JOIN_BELOW + 1) if length is None else resp.read())
            return _wire.decode_msgpack(resp, length)

    @staticmethod
    def _read_json(resp):
        raw = _read_bounded(resp, JSON_BODY_MAX, "JSON answer")
        try:
            return json.loads(raw)
        except ValueError as e:
            raise ProtocolError(resp.status, "protocol_error", f"segops: response is not JSON: {raw[:200]!r}") from e

    # ---- generic calls ----

    def call(
        self,
        op: str,
        pass_: str,
        args: Mapping[str, Any],
        *,
        outputs: Optional[Sequence[str]] = None,
        versions: Optional[Mapping[str, tuple]] = None,
    ) -> Dict[str, np.ndarray]:
        """Runs one function: POST /v1/{op}/{pass_} with args (name -> array, None left out;
        idx and num_segments included). outputs: names to compute and return (default all).
        versions: {argument name: (object, version)}, a promise that the argument's bytes are the
        same whenever the same live object comes with the same version; over shared memory such an
        argument is copied into a region once and then sent by reference. (object, version, True)
        copies it now whatever was kept and keeps it for later calls (segops.torch: a forward's
        idx and saved inputs, then sent by reference by the step's backward calls).
        Returns {output name: np.ndarray}."""
        if self._endpoints is not None:
            return self._endpoints.run(lambda c: c.call(op, pass_, args, outputs=outputs, versions=versions))
        return _endpoints.wait_for(self.url, self.timeout, lambda: self._call_once(op, pass_, args, outputs, versions))

    def _call_once(self, op, pass_, args, outputs, versions):
        if self._used is None:
            self._resolve()
        shm = self._shm
        row = _table.FUNCS.get((op, pass_))
        if shm is not None and self._want == "auto" and shm.prefers_body(args):
            shm = None  # a small call: cheaper as a body
        if shm is not None and row is not None:  # (an unknown function: the daemon's 404)
            try:
                return shm.call(op, pass_, args, outputs, row[1], versions)
            except _shm.NoRegion as e:
                if self._want == "shm":
                    cause = e.args[0]
                    if isinstance(cause, SegopsError):
                        raise cause from None
                    raise SegopsConnectionError(0, "connection_error", f"segops: {op}/{pass_}: no shared-memory region: {cause}") from None
                # auto: a call that no new region can hold goes as HTTP bodies
        body, length = _wire.encode_request(args, outputs)
        return self._roundtrip("POST", f"/v1/{op}/{pass_}", body, length, read=self._read_outputs)

    def info(self) -> Dict[str, Any]:
        """GET /v1/info: version, backend, devices, limits and the op table (a dict)."""
        if self._endpoints is not None:
            return self._endpoints.run(lambda c: c.info())
        return _endpoints.wait_for(self.url, self.timeout, lambda: self._roundtrip("GET", "/v1/info",
                                                                                   read=self._read_json))

    def _function(self, op: str, pass_: str, values: Dict[str, Any], outputs: Optional[Sequence[str]]) -> Any:
        """What every function method does (_methods.py): call, then the outputs asked for, one
        as an array and several as a tuple in the order asked."""
        res = self.call(op, pass_, values, outputs=outputs)
        want = _table.output_names(op, pass_) if outputs is None else tuple(outputs)
        try:
            got = tuple(res[k] for k in want)
        except KeyError as e:
            raise ProtocolError(200, "protocol_error", f"segops: {op}/{pass_}: response lacks output {e}") from None
        return got[0] if len(got) == 1 else got

    def health(self) -> Status:
        """GET /healthz: Status(ok=True, status="ok", http_status=200) while the daemon is alive.
        No answer at all raises SegopsConnectionError / SegopsTimeout."""
        return self._probe("/healthz")

    def ready(self) -> Status:
        """GET /readyz: Status(ok=True, status="ready") when the backend can take work;
        ok=False with the reason ("starting", "draining", ...) while it cannot (503).
        Over several daemons: the first ready one's answer, else the last one's."""
        if self._endpoints is not None:
            return self._endpoints.any_ready()
        return self._probe("/readyz")

    def _probe(self, path):
        try:
            body = self._roundtrip("GET", path, read=self._read_json)
        except SegopsError as e:
            if e.status == 503:
                return Status(False, e.message, 503)
            raise
        word = body.get("status", "ok") if isinstance(body, dict) else "ok"
        return Status(True, str(word), 200)


def _read_bounded(resp, cap, what):
    """A whole answer body of at most cap bytes; a ProtocolError (nothing allocated for it) when
    its declared length or its bytes go past that."""
    if resp.length is not None and resp.length > cap:
        raise ProtocolError(resp.status, "protocol_error",
                            f"segops: the daemon's {what} declares {resp.length} bytes (at most {cap} are read)")
    raw = resp.read() if resp.length is not None else resp.read(cap + 1)
    if len(raw) > cap:
        raise ProtocolError(resp.status, "protocol_error", f"segops: the daemon's {what} is longer than {cap} bytes")
    return raw


# The 18 functions' names, in the op table's order (their methods: _methods.FunctionMethods).
METHOD_NAMES = tuple(_table.method_name(op, pass_) for op, pass_ in _table.FUNCS)

"""_http.py: the pure-Python client of segops.Client (clients/python/README.md), in use when the C extension
is not: a thread-safe pool of keep-alive HTTP connections over TCP or a unix socket, msgpack bodies,
typed errors, failover over several daemons (_endpoints.py), the call's whole deadline."""

import http.client
import ipaddress
import json
import os
import socket
import threading
import time
import urllib.parse

from typing import Any, Dict, Mapping, Optional, Sequence, Union

import numpy as np

from . import _endpoints, _transport, _wire
from ._status import Status
from .errors import ProtocolError, SegopsConnectionError, SegopsError, SegopsTimeout, error_for

# Error answers and JSON answers are read whole into memory: at most this many bytes, whatever
# length the daemon declares (its own are a few hundred bytes, /v1/info a few dozen KiB).
ERROR_BODY_MAX = 64 << 10
JSON_BODY_MAX = 64 << 20
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


class HTTPClient:
    """segops.Client's calls as HTTP bodies, in Python: a client of one daemon, or of several.

    url: "http://host:port" (an optional path prefix is kept) or "unix:///path/segops.sock", or a
    list of them (a client of several daemons: calls go to the healthy one with the fewest calls
    in flight, and move to another on a refused or dropped connection or a 503; _endpoints.py).
    token: bearer token (None: $SEGOPS_TOKEN). timeout: seconds one call may take in all
    (connecting, sending, waiting, reading, moving to another daemon, waiting for a restarting
    one). max_idle: idle keep-alive connections kept. transport: "auto" (the daemon's unix socket
    when it lists one that answers here, else the URL), "unix" or "http". spin_us: how long a call
    to this host polls for its answer before sleeping. Safe to share between threads."""

    def __init__(
        self,
        url: Union[str, Sequence[str]],
        *,
        token: Optional[str] = None,
        timeout: float = 60.0,
        max_idle: int = 64,
        transport: str = "auto",
        spin_us: Optional[float] = None,
        wait: Optional[float] = None,
    ) -> None:
        if transport not in _transport.TRANSPORTS:
            raise ValueError(f"segops: transport must be one of {', '.join(_transport.TRANSPORTS)}, not {transport!r}")
        urls = _endpoints.split_urls(url)
        self._endpoints = None
        self._want = transport
        self._used = None  # the transport in use, once resolved (first call)
        self._contact = _endpoints.Contact(wait)  # first contact (_endpoints.py)
        if len(urls) > 1:
            clients = [
                HTTPClient(u, token=token, timeout=timeout, max_idle=max_idle, transport=transport, spin_us=spin_us)
                for u in urls
            ]
            self._endpoints = _endpoints.EndpointSet(clients, budget=timeout, contact=self._contact)
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
        """Closes the idle connections; connections in use close when their call ends."""
        if self._endpoints is not None:
            return self._endpoints.close()
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for c in idle:
            c.close()

    # ---- transport ----

    @property
    def transport_used(self) -> str:
        """"unix" or "http": what this client's calls use (probed now if not yet); for
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
            self._used = "unix" if self._unix is not None else "http"

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
    ) -> Dict[str, np.ndarray]:
        """POST /v1/{op}/{pass_} with args (name -> array, None left out; idx and num_segments
        included); outputs: names to compute and return (default all). {output name: ndarray}."""
        if self._endpoints is not None:
            return self._endpoints.run(lambda c: c.call(op, pass_, args, outputs=outputs))
        return _endpoints.wait_for(self.url, self.timeout, lambda: self._call_once(op, pass_, args, outputs),
                                  self._contact)

    def _call_once(self, op, pass_, args, outputs):
        if self._used is None:
            self._resolve()
        body, length = _wire.encode_request(args, outputs)
        return self._roundtrip("POST", f"/v1/{op}/{pass_}", body, length, read=self._read_outputs)

    def info(self) -> Dict[str, Any]:
        """GET /v1/info: version, backend, devices, limits and the op table (a dict)."""
        if self._endpoints is not None:
            return self._endpoints.run(lambda c: c.info())
        return _endpoints.wait_for(self.url, self.timeout, lambda: self._roundtrip("GET", "/v1/info",
                                                                                   read=self._read_json),
                                   self._contact)

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

"""_http.py: the pure-Python client of segops.Client (clients/python/README.md), in use when the C
extension is not: HTTP over TCP or over a `unix:///path` URL's socket, a thread-safe pool of
keep-alive connections, msgpack bodies, typed errors, failover over several daemons and the call's
whole deadline (_endpoints.py). The native channel, `local` and finding a daemon's unix listener
from its TCP URL are the extension's (libsegops)."""

import http.client
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

TRANSPORTS = ("auto", "unix", "http")
# Error answers and JSON answers are read whole into memory: at most this many bytes, whatever
# length the daemon declares (its own are a few hundred bytes, /v1/info a few dozen KiB).
ERROR_BODY_MAX = 64 << 10
JSON_BODY_MAX = 64 << 20
_MSGPACK = "application/msgpack"
_USER_AGENT = "segops-python/0.2"

# Failures that mean no daemon is there to answer (yet): what a restarting one gives, before any
# answer. A client of one daemon waits them out within the call's timeout (_endpoints.wait_for).
_UNREACHABLE = (ConnectionRefusedError, FileNotFoundError, ConnectionResetError, BrokenPipeError,
                ConnectionAbortedError, http.client.RemoteDisconnected)
# Failures that mean a reused keep-alive connection was closed by the server while idle:
# the request is sent again once on a fresh connection (every segops call is idempotent).
_STALE = (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError, ConnectionAbortedError)


def _unreachable(err):
    err.unreachable = True
    return err


class HTTPClient:
    """segops.Client's calls as HTTP bodies, in Python: a client of one daemon, or of several.

    url: "http://host:port" (an optional path prefix is kept) or "unix:///path/segops.sock", or a
    list of them (a client of several daemons: calls go to the healthy one with the fewest calls
    in flight, and move to another on a refused or dropped connection or a 503; _endpoints.py).
    token: bearer token (None: $SEGOPS_TOKEN). timeout: seconds one call may take in all
    (connecting, sending, waiting, reading, moving to another daemon, waiting for a restarting
    one). max_idle: idle keep-alive connections kept. transport: "auto" or "http" (the URL's own
    socket) or "unix" (which needs unix:/// URLs here). wait: first contact's wait
    (_endpoints.wait_seconds). Safe to share between threads."""

    def __init__(
        self,
        url: Union[str, Sequence[str]],
        *,
        token: Optional[str] = None,
        timeout: float = 60.0,
        max_idle: int = 64,
        transport: str = "auto",
        wait: Optional[float] = None,
    ) -> None:
        if transport not in TRANSPORTS:
            raise ValueError(f"segops: transport must be one of {', '.join(TRANSPORTS)}, not {transport!r}")
        urls = _endpoints.split_urls(url)
        self._endpoints = None
        self._contact = _endpoints.Contact(wait)  # first contact (_endpoints.py)
        self.timeout = timeout
        if len(urls) > 1:
            clients = [HTTPClient(u, token=token, timeout=timeout, max_idle=max_idle, transport=transport) for u in urls]
            self._endpoints = _endpoints.EndpointSet(clients, budget=timeout, contact=self._contact)
            self.url = ",".join(c.url for c in clients)
            return
        url = urls[0]
        self._unix = _transport.unix_path_of(url)
        parts = urllib.parse.urlsplit("http://localhost" if self._unix else url if "://" in url else "http://" + url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"segops: unsupported server url {url!r} (want http://host:port or unix:///path)")
        if transport == "unix" and self._unix is None:
            raise ValueError(f"segops: transport='unix' with {url}: finding a daemon's unix listener from its URL "
                             "needs segops' C extension; give its unix:///path URL instead")
        self.url = url if self._unix or "://" in url else "http://" + url
        self._https = parts.scheme == "https"
        self._host, self._port = parts.hostname, parts.port or (443 if self._https else 80)
        self._prefix = parts.path.rstrip("/")
        if token is None:
            token = os.environ.get("SEGOPS_TOKEN") or None
        self._headers = {"Content-Type": _MSGPACK, "Accept": _MSGPACK, "User-Agent": _USER_AGENT}
        if token:
            self._headers["Authorization"] = f"Bearer {token}"
        self._max_idle = max_idle
        self._lock = threading.Lock()
        self._idle = []
        self._closed = False
        self.connections_opened = 0  # how many connections this client has made

    def __repr__(self) -> str:
        return f"segops.Client({self.url!r})"

    def __enter__(self) -> "HTTPClient":
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

    @property
    def transport_used(self) -> str:
        """"unix" (a unix:/// URL's socket) or "http" (TCP); for a client of several daemons, each
        one's, comma-separated."""
        if self._endpoints is not None:
            return ",".join(ep.client.transport_used for ep in self._endpoints.endpoints)
        return "unix" if self._unix is not None else "http"

    # ---- connection pool ----

    def _acquire(self):
        with self._lock:
            if self._idle:
                return self._idle.pop(), True
            self.connections_opened += 1
        if self._unix is not None:
            return _transport.UnixHTTPConnection(self._unix, timeout=self.timeout), False
        cls = _transport.HTTPSConnection if self._https else _transport.HTTPConnection
        return cls(self._host, self._port, timeout=self.timeout), False

    def _release(self, conn):
        with self._lock:
            if not self._closed and len(self._idle) < self._max_idle:
                self._idle.append(conn)
                return
        conn.close()

    def _request(self, method, path, body, read):
        """One request under the client's rules for failures: a client of several daemons moves it
        (_endpoints.EndpointSet), a client of one waits for its daemon while it restarts."""
        def once():
            return self._roundtrip(method, path, body, read=read)

        return once() if self._endpoints is not None else _endpoints.wait_for(self.url, self.timeout, once,
                                                                              self._contact)

    def _roundtrip(self, method, path, body=None, length=0, headers=None, read=None):
        """Sends one request and hands the response to read(resp) -> result, which must read the
        whole body. Raises the typed error for non-2xx answers. Retries once on a fresh connection
        when a reused one turns out to be closed. (length: unused, http.client counts the body.)"""
        if self._endpoints is not None:
            return self._endpoints.run(lambda c: c._roundtrip(method, path, body, length, headers, read))
        where = f"{method} {self.url}{path}"
        hdrs = {**self._headers, **(headers or {})}
        if body is not None:
            hdrs["Content-Length"] = str(len(body))
        deadline = _endpoints.current_deadline() or time.monotonic() + self.timeout
        for attempt in (0, 1):
            conn, reused = self._acquire()
            conn.set_deadline(deadline)
            early = False  # answered before the body was all sent: the connection is spent
            try:
                if conn.sock is None:
                    conn.connect()
                try:
                    conn.pending = body  # sent with the head
                    conn.request(method, self._prefix + path, headers=hdrs)
                except _STALE:
                    # The server may have answered before reading the whole body (413, 401)
                    # and closed: that answer is still readable. Else the error stands.
                    resp = self._early_response(conn)
                    if resp is None:
                        raise
                    early = True
                else:
                    resp = conn.getresponse()
            except _STALE as e:
                conn.close()
                if reused and attempt == 0:
                    continue
                raise _unreachable(SegopsConnectionError(0, "connection_error", f"{where}: {e}")) from e
            except socket.timeout as e:
                conn.close()
                raise SegopsTimeout(0, "timeout", f"{where}: no answer within the call's timeout "
                                    f"({self.timeout:g} s)") from e
            except (OSError, http.client.HTTPException) as e:
                conn.close()
                err = SegopsConnectionError(0, "connection_error", f"{where}: {e}")
                raise (_unreachable(err) if isinstance(e, _UNREACHABLE) else err) from e
            return self._answer(conn, resp, early, where, read)
        raise AssertionError("unreachable")

    def _answer(self, conn, resp, early, where, read):
        """read(resp) of a 2xx answer, else its typed error; the connection back to the pool when
        the answer was read to its end and it stays open, else closed."""
        try:
            if not 200 <= resp.status < 300:
                raise self._error(resp)
            result = read(resp)
        except SegopsError as e:
            # a daemon's error answer read to its end leaves the connection usable
            if resp.status >= 400 and not isinstance(e, ProtocolError) and not early and not resp.will_close \
                    and resp.isclosed():
                self._release(conn)
            else:
                conn.close()
            raise
        except socket.timeout as e:
            conn.close()
            raise SegopsTimeout(0, "timeout", f"{where}: the answer did not come within the call's timeout "
                                f"({self.timeout:g} s)") from e
        except BaseException as e:
            conn.close()
            if isinstance(e, (OSError, http.client.HTTPException)):
                raise SegopsConnectionError(0, "connection_error", f"{where}: {e}") from e
            raise
        if resp.will_close or not resp.isclosed():
            conn.close()
        else:
            self._release(conn)
        return result

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
        try:
            retry_after = float(resp.getheader("Retry-After"))
        except (TypeError, ValueError):
            retry_after = None
        return error_for(resp.status, code, message, retry_after)

    @staticmethod
    def _read_outputs(resp):
        is_json = "json" in (resp.getheader("Content-Type") or "").split(";")[0].lower()
        return _wire.decode_outputs(_read_bounded(resp, JSON_BODY_MAX, "JSON answer") if is_json else resp.read(),
                                    is_json)

    @staticmethod
    def _read_json(resp):
        raw = _read_bounded(resp, JSON_BODY_MAX, "JSON answer")
        try:
            return json.loads(raw)
        except ValueError as e:
            raise ProtocolError(resp.status, "protocol_error", f"segops: response is not JSON: {raw[:200]!r}") from e

    # ---- calls ----

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
        return self._request("POST", f"/v1/{op}/{pass_}", _wire.encode_request(args, outputs), self._read_outputs)

    def info(self) -> Dict[str, Any]:
        """GET /v1/info: version, backend, devices, limits and the op table (a dict)."""
        return self._request("GET", "/v1/info", None, self._read_json)

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

"""_transport.py: how the pure-Python client's requests reach the daemon (_http.py; clients/python/README.md):
- "unix": HTTP bodies over the daemon's unix-domain socket (a `unix:///path` URL, or a unix
  listener that /v1/info lists and that answers here as the same daemon).
- "http": HTTP bodies over the URL's own socket.
"auto" picks the first that works; its probe runs once, on the client's first call. (With the C
extension, segops.Client's transports are libsegops': the native channel first.)
"""

import http.client
import ipaddress
import os
import socket
import threading
import time

from . import _endpoints

TRANSPORTS = ("auto", "unix", "http")

# ---------------------------------------------------------------- connections


class DeadlineSocket(socket.socket):
    """A socket whose every send and receive is bounded by what is left of its call's deadline
    (`deadline`, a time.monotonic() value; None: the plain timeout). A per-operation timeout alone
    lets a peer that trickles a byte a second hold a call for ever; a call's `timeout` bounds the
    whole call (clients/python/README.md)."""

    deadline = None

    def _arm(self):
        d = self.deadline
        if d is not None:
            left = d - time.monotonic()
            if left <= 0:
                raise socket.timeout("segops: the call's timeout passed")
            self.settimeout(left)

    def recv(self, *a):
        self._arm()
        return super().recv(*a)

    def recv_into(self, *a):
        self._arm()
        return super().recv_into(*a)

    def send(self, *a):
        self._arm()
        return super().send(*a)

    def sendall(self, *a):
        self._arm()  # (a sendall's timeout bounds it whole)
        return super().sendall(*a)


def _deadline_socket(sock, deadline):
    """sock's descriptor as a DeadlineSocket (sock is detached)."""
    timeout = sock.gettimeout()
    d = DeadlineSocket(sock.family, sock.type, sock.proto, fileno=sock.detach())
    d.settimeout(timeout)
    d.deadline = deadline
    return d


def connect_timeout(conn):
    """The connection's timeout for connect(): its own, at most what is left of its deadline (and
    of first contact's wait)."""
    d = getattr(conn, "deadline", None)
    t = conn.timeout
    for bound in (d, _endpoints.current_connect_by()):
        if bound is not None:
            left = max(bound - time.monotonic(), 0.001)
            t = left if t is None else min(t, left)
    return t


def _resolves(host, port, timeout):
    """Raises socket.gaierror when host does not resolve, ConnectionAbortedError when it takes longer
    than timeout (getaddrinfo itself has no timeout: it runs in a thread that is left behind)."""
    try:
        ipaddress.ip_address(host)
        return
    except ValueError:
        pass
    out = {}

    def run():
        try:
            socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except OSError as e:
            out["e"] = e

    t = threading.Thread(target=run, name="segops-resolve", daemon=True)
    t.start()
    t.join(timeout)
    if t.is_alive():
        raise ConnectionAbortedError(f"no connection in {timeout:.2g} s: resolving {host!r} took longer")
    e = out.get("e")
    if isinstance(e, socket.gaierror):
        raise socket.gaierror(f"no such host: {host!r} does not resolve ({e.strerror})")
    if e is not None:
        raise e


def _connect_error(e, where, timeout):
    """A failed connect() as an error that says why in a person's words (same exception type)."""
    if isinstance(e, ConnectionRefusedError):
        return ConnectionRefusedError(f"connection refused: nothing listens on {where}")
    if isinstance(e, socket.timeout):
        return ConnectionAbortedError(f"no connection to {where} in {timeout:.2g} s")
    return e


class _BodyMixin:
    """Sends the request body with the header block: one send for a small body (http.client
    would send the headers and the body separately, two packets and two wake-ups of the
    server per call), and a large body piece by piece from the arrays' buffers."""

    pending_body = None  # set just before request(); consumed by the header block's send
    deadline = None  # the current call's deadline (time.monotonic()), given to the socket (set_deadline)
    spin_s = 0.0  # how long read_response polls for an answer before sleeping (spin_wait)
    _nb = None  # the non-blocking twin of sock that the polling reads through
    _nb_of = None  # the sock it twins
    _spin_skip = 0  # calls left that sleep at once (after an answer outlasted the poll)

    def set_deadline(self, deadline):
        """Bounds this connection's next call (connect, sends, receives) by `deadline`."""
        self.deadline = deadline
        if isinstance(self.sock, DeadlineSocket):
            self.sock.deadline = deadline

    def close(self):
        nb, self._nb, self._nb_of = self._nb, None, None
        if nb is not None:
            nb.close()
        super().close()

    def send(self, data):
        body, self.pending_body = self.pending_body, None
        if body is None:
            return super().send(data)
        if isinstance(body, (bytes, bytearray)):
            return super().send(data + body)
        super().send(data)
        for piece in body:
            super().send(piece)


    def request_prebuilt(self, method, head, body):
        """Sends a request whose whole header block `head` the client built once per path
        (http.client would assemble it header by header on every call), then leaves the
        connection as request() would, so getresponse() and keep-alive work unchanged.
        Returns False, sending nothing, when the connection cannot take it that way."""
        if not _PREBUILT:
            return False
        r = self._HTTPConnection__response
        if r is not None:
            if not r.isclosed():
                return False
            self._HTTPConnection__response = None
        if self._HTTPConnection__state != http.client._CS_IDLE:
            return False
        if self.sock is None:
            self.connect()
        self._method = method
        # As after endheaders(): an early answer (413, 401) can be read if the send breaks.
        self._HTTPConnection__state = http.client._CS_REQ_SENT
        sock = self.sock
        if body is None:
            sock.sendall(head)
        elif isinstance(body, (bytes, bytearray)):
            sock.sendall(head + body)
        else:
            sock.sendall(head)
            for piece in body:
                sock.sendall(piece)
        return True


_HEAD_MAX = 64 * 1024  # the longest response head read (segopsd's are a few hundred bytes)
_RECV = 256 * 1024


class FastResponse:
    """The answer to a request sent by request_prebuilt, read straight from the socket: the
    head parsed in one pass over the bytes (http.client parses it as an e-mail message, which
    was most of a small call's client time), the body from the bytes already read, then from
    the socket. Offers what the client uses of http.client.HTTPResponse: status, reason,
    length, will_close, getheader(), read(), readinto(), isclosed()."""

    __slots__ = ("_sock", "_buf", "_pos", "_left", "_chunked", "status", "reason", "headers", "length", "will_close")

    def getheader(self, name, default=None):
        return self.headers.get(name.lower(), default)

    def isclosed(self):
        """True once the whole body has been read (as http.client's response reports it)."""
        return self._left == 0 and not self._chunked

    def _fill(self):
        chunk = self._sock.recv(_RECV)
        if not chunk:
            raise http.client.IncompleteRead(b"")
        if self._pos:
            del self._buf[: self._pos]
            self._pos = 0
        self._buf += chunk

    def readinto(self, b):
        if self._chunked:
            data = self.read(len(b))
            b[: len(data)] = data
            return len(data)
        n = min(len(b), self._left if self._left is not None else len(b))
        if n == 0:
            return 0
        avail = len(self._buf) - self._pos
        if avail:
            k = min(avail, n)
            b[:k] = self._buf[self._pos : self._pos + k]
            self._pos += k
        else:
            k = self._sock.recv_into(b, n)
            if k == 0:
                if self._left is None:
                    self._left = 0
                    return 0
                raise http.client.IncompleteRead(b"")
        if self._left is not None:
            self._left -= k
        return k

    def read(self, amt=None):
        if self._chunked:
            return self._read_chunked(amt)
        if self._left is None:  # no length: until the server closes
            out = bytearray(self._buf[self._pos :])
            self._buf, self._pos = bytearray(), 0
            while amt is None or len(out) < amt:
                chunk = self._sock.recv(_RECV)
                if not chunk:
                    self._left = 0
                    break
                out += chunk
            return bytes(out)
        n = self._left if amt is None else min(amt, self._left)
        avail = len(self._buf) - self._pos
        if avail >= n:
            out = bytes(self._buf[self._pos : self._pos + n])
            self._pos += n
            self._left -= n
            return out
        out = bytearray(n)
        mv = memoryview(out)
        got = 0
        while got < n:
            got += self.readinto(mv[got:])
        return bytes(out)

    def _line(self):
        while True:
            i = self._buf.find(b"\r\n", self._pos)
            if i >= 0:
                line = bytes(self._buf[self._pos : i])
                self._pos = i + 2
                return line
            if len(self._buf) - self._pos > _HEAD_MAX:
                raise http.client.HTTPException("segops: a chunk header is too long")
            self._fill()

    def _exact(self, n):
        while len(self._buf) - self._pos < n:
            self._fill()
        out = bytes(self._buf[self._pos : self._pos + n])
        self._pos += n
        return out

    def _read_chunked(self, amt):
        out = bytearray()
        while self._chunked and (amt is None or len(out) < amt):
            text = self._line().split(b";")[0].strip()
            try:
                size = int(text, 16)
            except ValueError:
                size = -1
            if size < 0 or not text.isalnum():
                raise http.client.HTTPException(f"segops: a bad chunk size {text[:20]!r} in a response")
            if size == 0:
                while self._line():  # trailers, up to the empty line
                    pass
                self._chunked = False
                self._left = 0
                break
            out += self._exact(size)
            if self._exact(2) != b"\r\n":
                raise http.client.HTTPException("segops: a chunk does not end with CRLF")
        return bytes(out)


# Whether the poll yields the CPU between reads (an experiment: $SEGOPS_CLIENT_SPIN_YIELD=1).
_SPIN_YIELD = os.environ.get("SEGOPS_CLIENT_SPIN_YIELD", "0") == "1" and hasattr(os, "sched_yield")


def spin_wait(conn, sock):
    """The first bytes of the answer: polled for up to conn.spin_s with non-blocking reads, then
    read blocking. A call to a daemon on this host is answered in tens of microseconds, and
    sleeping in recv until then costs the caller more than that: the scheduler's sleep and
    wake-up (a voluntary context switch, and in a VM the idle vCPU's exit), then caches cold
    after it. CPython polls a socket that has a timeout before every read, so the polling reads
    go through a twin socket object on a duplicate of the descriptor that has none (the two
    share the descriptor's O_NONBLOCK, which a socket with a timeout has set anyway). An answer
    that outlasts the poll makes the next 8 calls on this connection sleep at once, so long
    calls lose at most one poll in 9."""
    if conn._spin_skip > 0:
        conn._spin_skip -= 1
        return sock.recv(_RECV)
    nb = conn._nb
    if nb is None or conn._nb_of is not sock:
        if nb is not None:
            nb.close()
        nb = conn._nb = socket.socket(fileno=os.dup(sock.fileno()))
        nb.setblocking(False)
        conn._nb_of = sock
    clock = time.perf_counter
    end = clock() + conn.spin_s
    while True:
        try:
            return nb.recv(_RECV)
        except BlockingIOError:
            if clock() > end:
                conn._spin_skip = 8
                return sock.recv(_RECV)
            if _SPIN_YIELD:
                os.sched_yield()  # a runnable thread on this CPU (the daemon's, say) goes first


def read_response(conn):
    """The response to what request_prebuilt sent on conn (a FastResponse); leaves conn ready for
    its next request once the body is read. Raises what http.client would: RemoteDisconnected
    when the server closed without answering (a stale keep-alive connection), socket.timeout."""
    sock = conn.sock
    buf = bytearray()
    method = getattr(conn, "_method", "")
    while True:  # 1xx answers (none expected: no Expect header is sent) are skipped
        while True:
            end = buf.find(b"\r\n\r\n")
            if end >= 0:
                break
            if len(buf) > _HEAD_MAX:
                raise http.client.HTTPException("segops: the response head is too long")
            chunk = spin_wait(conn, sock) if conn.spin_s > 0 and not buf else sock.recv(_RECV)
            if not chunk:
                if not buf:
                    raise http.client.RemoteDisconnected("Remote end closed connection without response")
                raise http.client.IncompleteRead(bytes(buf))
            buf += chunk
        head = bytes(buf[:end])
        del buf[: end + 4]
        parsed = _parsed_heads.get((head, method))
        if parsed is None:
            parsed = _parse_head(head, method)
            if parsed is None:
                continue  # 1xx
            if len(_parsed_heads) >= 64:  # the Date header changes every second: forget old heads
                _parsed_heads.clear()
            _parsed_heads[(head, method)] = parsed
        break
    r = FastResponse()
    r._sock = sock
    r._buf = buf
    r._pos = 0
    r.status, r.reason, r.headers, r.will_close, r._chunked, r.length = parsed
    r._left = r.length
    conn._HTTPConnection__state = http.client._CS_IDLE  # as getresponse() leaves it
    return r


# (response head, request method) -> what read_response takes from it: an answer's head repeats
# (the same status and headers; the Date header changes once a second), and so is parsed once.
_parsed_heads = {}


def _parse_head(head, method):
    """(status, reason, headers (lower-case names; shared by the responses with this head: read
    only), will_close, chunked, length or None) of a response head, or None for a 1xx."""
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ", 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/1.") or not parts[1].isdigit():
        raise http.client.BadStatusLine(lines[0])
    status = int(parts[1])
    if 100 <= status < 200 and status != 101:
        return None
    headers = {}
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if not sep:
            raise http.client.HTTPException(f"segops: a malformed response header {line[:100]!r}")
        name = name.strip().lower()
        value = value.strip()
        if name in headers and name != "content-length":
            headers[name] = headers[name] + ", " + value
        elif name in headers and headers[name] != value:
            raise http.client.HTTPException("segops: two different Content-Length headers in a response")
        else:
            headers[name] = value
    reason = parts[2] if len(parts) > 2 else ""
    tokens = {t.strip().lower() for t in headers.get("connection", "").split(",")}
    will_close = "close" in tokens or (parts[0] == "HTTP/1.0" and "keep-alive" not in tokens)
    chunked = "chunked" in headers.get("transfer-encoding", "").lower()
    length = None
    if not chunked:
        cl = headers.get("content-length")
        if cl is not None:
            if not cl.isdigit():
                raise http.client.HTTPException(f"segops: a bad Content-Length in a response: {cl[:40]!r}")
            length = int(cl)
        elif status in (204, 304) or method == "HEAD":
            length = 0
        else:
            will_close = True  # the body ends when the server closes
    if method == "HEAD":
        length, chunked = 0, False
    return status, reason, headers, will_close, chunked, length


def _has_prebuilt():
    c = http.client.HTTPConnection("localhost")
    return all(hasattr(c, a) for a in ("_HTTPConnection__state", "_HTTPConnection__response", "_method")) and hasattr(
        http.client, "_CS_REQ_SENT"
    )


_PREBUILT = _has_prebuilt()  # CPython's http.client internals this relies on are there


def request_head(method, target, host_header, headers):
    """The header block of a request up to (not including) its Content-Length value: bytes."""
    lines = [f"{method} {target} HTTP/1.1", f"Host: {host_header}", "Accept-Encoding: identity"]
    lines += [f"{k}: {v}" for k, v in headers.items()]
    return ("\r\n".join(lines) + "\r\nContent-Length: ").encode("latin-1")


class HTTPConnection(_BodyMixin, http.client.HTTPConnection):
    def connect(self):
        timeout = connect_timeout(self)
        if _endpoints.current_connect_by() is not None:  # first contact: name resolution bounded too
            _resolves(self.host, self.port, timeout)
            timeout = connect_timeout(self)
        try:
            self.sock = socket.create_connection((self.host, self.port), timeout, self.source_address)
        except socket.gaierror as e:
            raise socket.gaierror(f"no such host: {self.host!r} does not resolve ({e.strerror})") from None
        except (ConnectionRefusedError, socket.timeout) as e:
            err = _connect_error(e, f"{self.host}:{self.port}", timeout)
            if err is e:
                raise
            raise err from None
        # A large body goes out in several sends: without this, Nagle's algorithm and the
        # server's delayed ACK can stall a request by tens of milliseconds.
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock.settimeout(self.timeout)
        self.sock = _deadline_socket(self.sock, self.deadline)


class HTTPSConnection(_BodyMixin, http.client.HTTPSConnection):
    def connect(self):
        super().connect()
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


class UnixHTTPConnection(_BodyMixin, http.client.HTTPConnection):
    """HTTP/1.1 over a unix-domain socket (Host: localhost)."""

    def __init__(self, path, timeout=None):
        super().__init__("localhost", timeout=timeout)
        self.unix_path = path

    def connect(self):
        s = DeadlineSocket(socket.AF_UNIX, socket.SOCK_STREAM)
        timeout = connect_timeout(self)
        try:
            s.settimeout(timeout)
            s.connect(self.unix_path)
            s.settimeout(self.timeout)
        except FileNotFoundError as e:
            s.close()
            raise FileNotFoundError(f"no such socket: {self.unix_path} does not exist") from None
        except (ConnectionRefusedError, socket.timeout) as e:
            s.close()
            raise _connect_error(e, self.unix_path, timeout) from None
        except BaseException:
            s.close()
            raise
        s.deadline = self.deadline
        self.sock = s


def unix_path_of(url):
    """The socket path of a `unix:///path` or `unix:/path` URL (None for other URLs)."""
    if url.startswith("unix://"):
        return url[len("unix://") :] or None
    if url.startswith("unix:"):
        return url[len("unix:") :] or None
    return None

"""_transport.py: the pure-Python client's connections (_http.py): http.client's, over TCP or over the
unix-domain socket of a `unix:///path` URL, each send and receive bounded by what is left of the
call's deadline, and a failed connect said in a person's words (nothing listens, no such host, no
such socket)."""

import http.client
import ipaddress
import socket
import threading
import time

from . import _endpoints


class DeadlineSocket(socket.socket):
    """A socket whose every send and receive is bounded by what is left of its call's deadline
    (`deadline`, a time.monotonic() value; None: the plain timeout). A per-operation timeout alone
    lets a peer that trickles a byte a second hold a call for ever; a call's `timeout` bounds the
    whole call (clients/python/README.md)."""

    deadline = None

    def _arm(self):
        if self.deadline is not None:
            left = self.deadline - time.monotonic()
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


def _connect_timeout(conn):
    """The connection's timeout for connect(): its own, at most what is left of its deadline (and
    of first contact's wait)."""
    t = conn.timeout
    for bound in (conn.deadline, _endpoints.current_connect_by()):
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
    if "e" in out:
        raise out["e"]


class _Bounded:
    """A connection whose socket is a DeadlineSocket: set_deadline bounds its next call. A body set
    in `pending` goes out with the request's head, in one send (http.client sends them apart: two
    wake-ups of the daemon per call)."""

    deadline = None
    pending = None

    def send(self, data):
        body, self.pending = self.pending, None
        super().send(data + body if body else data)

    def set_deadline(self, deadline):
        self.deadline = deadline
        if isinstance(self.sock, DeadlineSocket):
            self.sock.deadline = deadline

    def _open(self, family, address, where):
        timeout = _connect_timeout(self)
        try:
            if family != socket.AF_UNIX and _endpoints.current_connect_by() is not None:
                _resolves(address[0], address[1], timeout)  # first contact: name resolution bounded too
                timeout = _connect_timeout(self)
            if family == socket.AF_UNIX:
                s = DeadlineSocket(socket.AF_UNIX, socket.SOCK_STREAM)
                try:
                    s.settimeout(timeout)
                    s.connect(address)
                except BaseException:
                    s.close()
                    raise
            else:
                plain = socket.create_connection(address, timeout)
                # a body goes out after its head: without this, Nagle's algorithm and the server's
                # delayed ACK can stall a request by tens of milliseconds
                plain.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                s = DeadlineSocket(plain.family, plain.type, plain.proto, fileno=plain.detach())
        except socket.gaierror as e:
            raise socket.gaierror(f"no such host: {address[0]!r} does not resolve ({e.strerror})") from None
        except FileNotFoundError:
            raise FileNotFoundError(f"no such socket: {address} does not exist") from None
        except ConnectionRefusedError:
            raise ConnectionRefusedError(f"connection refused: nothing listens on {where}") from None
        except socket.timeout:
            raise ConnectionAbortedError(f"no connection to {where} in {timeout:.2g} s") from None
        s.settimeout(self.timeout)
        s.deadline = self.deadline
        self.sock = s


class HTTPConnection(_Bounded, http.client.HTTPConnection):
    def connect(self):
        self._open(socket.AF_INET, (self.host, self.port), f"{self.host}:{self.port}")


class HTTPSConnection(_Bounded, http.client.HTTPSConnection):
    """(TLS: each send and receive bounded by the timeout alone; the deadline bounds the call's tries.)"""

    def connect(self):
        super().connect()
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


class UnixHTTPConnection(_Bounded, http.client.HTTPConnection):
    """HTTP/1.1 over a unix-domain socket (Host: localhost)."""

    def __init__(self, path, timeout=None):
        super().__init__("localhost", timeout=timeout)
        self.unix_path = path

    def connect(self):
        self._open(socket.AF_UNIX, self.unix_path, self.unix_path)


def unix_path_of(url):
    """The socket path of a `unix:///path` or `unix:/path` URL (None for other URLs)."""
    for scheme in ("unix://", "unix:"):
        if url.startswith(scheme):
            return url[len(scheme):] or None
    return None

"""_endpoints.py: a set of segops daemons behind one Client (clients/python/README.md).

Each endpoint is a one-daemon Client of its own (its own connection pool and transport). A call
goes to the healthy endpoint with the fewest calls in flight (ties in turn). A refused or dropped
connection, or a 503, marks that endpoint failed and moves the call to another: every segops
function is pure, so sending it again is always safe. A failed endpoint rests for a back-off
(at least the server's Retry-After; doubling with each failure in a row) and is then asked
/readyz before work goes to it again; it rejoins when that answers 200."""

import itertools
import threading
import time

from .errors import ProtocolError, SegopsConnectionError, SegopsError

BACKOFF_MIN = 0.25  # seconds an endpoint rests after its first failure in a row
BACKOFF_MAX = 30.0


def split_urls(url):
    """A list/tuple of URLs, or one string with comma-separated URLs -> a list of stripped URLs."""
    items = url if isinstance(url, (list, tuple)) else str(url).split(",")
    urls = [str(u).strip() for u in items if str(u).strip()]
    if not urls:
        raise ValueError(f"segops: no server url in {url!r}")
    return urls


def retryable(err):
    """True for a failure another daemon may not have: no connection, a connection dropped in
    the middle of the answer (a truncated body), or 503 (draining, busy)."""
    if isinstance(err, ProtocolError):
        return "truncated" in str(err)
    return isinstance(err, SegopsConnectionError) or (isinstance(err, SegopsError) and err.status == 503)


class Endpoint:
    __slots__ = ("client", "in_flight", "failures", "resting_until", "last_error")

    def __init__(self, client):
        self.client = client
        self.in_flight = 0
        self.failures = 0  # in a row; 0 = healthy
        self.resting_until = 0.0
        self.last_error = None

    @property
    def url(self):
        return self.client.url

    def __repr__(self):
        state = "healthy" if not self.failures else f"failed x{self.failures}"
        return f"<endpoint {self.url} {state}, {self.in_flight} in flight>"


class EndpointSet:
    """Spreads calls over clients (one per daemon). budget: seconds a call may spend moving
    between endpoints and waiting for one to come back before its last error is raised."""

    def __init__(self, clients, *, budget=60.0):
        self.endpoints = [Endpoint(c) for c in clients]
        self.budget = budget
        self._lock = threading.Lock()
        self._turn = itertools.count()
        self.moves = 0  # calls sent again to another endpoint (for tests and logs)

    def close(self):
        for ep in self.endpoints:
            ep.client.close()

    def any_ready(self):
        """The first endpoint's Status that says ready, else the last answer (or raises the last
        connection error when none answered)."""
        last, err = None, None
        for ep in self.endpoints:
            try:
                last = ep.client.ready()
            except SegopsError as e:
                err = e
                continue
            if last:
                return last
        if last is None:
            raise err
        return last

    def _pick(self, tried, now):
        """The endpoint for the next attempt (in_flight taken), or (None, seconds to wait)."""
        with self._lock:
            usable = [e for e in self.endpoints if e.resting_until <= now]
            fresh = [e for e in usable if e not in tried] or usable
            if not fresh:
                return None, min(e.resting_until for e in self.endpoints) - now
            least = min(e.in_flight for e in fresh)
            ties = [e for e in fresh if e.in_flight == least]
            ep = ties[next(self._turn) % len(ties)]
            ep.in_flight += 1
            return ep, 0.0

    def _failed(self, ep, err):
        with self._lock:
            ep.failures += 1
            ep.last_error = err
            rest = min(BACKOFF_MAX, BACKOFF_MIN * 2 ** (ep.failures - 1))
            if getattr(err, "retry_after", None):
                rest = max(rest, min(float(err.retry_after), BACKOFF_MAX))
            ep.resting_until = time.monotonic() + rest

    def _healthy(self, ep):
        with self._lock:
            ep.failures = 0
            ep.last_error = None

    def _rejoin_ok(self, ep):
        """After a failure the endpoint must answer /readyz 200 before it gets work again."""
        try:
            if ep.client.ready():
                return True
            err = SegopsError(503, "unavailable", f"{ep.url}: /readyz is 503")
        except SegopsError as e:
            err = e
        self._failed(ep, err)
        return False

    def run(self, fn):
        """fn(client) on one endpoint after another until it returns or fails for good."""
        deadline = time.monotonic() + self.budget
        tried = set()
        last = None
        while True:
            now = time.monotonic()
            ep, wait = self._pick(tried, now)
            if ep is None:
                if now + wait > deadline:
                    raise last if last is not None else SegopsConnectionError(
                        0, "connection_error", "segops: no endpoint is available")
                time.sleep(max(wait, 0.001))
                continue
            try:
                if ep.failures and not self._rejoin_ok(ep):
                    last = ep.last_error
                    tried.add(ep)
                    continue
                result = fn(ep.client)
            except SegopsError as e:
                if not retryable(e):
                    raise
                self._failed(ep, e)
                last = e
                tried.add(ep)
                with self._lock:
                    self.moves += 1
                if time.monotonic() > deadline:
                    raise
                continue
            finally:
                with self._lock:
                    ep.in_flight -= 1
            if ep.failures:
                self._healthy(ep)
            return result

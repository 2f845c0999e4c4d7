"""_endpoints.py: a set of segops daemons behind one Client, and a call's deadline
(clients/python/README.md).

Each endpoint is a one-daemon Client of its own (its own connection pool and transport). A call
goes to the healthy endpoint with the fewest calls in flight (ties in turn). A refused or dropped
connection, a 503, or an attempt that used up its share of the call's time marks that endpoint failed and moves the call to another: every segops
function is pure, so sending it again is always safe. A failed endpoint rests for a back-off
(at least the server's Retry-After; doubling with each failure in a row) and is then asked
/readyz before work goes to it again; it rejoins when that answers 200.

A call's `timeout` bounds it whole: every connect, send and receive gets what is left of it
(_transport.DeadlineSocket). A client of one daemon waits for it while it restarts (refused
connections, 503 unavailable), with back-off, within that timeout (wait_for); when the time is up,
the error names every daemon's last failure and the time spent (gave_up)."""

import itertools
import threading
import time

from .errors import ProtocolError, SegopsConnectionError, SegopsError, SegopsTimeout

_local = threading.local()  # this thread's call: its deadline, and whether an endpoint set runs it


def current_deadline():
    """The deadline (time.monotonic()) of the call this thread is in, or None."""
    return getattr(_local, "deadline", None)


class call_scope:
    """Within it, this thread's call ends at `deadline` (the tighter of it and an enclosing one);
    single=True: one attempt only (an endpoint set moves the call itself)."""

    __slots__ = ("deadline", "single", "prev")

    def __init__(self, deadline, single=False):
        self.deadline, self.single = deadline, single

    def __enter__(self):
        self.prev = (getattr(_local, "deadline", None), getattr(_local, "single", False))
        d = self.deadline if self.prev[0] is None else min(self.prev[0], self.deadline)
        _local.deadline, _local.single = d, self.single or self.prev[1]
        return d

    def __exit__(self, *exc):
        _local.deadline, _local.single = self.prev


def waitable(err):
    """True for a failure that a restarting daemon gives: nothing answering (refused, reset or
    closed before any answer), or 503 unavailable (draining, starting)."""
    if isinstance(err, SegopsConnectionError):
        return err.unreachable
    return isinstance(err, SegopsError) and err.status == 503 and err.code == "unavailable"


def gave_up(failures, elapsed, timeout, latest=None):
    """The error of a call that ran out of time: the type of its latest failure (default: the
    last of failures), with a message naming every daemon's last failure ([(url, error)]) and the
    time spent."""
    last = latest if latest is not None else failures[-1][1]
    seen = ", ".join(f"{url}: {e.message if isinstance(e, SegopsError) else e}" for url, e in failures)
    msg = f"segops: no daemon answered in {elapsed:.1f} s (timeout {timeout:g} s); last failures: {seen}"
    cls = type(last) if isinstance(last, SegopsError) else SegopsConnectionError
    try:
        return cls(getattr(last, "status", 0), getattr(last, "code", "connection_error"), msg,
                   retry_after=getattr(last, "retry_after", None))
    except TypeError:
        return SegopsConnectionError(0, "connection_error", msg)


def wait_for(url, timeout, fn):
    """fn() for a client of one daemon: again, with back-off, while the daemon is unreachable or
    draining, until the call's deadline; inside an endpoint set's attempt, once."""
    t0 = time.monotonic()
    with call_scope(t0 + timeout) as deadline:
        if getattr(_local, "single", False):
            return fn()
        pause = 0.05
        while True:
            try:
                return fn()
            except SegopsError as e:
                if not waitable(e):
                    raise
                now = time.monotonic()
                if now >= deadline:
                    raise gave_up([(url, e)], now - t0, timeout) from e
                rest = max(pause, min(e.retry_after or 0.0, 1.0))
                time.sleep(min(rest, deadline - now))
                pause = min(pause * 2, 1.0)

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
    the middle of the answer (a truncated body), 503 (draining, busy), or an attempt that used up
    its share of the call's time."""
    if isinstance(err, ProtocolError):
        return "truncated" in str(err)
    return isinstance(err, (SegopsConnectionError, SegopsTimeout)) or (
        isinstance(err, SegopsError) and err.status == 503)


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

    def _share(self, tried, now, deadline):
        """The deadline of the next attempt: an equal share of what is left among the endpoints
        not yet tried in this call, so that one daemon that answers slowly (or trickles) leaves
        time to try the others."""
        untried = sum(1 for e in self.endpoints if e not in tried) or 1
        return now + (deadline - now) / untried

    def run(self, fn):
        """fn(client) on one endpoint after another until it returns or fails for good; when the
        call's time is up, the error names every endpoint's last failure."""
        t0 = time.monotonic()
        deadline = t0 + self.budget
        outer = current_deadline()
        if outer is not None:
            deadline = min(deadline, outer)
        tried = set()
        last = {}  # url -> the last error of this call there
        latest = None
        while True:
            now = time.monotonic()
            ep, wait = self._pick(tried, now)
            if ep is None:
                if now + wait > deadline:
                    raise self._gave_up(last, now - t0, latest)
                time.sleep(max(wait, 0.001))
                continue
            try:
                with call_scope(self._share(tried, now, deadline), single=True):
                    if ep.failures and not self._rejoin_ok(ep):
                        last[ep.url] = ep.last_error
                        tried.add(ep)
                        continue
                    result = fn(ep.client)
            except SegopsError as e:
                if not retryable(e):
                    raise
                self._failed(ep, e)
                last[ep.url] = latest = e
                tried.add(ep)
                with self._lock:
                    self.moves += 1
                if time.monotonic() >= deadline:
                    raise self._gave_up(last, time.monotonic() - t0, e) from e
                continue
            finally:
                with self._lock:
                    ep.in_flight -= 1
            if ep.failures:
                self._healthy(ep)
            return result

    def _gave_up(self, last, elapsed, latest):
        failures = [(ep.url, last.get(ep.url) or ep.last_error) for ep in self.endpoints]
        failures = [(u, e) for u, e in failures if e is not None]
        if not failures:
            return SegopsConnectionError(0, "connection_error", "segops: no endpoint is available")
        return gave_up(failures, elapsed, self.budget, latest)

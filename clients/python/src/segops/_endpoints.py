"""_endpoints.py: a set of segops daemons behind one Client, and a call's deadline (the rules:
clients/python/README.md, "Several daemons"; libsegops keeps the same ones).

Each endpoint is a one-daemon client of its own (its own connection pool). A call goes to the
healthy endpoint with the fewest calls in flight (ties in turn); a refused or dropped connection, a
503, or an attempt that used up its share of the call's time marks that endpoint failed (it rests
for a back-off, at least the Retry-After, then must answer /readyz 200) and moves the call to
another: every segops function is pure. A call's `timeout` bounds it whole: every connect, send and
receive gets what is left of it (_transport.DeadlineSocket). A client of one daemon waits for it
while it restarts (wait_for); when the time is up, the error names every daemon's last failure and
the time spent (gave_up). A client that has never reached any daemon (first contact) gives up after
`wait` seconds (wait_seconds), at once on a host name that does not resolve, naming every URL, why,
and how to start one (first_contact_error); a call that waits for a daemon it reached before says so
once on the `segops` logger after a second."""

import contextlib
import itertools
import logging
import os
import threading
import time

from .errors import SegopsConnectionError, SegopsError, SegopsTimeout

_local = threading.local()  # this thread's call: its deadline, and whether an endpoint set runs it


def current_deadline():
    """The deadline (time.monotonic()) of the call this thread is in, or None."""
    return getattr(_local, "deadline", None)


def current_connect_by():
    """First contact: the time (time.monotonic()) by which this thread's connection must be made,
    name resolution included, or None."""
    return getattr(_local, "connect_by", None)


FIRST_CONTACT_S = 1.0  # how long a client that has never reached a daemon tries, unless told to wait
log = logging.getLogger("segops")


def wait_seconds(wait=None):
    """First contact's wait: `wait` when given, else $SEGOPS_WAIT_S, else FIRST_CONTACT_S."""
    src = "wait"
    if wait is None:
        wait, src = os.environ.get("SEGOPS_WAIT_S"), "SEGOPS_WAIT_S"
        if wait is None or not wait.strip():
            return FIRST_CONTACT_S
    try:
        w = float(wait)
    except (TypeError, ValueError):
        w = None
    if w is None or not 0 <= w <= 1e6:
        raise ValueError(f"segops: {src} must be a number of seconds from 0 to 1000000, not {wait!r}")
    return w if w > 0 else FIRST_CONTACT_S


def spin_us(v=None):
    """Client(spin_us=...): how long a call to this host polls for its answer before sleeping
    (microseconds; the extension's native channel and HTTP): `v` when given, else
    $SEGOPS_CLIENT_SPIN_US, else None (the client's default)."""
    src = "spin_us"
    if v is None:
        v, src = os.environ.get("SEGOPS_CLIENT_SPIN_US"), "SEGOPS_CLIENT_SPIN_US"
        if v is None or not v.strip():
            return None
    try:
        f = float(v)
    except (TypeError, ValueError):
        f = None
    if f is None or not 0 <= f <= 100000:  # the comparison also refuses nan
        raise ValueError(f"segops: {src} must be a number of microseconds from 0 to 100000, not {v!r}")
    return f


class Contact:
    """Whether a client has reached a daemon yet (then its calls wait for one that went away), how
    long first contact waits, and whether this outage's "waiting for" was logged."""

    __slots__ = ("wait", "reached", "said")

    def __init__(self, wait=None):
        self.wait = wait_seconds(wait)
        self.reached = False
        self.said = False

    def answered(self):
        self.reached = True
        self.said = False

    def heard(self, err):
        """err came from a call: anything but no connection means a daemon is there."""
        if not isinstance(err, SegopsConnectionError):
            self.reached = True

    def say_waiting(self, what, deadline, err):
        if self.said:
            return
        self.said = True
        until = time.strftime("%H:%M:%S", time.localtime(time.time() + deadline - time.monotonic()))
        log.warning("segops: waiting for %s until %s: %s", what, until, _reason(err))


def _reason(err):
    """An error's message without the request it was about (its URL is named beside it)."""
    m = err.message if isinstance(err, SegopsError) else str(err)
    if m.startswith("segops: "):
        m = m[len("segops: "):]
    if m.startswith(("GET ", "POST ")) and ": " in m:
        m = m.split(": ", 1)[1]
    return m


def first_contact_error(failures, elapsed):
    """The error of a client that never reached a daemon: every URL ([(url, error)]) and why, and
    what to do."""
    seen = "; ".join(f"{url}: {_reason(e) if e is not None else 'not tried'}" for url, e in failures)
    return SegopsConnectionError(
        0, "connection_error",
        f"segops: no segops daemon answered in {elapsed:.2g} s (this client has not reached one yet): {seen}. "
        "Start one (segopsd --listen HOST:PORT; scripts/run.sh in a source tree) or point SEGOPS_URL at one; to "
        "wait for a daemon that is starting, set SEGOPS_WAIT_S (or Client(wait=...)) to the seconds to wait")


@contextlib.contextmanager
def connect_scope(connect_by):
    """Within it, this thread's connections are made by `connect_by` (None: by the deadline)."""
    prev, _local.connect_by = getattr(_local, "connect_by", None), connect_by
    try:
        yield
    finally:
        _local.connect_by = prev


@contextlib.contextmanager
def call_scope(deadline, single=False):
    """Within it, this thread's call ends at `deadline` (the tighter of it and an enclosing one),
    which it yields; single=True: one attempt only (an endpoint set moves the call itself)."""
    prev = (getattr(_local, "deadline", None), getattr(_local, "single", False))
    _local.deadline, _local.single = deadline if prev[0] is None else min(prev[0], deadline), single or prev[1]
    try:
        yield _local.deadline
    finally:
        _local.deadline, _local.single = prev


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


def wait_for(url, timeout, fn, contact=None):
    """fn() for a client of one daemon: again, with back-off, while the daemon is unreachable or
    draining, until the call's deadline (first contact: until contact.wait); inside an endpoint
    set's attempt, once."""
    t0 = time.monotonic()
    with call_scope(t0 + timeout) as deadline:
        if getattr(_local, "single", False):
            return fn()
        if contact is None:
            contact = Contact()
        pause = 0.05
        while True:
            first = not contact.reached
            contact_by = min(t0 + contact.wait, deadline)
            try:
                with connect_scope(contact_by if first else None):
                    result = fn()
                contact.answered()
                return result
            except SegopsError as e:
                contact.heard(e)
                now = time.monotonic()
                if not contact.reached and isinstance(e, SegopsConnectionError):
                    # first contact: a name that does not resolve is not waited for unless told to
                    if now >= contact_by or (not waitable(e) and contact.wait <= FIRST_CONTACT_S):
                        if contact_by < deadline:
                            raise first_contact_error([(url, e)], now - t0) from e
                        raise gave_up([(url, e)], now - t0, timeout) from e
                elif not waitable(e):
                    raise
                if now >= deadline:
                    raise gave_up([(url, e)], now - t0, timeout) from e
                if contact.reached and now - t0 >= 1.0:
                    contact.say_waiting(url, deadline, e)
                rest = max(pause, min(e.retry_after or 0.0, 1.0))
                end = contact_by if not contact.reached else deadline
                if contact.reached and not contact.said:
                    end = min(end, max(t0 + 1.0, now + 0.001))
                time.sleep(max(min(rest, end - now), 0.001))
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
    the middle of the answer, 503 (draining, busy), or an attempt that used up its share of the
    call's time."""
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

    def __init__(self, clients, *, budget=60.0, contact=None):
        self.endpoints = [Endpoint(c) for c in clients]
        self.budget = budget
        self.contact = contact if contact is not None else Contact()
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

    def _pick(self, tried, now, gone=()):
        """The endpoint for the next attempt (in_flight taken), or (None, seconds to wait; None:
        none is left)."""
        with self._lock:
            alive = [e for e in self.endpoints if e not in gone]
            if not alive:
                return None, None
            usable = [e for e in alive if e.resting_until <= now]
            fresh = [e for e in usable if e not in tried] or usable
            if not fresh:
                return None, min(e.resting_until for e in alive) - now
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
        gone = set()  # first contact: endpoints whose host name does not resolve
        last = {}  # url -> the last error of this call there
        latest = None
        contact = self.contact
        contact_by = min(t0 + contact.wait, deadline)
        while True:
            now = time.monotonic()
            first = not contact.reached
            give_up = contact_by if first else deadline
            ep, wait = self._pick(tried, now, gone)
            if ep is None:
                if wait is None or now + wait > give_up:
                    if first and contact_by < deadline:
                        raise self._first_contact(last, now - t0)
                    raise self._gave_up(last, now - t0, latest)
                if not first and latest is not None and now - t0 >= 1.0:
                    contact.say_waiting("a daemon of " + ",".join(e.url for e in self.endpoints), deadline, latest)
                time.sleep(max(min(wait, give_up - now), 0.001))
                continue
            try:
                with call_scope(self._share(tried, now, deadline), single=True), \
                        connect_scope(contact_by if first else None):
                    if ep.failures and not self._rejoin_ok(ep):
                        last[ep.url] = ep.last_error
                        tried.add(ep)
                        contact.heard(ep.last_error)
                        continue
                    result = fn(ep.client)
            except SegopsError as e:
                contact.heard(e)
                if not retryable(e):
                    raise
                self._failed(ep, e)
                last[ep.url] = latest = e
                tried.add(ep)
                if not contact.reached and isinstance(e, SegopsConnectionError) and not e.unreachable and \
                        contact.wait <= FIRST_CONTACT_S:
                    gone.add(ep)  # a name that does not resolve does not get better (unless told to wait)
                with self._lock:
                    self.moves += 1
                if not contact.reached and contact_by < deadline and time.monotonic() >= contact_by:
                    raise self._first_contact(last, time.monotonic() - t0) from e
                if time.monotonic() >= deadline:
                    raise self._gave_up(last, time.monotonic() - t0, e) from e
                continue
            finally:
                with self._lock:
                    ep.in_flight -= 1
            contact.answered()
            if ep.failures:
                self._healthy(ep)
            return result

    def _first_contact(self, last, elapsed):
        return first_contact_error([(ep.url, last.get(ep.url) or ep.last_error) for ep in self.endpoints], elapsed)

    def _gave_up(self, last, elapsed, latest):
        failures = [(ep.url, last.get(ep.url) or ep.last_error) for ep in self.endpoints]
        failures = [(u, e) for u, e in failures if e is not None]
        if not failures:
            return SegopsConnectionError(0, "connection_error", "segops: no endpoint is available")
        return gave_up(failures, elapsed, self.budget, latest)

"""_shm.py: the "shm" transport (clients/python/README.md, proto/API.md "Shared memory"): tensors
travel through POSIX shared-memory regions that the client registers with the daemon (Triton's
system shared memory extension); the HTTP request and answer only name offsets in them.

Regions: each call borrows one "scratch" region from the client's pool (a thread that calls
holds one at a time, so threads never share one), copies the inputs in at aligned offsets,
asks the outputs into the same region and copies them out before the region goes back to the
pool: a returned array never aliases memory a later call overwrites. A region too small for a
call is replaced by one of the next power-of-two size. Arrays from Client.empty() live in
regions of their own and are sent by reference, without any copy. Every region is unregistered
and unlinked by Client.close(), at interpreter exit, or (Client.empty's) when its array dies.
A daemon that answers shm_region_unknown has forgotten them (it restarted): every region of the
session is registered again and the call resent (it is pure).
"""

import atexit
import http.client
import itertools
import json
import mmap
import os
import secrets
import threading
import weakref

import msgpack
import numpy as np

from . import _table, _wire
from ._transport import UnixHTTPConnection
from .errors import ProtocolError, SegopsConnectionError, SegopsError, ShmRegionUnknown

# Under transport="auto", calls with less array data than this go as bodies even when shared
# memory works: for a tiny call the region's copies in and out cost more than the body.
SHM_MIN_BYTES = 64 * 1024
SHM_DIR = "/dev/shm"
_ALIGN = 64
_MIN_REGION = 1 << 20
# Lending: results are views into the call's region (no copy) while this process holds at most
# _MAX_LENT regions, and _MAX_LENT_BYTES of them, lent to live results; past either, results are
# copied out. SEGOPS_SHM_MAX_LENT=N sets the count (0: always copy). On by default since kept inputs
# and kept regions come from one pool (no registration per step): 16 workers on one H200 made
# 15 of 16 (op, N) cells faster with it, by up to 35 % at 2^20 (bench/worker/worker_bench.py
# --transport shm --worker-env SEGOPS_SHM_MAX_LENT=0 against the default).
# A lent region counts against the daemon's --max-shm-bytes like any other; when no region can
# be registered, transport="auto" sends the call as bodies.
_MAX_LENT = int(os.environ.get("SEGOPS_SHM_MAX_LENT", "8") or 0)
_MAX_LENT_BYTES = 256 << 20
# A call whose results total fewer bytes than this copies them out, lending nothing: for small
# results the copy costs less than lending's bookkeeping (a hung base array and its weak reference,
# the lent counts, the region's return on a later call), measured on one training step at N = 2^10
# (bench/client/step_cost.py).
_LEND_MIN_BYTES = 64 << 10
# Scratch regions kept by one client, idle and lent together (a single call larger than this still
# gets its region), and how many may wait idle.
_POOL_MAX_BYTES = 512 << 20
_POOL_MAX_IDLE = 8
# Kept inputs: an argument the caller vouches for with a version token (Client.call's versions=)
# is copied once into a region of the pool and sent by reference while the token holds. Kept from
# the second call that shows the same token (a one-off argument is not worth the bookkeeping), or
# at once for a token (obj, version, True), which also copies it again whatever was kept: what
# segops.torch sends with a forward's idx and the inputs its backward reads, so every forward
# copies its arguments afresh (a tensor changed without a version bump, e.g. through numpy, is
# never sent stale into a later step) and the backward and double backward of the step send them
# by reference. At most _KEEP_MAX arrays and _KEEP_MAX_BYTES per client (least recently used go
# back to the pool), none smaller than _KEEP_MIN_BYTES.
_KEEP_MAX = 6
_KEEP_MAX_BYTES = 512 << 20
_KEEP_MIN_BYTES = 64 << 10

_names = itertools.count()


class Region:
    """One POSIX shared-memory object (/dev/shm/<name>), mapped here, registered under <name>."""

    __slots__ = ("name", "key", "size", "mm", "buf", "addr", "registered", "__weakref__")

    def __init__(self, size):
        self.name = f"segops-{os.getpid()}-{secrets.token_hex(4)}-{next(_names)}"
        self.key = "/" + self.name
        self.size = size
        path = os.path.join(SHM_DIR, self.name)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            os.ftruncate(fd, size)
            self.mm = mmap.mmap(fd, size)
        except BaseException:
            os.close(fd)
            os.unlink(path)
            raise
        os.close(fd)
        self.buf = np.frombuffer(self.mm, dtype=np.uint8)
        self.addr = self.buf.ctypes.data
        self.registered = False

    def view(self, offset, dtype, shape, base=None):
        """The C-contiguous array of `shape` at `offset`, a view of `base` (a byte array over this
        region's memory, see hang) or of the region's own."""
        return np.ndarray(shape, dtype, self.buf if base is None else base, offset)

    def hang(self, queue, item):
        """A byte array over this region's memory from which arrays given out hang (numpy views
        keep their base alive, and so do tensors made from them); when the last of them dies,
        `item` is appended to `queue`. Only appended: the callback may run inside any
        allocation, even under a lock, so the owner of `queue` acts on it later."""
        owner = np.frombuffer(self.mm, dtype=np.uint8)
        # A weak reference with a callback, held in _hung until it fires (what weakref.finalize
        # does, without its bookkeeping in Python on every call).
        ref = weakref.ref(owner, _unhang)
        _hung[id(ref)] = (ref, queue, item)
        return owner

    def unlink(self):
        try:
            os.unlink(os.path.join(SHM_DIR, self.name))
        except OSError:
            pass

    def close(self):
        """Unmaps when nothing borrows the memory any more (else the mapping dies with the
        last array that uses it)."""
        self.buf = None
        try:
            self.mm.close()
        except (BufferError, ValueError):
            pass


_hung = {}  # id(weak reference) -> (the reference, queue, item): arrays hung from regions (Region.hang)


def _unhang(ref, hung=_hung):
    entry = hung.pop(id(ref), None)
    if entry is not None:
        entry[1].append(entry[2])


class NoRegion(Exception):
    """A call's region could not be made or registered (cause in .args[0])."""


def _align(n):
    return (n + _ALIGN - 1) & ~(_ALIGN - 1)


# Output shapes, from the op table's rules (proto/API.md, Formulas): grad_<a> has the shape of input a;
# grad_g_out that of g_out; a forward's out leads with S or N and has the trailing dimensions of
# the forward input _table.OUT_SHAPE names (or gg_ of it), or none.
def _forward_shape(op, arrays, s):
    lead, src = _table.OUT_SHAPE[op]
    a = None if src is None else arrays[src] if src in arrays else arrays["gg_" + src]
    n = a.shape[0] if a is not None else arrays["idx"].shape[0]
    return (s if lead == "S" else n,) + (tuple(a.shape[1:]) if a is not None else ())


def output_shape(op, name, arrays, s):
    """The shape of output `name` for these (wire) input arrays, or None when unknown."""
    try:
        if name == "out":
            return _forward_shape(op, arrays, s)
        if name == "grad_g_out":
            g = arrays.get("g_out")
            return tuple(g.shape) if g is not None else _forward_shape(op, arrays, s)
        if name.startswith("grad_"):
            base = name[5:]
            a = arrays.get(base)
            if a is None:
                a = arrays.get("gg_" + base)
            if a is not None:
                return tuple(a.shape)
            # An input the formula does not read (sum's and mean's x) is not sent: its shape is
            # (N,) + g_out's trailing dimensions, since out = (S,) + x.shape[1:].
            g, idx = arrays.get("g_out"), arrays.get("idx")
            if g is not None and idx is not None and _table.OUT_SHAPE[op][1] == base:
                lead = idx.shape[0] if _table.LEADS[op][base] == "N" else s
                return (lead,) + tuple(g.shape[1:])
            return None
    except (KeyError, AttributeError, TypeError):
        return None
    return None


_registry = weakref.WeakSet()  # live ShmSession objects, closed at interpreter exit
# Regions of sessions that died without close() (their Client was dropped): their files are
# unlinked when the session dies; the daemon is told to unregister them at interpreter exit, by
# (address, region name): no network I/O in a finalizer, which may run inside any allocation.
_orphans = []


def _orphaned(regions, address):
    """weakref.finalize callback of a ShmSession: `regions` is its name -> Region dict."""
    for r in list(regions.values()):
        r.unlink()
        if r.registered:
            _orphans.append((address, r.name))
    regions.clear()


def _unregister_orphans():
    """Tells each daemon to unregister the regions of sessions that died without close()."""
    conns = {}
    while _orphans:
        (unix, host, port, https, prefix, headers), name = _orphans.pop()
        try:
            key = (unix, host, port, https)
            c = conns.get(key)
            if c is None:
                if unix is not None:
                    c = UnixHTTPConnection(unix, timeout=2)
                elif https:
                    c = http.client.HTTPSConnection(host, port, timeout=2)
                else:
                    c = http.client.HTTPConnection(host, port, timeout=2)
                conns[key] = c
            c.request("POST", f"{prefix}/v2/systemsharedmemory/region/{name}/unregister", b"",
                      dict(headers, **{"Content-Length": "0"}))
            c.getresponse().read()
        except (OSError, http.client.HTTPException):
            conns.pop(key, None)  # that daemon is gone or broke the connection: nothing to undo there
    for c in conns.values():
        c.close()


@atexit.register
def _close_all():
    for s in list(_registry):
        try:
            s.close()
        except Exception:
            pass
    _unregister_orphans()


def _after_fork():
    # A forked child shares the parent's mappings but not its registrations: it must neither
    # use nor unregister them. Its sessions start afresh (new regions) on their next call.
    for s in list(_registry):
        s._forked()


os.register_at_fork(after_in_child=_after_fork)


class _Kept:
    """An input kept in a region of its own: the token's object (weakly), the version its bytes
    there have, the array's (address, nbytes, dtype, shape) then, and how many calls in flight
    name its region (it is not dropped while any does)."""

    __slots__ = ("ref", "version", "spec", "region", "busy")

    def __init__(self, ref, version, spec, region):
        self.ref, self.version, self.spec, self.region = ref, version, spec, region
        self.busy = 0


class ShmSession:
    """A client's regions and the calls that go through them. `rpc(method, path, json_obj)`
    sends a small JSON request to the daemon and returns the parsed answer."""

    def __init__(self, client):
        self._client = weakref.ref(client)
        self._lock = threading.Lock()
        self._idle = []  # scratch regions not in use
        self._all = {}  # name -> Region: every region registered by this process
        self._user = []  # (start, end, region) of Client.empty() regions
        self._dead = []  # entries of _user whose arrays have died (appended by finalizers)
        self._pid = os.getpid()
        self._returned = []  # lent regions whose results have all died (appended by finalizers)
        self._lent = 0  # regions lent to live results, and their bytes
        self._lent_bytes = 0
        self._parsed = {}  # (answer bytes, placement) -> its placed outputs and their bytes (see _decode)
        self._packed = {}  # a request's tensors, places and scalars -> its body (see _pack)
        self._keep_lock = threading.Lock()
        self._kept = {}  # id(token object) -> _Kept (kept inputs), in least recently used order
        self._kept_dead = []  # ids of kept inputs whose token object has died (appended by finalizers)
        self.bytes_copied = 0  # input bytes copied into scratch regions (statistics)
        self.bytes_kept = 0  # input bytes sent from kept regions instead of copied (statistics)
        self.outputs_inline = 0  # outputs answered in the body because no place was known for them
        self.outputs_lent = 0  # outputs returned as views into their region (statistics)
        self.registrations = 0  # regions registered with the daemon (statistics)
        self._epoch = 0  # how many times the daemon forgot this session's regions and got them again
        self._again_lock = threading.Lock()
        _registry.add(self)
        self._finalizer = None
        self._watch(client)

    def _watch(self, client):
        """Unlinks this session's region files if it dies without close() (see _orphaned)."""
        if self._finalizer is not None:
            self._finalizer.detach()
        address = (client._unix, client._host, client._port, client._https, client._prefix,
                   {k: v for k, v in client._headers.items() if k == "Authorization"})
        self._finalizer = weakref.finalize(self, _orphaned, self._all, address)
        self._finalizer.atexit = False  # at exit _close_all closes live sessions properly

    # -- registration --

    def _rpc(self, method, path, obj=None):
        c = self._client()
        if c is None:
            raise SegopsConnectionError(0, "connection_error", "segops: client is gone")
        body = json.dumps(obj).encode() if obj is not None else None
        hdrs = {"Content-Type": "application/json", "Accept": "application/json"}
        return c._roundtrip(method, path, body, len(body) if body else 0, headers=hdrs, read=lambda r: r.read())

    def _register(self, size):
        r = Region(max(size, 1))
        try:
            self._rpc("POST", f"/v2/systemsharedmemory/region/{r.name}/register",
                      {"key": r.key, "offset": 0, "byte_size": r.size})
        except BaseException:
            r.unlink()
            r.close()
            raise
        r.registered = True
        with self._lock:
            self._all[r.name] = r
            self.registrations += 1
        return r

    def _register_again(self, epoch):
        """After shm_region_unknown: registers every region of this session again (the daemon
        restarted and knows none), once for all the threads that met it in the same epoch."""
        with self._again_lock:
            if self._epoch != epoch:
                return  # another thread did it meanwhile
            with self._lock:
                regions = [r for r in self._all.values() if r.registered]
            for r in regions:
                try:
                    self._rpc("POST", f"/v2/systemsharedmemory/region/{r.name}/register",
                              {"key": r.key, "offset": 0, "byte_size": r.size})
                except SegopsError as e:
                    if "already registered" not in e.message:  # (registered afresh by a new call meanwhile)
                        raise NoRegion(e) from e
            self._epoch += 1

    def _post(self, c, path, packed):
        """Sends a call that names regions; after a daemon restart, registers them again and
        resends (a call is pure: sending it twice is safe)."""
        for attempt in range(3):
            epoch = self._epoch
            try:
                return c._roundtrip("POST", path, packed, len(packed), read=_read_small)
            except ShmRegionUnknown:
                if attempt == 2:
                    raise
                self._register_again(epoch)
        raise AssertionError("unreachable")

    def _drop(self, r, tell_daemon=True):
        with self._lock:
            self._all.pop(r.name, None)
        if r.registered and tell_daemon:
            try:
                self._rpc("POST", f"/v2/systemsharedmemory/region/{r.name}/unregister")
            except (SegopsError, OSError):
                pass  # the daemon is gone or forgot it: nothing left to undo there
        r.registered = False
        r.unlink()
        r.close()

    def close(self):
        """Unregisters and unlinks every region (arrays from empty() stay readable here)."""
        if os.getpid() != self._pid:
            return
        with self._lock:
            regions = list(self._all.values())
            self._idle, self._user, self._dead = [], [], []
            self._kept, self._kept_dead = {}, []
        for r in regions:
            self._drop(r)

    def _forked(self):
        self._lock = threading.Lock()
        self._keep_lock = threading.Lock()
        self._again_lock = threading.Lock()
        # The parent's regions are the parent's: this child's finalizer must never unlink them.
        self._finalizer.detach()
        self._finalizer = None
        self._idle, self._all, self._user, self._dead = [], {}, [], []
        self._kept, self._kept_dead = {}, []
        self._returned, self._lent, self._lent_bytes = [], 0, 0
        self._pid = os.getpid()
        c = self._client()
        if c is not None:
            self._watch(c)

    # -- user arrays --

    def empty(self, shape, dtype):
        """A C-contiguous array in a region of its own, registered now; sent by reference."""
        dt = np.dtype(dtype)
        if dt.byteorder == ">":
            dt = dt.newbyteorder("<")
        shape = tuple(int(d) for d in (shape if isinstance(shape, (tuple, list)) else (shape,)))
        count = 1
        for d in shape:
            count *= d
        r = self._register(_align(max(count * dt.itemsize, 1)))
        # When the user's last array from this region dies, the region is unregistered on the
        # next call or at close.
        entry = (r.addr, r.addr + r.size, r)
        arr = r.view(0, dt, shape, base=r.hang(self._dead, entry))
        with self._lock:
            self._user.append(entry)
        return arr

    def _reap(self):
        """Unregisters the regions of Client.empty() arrays that have died."""
        while self._dead:
            entry = self._dead.pop()
            with self._lock:
                if entry not in self._user:
                    continue
                self._user.remove(entry)
            self._drop(entry[2])

    def _find_user(self, arr):
        if not self._user:
            return None
        start = arr.__array_interface__["data"][0]
        end = start + arr.nbytes
        for lo, hi, r in self._user:
            if lo <= start and end <= hi:
                return r, start - lo
        return None

    def prefers_body(self, args):
        """auto only: a call whose arrays total under SHM_MIN_BYTES and none of which lives in a
        region of ours (client.empty()) is cheaper as an HTTP body than copied into a region and
        back (measured: bench/client/overhead.py)."""
        total = 0
        for v in args.values():
            if isinstance(v, np.ndarray):
                if self._user and self._find_user(v) is not None:
                    return False
                total += v.nbytes
        return total < SHM_MIN_BYTES

    # -- kept inputs --

    def _reap_kept(self):
        while self._kept_dead:
            key = self._kept_dead.pop()
            with self._lock:
                k = self._kept.get(key)
                if k is None or k.ref() is not None:
                    continue
                del self._kept[key]
            if k.region is not None:
                self._release(k.region)

    def _kept_place(self, arr, token, busy):
        """(region, 0) holding arr's bytes when token = (object, version) vouches that they did
        not change since they were put there, else None (the caller copies arr as usual). The
        entry is counted busy (appended to `busy`) until the caller's _unbusy."""
        try:
            if not _KEEP_MIN_BYTES <= arr.nbytes <= _KEEP_MAX_BYTES // 2:
                return None  # never kept: no lock, no bookkeeping
        except AttributeError:
            return None
        with self._keep_lock:  # one thread at a time fills or replaces a kept region
            k = self._kept_locked(arr, token)
            if k is None:
                return None
            k.busy += 1
            busy.append(k)
            return k.region, 0

    def _unbusy(self, busy):
        with self._keep_lock:
            for k in busy:
                k.busy -= 1
            self._trim_kept()  # what was over the caps while busy

    def _kept_locked(self, arr, token):
        """_kept_place's work, under _keep_lock: the entry whose region holds arr's bytes, or None.
        token: (obj, version), or (obj, version, True) to copy arr now whatever the entry holds
        (and keep it from this first sight on)."""
        try:
            if not _KEEP_MIN_BYTES <= arr.nbytes <= _KEEP_MAX_BYTES // 2:
                return None
            obj, version, *rest = token
            refresh = bool(rest and rest[0])
            key = id(obj)
            spec = (arr.__array_interface__["data"][0], arr.nbytes, arr.dtype.str, arr.shape)
        except (TypeError, ValueError, AttributeError):
            return None
        k = self._kept.get(key)
        if k is not None and k.ref() is not obj:
            # The id of a dead object, reused by this one before the dead one's entry was reaped:
            # its region goes now (no call can name it: its object is gone).
            with self._lock:
                self._kept.pop(key, None)
            if k.region is not None:
                self._release(k.region)
            k = None
        if k is None:
            # First sight: remember the token only (unless asked to copy now).
            try:
                ref = weakref.ref(obj, lambda _r, q=self._kept_dead, key=key: q.append(key))
            except TypeError:
                return None
            k = _Kept(ref, version, spec, None)
            with self._lock:
                self._kept[key] = k
            if not refresh:
                self._trim_kept()
                return None
        with self._lock:  # most recently used last
            self._kept.pop(key, None)
            self._kept[key] = k
        if k.region is not None and k.version == version and k.spec == spec and not refresh:
            self.bytes_kept += arr.nbytes
            return k
        if k.region is None or k.region.size < arr.nbytes:
            if k.region is not None:
                self._release(k.region)
                k.region = None
            try:
                # From the pool like a call's region (and back to it when dropped): inputs kept
                # for one step only, as a training batch's are, then cost no registration.
                k.region = self._acquire(_align(arr.nbytes))
            except (SegopsError, OSError, NoRegion):
                return None  # no room for it: copied with the call's other inputs
        k.region.mm[: arr.nbytes] = arr  # (C-contiguous: its buffer is its bytes in order)
        self.bytes_copied += arr.nbytes
        k.version, k.spec = version, spec
        self._trim_kept()
        return k if k.region is not None else None

    def _trim_kept(self):
        """Drops the least recently used kept inputs past _KEEP_MAX or _KEEP_MAX_BYTES (not those
        a call in flight names), and forgets tokens seen only once past 4 * _KEEP_MAX. Called
        with _keep_lock held, so no call is handed a kept region while this drops it."""
        drop = []
        with self._lock:
            held = [(key, k) for key, k in self._kept.items() if k.region is not None and not k.busy]  # oldest first
            total = sum(k.region.size for _, k in held)
            while held and (len(held) > _KEEP_MAX or total > _KEEP_MAX_BYTES):
                key, k = held.pop(0)
                total -= k.region.size
                del self._kept[key]
                drop.append(k.region)
            seen = [key for key, k in self._kept.items() if k.region is None]
            for key in seen[: max(0, len(seen) - 4 * _KEEP_MAX)]:
                del self._kept[key]
        for r in drop:
            self._release(r)

    # -- calls --

    def _acquire(self, need):
        """The smallest idle region that holds `need` bytes, else a new one of the next
        power-of-two size. Idle regions that are too small stay while the pool is within
        _POOL_MAX_BYTES: calls of different sizes alternate in a training step (a forward and a
        double backward need regions of different sizes), and dropping one to register another
        on every call costs a registration each time (and page pinning by the CUDA backend)."""
        with self._lock:
            best = None
            for i, r in enumerate(self._idle):
                if r.size >= need and (best is None or r.size < self._idle[best].size):
                    best = i
            if best is not None:
                return self._idle.pop(best)
            size = _MIN_REGION
            while size < need:
                size *= 2
            drop = self._shed(size)
        for r in drop:
            self._drop(r)
        try:
            return self._register(size)
        except (SegopsError, OSError) as e:  # over the daemon's --max-shm-bytes, /dev/shm full
            with self._lock:
                drop, self._idle = self._idle, []
            if not drop:
                raise NoRegion(e) from e
        for r in drop:  # make room with this client's idle regions, then try once more
            self._drop(r)
        try:
            return self._register(size)
        except (SegopsError, OSError) as e:
            raise NoRegion(e) from e

    def _shed(self, extra):
        """Idle regions to drop, smallest first, so that the idle and lent ones plus `extra` bytes
        stay within _POOL_MAX_BYTES and at most _POOL_MAX_IDLE stay idle. Lock held."""
        if len(self._idle) <= _POOL_MAX_IDLE:
            total = self._lent_bytes + extra
            for r in self._idle:
                total += r.size
            if total <= _POOL_MAX_BYTES:
                return []  # within both caps: nothing to drop (the common case)
        idle = sorted(self._idle, key=lambda r: r.size)
        total = sum(r.size for r in idle) + self._lent_bytes + extra
        drop = []
        while idle and (total > _POOL_MAX_BYTES or len(idle) > _POOL_MAX_IDLE):
            r = idle.pop(0)
            total -= r.size
            drop.append(r)
        for r in drop:
            self._idle.remove(r)
        return drop

    def _release(self, r):
        with self._lock:
            if r.name in self._all:
                self._idle.append(r)
                drop = self._shed(0)
            else:
                drop = [r]
        for d in drop:
            self._drop(d)

    def _take_back(self):
        """Regions lent to results that have all died go back to the idle ones."""
        while self._returned:
            r = self._returned.pop()
            with self._lock:
                self._lent -= 1
                self._lent_bytes -= r.size
            self._release(r)

    def _lend(self, region):
        """Whether this call's results may stay in its region (counted as lent if so)."""
        with self._lock:
            if self._lent >= _MAX_LENT or self._lent_bytes + region.size > _MAX_LENT_BYTES:
                return False
            self._lent += 1
            self._lent_bytes += region.size
            return True

    def call(self, op, pass_, args, outputs, out_names, versions=None):
        """One function through shared memory; returns {output name: np.ndarray}: copies out of
        the region, or with lending on (_MAX_LENT > 0) views into it, the region then unused
        until every one of them (and every view or tensor made from them) is gone."""
        if os.getpid() != self._pid:
            self._forked()
        if self._dead:
            self._reap()
        if self._returned:
            self._take_back()
        if self._kept_dead:
            self._reap_kept()
        busy = []  # kept inputs this call names (not dropped until it is answered)
        try:
            tensors = []  # (name, wire array, offset in the call's region, or (region, offset))
            scalars = {}
            arrays = {}
            odt = None  # the outputs' dtype: the first floating input's
            pos = 0
            for name, v in args.items():
                if v is None:
                    continue
                if name == "num_segments" or isinstance(v, (int, np.integer, float)):
                    scalars[name] = _wire._scalar(v, name)
                    continue
                arr = _wire.wire_array(v, name)
                arrays[name] = arr
                if odt is None and arr.dtype.kind == "f":
                    odt = arr.dtype
                ref = self._find_user(arr) if self._user else None
                if ref is None and versions and name in versions and arr.nbytes >= _KEEP_MIN_BYTES:
                    ref = self._kept_place(arr, versions[name], busy)
                if ref is None:
                    tensors.append((name, arr, pos))
                    pos = (pos + arr.nbytes + _ALIGN - 1) & ~(_ALIGN - 1)  # _align
                else:
                    tensors.append((name, arr, ref))
            s = scalars.get("num_segments")
            itemsize = odt.itemsize if odt is not None else 8  # float64 when no input is floating
            want = out_names if outputs is None else tuple(outputs)
            outs = []  # (name, offset, nbytes)
            for name in want:
                shape = output_shape(op, name, arrays, s) if isinstance(s, int) else None
                if shape is None:
                    continue  # answered inline
                nb = itemsize
                for d in shape:
                    nb *= d
                outs.append((name, pos, nb))
                pos = (pos + nb + _ALIGN - 1) & ~(_ALIGN - 1)  # _align
            region = self._acquire(pos)
            lent = False
            try:
                mm, rname = region.mm, region.name
                sig = []  # (name, dtype name, shape, region name, offset) of each tensor
                for name, arr, where in tensors:
                    if isinstance(where, tuple):
                        r, off = where[0].name, where[1]
                    else:
                        r, off = rname, where
                        nb = arr.nbytes
                        if nb:
                            mm[off : off + nb] = arr  # (C-contiguous: its buffer is its bytes in order)
                            self.bytes_copied += nb
                    sig.append((name, _wire.dtype_name(arr.dtype), arr.shape, r, off))
                packed = self._pack(sig, scalars, outputs, outs, rname)
                c = self._client()
                raw = self._post(c, f"/v1/{op}/{pass_}", packed)
                with _wire.answer_checked():
                    res, lent = self._decode(raw, region, outs)
                return res
            finally:
                if not lent:
                    self._release(region)
        finally:
            if busy:
                self._unbusy(busy)

    def _pack(self, sig, scalars, outputs, outs, rname):
        """The request body (msgpack). A step's calls repeat with the same tensors at the same
        places: the same body is packed once and kept (up to 256 bodies, then forgotten)."""
        try:
            key = (tuple(sig), tuple([(k, v.__class__, v) for k, v in scalars.items()]),
                   None if outputs is None else tuple(outputs), tuple(outs), rname)
            packed = self._packed.get(key)
        except TypeError:  # an unhashable argument (a list): packed every time
            key = packed = None
        if packed is None:
            body = {}
            for name, dn, shape, r, off in sig:
                body[name] = {"dtype": dn, "shape": list(shape), "shm": {"region": r, "offset": off}}
            body.update(scalars)
            if outputs is not None:
                body["outputs"] = list(outputs)
            if outs:
                body["outputs_shm"] = {name: {"region": rname, "offset": off} for name, off, _ in outs}
            packed = msgpack.packb(body)
            if key is not None:
                if len(self._packed) >= 256:
                    self._packed.clear()
                self._packed[key] = packed
        return packed

    def _decode(self, raw, region, outs):
        """{name: array} and whether the region is now lent to them (views, released when the last
        of them dies) rather than copied out. outs: [(name, offset, nbytes)] asked for."""
        # A step's calls repeat: the same answer bytes to the same placement parse the same way.
        key = (raw, tuple(outs))
        parsed = self._parsed.get(key)
        if parsed is None:
            out, views = self._parse(raw, region, {n: (o, nb) for n, o, nb in outs})
            parsed = views, sum([v[4] for v in views])
            if not out:
                if len(self._parsed) >= 256:
                    self._parsed.clear()
                self._parsed[key] = parsed
        else:
            out = {}
        views, size = parsed
        if views and size >= _LEND_MIN_BYTES and self._lend(region):
            base = region.hang(self._returned, region)
            for k, off, dt, shape, _ in views:
                out[k] = np.ndarray(shape, dt, base, off)
            self.outputs_lent += len(views)
            return out, True
        for k, off, dt, shape, _ in views:
            out[k] = region.view(off, dt, shape).copy()
        return out, False

    def _parse(self, raw, region, placed):
        """({name: array} of outputs answered inline, [(name, offset, dtype, shape, nbytes)] of
        those placed in the region), each checked against where it was asked to go."""
        out = {}
        views = []
        for k, t in _wire.unpack_map(raw).items():
            ref = t.get("shm") if isinstance(t, dict) else None
            if ref is None:
                self.outputs_inline += 1
                out[k] = _wire.inline_tensor(k, t)
                continue
            dt = _wire.WIRE_DTYPES.get(t.get("dtype"))
            shape = _wire._shape(k, t.get("shape", ()))
            off = ref.get("offset")
            if dt is None or ref.get("region") != region.name or k not in placed or off != placed[k][0]:
                raise ProtocolError(200, "protocol_error", f"segops: output {k!r} answered at an unexpected place {ref!r}")
            nb = np.dtype(dt).itemsize
            for d in shape:
                nb *= d
            if nb > placed[k][1] or off + nb > region.size:
                raise ProtocolError(200, "protocol_error", f"segops: output {k!r} ({nb} bytes) overflows its place")
            views.append((k, off, np.dtype(dt), shape, nb))
        return out, tuple(views)


def _read_small(resp):
    return resp.read()


def probe_shm(session):
    """True when the daemon reads and writes this process's region: a tiny sum through it."""
    x = np.array([1.0, 2.0, 4.0])
    res = session.call("segmented_sum", "forward", {"x": x, "idx": np.zeros(3, np.int32), "num_segments": 1},
                       None, ("out",))
    out = res.get("out")
    return out is not None and out.shape == (1,) and float(out[0]) == 7.0

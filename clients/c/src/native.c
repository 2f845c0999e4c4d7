/* native.c: the native same-node channel's client side (transport.h; the wire contract is
 * proto/segops_ring.h, the protocol proto/native.md, the mechanics both ends share
 * proto/segops_chan.h). A channel is one SOCK_SEQPACKET connection to the daemon's channel socket, the ring's memfd and
 * the client's pools (mem.h) handed over on it. A call claims a slot, writes its descriptor, rings the doorbell and
 * waits for the slot's state: spinning for spin_us, then asleep on the futex. A daemon that goes away mid-call is
 * reported at once (SEGOPS_E_CONNECTION; a drain answer SEGOPS_E_UNAVAILABLE) after one attempt
 * to open the channel again that never waits for a daemon to come (its socket may have a successor
 * already): waiting, back-off and moving to another daemon are client.c's (endpoints.c), which
 * finds the daemon's transport again and so hands the pools over again. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "mem.h"
#include "ops.h"
#include "segops_chan.h"
#include "segops_ring.h"
#include "transport.h"

/* The first pool's size (mem.c's FIRST_POOL): a process that cannot size it does not open a channel. */
#define NATIVE_FIRST_POOL ((size_t)4 << 20)
/* Slots of a client's ring: calls in flight at once per channel (one bit each of a 64-bit mask). */
#define SLOTS 64
/* The default spin budget (spin_us < 0 and no $SEGOPS_CLIENT_SPIN_US): proto/native.md, Doorbells. */
#define DEFAULT_SPIN_US 50
/* A sleeping caller looks at the socket this often, so a daemon that died is noticed. */
#define SLEEP_S 0.05
/* How long the one reconnect after a lost daemon may take for its handshake (a successor already
 * on the socket answers in microseconds; one that is not there refuses the connection at once). */
#define RECONNECT_S 0.25

/* ---- forks --------------------------------------------------------------------------------------
 * A channel belongs to the process that opened it: a forked child must neither use nor close its
 * parent's (the socket and the ring are shared with the parent), so it opens its own. */
static atomic_uint fork_epoch;
static pthread_once_t fork_once = PTHREAD_ONCE_INIT;
static void on_fork_child(void) { atomic_fetch_add(&fork_epoch, 1); }
static void register_fork(void) { pthread_atfork(NULL, NULL, on_fork_child); }

/* ---- a channel -------------------------------------------------------------------------------- */

/* A call that timed out: the daemon may still write its outputs, so its slot stays taken and the
 * pool blocks it wrote or read stay held (mem.h) until the slot is answered or the daemon ends the
 * channel. */
typedef struct abandoned {
  uint32_t slot;
  void *held[SEGOPS_MAX_INPUTS + 1 + 2 * SEGOPS_MAX_OUTPUTS];
  int n;
  struct abandoned *next;
} abandoned;

typedef struct {
  int sock;
  int ring_fd;
  unsigned char *ring;
  size_t ring_len;
  segops_ring_header *hdr;
  atomic_uint_fast64_t free_slots; /* bit k: slot k is free */
  atomic_uint_fast64_t seq;
  atomic_int refs;     /* the transport's, plus one per call using it */
  atomic_bool broken;  /* the daemon went away or is draining: open a new one */
  pthread_mutex_t ctl; /* the control exchange (POOL) */
  atomic_int pools_sent;
  pthread_mutex_t ab_mu;
  abandoned *ab;
  segops_mem *mem;
} chan;

typedef struct {
  segops_transport base;
  char path[108];
  uid_t uid; /* the daemon's: every channel's peer and its socket's owner must be it */
  pid_t pid; /* the daemon's as /v1/info said, for the first channel only (0: not compared) */
  char *token;
  int spin_us;
  segops_mem *mem;
  pthread_mutex_t mu; /* cur */
  chan *cur;
  unsigned epoch;
} native_t;

static segops_ring_slot *slot_at(chan *c, uint32_t k) { return segops_chan_slot(c->ring, k); }

static void unhold_abandoned(chan *c, abandoned *a) {
  for (int i = 0; i < a->n; i++) segops_mem_unhold(c->mem, a->held[i]);
  free(a);
}

/* The daemon's end of the socket is closed (it died, or ended the channel). */
static bool peer_gone(chan *c) {
  /* Not POLLIN: a control reply for another thread may be waiting there. */
  struct pollfd p = {c->sock, POLLRDHUP, 0};
  return poll(&p, 1, 0) > 0 && (p.revents & (POLLHUP | POLLRDHUP | POLLERR));
}

/* For a channel that goes: lists in out the blocks of its timed-out calls that the daemon may
 * still write (their slots unanswered, the daemon still there) and returns how many; unholds the
 * others (nothing writes them any more); frees the list. */
static int still_held(chan *c, void **out, int cap) {
  bool gone = c->sock < 0 || peer_gone(c);
  int n = 0;
  while (c->ab) {
    abandoned *a = c->ab;
    c->ab = a->next;
    uint32_t st = __atomic_load_n(&slot_at(c, a->slot)->state, __ATOMIC_ACQUIRE) & SEGOPS_SLOT_STATE_MASK;
    if (!gone && st == SEGOPS_SLOT_SUBMITTED && n + a->n <= cap) {
      memcpy(out + n, a->held, (size_t)a->n * sizeof *out);
      n += a->n;
      free(a);
    } else if (!gone && st == SEGOPS_SLOT_SUBMITTED) {
      free(a); /* no room to list them: they stay held, never reused under the daemon's pen */
    } else {
      unhold_abandoned(c, a);
    }
  }
  return n;
}

/* Frees a channel. Blocks of its timed-out calls that the daemon may still write stay held until
 * it closes its end, which it does once those calls are over: this side shuts its sending half
 * (the daemon sees the channel end) and hands the socket to mem.h, which unholds them then. */
static void chan_destroy(chan *c) {
  void *held[SLOTS * (SEGOPS_MAX_INPUTS + 1 + 2 * SEGOPS_MAX_OUTPUTS)];
  int n = c->ring ? still_held(c, held, (int)(sizeof held / sizeof held[0])) : 0;
  if (n && shutdown(c->sock, SHUT_WR) == 0 && segops_mem_unhold_on_hangup(c->mem, c->sock, held, n)) c->sock = -1;
  if (c->ring) munmap(c->ring, c->ring_len);
  if (c->ring_fd >= 0) close(c->ring_fd);
  if (c->sock >= 0) close(c->sock);
  pthread_mutex_destroy(&c->ctl);
  pthread_mutex_destroy(&c->ab_mu);
  free(c);
}

static void chan_put(chan *c) {
  if (c && atomic_fetch_sub(&c->refs, 1) == 1) chan_destroy(c);
}

static void sleep_s(double s) {
  if (s <= 0) return;
  struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
  nanosleep(&ts, NULL);
}

/* ---- messages ----------------------------------------------------------------------------------- */

typedef union {
  segops_msg_head h;
  segops_msg_welcome welcome;
  segops_msg_ok ok;
  segops_msg_error error;
  char raw[SEGOPS_MSG_MAX];
} reply;

/* Waits (until deadline) for the daemon's reply to the message just sent: type want, else its
 * ERROR turned into e. Returns SEGOPS_OK or the code; *gone tells that the daemon is unreachable
 * (worth retrying) rather than refusing. */
static int recv_reply(int sock, uint32_t want, size_t want_len, reply *r, double deadline, bool *gone,
                      segops_error *e) {
  *gone = false;
  double left = deadline - segops_client_now();
  struct pollfd p = {sock, POLLIN, 0};
  int pr = poll(&p, 1, left > 0 ? (int)(left * 1e3) + 1 : 0);
  if (pr == 0) return segops_client_err(e, SEGOPS_E_TIMEOUT, "the native channel's daemon did not answer in time");
  int fd = -1;
  ssize_t n = pr < 0 ? -1 : segops_chan_recv(sock, r, sizeof *r, &fd, 0);
  if (fd >= 0) close(fd); /* the daemon sends none */
  if (n < 0 && errno == EMSGSIZE)
    return segops_client_err(e, SEGOPS_E_PROTOCOL, "unexpected native-channel message (over %u bytes)", SEGOPS_MSG_MAX);
  if (pr < 0 || n <= 0) {
    *gone = true;
    return segops_client_err(e, SEGOPS_E_CONNECTION, "the native channel closed (%s)",
                             n == 0 ? "by the daemon" : strerror(errno));
  }
  if (n < (ssize_t)sizeof r->h || r->h.magic != SEGOPS_MSG_MAGIC)
    return segops_client_err(e, SEGOPS_E_PROTOCOL, "the native channel's socket is not a segopsd (bad magic)");
  if (r->h.version != SEGOPS_NATIVE_VERSION)
    return segops_client_err(e, SEGOPS_E_PROTOCOL, "segopsd speaks native channel version %" PRIu32 ", this client %u",
                             r->h.version, SEGOPS_NATIVE_VERSION);
  if (r->h.type == SEGOPS_MSG_ERROR && n == (ssize_t)sizeof r->error) {
    r->error.name[sizeof r->error.name - 1] = 0;
    r->error.message[sizeof r->error.message - 1] = 0;
    int code = r->error.code < 0 && r->error.code > -100 ? r->error.code : SEGOPS_E_INTERNAL;
    if (e) {
      e->code = code;
      e->http_status = segops_err_status(code);
      snprintf(e->name, sizeof e->name, "%s", r->error.name);
      snprintf(e->message, sizeof e->message, "%s", r->error.message);
    }
    /* A draining daemon refuses new channels: a new one may come on the same socket. */
    *gone = code == SEGOPS_E_UNAVAILABLE;
    return code;
  }
  if (r->h.type != want || n != (ssize_t)want_len || r->h.size != (uint32_t)n)
    return segops_client_err(e, SEGOPS_E_PROTOCOL, "unexpected native-channel message (type %" PRIu32 ", %zd bytes)",
                             r->h.type, n);
  return SEGOPS_OK;
}

/* ---- opening a channel ------------------------------------------------------------------------------ */

/* Connects without waiting: a unix socket whose backlog is full refuses at once (EAGAIN) instead
 * of blocking, as a missing or dead one does. */
static int connect_sock(const char *path, bool *gone, segops_error *e) {
  *gone = true;
  struct sockaddr_un sa;
  memset(&sa, 0, sizeof sa);
  sa.sun_family = AF_UNIX;
  snprintf(sa.sun_path, sizeof sa.sun_path, "%s", path);
  int s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (s < 0) return segops_client_err(e, SEGOPS_E_CONNECTION, "socket: %s", strerror(errno)), -1;
  if (connect(s, (struct sockaddr *)&sa, sizeof sa) != 0 || fcntl(s, F_SETFL, 0) != 0) {
    int err = errno;
    close(s);
    /* Missing, refused or full: no daemon there now (one may come). Anything else will not change. */
    *gone = err == ENOENT || err == ECONNREFUSED || err == EAGAIN;
    segops_client_err(e, SEGOPS_E_CONNECTION, "cannot connect to the native channel %s: %s", path, strerror(err));
    return -1;
  }
  return s;
}

/* Identity before secrets: the peer of a connected socket is the daemon /v1/info described (its
 * uid, the one this client first saw; its pid where given) and the socket file is that uid's,
 * checked before the token, the ring or any pool goes out. Whoever else listens on the path (a
 * user who bound it while the daemon restarted) gets nothing. */
static int check_peer(int sock, native_t *t, segops_error *e) {
  struct ucred cr = {0, (uid_t)-1, (gid_t)-1};
  socklen_t crl = sizeof cr;
  if (getsockopt(sock, SOL_SOCKET, SO_PEERCRED, &cr, &crl) != 0)
    return segops_client_err(e, SEGOPS_E_CONNECTION, "native channel %s: cannot read its peer's credentials: %s",
                             t->path, strerror(errno));
  if (cr.uid != t->uid || (t->pid > 0 && cr.pid != t->pid))
    return segops_client_err(e, SEGOPS_E_CONNECTION,
                             "native channel %s: its peer is uid %u pid %d, not segopsd (uid %u%s%d, from /v1/info); "
                             "nothing was sent to it",
                             t->path, (unsigned)cr.uid, (int)cr.pid, (unsigned)t->uid, t->pid > 0 ? " pid " : "",
                             t->pid > 0 ? (int)t->pid : 0);
  struct stat st;
  if (lstat(t->path, &st) != 0 || !S_ISSOCK(st.st_mode) || st.st_uid != t->uid)
    return segops_client_err(e, SEGOPS_E_CONNECTION,
                             "native channel %s: the socket file is %s%u, not segopsd's uid %u (from /v1/info); "
                             "nothing was sent to it",
                             t->path, lstat(t->path, &st) == 0 ? "owned by uid " : "gone, uid ",
                             lstat(t->path, &st) == 0 ? (unsigned)st.st_uid : 0u, (unsigned)t->uid);
  return SEGOPS_OK;
}

/* Whether RLIMIT_FSIZE lets this process size a memfd of n bytes (past it, ftruncate kills the
 * process with SIGXFSZ): the ring and the first pool are checked before the channel opens, so that
 * such a process uses HTTP ("auto") instead. */
static int fsize_allows(size_t n, segops_error *e) {
  struct rlimit fl;
  if (getrlimit(RLIMIT_FSIZE, &fl) == 0 && fl.rlim_cur != RLIM_INFINITY && (rlim_t)n > fl.rlim_cur)
    return segops_client_err(e, SEGOPS_E_RESOURCE_EXHAUSTED,
                             "the native channel needs memfds of %zu bytes, above this process's file size limit "
                             "(RLIMIT_FSIZE, ulimit -f: %llu bytes)",
                             n, (unsigned long long)fl.rlim_cur);
  return SEGOPS_OK;
}

/* The ring: a sealed, fully allocated memfd with its header written. */
static int make_ring(chan *c, segops_error *e) {
  c->ring_len = (size_t)SEGOPS_RING_BYTES(SLOTS);
  int rc = fsize_allows(c->ring_len > NATIVE_FIRST_POOL ? c->ring_len : NATIVE_FIRST_POOL, e);
  if (rc) return rc;
  c->ring_fd = memfd_create("segops-ring", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (c->ring_fd < 0 || ftruncate(c->ring_fd, (off_t)c->ring_len) != 0 ||
      fallocate(c->ring_fd, 0, 0, (off_t)c->ring_len) != 0 ||
      fcntl(c->ring_fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0)
    return segops_client_err(e, SEGOPS_E_NOMEM, "cannot make the native channel's ring: %s", strerror(errno));
  void *p = mmap(NULL, c->ring_len, PROT_READ | PROT_WRITE, MAP_SHARED, c->ring_fd, 0);
  if (p == MAP_FAILED)
    return segops_client_err(e, SEGOPS_E_NOMEM, "cannot map the native channel's ring: %s", strerror(errno));
  c->ring = p;
  c->hdr = p;
  c->hdr->magic = SEGOPS_RING_MAGIC;
  c->hdr->version = SEGOPS_NATIVE_VERSION;
  c->hdr->slot_count = SLOTS;
  c->hdr->slot_bytes = SEGOPS_RING_SLOT_BYTES;
  c->hdr->header_bytes = SEGOPS_RING_HEADER_BYTES;
  atomic_init(&c->free_slots, ~(uint_fast64_t)0);
  return SEGOPS_OK;
}

/* HELLO -> WELCOME, RING -> OK. */
static int handshake(chan *c, const native_t *t, double deadline, bool *gone, segops_error *e) {
  segops_msg_hello h;
  memset(&h, 0, sizeof h);
  segops_chan_head(&h.h, SEGOPS_MSG_HELLO, sizeof h);
  size_t tl = t->token ? strlen(t->token) : 0;
  if (tl > SEGOPS_TOKEN_BYTES)
    return segops_client_err(e, SEGOPS_E_INVALID_ARGUMENT, "the token is longer than %u bytes", SEGOPS_TOKEN_BYTES);
  h.token_len = (uint32_t)tl;
  if (tl) memcpy(h.token, t->token, tl);
  /* A daemon that refuses at once (a full channel table) has sent its ERROR already: a failed
   * send still reads it. */
  (void)segops_chan_send(c->sock, &h, sizeof h, -1);
  explicit_bzero(h.token, sizeof h.token);
  reply r;
  int rc = recv_reply(c->sock, SEGOPS_MSG_WELCOME, sizeof r.welcome, &r, deadline, gone, e);
  if (rc) return rc;
  segops_msg_ring m;
  memset(&m, 0, sizeof m);
  segops_chan_head(&m.h, SEGOPS_MSG_RING, sizeof m);
  m.slot_count = SLOTS;
  if (segops_chan_send(c->sock, &m, sizeof m, c->ring_fd) != 0) {
    *gone = true;
    return segops_client_err(e, SEGOPS_E_CONNECTION, "the native channel closed during the handshake: %s",
                             strerror(errno));
  }
  return recv_reply(c->sock, SEGOPS_MSG_OK, sizeof r.ok, &r, deadline, gone, e);
}

/* Hands over the pools made since the last hand-over on this channel (in id order), so that a
 * call never names a pool the daemon does not have. */
static int send_pools(chan *c, double deadline, bool *gone, segops_error *e) {
  *gone = false;
  if (!c->mem || segops_mem_pool_count(c->mem) <= atomic_load(&c->pools_sent)) return SEGOPS_OK;
  pthread_mutex_lock(&c->ctl);
  int rc = SEGOPS_OK;
  while (rc == SEGOPS_OK && atomic_load(&c->pools_sent) < segops_mem_pool_count(c->mem)) {
    size_t size = 0;
    int id = atomic_load(&c->pools_sent);
    int fd = segops_mem_pool_fd(c->mem, id, &size);
    segops_msg_pool m;
    memset(&m, 0, sizeof m);
    segops_chan_head(&m.h, SEGOPS_MSG_POOL, sizeof m);
    m.pool_id = (uint32_t)id;
    m.size = size;
    if (segops_chan_send(c->sock, &m, sizeof m, fd) != 0) {
      *gone = true;
      rc = segops_client_err(e, SEGOPS_E_CONNECTION, "the native channel closed: %s", strerror(errno));
      break;
    }
    segops_chan_ring_doorbell(c->hdr); /* the daemon reads control messages when its ring is idle: wake it */
    reply r;
    rc = recv_reply(c->sock, SEGOPS_MSG_OK, sizeof r.ok, &r, deadline, gone, e);
    if (rc == SEGOPS_OK) atomic_fetch_add(&c->pools_sent, 1);
  }
  pthread_mutex_unlock(&c->ctl);
  return rc;
}

/* A new channel: connected, the ring and every pool handed over; NULL with e filled (*gone: the
 * daemon is not there or is draining, rather than refusing this client). Never waits for a daemon
 * to come; deadline bounds the handshake. */
static chan *chan_open(native_t *t, double deadline, bool *gone, segops_error *e) {
  chan *c = calloc(1, sizeof *c);
  if (!c) {
    *gone = false;
    segops_client_err(e, SEGOPS_E_NOMEM, "out of memory");
    return NULL;
  }
  c->sock = c->ring_fd = -1;
  c->mem = t->mem;
  atomic_init(&c->refs, 1);
  pthread_mutex_init(&c->ctl, NULL);
  pthread_mutex_init(&c->ab_mu, NULL);
  c->sock = connect_sock(t->path, gone, e);
  int rc = c->sock < 0 ? SEGOPS_E_CONNECTION : SEGOPS_OK;
  if (rc == SEGOPS_OK) rc = check_peer(c->sock, t, e); /* *gone stays: ask /v1/info again */
  if (rc == SEGOPS_OK) {
    *gone = false;
    rc = make_ring(c, e);
  }
  if (rc == SEGOPS_OK) rc = handshake(c, t, deadline, gone, e);
  if (rc == SEGOPS_OK) rc = send_pools(c, deadline, gone, e);
  if (rc) {
    chan_destroy(c);
    return NULL;
  }
  return c;
}

/* After a fork: the parent's channel, of which only this process's copies of the descriptors and
 * the mapping go; its locks and abandoned list are the parent's business. Under t->mu. */
static void forget_parent_chan(native_t *t) {
  unsigned ep = atomic_load(&fork_epoch);
  if (ep == t->epoch) return;
  chan *old = t->cur;
  t->cur = NULL;
  t->epoch = ep;
  if (!old) return;
  if (old->ring) munmap(old->ring, old->ring_len);
  if (old->ring_fd >= 0) close(old->ring_fd);
  if (old->sock >= 0) close(old->sock);
  free(old);
}

/* The current channel with a reference for the caller, opened when there is none or it broke (one
 * attempt); NULL with e filled (*gone as chan_open's). *fresh: opened by this call. After a fork
 * the parent's is left alone. */
static chan *chan_get(native_t *t, double deadline, bool *fresh, bool *gone, segops_error *e) {
  pthread_mutex_lock(&t->mu);
  forget_parent_chan(t);
  if (t->cur && atomic_load(&t->cur->broken)) {
    chan_put(t->cur);
    t->cur = NULL;
  }
  *fresh = !t->cur;
  *gone = false;
  if (!t->cur) t->cur = chan_open(t, deadline, gone, e);
  chan *c = t->cur;
  if (c) atomic_fetch_add(&c->refs, 1);
  pthread_mutex_unlock(&t->mu);
  return c;
}

/* ---- one call ------------------------------------------------------------------------------------------ */

/* Where a call's tensors go: the request's descriptors, the pool memory it borrowed for copies, and
 * for each output where its bytes land and whether they are copied out afterwards. */
typedef struct {
  segops_ring_request req;
  void *tmp[SEGOPS_MAX_INPUTS + 1 + SEGOPS_MAX_OUTPUTS];
  int ntmp;
  void *out_place[SEGOPS_MAX_OUTPUTS]; /* where the daemon writes output k */
  bool out_copy[SEGOPS_MAX_OUTPUTS];   /* copied to the caller's data afterwards */
  bool out_alloc[SEGOPS_MAX_OUTPUTS];  /* allocated here for a caller's NULL data */
  uint64_t out_need[SEGOPS_MAX_OUTPUTS];
} placed;

static void *tmp_alloc(native_t *t, placed *pl, size_t n) {
  void *p = segops_mem_alloc(t->mem, n ? n : 1);
  if (p) pl->tmp[pl->ntmp++] = p;
  return p;
}

static void placed_free(native_t *t, placed *pl) {
  for (int i = 0; i < pl->ntmp; i++) segops_mem_release(t->mem, pl->tmp[i]);
  pl->ntmp = 0;
}

/* prod(shape) * itemsize of an array, or -1 when the shape is negative or overflows. */
static int64_t array_bytes(const segops_array *a) {
  static const int64_t SZ[SEGOPS_DTYPE_COUNT] = {4, 8, 4, 8};
  int64_t n = SZ[a->dtype];
  for (int d = 0; d < a->ndim; d++)
    if (a->shape[d] < 0 || __builtin_mul_overflow(n, a->shape[d], &n)) return -1;
  return n;
}

/* One input into the pools: where it lies, or a copy there. */
static int place_input(native_t *t, placed *pl, const char *op, const char *name, const segops_array *a,
                       segops_ring_tensor *d, segops_error *e) {
  memset(d, 0, sizeof *d);
  if (!a) return SEGOPS_OK;
  if ((unsigned)a->dtype >= SEGOPS_DTYPE_COUNT)
    return segops_client_err(e, SEGOPS_E_INVALID_ARGUMENT,
                             "%s: %s has dtype %d, which is none of float32, float64, int32, int64", op, name,
                             (int)a->dtype);
  if (a->ndim < 0 || a->ndim > SEGOPS_MAX_NDIM)
    return segops_client_err(e, SEGOPS_E_INVALID_ARGUMENT, "%s: %s has %d dimensions; at most %d are allowed", op, name,
                             a->ndim, SEGOPS_MAX_NDIM);
  d->flags = SEGOPS_TENSOR_PRESENT;
  d->dtype = (uint32_t)a->dtype;
  d->ndim = (uint32_t)a->ndim;
  for (int k = 0; k < a->ndim; k++) d->shape[k] = a->shape[k];
  int64_t nb = array_bytes(a);
  if (nb < 0) nb = 0; /* the daemon refuses the shape by its own rule */
  d->nbytes = (uint64_t)nb;
  if (nb > 0 && !a->data) return segops_client_err(e, SEGOPS_E_INVALID_ARGUMENT, "%s: %s has no data", op, name);
  if (nb > 0 && segops_mem_locate(t->mem, a->data, (size_t)nb, &d->pool, &d->offset)) return SEGOPS_OK;
  if (nb == 0 && segops_mem_pool_count(t->mem) > 0) return SEGOPS_OK; /* no bytes: pool 0, offset 0 */
  void *p = tmp_alloc(t, pl, (size_t)nb);
  if (!p || !segops_mem_locate(t->mem, p, (size_t)nb, &d->pool, &d->offset))
    return segops_client_err(e, SEGOPS_E_NOMEM, "%s: no shared memory left for %s (%" PRId64 " bytes)", op, name, nb);
  if (nb) memcpy(p, a->data, (size_t)nb);
  return SEGOPS_OK;
}

/* The bytes output k will have: the answer the call should get, as call_check.c predicts it from
 * the op table and the inputs' shapes (0 when the inputs do not say: the daemon then refuses the
 * call by its own rules before any output matters). */
static uint64_t output_bytes(const segops_tcall *call, int k) {
  if (call->expect_known) return (uint64_t)call->out_nbytes[k];
  segops_tcall c = *call; /* assembled without segops_call_build */
  segops_call_expect(&c);
  return c.expect_known ? (uint64_t)c.out_nbytes[k] : 0;
}

/* True when [off, off + n) of pool overlaps an input's bytes. */
static bool meets_input(const segops_ring_request *r, uint32_t pool, uint64_t off, uint64_t n) {
  for (int j = 0; j <= SEGOPS_MAX_INPUTS; j++) {
    const segops_ring_tensor *d = j < SEGOPS_MAX_INPUTS ? &r->in[j] : &r->idx;
    if ((d->flags & SEGOPS_TENSOR_PRESENT) && d->pool == pool && n && d->nbytes && off < d->offset + d->nbytes &&
        d->offset < off + n)
      return true;
  }
  return false;
}

/* One requested output: in the caller's memory when it lies in a pool (aligned, clear of the
 * inputs), else in pool memory copied out afterwards, or allocated for the caller. */
static int place_output(native_t *t, placed *pl, const segops_tcall *call, int k, segops_error *e) {
  segops_array *o = call->out[k];
  segops_ring_tensor *d = &pl->req.out[k];
  uint64_t need = output_bytes(call, k);
  pl->out_need[k] = need;
  d->flags = SEGOPS_TENSOR_PRESENT;
  if (o->data) {
    if (((uintptr_t)o->data & 63u) == 0 && segops_mem_locate(t->mem, o->data, o->nbytes, &d->pool, &d->offset) &&
        !meets_input(&pl->req, d->pool, d->offset, o->nbytes)) {
      d->nbytes = o->nbytes;
      pl->out_place[k] = o->data;
      return SEGOPS_OK;
    }
    d->nbytes = o->nbytes < need ? o->nbytes : need; /* a short buffer is refused by the daemon's rule */
    if (need == 0 && segops_mem_pool_count(t->mem) > 0) return SEGOPS_OK; /* nothing is written */
    void *p = tmp_alloc(t, pl, (size_t)need);
    if (!p || !segops_mem_locate(t->mem, p, (size_t)need, &d->pool, &d->offset))
      return segops_client_err(e, SEGOPS_E_NOMEM, "%s: no shared memory left for output %s", call->op,
                               call->out_name[k]);
    pl->out_place[k] = p;
    pl->out_copy[k] = true;
    return SEGOPS_OK;
  }
  void *p = segops_client_alloc(t->mem, (size_t)need);
  if (!p || !segops_mem_locate(t->mem, p, (size_t)need, &d->pool, &d->offset)) {
    if (p) free(p); /* heap memory: the pools could not grow */
    return segops_client_err(e, SEGOPS_E_NOMEM, "%s: no shared memory left for output %s", call->op, call->out_name[k]);
  }
  d->nbytes = need;
  pl->out_place[k] = p;
  pl->out_alloc[k] = true;
  return SEGOPS_OK;
}

static int place_call(native_t *t, placed *pl, const segops_tcall *call, segops_error *e) {
  segops_ring_request *r = &pl->req;
  r->fn = (uint32_t)call->fn;
  r->want = call->want;
  r->num_segments = call->num_segments;
  int rc = SEGOPS_OK;
  for (int j = 0; j < call->n_in && rc == SEGOPS_OK; j++)
    rc = place_input(t, pl, call->op, call->in_name[j], call->in[j], &r->in[j], e);
  if (rc == SEGOPS_OK) rc = place_input(t, pl, call->op, "idx", call->idx, &r->idx, e);
  if (rc == SEGOPS_OK && !call->idx) r->idx.flags = 0; /* idx is required: the daemon says so */
  /* SEGOPS_REQ_DTYPE (JSON's top-level "dtype") is not sent: a call without a float input answers
   * float64, as over HTTP with msgpack bodies and in "local" (proto/native.md, The ring). */
  for (int k = 0; k < call->n_out && rc == SEGOPS_OK; k++)
    if (call->out[k]) rc = place_output(t, pl, call, k, e);
  return rc;
}

/* Claims a free slot of c: its index, or -1 when none came free before deadline. */
static int slot_claim(chan *c, double deadline) {
  for (unsigned i = 0;; i++) {
    uint_fast64_t m = atomic_load(&c->free_slots);
    while (m) {
      int k = __builtin_ctzll((unsigned long long)m);
      if (atomic_compare_exchange_weak(&c->free_slots, &m, m & ~((uint_fast64_t)1 << k))) return k;
    }
    if (atomic_load(&c->broken) || ((i & 15u) == 0 && segops_client_now() >= deadline)) return -1;
    sleep_s(20e-6);
  }
}

static void slot_release(chan *c, int k) {
  __atomic_store_n(&slot_at(c, (uint32_t)k)->state, SEGOPS_SLOT_FREE, __ATOMIC_RELEASE);
  atomic_fetch_or(&c->free_slots, (uint_fast64_t)1 << k);
}

/* Frees the memory of timed-out calls whose slots the daemon has answered since. */
static void sweep_abandoned(chan *c) {
  if (!c->ab) return;
  pthread_mutex_lock(&c->ab_mu);
  for (abandoned **pp = &c->ab; *pp;) {
    abandoned *a = *pp;
    uint32_t st = __atomic_load_n(&slot_at(c, a->slot)->state, __ATOMIC_ACQUIRE) & SEGOPS_SLOT_STATE_MASK;
    if (st != SEGOPS_SLOT_SUBMITTED) {
      *pp = a->next;
      slot_release(c, (int)a->slot);
      unhold_abandoned(c, a);
    } else {
      pp = &a->next;
    }
  }
  pthread_mutex_unlock(&c->ab_mu);
}

/* Waits for slot k's answer: spinning for spin_us, then asleep on its state. SEGOPS_OK when it
 * is DONE; SEGOPS_E_CONNECTION when the daemon went away; SEGOPS_E_TIMEOUT at the deadline. */
static int await(chan *c, uint32_t k, int spin_us, double deadline) {
  uint32_t *st = &slot_at(c, k)->state;
  double spin_until = segops_client_now() + spin_us * 1e-6;
  for (unsigned i = 0;; i++) {
    if ((__atomic_load_n(st, __ATOMIC_ACQUIRE) & SEGOPS_SLOT_STATE_MASK) == SEGOPS_SLOT_DONE) return SEGOPS_OK;
    if ((i & 63u) == 0 && segops_client_now() >= spin_until) break;
    segops_chan_cpu_relax();
  }
  for (;;) {
    uint32_t v = __atomic_load_n(st, __ATOMIC_ACQUIRE);
    if ((v & SEGOPS_SLOT_STATE_MASK) == SEGOPS_SLOT_DONE) return SEGOPS_OK;
    double now = segops_client_now();
    if (now >= deadline) return SEGOPS_E_TIMEOUT;
    if (peer_gone(c)) return SEGOPS_E_CONNECTION;
    /* Say we sleep (the daemon then wakes us), unless the answer came meanwhile. */
    if (!(v & SEGOPS_SLOT_WAITING) &&
        !__atomic_compare_exchange_n(st, &v, v | SEGOPS_SLOT_WAITING, false, __ATOMIC_SEQ_CST, __ATOMIC_ACQUIRE))
      continue;
    v |= SEGOPS_SLOT_WAITING;
    double nap = deadline - now < SLEEP_S ? deadline - now : SLEEP_S;
    segops_chan_futex_wait(st, v, nap);
  }
}

/* The answer of a successful call into the caller's arrays (copies out where needed). */
static int take_outputs(const segops_tcall *call, placed *pl, const segops_ring_answer *a, segops_error *e) {
  for (int k = 0; k < call->n_out; k++) {
    segops_array *o = call->out[k];
    if (!o) continue;
    const segops_ring_shape *sh = &a->out[k];
    segops_array got = {(segops_dtype)sh->dtype, (int)sh->ndim, {0}, NULL, 0};
    if (sh->dtype > SEGOPS_F64 || sh->ndim > SEGOPS_MAX_NDIM)
      return segops_client_err(e, SEGOPS_E_PROTOCOL, "%s: the daemon's answer for %s has a bad shape", call->op,
                               call->out_name[k]);
    for (uint32_t d = 0; d < sh->ndim; d++) got.shape[d] = sh->shape[d];
    int64_t nb = array_bytes(&got);
    if (nb < 0 || (uint64_t)nb != pl->out_need[k] || (uint64_t)nb > pl->req.out[k].nbytes)
      return segops_client_err(e, SEGOPS_E_PROTOCOL, "%s: the daemon's answer for %s does not fit its place", call->op,
                               call->out_name[k]);
    if (pl->out_copy[k] && nb) memcpy(o->data, pl->out_place[k], (size_t)nb);
    if (pl->out_alloc[k]) {
      o->data = pl->out_place[k];
      pl->out_alloc[k] = false; /* the caller's now */
    }
    o->dtype = got.dtype;
    o->ndim = got.ndim;
    memcpy(o->shape, got.shape, sizeof o->shape);
    o->nbytes = (size_t)nb;
  }
  return SEGOPS_OK;
}

static int answer_error(const segops_ring_answer *a, segops_error *e) {
  int code = a->status < 0 && a->status > -100 ? a->status : SEGOPS_E_INTERNAL;
  if (e) {
    e->code = code;
    e->http_status = segops_err_status(code);
    memcpy(e->name, a->name, sizeof e->name);
    e->name[sizeof e->name - 1] = 0;
    size_t n = sizeof a->message < sizeof e->message ? sizeof a->message : sizeof e->message;
    memcpy(e->message, a->message, n);
    e->message[n - 1] = 0;
  }
  return code;
}

/* A timed-out call: its slot stays taken, and every pool block the daemon may still read or write
 * for it (the copies and outputs this library allocated, given back once unheld, and the caller's
 * own outputs in place) stays held until the daemon answers the slot (sweep_abandoned) or ends the
 * channel (chan_destroy). */
static void abandon(native_t *t, chan *c, uint32_t k, placed *pl) {
  abandoned *a = calloc(1, sizeof *a);
  void *blocks[SEGOPS_MAX_INPUTS + 1 + 2 * SEGOPS_MAX_OUTPUTS];
  int n = 0;
  for (int i = 0; i < pl->ntmp; i++)
    if (segops_mem_hold(t->mem, pl->tmp[i])) blocks[n++] = pl->tmp[i];
  for (int o = 0; o < SEGOPS_MAX_OUTPUTS; o++) /* out_copy places are among tmp */
    if (pl->out_place[o] && !pl->out_copy[o] && segops_mem_hold(t->mem, pl->out_place[o]))
      blocks[n++] = pl->out_place[o];
  placed_free(t, pl); /* held: given back when unheld */
  for (int o = 0; o < SEGOPS_MAX_OUTPUTS; o++)
    if (pl->out_alloc[o]) {
      segops_mem_release(t->mem, pl->out_place[o]);
      pl->out_alloc[o] = false;
    }
  if (!a) return; /* the slot and the blocks stay taken: never reused under the daemon's pen */
  a->slot = k;
  memcpy(a->held, blocks, (size_t)n * sizeof blocks[0]);
  a->n = n;
  pthread_mutex_lock(&c->ab_mu);
  a->next = c->ab;
  c->ab = a;
  pthread_mutex_unlock(&c->ab_mu);
}

/* How one try on a channel ended, beyond its code. */
typedef enum { TRY_DONE, TRY_GONE, TRY_DRAINING } try_end;

/* One try on channel c: TRY_GONE when its daemon went away (the call was not answered), TRY_DRAINING
 * when it answered that it drains; either way the channel is broken and a new one is opened for
 * the next call. */
static int call_on(native_t *t, chan *c, const segops_tcall *call, placed *pl, double deadline, try_end *end,
                   segops_error *e) {
  *end = TRY_DONE;
  sweep_abandoned(c);
  bool gone = false;
  int rc = send_pools(c, deadline, &gone, e);
  if (rc) {
    /* A refused pool leaves the channel as it was; anything else leaves the exchange unknown. */
    if (gone) *end = rc == SEGOPS_E_UNAVAILABLE ? TRY_DRAINING : TRY_GONE;
    if (gone || rc == SEGOPS_E_TIMEOUT || rc == SEGOPS_E_PROTOCOL || rc == SEGOPS_E_CONNECTION)
      atomic_store(&c->broken, true);
    return rc;
  }
  double left = deadline - segops_client_now();
  pl->req.timeout_us = left > 0 ? (uint64_t)(left * 1e6) + 1 : 1;
  int k = slot_claim(c, deadline);
  if (k < 0) {
    bool broken = atomic_load(&c->broken);
    *end = broken ? TRY_GONE : TRY_DONE;
    return segops_client_err(e, broken ? SEGOPS_E_CONNECTION : SEGOPS_E_TIMEOUT,
                             "%s: no free slot on the native channel before the %s", call->op,
                             broken ? "channel broke" : "deadline");
  }
  segops_ring_slot *s = slot_at(c, (uint32_t)k);
  uint64_t seq = atomic_fetch_add(&c->seq, 1) + 1;
  memcpy(&s->req, &pl->req, sizeof s->req);
  s->seq = seq;
  __atomic_store_n(&s->state, SEGOPS_SLOT_SUBMITTED, __ATOMIC_RELEASE);
  segops_chan_ring_doorbell(c->hdr);
  rc = await(c, (uint32_t)k, t->spin_us, deadline);
  if (rc == SEGOPS_E_TIMEOUT) {
    abandon(t, c, (uint32_t)k, pl);
    return segops_client_err(e, SEGOPS_E_TIMEOUT, "%s: no answer from the native channel before the deadline",
                             call->op);
  }
  if (rc == SEGOPS_E_CONNECTION) {
    atomic_store(&c->broken, true);
    *end = TRY_GONE;
    slot_release(c, k);
    return segops_client_err(e, SEGOPS_E_CONNECTION, "%s: the native channel's daemon went away during the call",
                             call->op);
  }
  segops_ring_answer a;
  memcpy(&a, &s->ans, sizeof a);
  slot_release(c, k);
  if (a.seq != seq) {
    atomic_store(&c->broken, true);
    return segops_client_err(e, SEGOPS_E_PROTOCOL, "%s: the native channel answered another call", call->op);
  }
  if (a.status == SEGOPS_E_UNAVAILABLE) { /* draining: this daemon goes away */
    atomic_store(&c->broken, true);
    *end = TRY_DRAINING;
    return answer_error(&a, e);
  }
  if (a.status != SEGOPS_OK) return answer_error(&a, e);
  return take_outputs(call, pl, &a, e);
}

/* The call on the current channel. When that channel was open before this call and its daemon is
 * found gone, the channel is opened once more (a restarted daemon may be on the socket already; a
 * missing one refuses at once) and the call sent there; otherwise, or when that fails, the daemon's
 * going is reported (CONNECTION, or UNAVAILABLE for a drain) for client.c to wait or move on. */
static int send_call(native_t *t, const segops_tcall *call, placed *pl, double deadline, segops_error *e) {
  bool fresh, gone;
  chan *c = chan_get(t, deadline, &fresh, &gone, e);
  if (!c) return e->code;
  try_end end;
  int rc = call_on(t, c, call, pl, deadline, &end, e);
  chan_put(c);
  if (end != TRY_GONE || fresh) return rc;
  double soon = segops_client_now() + RECONNECT_S;
  segops_error again;
  c = chan_get(t, soon < deadline ? soon : deadline, &fresh, &gone, &again);
  if (!c) return rc; /* the first failure says what happened */
  rc = call_on(t, c, call, pl, deadline, &end, e);
  chan_put(c);
  return rc;
}

static int native_call(segops_transport *tp, const segops_tcall *call, double deadline, segops_error *e) {
  native_t *t = (native_t *)tp;
  segops_error own;
  if (!e) e = &own;
  placed pl;
  memset(&pl, 0, sizeof pl);
  int rc = place_call(t, &pl, call, e);
  if (rc == SEGOPS_OK) rc = send_call(t, call, &pl, deadline, e);
  for (int k = 0; k < SEGOPS_MAX_OUTPUTS; k++)
    if (pl.out_alloc[k]) segops_mem_release(t->mem, pl.out_place[k]);
  placed_free(t, &pl);
  return rc;
}

static int native_info(segops_transport *tp, char **json, double deadline, segops_error *e) {
  (void)tp, (void)json, (void)deadline;
  return segops_client_err(e, SEGOPS_E_NOT_IMPLEMENTED,
                           "the native channel carries calls only; ask the daemon's HTTP address for /v1/info");
}

static void native_close(segops_transport *tp) {
  native_t *t = (native_t *)tp;
  if (!t) return;
  forget_parent_chan(t);
  if (t->cur) chan_put(t->cur);
  if (t->token) {
    explicit_bzero(t->token, strlen(t->token));
    free(t->token);
  }
  pthread_mutex_destroy(&t->mu);
  free(t);
}

/* forget: native_close is a forked child's too (the parent's channel is left alone). */
static const segops_transport_vt NATIVE_VT = {"native", native_call, native_info, native_close, native_close};

static int default_spin_us(void) {
  const char *v = getenv("SEGOPS_CLIENT_SPIN_US");
  if (v && *v) {
    char *end;
    long n = strtol(v, &end, 10);
    if (!*end && n >= 0 && n <= 1000000) return (int)n;
  }
  return DEFAULT_SPIN_US;
}

segops_transport *segops_native_open(const char *path, struct segops_mem *mem, const char *token, int spin_us,
                                     uid_t uid, pid_t pid, double deadline, segops_error *e) {
  pthread_once(&fork_once, register_fork);
  if (!mem) {
    segops_client_err(e, SEGOPS_E_NOT_IMPLEMENTED, "the native channel needs memfds, which this system does not give");
    return NULL;
  }
  if (!path || !path[0] || strlen(path) >= sizeof((native_t *)0)->path) {
    segops_client_err(e, SEGOPS_E_INVALID_ARGUMENT, "the native channel's socket path is empty or too long");
    return NULL;
  }
  native_t *t = calloc(1, sizeof *t);
  if (!t || (token && !(t->token = strdup(token)))) {
    free(t);
    segops_client_err(e, SEGOPS_E_NOMEM, "out of memory");
    return NULL;
  }
  t->base.vt = &NATIVE_VT;
  snprintf(t->path, sizeof t->path, "%s", path);
  t->mem = mem;
  t->uid = uid;
  t->pid = pid;
  t->spin_us = spin_us >= 0 ? spin_us : default_spin_us();
  t->epoch = atomic_load(&fork_epoch);
  pthread_mutex_init(&t->mu, NULL);
  bool fresh, gone;
  chan *c = chan_get(t, deadline, &fresh, &gone, e);
  if (!c) {
    native_close(&t->base);
    return NULL;
  }
  chan_put(c);
  t->pid = 0; /* a restarted daemon has another pid: its uid and its socket's owner still hold */
  return &t->base;
}

/* native_conn.c: a native channel of libsegops (native_client.h): connecting without waiting, the
 * peer's identity checked before anything goes out, the ring made, the handshake, the pools handed
 * over, and a transport's current channel, opened again once when it broke. A daemon that goes
 * away mid-call is reported at once (SEGOPS_E_CONNECTION; a drain answer SEGOPS_E_UNAVAILABLE):
 * waiting, back-off and moving to another daemon are client.c's (endpoints.c), which finds the
 * daemon's transport again and so hands the pools over again. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "native_client.h"

/* The daemon's end of the socket is closed (it died, or ended the channel). */
bool segops_nc_peer_gone(chan *c) {
  /* Not POLLIN: a control reply for another thread may be waiting there. */
  struct pollfd p = {c->sock, POLLRDHUP, 0};
  return poll(&p, 1, 0) > 0 && (p.revents & (POLLHUP | POLLRDHUP | POLLERR));
}

/* Frees a channel. Blocks of its timed-out calls that the daemon may still write stay held until
 * it closes its end, which it does once those calls are over: this side shuts its sending half
 * (the daemon sees the channel end) and hands the socket to mem.h, which unholds them then. */
static void chan_destroy(chan *c) {
  void *held[NATIVE_SLOTS * NATIVE_CALL_BLOCKS];
  int n = c->ring ? segops_nc_still_held(c, held, (int)(sizeof held / sizeof held[0])) : 0;
  if (n && shutdown(c->sock, SHUT_WR) == 0 && segops_mem_unhold_on_hangup(c->mem, c->sock, held, n)) c->sock = -1;
  if (c->ring) munmap(c->ring, c->ring_len);
  if (c->ring_fd >= 0) close(c->ring_fd);
  if (c->sock >= 0) close(c->sock);
  pthread_mutex_destroy(&c->ctl);
  pthread_mutex_destroy(&c->ab_mu);
  free(c);
}

void segops_nc_put(chan *c) {
  if (c && atomic_fetch_sub(&c->refs, 1) == 1) chan_destroy(c);
}

/* ---- messages ---- */

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
  c->ring_len = (size_t)SEGOPS_RING_BYTES(NATIVE_SLOTS);
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
  c->hdr->slot_count = NATIVE_SLOTS;
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
  m.slot_count = NATIVE_SLOTS;
  if (segops_chan_send(c->sock, &m, sizeof m, c->ring_fd) != 0) {
    *gone = true;
    return segops_client_err(e, SEGOPS_E_CONNECTION, "the native channel closed during the handshake: %s",
                             strerror(errno));
  }
  return recv_reply(c->sock, SEGOPS_MSG_OK, sizeof r.ok, &r, deadline, gone, e);
}

/* Hands over the pools made since the last hand-over on this channel (in id order), so that a
 * call never names a pool the daemon does not have. */
int segops_nc_send_pools(chan *c, double deadline, bool *gone, segops_error *e) {
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
  if (rc == SEGOPS_OK) rc = segops_nc_send_pools(c, deadline, gone, e);
  if (rc) {
    chan_destroy(c);
    return NULL;
  }
  return c;
}

/* The current channel with a reference for the caller, opened when there is none or it broke (one
 * attempt); NULL with e filled (*gone as chan_open's). *fresh: opened by this call. After a fork
 * the parent's is left alone. */
chan *segops_nc_get(native_t *t, double deadline, bool *fresh, bool *gone, segops_error *e) {
  pthread_mutex_lock(&t->mu);
  segops_nc_forget_parent(t);
  if (t->cur && atomic_load(&t->cur->broken)) {
    segops_nc_put(t->cur);
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

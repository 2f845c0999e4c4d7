/* native_channel.c: one native channel's thread: the handshake (version, token, the ring's memfd),
 * the control messages that hand pools over, and the ring: scan for submitted slots, run them,
 * then wait for the doorbell (bounded spinning, then a futex sleep; a client that goes and a stop
 * ring it). Ends the channel: waits for its calls in flight, then unpins, unmaps and closes
 * everything it holds, the socket last (a client reads its close as "no call of mine runs"). */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "errors.h"
#include "log.h"
#include "metrics.h"
#include "native_internal.h"
#include "segops_token.h"
#include "shares.h"

/* A sleeping channel is woken by its client's doorbell, by the accept thread when the client's
 * socket hangs up (native_server.c), and by a stop, so it sleeps without a timeout and an idle
 * channel costs no CPU. Only a channel the accept thread could not watch looks at its socket this
 * often by itself (bounding how late its dead client is noticed). */
#define UNWATCHED_SLEEP_S 1.0
/* Handshake messages must arrive within this. */
#define HANDSHAKE_S 5
/* Wake-ups in a row that find neither a call nor a control message before the channel naps:
 * a legitimate client rings only with one of them, so only a doorbell flood gets here. */
#define EMPTY_WAKES_MAX 256
/* How often a spinning channel thread looks at its client's CPU time (wait_doorbell). */
#define SPIN_PROBE_S 10e-6

void segops_native_ring_wake(native_channel *ch) {
  __atomic_fetch_add(&ch->hdr->doorbell, 1, __ATOMIC_SEQ_CST);
  segops_chan_futex_wake(&ch->hdr->doorbell, 1);
}

/* ---- messages -------------------------------------------------------------------------------- */

typedef union {
  segops_msg_head h;
  segops_msg_hello hello;
  segops_msg_ring ring;
  segops_msg_pool pool;
  char raw[SEGOPS_MSG_MAX];
} any_msg;

/* One message and at most one descriptor (*fd, -1 when none; extra ones are closed). Returns its
 * bytes, 0 at end of stream, -1 on error (errno: EAGAIN with MSG_DONTWAIT and nothing there). */
static ssize_t recv_msg(int sock, any_msg *m, int *fd, int flags) {
  return segops_chan_recv(sock, m, sizeof *m, fd, flags);
}

/* Sends ERROR (code, message) on a socket; the caller decides whether the channel goes on. */
void segops_native_send_error(int sock, int code, const char *message) {
  segops_msg_error e;
  memset(&e, 0, sizeof e);
  segops_chan_head(&e.h, SEGOPS_MSG_ERROR, sizeof e);
  e.code = code;
  snprintf(e.name, sizeof e.name, "%s", segops_err_code(code));
  snprintf(e.message, sizeof e.message, "%s", message);
  (void)segops_chan_send(sock, &e, sizeof e, -1);
}

static void send_ok(native_channel *ch, uint32_t id) {
  segops_msg_ok ok;
  memset(&ok, 0, sizeof ok);
  segops_chan_head(&ok.h, SEGOPS_MSG_OK, sizeof ok);
  ok.id = id;
  (void)segops_chan_send(ch->sock, &ok, sizeof ok, -1);
}

/* A message's head: ours, of the size received. SEGOPS_OK or an error with its message. */
static int check_head(const any_msg *m, ssize_t n, char *err, size_t errlen) {
  if (n < (ssize_t)sizeof(segops_msg_head) || m->h.magic != SEGOPS_MSG_MAGIC)
    return segops_errf(SEGOPS_E_INVALID_ARGUMENT, err, errlen,
                       "not a segops native-channel message (%zd bytes, bad magic)", n);
  if (m->h.version != SEGOPS_NATIVE_VERSION)
    return segops_errf(SEGOPS_E_NOT_IMPLEMENTED, err, errlen,
                       "segopsd speaks native channel version %u, this client %u", SEGOPS_NATIVE_VERSION, m->h.version);
  if (m->h.size != (uint32_t)n)
    return segops_errf(SEGOPS_E_INVALID_ARGUMENT, err, errlen,
                       "malformed native-channel message: its head says %" PRIu32 " bytes, the packet has %zd",
                       m->h.size, n);
  return SEGOPS_OK;
}

/* ---- the handshake ------------------------------------------------------------------------------ */

/* HELLO -> WELCOME. SEGOPS_OK, or an error already answered (err holds it for the log). */
static int hello(native_channel *ch, char *err, size_t errlen) {
  segops_native *n = ch->srv;
  any_msg m;
  int fd;
  ssize_t got = recv_msg(ch->sock, &m, &fd, 0);
  if (fd >= 0) close(fd);
  if (got <= 0)
    return segops_errf(SEGOPS_E_INVALID_ARGUMENT, err, errlen, "no HELLO (%s)", got ? strerror(errno) : "closed");
  int rc = check_head(&m, got, err, errlen);
  if (rc == SEGOPS_OK && (m.h.type != SEGOPS_MSG_HELLO || got != (ssize_t)sizeof m.hello ||
                          m.hello.token_len > SEGOPS_TOKEN_BYTES || fd >= 0))
    rc = segops_errf(SEGOPS_E_INVALID_ARGUMENT, err, errlen, "the first message must be a HELLO (type %u, %zu bytes)",
                     SEGOPS_MSG_HELLO, sizeof m.hello);
  const char *token = n->d.cfg->token;
  if (rc == SEGOPS_OK && token && !segops_token_equal(m.hello.token, m.hello.token_len, token, strlen(token)))
    rc = segops_errf(SEGOPS_E_UNAUTHENTICATED, err, errlen,
                     "a valid token is required (the one segopsd was given with --token-file or SEGOPS_TOKEN)");
  if (rc == SEGOPS_OK && !n->d.takes_work(n->d.ctx))
    rc = segops_errf(SEGOPS_E_UNAVAILABLE, err, errlen, "segopsd is draining (it is shutting down)");
  if (rc) {
    segops_native_send_error(ch->sock, rc, err);
    return rc;
  }
  segops_msg_welcome w;
  memset(&w, 0, sizeof w);
  segops_chan_head(&w.h, SEGOPS_MSG_WELCOME, sizeof w);
  w.max_slots = SEGOPS_RING_MAX_SLOTS;
  w.max_pools = SEGOPS_NATIVE_MAX_POOLS;
  w.max_map_bytes = (uint64_t)n->d.cfg->native_max_map_bytes;
  w.daemon_pid = (uint32_t)getpid();
  if (segops_chan_send(ch->sock, &w, sizeof w, -1) != 0)
    return segops_errf(SEGOPS_E_INVALID_ARGUMENT, err, errlen, "cannot send WELCOME: %s", strerror(errno));
  return SEGOPS_OK;
}

/* The ring's memfd, checked and mapped; its header as the client wrote it. */
static int take_ring(native_channel *ch, const any_msg *m, ssize_t got, int fd, char *err, size_t errlen) {
  int rc = check_head(m, got, err, errlen);
  if (rc == SEGOPS_OK && (m->h.type != SEGOPS_MSG_RING || got != (ssize_t)sizeof m->ring || fd < 0))
    rc = segops_errf(SEGOPS_E_INVALID_ARGUMENT, err, errlen,
                     "after WELCOME the client sends RING (type %u, %zu bytes) with the ring's memfd", SEGOPS_MSG_RING,
                     sizeof m->ring);
  if (rc == SEGOPS_OK && (m->ring.slot_count < 1 || m->ring.slot_count > SEGOPS_RING_MAX_SLOTS))
    rc = segops_errf(SEGOPS_E_INVALID_ARGUMENT, err, errlen, "the ring's slot count %" PRIu32 " is not in [1, %u]",
                     m->ring.slot_count, SEGOPS_RING_MAX_SLOTS);
  if (rc) {
    if (fd >= 0) close(fd);
    return rc;
  }
  rc = segops_native_mem_open(&ch->ring, fd, 0, (uint64_t)ch->srv->d.cfg->native_max_map_bytes, (int64_t)ch->uid,
                              "the ring", err, errlen);
  if (rc) return rc;
  uint32_t slots = m->ring.slot_count;
  /* The ring and the daemon's bookkeeping for its slots (about 4 KiB a slot) count against the
   * uid's share of mapped memory: a uid's channels cannot hold the daemon's memory for everyone. */
  uint64_t charge = ch->ring.size + (uint64_t)slots * (sizeof *ch->calls + sizeof *ch->busy);
  int why = segops_share_take(SEGOPS_SHARE_MAPPED, (int64_t)ch->uid, charge);
  if (why) return segops_share_refusal(why, SEGOPS_SHARE_MAPPED, (int64_t)ch->uid, charge, "the ring", err, errlen);
  ch->state_bytes = charge - ch->ring.size;
  ch->mapped = ch->ring.size; /* given back with the channel, whatever fails below */
  segops_ring_header h;
  memcpy(&h, ch->ring.base, ch->ring.size < sizeof h ? ch->ring.size : sizeof h);
  if (ch->ring.size < SEGOPS_RING_BYTES(slots))
    return segops_errf(SEGOPS_E_INVALID_ARGUMENT, err, errlen,
                       "the ring's memfd is %zu bytes; %" PRIu32 " slots need %" PRIu64, ch->ring.size, slots,
                       SEGOPS_RING_BYTES(slots));
  if (h.magic != SEGOPS_RING_MAGIC || h.version != SEGOPS_NATIVE_VERSION || h.slot_count != slots ||
      h.slot_bytes != SEGOPS_RING_SLOT_BYTES || h.header_bytes != SEGOPS_RING_HEADER_BYTES)
    return segops_errf(SEGOPS_E_INVALID_ARGUMENT, err, errlen,
                       "the ring's header is not a version %u ring of %" PRIu32
                       " slots (magic, version, slot count "
                       "and sizes as proto/segops_ring.h defines them)",
                       SEGOPS_NATIVE_VERSION, slots);
  ch->calls = calloc(slots, sizeof *ch->calls);
  ch->busy = calloc(slots, sizeof *ch->busy);
  if (!ch->calls || !ch->busy) return segops_errf(SEGOPS_E_NOMEM, err, errlen, "out of memory for %u slots", slots);
  ch->nslots = slots;
  segops_metrics_native_bytes((int64_t)ch->ring.size, 0);
  pthread_mutex_lock(&ch->srv->mu);
  ch->hdr = (segops_ring_header *)(void *)ch->ring.base; /* published for segops_native_stop's wake-up */
  pthread_mutex_unlock(&ch->srv->mu);
  return SEGOPS_OK;
}

/* HELLO, WELCOME, RING, OK; on any refusal the ERROR is sent and the channel ends. */
static int handshake(native_channel *ch) {
  struct timeval tv = {HANDSHAKE_S, 0};
  setsockopt(ch->sock, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(ch->sock, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  char err[512];
  int rc = hello(ch, err, sizeof err);
  if (rc == SEGOPS_OK) {
    any_msg m;
    int fd;
    ssize_t got = recv_msg(ch->sock, &m, &fd, 0);
    if (got <= 0) {
      rc = segops_errf(SEGOPS_E_INVALID_ARGUMENT, err, sizeof err, "no RING (%s)", got ? strerror(errno) : "closed");
    } else {
      rc = take_ring(ch, &m, got, fd, err, sizeof err);
      if (rc) segops_native_send_error(ch->sock, rc, err);
    }
  }
  if (rc) {
    unsigned skipped;
    if (rc == SEGOPS_E_NOT_IMPLEMENTED)
      SEGOPS_LOGW("native channel %lu (pid %d): %s", ch->id, (int)ch->pid, err);
    else if (segops_native_may_warn(ch->uid, &skipped))
      SEGOPS_LOGW("native channel %lu (pid %d uid %u) refused: %s (%u more of this uid's not logged)", ch->id,
                  (int)ch->pid, (unsigned)ch->uid, err, skipped);
    else
      SEGOPS_LOGD("native channel %lu (pid %d) refused: %s", ch->id, (int)ch->pid, err);
    return rc;
  }
  send_ok(ch, 0);
  SEGOPS_LOGD("native channel %lu (pid %d): ring of %u slots", ch->id, (int)ch->pid, ch->nslots);
  return SEGOPS_OK;
}

/* ---- pools --------------------------------------------------------------------------------------- */

/* Whether mem's object is already the ring or a pool of this channel. */
static const char *already_here(const native_channel *ch, const segops_native_mem *mem, char *buf, size_t len) {
  if (mem->dev == ch->ring.dev && mem->ino == ch->ring.ino) return "the ring";
  for (uint32_t k = 0; k < ch->npools; k++)
    if (mem->dev == ch->pools[k].dev && mem->ino == ch->pools[k].ino) {
      snprintf(buf, len, "pool %" PRIu32, k);
      return buf;
    }
  return NULL;
}

/* POOL: checked, mapped, pinned within the cap, published; OK or ERROR (the channel goes on). */
static void take_pool(native_channel *ch, const segops_msg_pool *p, ssize_t got, int fd) {
  const segops_config *cfg = ch->srv->d.cfg;
  char err[512], what[48];
  snprintf(what, sizeof what, "pool %" PRIu32, p->pool_id);
  int rc = SEGOPS_OK;
  if (got != (ssize_t)sizeof *p || fd < 0)
    rc = segops_errf(SEGOPS_E_INVALID_ARGUMENT, err, sizeof err, "a POOL message is %zu bytes with one memfd",
                     sizeof *p);
  else if (p->pool_id != ch->npools)
    rc = segops_errf(SEGOPS_E_INVALID_ARGUMENT, err, sizeof err,
                     "pools are handed over in order: the next is pool %" PRIu32 ", not %" PRIu32, ch->npools,
                     p->pool_id);
  else if (ch->npools >= SEGOPS_NATIVE_MAX_POOLS)
    rc = segops_errf(SEGOPS_E_RESOURCE_EXHAUSTED, err, sizeof err, "a channel may hand over %d pools at most",
                     SEGOPS_NATIVE_MAX_POOLS);
  if (rc) {
    if (fd >= 0) close(fd);
    segops_native_send_error(ch->sock, rc, err);
    return;
  }
  segops_native_mem *mem = &ch->pools[ch->npools];
  uint64_t cap = (uint64_t)cfg->native_max_map_bytes;
  rc = segops_native_mem_open(mem, fd, p->size, cap > ch->mapped ? cap - ch->mapped : 0, (int64_t)ch->uid, what, err,
                              sizeof err);
  char where[32];
  const char *dup = rc ? NULL : already_here(ch, mem, where, sizeof where);
  if (dup) {
    segops_native_mem_close(mem, NULL);
    rc = segops_errf(SEGOPS_E_INVALID_ARGUMENT, err, sizeof err,
                     "%s is the same memory as %s, already handed over on this channel", what, dup);
  }
  int why = rc ? 0 : segops_share_take(SEGOPS_SHARE_MAPPED, (int64_t)ch->uid, mem->size);
  if (why) {
    segops_native_mem_close(mem, NULL);
    rc = segops_share_refusal(why, SEGOPS_SHARE_MAPPED, (int64_t)ch->uid, mem->size, what, err, sizeof err);
  }
  if (rc) {
    segops_native_send_error(ch->sock, rc, err);
    return;
  }
  /* Pinned within the channel's cap and the uid's share of pinned memory; beyond, used unpinned. */
  uint64_t pinned = 0;
  if (ch->pinned + mem->size <= (uint64_t)cfg->native_max_pinned_bytes && ch->srv->d.backend->host_register &&
      segops_share_take(SEGOPS_SHARE_PINNED, (int64_t)ch->uid, mem->size) == 0) {
    if (segops_native_mem_pin(mem, ch->srv->d.backend))
      pinned = mem->size;
    else
      segops_share_give(SEGOPS_SHARE_PINNED, (int64_t)ch->uid, mem->size);
  }
  ch->pinned += pinned;
  ch->mapped += mem->size;
  ch->views[ch->npools] = (segops_native_view){mem->base, mem->size};
  ch->npools++;
  segops_metrics_native_bytes((int64_t)mem->size, (int64_t)pinned);
  SEGOPS_LOGD("native channel %lu: %s, %zu bytes%s", ch->id, what, mem->size, pinned ? ", pinned" : "");
  send_ok(ch, p->pool_id);
}

/* The control messages waiting on the socket: 1 when one was handled, 0 when none is there, -1
 * when the channel ends (the client closed it, or broke the protocol). */
static int control(native_channel *ch) {
  any_msg m;
  int fd;
  ssize_t got = recv_msg(ch->sock, &m, &fd, MSG_DONTWAIT);
  if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return 0;
  if (got <= 0) return -1;
  char err[512];
  int rc = check_head(&m, got, err, sizeof err);
  if (rc == SEGOPS_OK && m.h.type == SEGOPS_MSG_POOL) {
    take_pool(ch, &m.pool, got, fd);
    return 1;
  }
  if (fd >= 0) close(fd);
  if (rc == SEGOPS_OK)
    rc = segops_errf(SEGOPS_E_INVALID_ARGUMENT, err, sizeof err,
                     "unexpected message type %" PRIu32 " on an open channel", m.h.type);
  unsigned skipped;
  if (segops_native_may_warn(ch->uid, &skipped))
    SEGOPS_LOGW("native channel %lu (pid %d uid %u) closed: %s (%u more of this uid's not logged)", ch->id,
                (int)ch->pid, (unsigned)ch->uid, err, skipped);
  else
    SEGOPS_LOGD("native channel %lu (pid %d) closed: %s", ch->id, (int)ch->pid, err);
  segops_native_send_error(ch->sock, rc, err);
  return -1;
}

/* ---- the ring -------------------------------------------------------------------------------------- */

/* Starts every submitted slot the daemon does not hold yet; the last one may run inline. */
static int scan(native_channel *ch) {
  uint32_t ready[SEGOPS_RING_MAX_SLOTS];
  int n = 0;
  for (uint32_t k = 0; k < ch->nslots; k++) {
    if (atomic_load_explicit(&ch->busy[k], memory_order_acquire)) continue;
    uint32_t st = __atomic_load_n(&segops_native_slot(ch, k)->state, __ATOMIC_ACQUIRE);
    if ((st & SEGOPS_SLOT_STATE_MASK) == SEGOPS_SLOT_SUBMITTED) ready[n++] = k;
  }
  for (int i = 0; i < n; i++) {
    atomic_store_explicit(&ch->busy[ready[i]], 1, memory_order_relaxed);
    segops_native_call_start(ch, ready[i], i == n - 1);
  }
  return n;
}

/* The client process's CPU time in seconds (its CPU clock, clock_getcpuclockid), or -1. Read from
 * another process, that clock moves only at scheduler ticks and context switches: a client running
 * without a pause looks idle between them, so it serves only where caller_running cannot. */
static double client_cpu(const native_channel *ch) {
  struct timespec ts;
  if (!ch->has_cpuclk || clock_gettime(ch->cpuclk, &ts) != 0) return -1;
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Opens /proc/<pid>/task/<tid>/stat for the spin policy's looks (caller_running) in place of the
 * one open for another tid; stat_fd -1 when that fails (the looks then fall back to the CPU clock).
 * The accept thread opens the client's main thread's at the channel's start, so the channel holds
 * its one descriptor from then on, whichever of its client's threads calls. */
void segops_native_stat_open(native_channel *ch, int32_t tid) {
  if (ch->stat_fd >= 0) close(ch->stat_fd);
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/task/%d/stat", (int)ch->pid, (int)tid);
  ch->stat_fd = open(path, O_RDONLY | O_CLOEXEC);
  ch->stat_tid = tid;
}

/* Whether the client thread that last rang (the ring's caller_tid) is running on another CPU than
 * this thread's: 1 when its state in /proc/<pid>/task/<tid>/stat is R and its CPU (field 39) is not
 * ours, 0 when it sleeps, or waits for this very CPU (spinning would only keep it waiting), -1 when
 * that cannot be read (no tid told, another pid namespace, the thread gone). The state is live,
 * where the CPU times /proc and the CPU clocks give of another process move only at scheduler
 * ticks and context switches. The file stays open while the tid is the same (segops_native_stat_open).
 * The kernel finds task/<tid> only among the threads of <pid>, so a client that lies in caller_tid can only name
 * another thread of its own: to keep the daemon spinning it must keep one of its threads running,
 * at its own CPU. */
static int caller_running(native_channel *ch) {
  int32_t tid = __atomic_load_n(&ch->hdr->caller_tid, __ATOMIC_RELAXED);
  if (tid <= 0 || ch->pid <= 0) return -1;
  if (tid != ch->stat_tid) segops_native_stat_open(ch, tid);
  if (ch->stat_fd < 0) return -1;
  char buf[512]; /* "pid (comm) state ...": about 300 bytes, comm at most 16 */
  ssize_t r = pread(ch->stat_fd, buf, sizeof buf - 1, 0); /* 5 us here; with open and close, 13 */
  if (r <= 0) return -1;
  buf[r] = 0;
  const char *p = strrchr(buf, ')'); /* comm may hold spaces and parentheses */
  if (!p || p[1] != ' ' || !p[2]) return -1;
  if (p[2] != 'R') return 0;
  p += 2;
  for (int f = 3; f < 39 && p; f++) { /* to field 39, the CPU it runs or waits on */
    p = strchr(p, ' ');
    if (p) p++;
  }
  if (!p) return -1;
  return atoi(p) != sched_getcpu();
}

/* Waits until the doorbell moves from seen: spinning while the last call is recent (until
 * spin_until) and its client keeps calling, then asleep on the futex. The spin policy: the daemon
 * spins for a channel only while the client thread that last called is running (it computes, or
 * spins for its answer, and will call again soon), looked at every SPIN_PROBE_S; a client that
 * sleeps between calls gets the daemon asleep too, so a co-tenant pays for the daemon's spinning
 * with its own CPU. Where that thread cannot be looked at, the client process's CPU time must
 * advance at least half as fast as the clock. */
static void wait_doorbell(native_channel *ch, uint32_t seen, double spin_until) {
  uint32_t *db = &ch->hdr->doorbell;
  const atomic_bool *stop = &ch->srv->stopping;
  double t0 = 0, c0 = -1, next_probe = 0;
  for (unsigned i = 0;; i++) {
    if (__atomic_load_n(db, __ATOMIC_ACQUIRE) != seen) return;
    if ((i & 63u) == 0) {
      double now = segops_now();
      if (now >= spin_until || atomic_load_explicit(stop, memory_order_relaxed)) break;
      if (i == 0) {
        t0 = now, c0 = client_cpu(ch), next_probe = now + SPIN_PROBE_S;
      } else if (now >= next_probe) {
        int running = caller_running(ch);
        if (running == 0) break; /* the client sleeps: so does the daemon */
        if (running < 0 && c0 >= 0) {
          double c = client_cpu(ch);
          if (c >= 0 && c - c0 < (now - t0) / 2) break; /* the client is not running: sleep */
        }
        next_probe = now + SPIN_PROBE_S;
      }
    }
    segops_chan_cpu_relax();
  }
  /* Dekker with the client: it adds to the doorbell, then reads daemon_sleeps. */
  __atomic_store_n(&ch->hdr->daemon_sleeps, 1u, __ATOMIC_SEQ_CST);
  if (__atomic_load_n(db, __ATOMIC_SEQ_CST) == seen && !atomic_load(stop))
    segops_chan_futex_wait(db, seen, ch->watched ? -1.0 : UNWATCHED_SLEEP_S);
  __atomic_store_n(&ch->hdr->daemon_sleeps, 0u, __ATOMIC_RELAXED);
}

static void serve(native_channel *ch) {
  segops_native *n = ch->srv;
  const double spin = (double)n->d.cfg->native_spin_us * 1e-6;
  double last_work = segops_now();
  unsigned empty = 0;
  while (!atomic_load(&n->stopping)) {
    if (atomic_load(&ch->ring.damaged)) {
      SEGOPS_LOGD("native channel %lu (pid %d) closed: its ring lost pages under the daemon", ch->id, (int)ch->pid);
      break;
    }
    uint32_t seen = __atomic_load_n(&ch->hdr->doorbell, __ATOMIC_ACQUIRE);
    if (scan(ch)) {
      last_work = segops_now();
      empty = 0;
      continue;
    }
    /* No call: a control message, or the socket's end, may be what rang. */
    int c = control(ch);
    if (c < 0) break;
    if (c > 0) {
      empty = 0;
      continue;
    }
    if (++empty > EMPTY_WAKES_MAX) {
      struct timespec ts = {0, 1000000L};
      nanosleep(&ts, NULL);
    }
    wait_doorbell(ch, seen, last_work + spin);
  }
}

/* ---- the channel's end ----------------------------------------------------------------------------- */

static void channel_end(native_channel *ch) {
  segops_native *n = ch->srv;
  pthread_mutex_lock(&ch->mu);
  while (ch->inflight > 0) pthread_cond_wait(&ch->idle, &ch->mu);
  pthread_mutex_unlock(&ch->mu);
  pthread_mutex_lock(&n->mu);
  native_channel **pp = &n->channels;
  while (*pp && *pp != ch) pp = &(*pp)->next;
  if (*pp) *pp = ch->next;
  segops_native_unwatch(n, ch);
  pthread_mutex_unlock(&n->mu);
  for (uint32_t k = 0; k < ch->npools; k++) segops_native_mem_close(&ch->pools[k], n->d.backend);
  segops_native_mem_close(&ch->ring, n->d.backend);
  segops_metrics_native_bytes(-(int64_t)(ch->nslots ? ch->mapped : 0), -(int64_t)ch->pinned);
  segops_share_give(SEGOPS_SHARE_MAPPED, (int64_t)ch->uid, ch->mapped + ch->state_bytes);
  segops_share_give(SEGOPS_SHARE_PINNED, (int64_t)ch->uid, ch->pinned);
  close(ch->sock);
  if (ch->stat_fd >= 0) close(ch->stat_fd);
  free(ch->calls);
  free(ch->busy);
  pthread_cond_destroy(&ch->idle);
  pthread_mutex_destroy(&ch->mu);
  SEGOPS_LOGD("native channel %lu (pid %d) ended", ch->id, (int)ch->pid);
  segops_native_user_give(n, ch->uid);
  segops_metrics_native_channels(-1);
  free(ch);
  pthread_mutex_lock(&n->mu);
  n->live--;
  pthread_cond_broadcast(&n->gone);
  pthread_mutex_unlock(&n->mu);
}

void *segops_native_channel_main(void *arg) {
  native_channel *ch = arg;
  segops_metrics_native_channels(1);
  if (handshake(ch) == SEGOPS_OK) serve(ch);
  channel_end(ch);
  return NULL;
}

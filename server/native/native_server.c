/* native_server.c: the native channel's socket: its path, the accept thread (peer credentials
 * logged, per-user and total channel limits; it also watches every channel's socket and wakes the
 * channel whose client went), one thread per channel, and the stop. */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "errors.h"
#include "listen_unix.h"
#include "log.h"
#include "native_internal.h"
#include "shm_guard.h"

/* ---- the path ------------------------------------------------------------------------------ */

void segops_native_socket_path(const segops_config *cfg, int port, char *path, size_t len, bool *derived,
                               bool *own_dir) {
  *derived = false;
  *own_dir = false;
  path[0] = 0;
  if (!strcmp(cfg->native_socket, "off")) return;
  if (cfg->native_socket[0]) {
    snprintf(path, len, "%s", cfg->native_socket);
    return;
  }
  *derived = true;
  if (port > 0) {
    /* A directory of its own, which only this daemon's user (or root) can write: nobody else can
     * bind the path first, nor replace the socket while the daemon restarts, and several daemons
     * on one port (different addresses) never meet. Others may pass through it (0711) to reach
     * the socket, whose own mode is --socket-mode. */
    char dir[96];
    snprintf(dir, sizeof dir, "/tmp/segopsd-%d-XXXXXX", port);
    if (!mkdtemp(dir)) {
      SEGOPS_LOGW("native channel: cannot make a directory for its socket in /tmp: %s", strerror(errno));
      return;
    }
    if (chmod(dir, 0711) != 0) {
      SEGOPS_LOGW("native channel: cannot open %s to other users: %s", dir, strerror(errno));
      rmdir(dir);
      return;
    }
    if ((size_t)snprintf(path, len, "%s/native.sock", dir) >= len) {
      rmdir(dir);
      path[0] = 0;
      return;
    }
    *own_dir = true;
    return;
  }
  for (int k = 0; k < cfg->n_listen; k++)
    if (cfg->listen[k].is_unix) {
      if ((size_t)snprintf(path, len, "%s.native", cfg->listen[k].path) >= len) path[0] = 0;
      return;
    }
}

/* The directory segops_native_socket_path made for path, removed (it is empty once the socket
 * file went). */
static void remove_own_dir(const char *path) {
  char dir[108];
  snprintf(dir, sizeof dir, "%s", path);
  char *slash = strrchr(dir, '/');
  if (!slash || slash == dir) return;
  *slash = 0;
  if (rmdir(dir) != 0) SEGOPS_LOGW("native channel: cannot remove %s: %s", dir, strerror(errno));
}

const char *segops_native_path(const segops_native *n) { return n->path; }

/* ---- per-user limits ------------------------------------------------------------------------- */

#define MAX_USERS 1024
static struct {
  uid_t uid;
  int n;
} g_users[MAX_USERS];
static int g_total;

bool segops_native_user_take(segops_native *n, uid_t uid, char *err, size_t errlen) {
  const segops_config *c = n->d.cfg;
  pthread_mutex_lock(&n->mu);
  int free_k = -1, k;
  for (k = 0; k < MAX_USERS; k++) {
    if (g_users[k].n > 0 && g_users[k].uid == uid) break;
    if (g_users[k].n == 0 && free_k < 0) free_k = k;
  }
  bool ok = true;
  if (g_total >= c->max_connections) {
    snprintf(err, errlen, "segopsd has %d native channels open, its limit (--max-connections)", g_total);
    ok = false;
  } else if (k < MAX_USERS && g_users[k].n >= c->native_max_channels_per_uid) {
    snprintf(err, errlen, "user %u has %d native channels open, the limit per user (--native-max-channels-per-uid)",
             (unsigned)uid, g_users[k].n);
    ok = false;
  } else if (k == MAX_USERS && free_k < 0) {
    snprintf(err, errlen, "native channels are open for %d users, the most segopsd tracks", MAX_USERS);
    ok = false;
  }
  if (ok) {
    if (k == MAX_USERS) {
      k = free_k;
      g_users[k].uid = uid;
    }
    g_users[k].n++;
    g_total++;
  }
  pthread_mutex_unlock(&n->mu);
  return ok;
}

void segops_native_user_give(segops_native *n, uid_t uid) {
  pthread_mutex_lock(&n->mu);
  for (int k = 0; k < MAX_USERS; k++)
    if (g_users[k].n > 0 && g_users[k].uid == uid) {
      g_users[k].n--;
      g_total--;
      break;
    }
  pthread_mutex_unlock(&n->mu);
}

/* ---- rate-limited warnings -------------------------------------------------------------------- */

/* Refusals and broken channels are warned at most once a second per uid (a co-tenant opening
 * thousands of connections a second must not flood the log); the rest go to debug. */
#define WARN_SLOTS 64
static struct {
  uid_t uid;
  double at;
  unsigned skipped;
} g_warned[WARN_SLOTS];
static pthread_mutex_t g_warn_mu = PTHREAD_MUTEX_INITIALIZER;

bool segops_native_may_warn(uid_t uid, unsigned *skipped) {
  double now = segops_now();
  pthread_mutex_lock(&g_warn_mu);
  unsigned k = (unsigned)uid % WARN_SLOTS;
  bool ok = g_warned[k].uid != uid || g_warned[k].at == 0 || now - g_warned[k].at >= 1.0;
  *skipped = 0;
  if (ok) {
    *skipped = g_warned[k].uid == uid ? g_warned[k].skipped : 0;
    g_warned[k].uid = uid;
    g_warned[k].at = now;
    g_warned[k].skipped = 0;
  } else {
    g_warned[k].skipped++;
  }
  pthread_mutex_unlock(&g_warn_mu);
  return ok;
}

/* ---- watching the channels' sockets ----------------------------------------------------------
 * A channel's thread sleeps on its ring's doorbell (a futex), which cannot also wait for its
 * socket; the accept thread epolls every channel's socket for its hang-up and rings that channel's
 * doorbell, so a client that dies or closes is noticed at once while idle channels use no CPU. An
 * event carries the channel's id, looked up under n->mu, so a channel that ended meanwhile (and a
 * descriptor number used again) is never touched. */

#define EV_LISTEN 0u
#define EV_WAKE UINT64_MAX

/* Whether ch's socket is watched from now on (false: epoll cannot take it; the channel then looks
 * at its socket by itself). Before ch's thread starts. */
static bool watch(segops_native *n, native_channel *ch) {
  struct epoll_event ev = {.events = EPOLLRDHUP | EPOLLONESHOT, .data.u64 = ch->id}; /* HUP, ERR always */
  return epoll_ctl(n->ep, EPOLL_CTL_ADD, ch->sock, &ev) == 0;
}

void segops_native_unwatch(segops_native *n, native_channel *ch) {
  if (ch->watched) epoll_ctl(n->ep, EPOLL_CTL_DEL, ch->sock, NULL);
  ch->watched = false;
}

/* The client of channel id hung up: its thread, asleep or about to sleep, is rung awake and finds
 * the socket's end. */
static void hung_up(segops_native *n, uint64_t id) {
  pthread_mutex_lock(&n->mu);
  for (native_channel *ch = n->channels; ch; ch = ch->next)
    if (ch->id == id) {
      if (ch->hdr) segops_native_ring_wake(ch); /* before its ring: its handshake reads the end */
      break;
    }
  pthread_mutex_unlock(&n->mu);
}

/* ---- accepting ------------------------------------------------------------------------------- */

/* Answers a connection over the limits with ERROR and closes it, never waiting on the peer (a
 * co-tenant's silent connects must not hold up everyone queued behind them). What the peer sent
 * already (its HELLO, as a client sends it at once) is read first without waiting: closing a socket
 * with a message unread resets the connection, and the client would see that instead of the
 * reason. */
static void refuse(int s, const char *why) {
  char buf[SEGOPS_MSG_MAX];
  for (int k = 0; k < 4 && recv(s, buf, sizeof buf, MSG_DONTWAIT) > 0; k++) {
  }
  segops_native_send_error(s, SEGOPS_E_RESOURCE_EXHAUSTED, why);
  close(s);
}

/* One connection: its credentials, the limits, then its own thread. */
static void accept_one(segops_native *n, int s) {
  struct ucred cr = {0, (uid_t)-1, (gid_t)-1};
  socklen_t crl = sizeof cr;
  if (getsockopt(s, SOL_SOCKET, SO_PEERCRED, &cr, &crl) != 0) {
    SEGOPS_LOGW("native channel: cannot read the peer's credentials (%s); closed", strerror(errno));
    close(s);
    return;
  }
  char err[256];
  if (!segops_native_user_take(n, cr.uid, err, sizeof err)) {
    unsigned skipped;
    if (segops_native_may_warn(cr.uid, &skipped))
      SEGOPS_LOGW("native channel from pid %d uid %u refused: %s (%u more of this uid's not logged)", (int)cr.pid,
                  (unsigned)cr.uid, err, skipped);
    else
      SEGOPS_LOGD("native channel from pid %d uid %u refused: %s", (int)cr.pid, (unsigned)cr.uid, err);
    refuse(s, err);
    return;
  }
  native_channel *ch = calloc(1, sizeof *ch);
  if (!ch) {
    segops_native_user_give(n, cr.uid);
    close(s);
    return;
  }
  ch->srv = n;
  ch->sock = s;
  ch->pid = cr.pid;
  ch->uid = cr.uid;
  ch->gid = cr.gid;
  ch->ring.fd = -1;
  ch->ring.guard = -1;
  ch->has_cpuclk = cr.pid > 0 && clock_getcpuclockid(cr.pid, &ch->cpuclk) == 0;
  ch->stat_fd = -1;
  if (cr.pid > 0) segops_native_stat_open(ch, cr.pid); /* its main thread's, until another calls */
  pthread_mutex_init(&ch->mu, NULL);
  pthread_cond_init(&ch->idle, NULL);
  pthread_mutex_lock(&n->mu);
  ch->id = ++n->next_id;
  ch->next = n->channels;
  n->channels = ch;
  n->live++;
  pthread_mutex_unlock(&n->mu);
  SEGOPS_LOGD("native channel %lu from pid %d uid %u gid %u", ch->id, (int)cr.pid, (unsigned)cr.uid, (unsigned)cr.gid);
  ch->watched = watch(n, ch);
  pthread_attr_t at;
  pthread_attr_init(&at);
  pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
  pthread_t t;
  int rc = pthread_create(&t, &at, segops_native_channel_main, ch);
  pthread_attr_destroy(&at);
  if (rc != 0) {
    /* The thread would have ended the channel; do what it would do with nothing opened. */
    SEGOPS_LOGW("native channel %lu: cannot start its thread (%s); closed", ch->id, strerror(rc));
    pthread_mutex_lock(&n->mu);
    native_channel **pp = &n->channels;
    while (*pp && *pp != ch) pp = &(*pp)->next;
    if (*pp) *pp = ch->next;
    segops_native_unwatch(n, ch);
    n->live--;
    pthread_cond_broadcast(&n->gone);
    pthread_mutex_unlock(&n->mu);
    segops_native_user_give(n, cr.uid);
    pthread_cond_destroy(&ch->idle);
    pthread_mutex_destroy(&ch->mu);
    if (ch->stat_fd >= 0) close(ch->stat_fd);
    free(ch);
    refuse(s, "segopsd cannot start a thread for the channel");
  }
}

static void accept_next(segops_native *n) {
  int s = accept4(n->listen_fd, NULL, NULL, SOCK_CLOEXEC);
  if (s >= 0) {
    accept_one(n, s);
  } else if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
    SEGOPS_LOGW("native channel: cannot accept (%s)", strerror(errno));
    struct timespec ts = {0, 50 * 1000000L}; /* let descriptors come back rather than spin */
    nanosleep(&ts, NULL);
  }
}

static void *accept_main(void *arg) {
  segops_native *n = arg;
  for (;;) {
    struct epoll_event ev[16];
    int k = epoll_wait(n->ep, ev, 16, -1);
    if (k < 0 && errno != EINTR) break;
    if (atomic_load(&n->stopping)) break;
    for (int i = 0; i < k; i++) {
      if (ev[i].data.u64 == EV_LISTEN)
        accept_next(n);
      else if (ev[i].data.u64 != EV_WAKE)
        hung_up(n, ev[i].data.u64);
    }
  }
  return NULL;
}

/* The accept thread's epoll set with the listening socket and the stop pipe in it. */
static bool watch_start(segops_native *n) {
  n->ep = epoll_create1(EPOLL_CLOEXEC);
  struct epoll_event l = {.events = EPOLLIN, .data.u64 = EV_LISTEN}, w = {.events = EPOLLIN, .data.u64 = EV_WAKE};
  return n->ep >= 0 && epoll_ctl(n->ep, EPOLL_CTL_ADD, n->listen_fd, &l) == 0 &&
         epoll_ctl(n->ep, EPOLL_CTL_ADD, n->wake[0], &w) == 0;
}

segops_native *segops_native_start(const segops_native_deps *d, const char *path, bool own_dir) {
  segops_native *n = calloc(1, sizeof *n);
  if (!n) {
    if (own_dir) remove_own_dir(path);
    return NULL;
  }
  n->d = *d;
  n->wake[0] = n->wake[1] = -1;
  n->listen_fd = -1;
  n->ep = -1;
  pthread_mutex_init(&n->mu, NULL);
  pthread_cond_init(&n->gone, NULL);
  snprintf(n->path, sizeof n->path, "%s", path);
  n->own_dir = own_dir;
  char err[320];
  if (!segops_guard_install()) { /* clients' pages must never take the daemon down */
    SEGOPS_LOGE("native channel: cannot install the SIGBUS guard");
    goto fail;
  }
  n->listen_fd = segops_unix_listen_type(path, SOCK_SEQPACKET, d->cfg->socket_mode, &n->dev, &n->ino, err, sizeof err);
  if (n->listen_fd < 0) {
    SEGOPS_LOGE("native channel: %s", err);
    goto fail;
  }
  if (strlen(path) >= sizeof n->path || pipe2(n->wake, O_CLOEXEC) != 0 || !watch_start(n) ||
      pthread_create(&n->accept_thread, NULL, accept_main, n) != 0) {
    SEGOPS_LOGE("native channel: cannot start its thread on %s", path);
    goto fail;
  }
  return n;
fail:
  if (n->listen_fd >= 0) {
    close(n->listen_fd);
    segops_unix_unlink(n->path, n->dev, n->ino);
  }
  if (own_dir) remove_own_dir(path);
  if (n->wake[0] >= 0) close(n->wake[0]), close(n->wake[1]);
  if (n->ep >= 0) close(n->ep);
  pthread_cond_destroy(&n->gone);
  pthread_mutex_destroy(&n->mu);
  free(n);
  return NULL;
}

void segops_native_stop(segops_native *n) {
  if (!n) return;
  atomic_store(&n->stopping, true);
  (void)!write(n->wake[1], "x", 1);
  pthread_join(n->accept_thread, NULL);
  close(n->listen_fd);
  segops_unix_unlink(n->path, n->dev, n->ino);
  if (n->own_dir) remove_own_dir(n->path);
  /* Every channel's thread is woken: the doorbell (a sleeping one), the socket's reading end (one in
   * its handshake). It answers nothing new, waits for its calls in flight and frees itself, closing
   * its socket last: only reading is shut here, so a client sees its channel end only once no call
   * of its runs any more. */
  pthread_mutex_lock(&n->mu);
  for (native_channel *ch = n->channels; ch; ch = ch->next) {
    shutdown(ch->sock, SHUT_RD);
    if (ch->hdr) segops_native_ring_wake(ch);
  }
  while (n->live > 0) pthread_cond_wait(&n->gone, &n->mu);
  pthread_mutex_unlock(&n->mu);
  close(n->ep);
  close(n->wake[0]);
  close(n->wake[1]);
  pthread_cond_destroy(&n->gone);
  pthread_mutex_destroy(&n->mu);
  free(n);
}

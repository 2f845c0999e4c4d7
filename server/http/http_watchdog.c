/* http_watchdog.c: cuts connections that hold a slot or memory without making progress.
 * Request heads: a new connection must send a complete head within --head-timeout, a kept-alive
 * one its next head within --idle-timeout of its last answer; libmicrohttpd's own timeout
 * measures silence only, so a client trickling one header byte a second (slowloris) would
 * otherwise hold its connection, and a slot, forever. Request bodies likewise: an upload slower
 * than --min-upload-rate (after a grace of --idle-timeout) or longer than --request-timeout is
 * cut, and so is one whose peer has closed (EOF seen by a non-consuming peek on two ticks without
 * progress: with epoll, a FIN that arrived together with the head is otherwise noticed only at the
 * idle timeout). A connection waiting for a request head whose peer has closed (a cut head, or a
 * keep-alive connection after its last answer) is closed the same way: no request can come on it
 * any more. Answers: one the peer stops taking (the socket's unsent bytes, SIOCOUTQ, unchanged for
 * --answer-stall-timeout) or takes slower than --min-download-rate (all of it not taken within
 * the stall timeout plus its size at that rate) is cut, so that the memory it holds (outputs,
 * encoded answer: counted in --max-inflight-bytes) comes back instead of waiting for the idle
 * timeout. */
#include "http_watchdog.h"

#include <linux/sockios.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <time.h>

#include "log.h"

/* waiting_since: monotonic ns when the wait for a request head began; HANDLING while a request
 * is being handled, CUT once cut. Atomic, so that marking a request (twice per request, on the
 * hot path) takes no lock; the list lock only guards insertion, removal and the scan. */
#define HANDLING (-1)
#define CUT (-2)
typedef struct segops_watch {
  struct segops_watch *prev, *next;
  int fd;
  _Atomic int64_t waiting_since;
  atomic_bool first_head;       /* no request yet: the head deadline is --head-timeout */
  _Atomic int64_t upload_since; /* monotonic ns when the body began; -1 when no upload */
  _Atomic int64_t upload_bytes; /* body bytes handed to the request so far */
  _Atomic int64_t answer_since; /* monotonic ns when an answer was queued; -1 when none */
  _Atomic int64_t answer_bytes; /* its size */
  int64_t eof_bytes;            /* watchdog thread only: upload_bytes when EOF was first seen; -1 */
  int64_t eof_wait;             /* watchdog thread only: waiting_since when EOF was first seen; -1 */
  int outq;                     /* watchdog thread only: the answer's unsent bytes at the last change */
  int64_t outq_since;           /* watchdog thread only: when they last changed; -1 */
} conn_track;

struct segops_watchdog {
  pthread_mutex_t mu;
  pthread_cond_t wake; /* the first connection, or stop: the thread sleeps while none is open */
  conn_track head;     /* circular list of open connections */
  pthread_t thread;
  atomic_bool stop;
  segops_watchdog_opts o;
};

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* peer_closed: the peer has sent its FIN and libmicrohttpd has read everything before it. */
static bool peer_closed(const conn_track *t) {
  char b;
  return recv(t->fd, &b, 1, MSG_PEEK | MSG_DONTWAIT) == 0;
}

static void cut_upload(conn_track *t, const char *why) {
  int64_t u = atomic_load(&t->upload_since);
  if (u < 0 || !atomic_compare_exchange_strong(&t->upload_since, &u, -1)) return;
  shutdown(t->fd, SHUT_RDWR); /* as for heads: libmicrohttpd sees the end and closes */
  SEGOPS_LOGD("cut an upload: %s", why);
}

static void check_upload(segops_watchdog *w, conn_track *t, int64_t now) {
  int64_t since = atomic_load(&t->upload_since);
  if (since < 0) {
    t->eof_bytes = -1;
    return;
  }
  int64_t got = atomic_load(&t->upload_bytes);
  double el = (double)(now - since) * 1e-9;
  if (w->o.upload_max_s > 0 && el > w->o.upload_max_s) return cut_upload(t, "longer than --request-timeout");
  if (w->o.min_upload_rate > 0 && el > w->o.idle_s && (double)got < w->o.min_upload_rate * (el - w->o.idle_s))
    return cut_upload(t, "slower than --min-upload-rate");
  if (!peer_closed(t)) {
    t->eof_bytes = -1;
    return;
  }
  /* The peer closed before the body was complete. Data libmicrohttpd has read but not yet
   * handed over would show as progress by the next tick; none came: the upload is dead. */
  if (t->eof_bytes == got) return cut_upload(t, "the peer closed before the body was complete");
  t->eof_bytes = got;
}

static void cut_answer(conn_track *t, const char *why) {
  int64_t a = atomic_load(&t->answer_since);
  if (a < 0 || !atomic_compare_exchange_strong(&t->answer_since, &a, -1)) return;
  shutdown(t->fd, SHUT_RDWR); /* libmicrohttpd's next write fails: it closes, the request completes */
  SEGOPS_LOGD("cut an answer: %s", why);
}

static void check_answer(segops_watchdog *w, conn_track *t, int64_t now) {
  int64_t since = atomic_load(&t->answer_since);
  if (since < 0) {
    t->outq_since = -1;
    return;
  }
  double el = (double)(now - since) * 1e-9;
  double bytes = (double)atomic_load(&t->answer_bytes);
  if (w->o.min_download_rate > 0 && el > w->o.answer_stall_s + bytes / w->o.min_download_rate)
    return cut_answer(t, "taken slower than --min-download-rate");
  int q = 0;
  if (w->o.answer_stall_s <= 0 || ioctl(t->fd, SIOCOUTQ, &q) != 0) return;
  /* Bytes written but not taken: the same non-zero count on every tick means the peer takes
   * nothing (libmicrohttpd refills the socket as soon as it takes some). */
  if (q <= 0 || q != t->outq || t->outq_since < 0) {
    t->outq = q;
    t->outq_since = now;
    return;
  }
  if ((double)(now - t->outq_since) * 1e-9 > w->o.answer_stall_s)
    cut_answer(t, "the peer took none of it for --answer-stall-timeout");
}

/* A connection waiting for a head (since >= 0) whose peer closed on two ticks of the same wait:
 * whatever it sent has been read and is no complete head. The second tick leaves libmicrohttpd
 * the time to hand over a head that arrived together with the FIN. */
static void check_waiting(conn_track *t, int64_t since) {
  if (since < 0 || !peer_closed(t)) {
    t->eof_wait = -1;
    return;
  }
  if (t->eof_wait != since) {
    t->eof_wait = since;
    return;
  }
  if (atomic_compare_exchange_strong(&t->waiting_since, &since, CUT)) {
    shutdown(t->fd, SHUT_RDWR);
    SEGOPS_LOGD("closed a connection whose peer closed while it waited for a request head");
  }
}

static void *watch(void *arg) {
  segops_watchdog *w = arg;
  const struct timespec tick = {0, 100 * 1000 * 1000};
  while (!atomic_load(&w->stop)) {
    pthread_mutex_lock(&w->mu); /* no connection open: nothing to watch, no wake-ups */
    while (w->head.next == &w->head && !atomic_load(&w->stop)) pthread_cond_wait(&w->wake, &w->mu);
    pthread_mutex_unlock(&w->mu);
    nanosleep(&tick, NULL);
    int64_t now = now_ns();
    pthread_mutex_lock(&w->mu);
    for (conn_track *t = w->head.next; t != &w->head; t = t->next) {
      check_upload(w, t, now);
      check_answer(w, t, now);
      int64_t since = atomic_load(&t->waiting_since);
      double limit_s = atomic_load(&t->first_head) ? w->o.head_s : w->o.idle_s;
      int64_t limit = (int64_t)(limit_s * 1e9);
      if (limit > 0 && since >= 0 && now - since > limit &&
          atomic_compare_exchange_strong(&t->waiting_since, &since, CUT)) {
        /* shutdown, not close: the socket stays libmicrohttpd's, which sees the end of the
         * stream and closes the connection itself. The list lock is held, and the CLOSED
         * notification removes a connection under it before its socket is closed. */
        shutdown(t->fd, SHUT_RDWR);
        SEGOPS_LOGD("cut a connection that sent no complete request head within %.3g s", limit_s);
        continue;
      }
      check_waiting(t, since);
    }
    pthread_mutex_unlock(&w->mu);
  }
  return NULL;
}

segops_watchdog *segops_watchdog_new(const segops_watchdog_opts *opts) {
  segops_watchdog *w = calloc(1, sizeof *w);
  if (!w) return NULL;
  w->o = *opts;
  pthread_mutex_init(&w->mu, NULL);
  pthread_cond_init(&w->wake, NULL);
  w->head.next = w->head.prev = &w->head;
  atomic_init(&w->stop, false);
  if (pthread_create(&w->thread, NULL, watch, w) != 0) {
    pthread_cond_destroy(&w->wake);
    pthread_mutex_destroy(&w->mu);
    free(w);
    return NULL;
  }
  return w;
}

void segops_watchdog_free(segops_watchdog *w) {
  if (!w) return;
  pthread_mutex_lock(&w->mu);
  atomic_store(&w->stop, true);
  pthread_cond_signal(&w->wake);
  pthread_mutex_unlock(&w->mu);
  pthread_join(w->thread, NULL);
  for (conn_track *t = w->head.next; t != &w->head;) { /* none left after MHD_stop_daemon */
    conn_track *n = t->next;
    free(t);
    t = n;
  }
  pthread_cond_destroy(&w->wake);
  pthread_mutex_destroy(&w->mu);
  free(w);
}

segops_watch *segops_watchdog_add(segops_watchdog *w, int fd) {
  conn_track *t = calloc(1, sizeof *t);
  if (!t) return NULL;
  t->fd = fd;
  atomic_init(&t->waiting_since, now_ns());
  atomic_init(&t->first_head, true);
  atomic_init(&t->upload_since, -1);
  atomic_init(&t->upload_bytes, 0);
  atomic_init(&t->answer_since, -1);
  atomic_init(&t->answer_bytes, 0);
  t->eof_bytes = -1;
  t->eof_wait = -1;
  t->outq_since = -1;
  pthread_mutex_lock(&w->mu);
  if (w->head.next == &w->head) pthread_cond_signal(&w->wake);
  t->next = w->head.next;
  t->prev = &w->head;
  w->head.next->prev = t;
  w->head.next = t;
  pthread_mutex_unlock(&w->mu);
  return t;
}

void segops_watchdog_remove(segops_watchdog *w, segops_watch *t) {
  if (!t) return;
  /* Under the list lock: the thread never shuts down an fd that is closed (and maybe reused). */
  pthread_mutex_lock(&w->mu);
  t->prev->next = t->next;
  t->next->prev = t->prev;
  pthread_mutex_unlock(&w->mu);
  free(t);
}

void segops_watchdog_upload(segops_watch *t, int64_t bytes) {
  if (!t) return;
  if (bytes < 0) {
    atomic_store(&t->upload_since, -1);
    return;
  }
  atomic_store(&t->upload_bytes, bytes);
  if (bytes == 0) atomic_store(&t->upload_since, now_ns());
}

void segops_watchdog_answer(segops_watch *t, uint64_t bytes) {
  if (!t) return;
  atomic_store(&t->answer_bytes, (int64_t)bytes);
  atomic_store(&t->answer_since, now_ns());
}

static void mark(segops_watch *t, bool handling) {
  if (!t) return;
  atomic_store(&t->upload_since, -1);
  atomic_store(&t->answer_since, -1);
  if (!handling) atomic_store(&t->first_head, false);
  int64_t cur = atomic_load(&t->waiting_since);
  while (cur != CUT && !atomic_compare_exchange_weak(&t->waiting_since, &cur, handling ? HANDLING : now_ns())) {
  }
}

void segops_watchdog_request_begin(segops_watch *t) { mark(t, true); }
void segops_watchdog_request_end(segops_watch *t) { mark(t, false); }

/* http_watchdog.c: cuts connections that have not sent a complete request head within
 * --idle-timeout. libmicrohttpd's own timeout measures silence only, so a client trickling one
 * header byte a second (slowloris) would otherwise hold its connection, and a slot, forever.
 * Request bodies likewise: an upload slower than --min-upload-rate (after a grace of
 * --idle-timeout) or longer than --request-timeout is cut, and so is one whose peer has closed
 * (EOF seen by a non-consuming peek on two ticks without progress: with epoll, a FIN that
 * arrived together with the head is otherwise noticed only at the idle timeout). A connection
 * waiting for a request head whose peer has closed (a cut head, or a keep-alive connection after
 * its last answer) is closed the same way: no request can come on it any more. */
#include "http_watchdog.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>

#include "log.h"

/* waiting_since: monotonic ns when the wait for a request head began; HANDLING while a request
 * is being handled, CUT once cut. Atomic, so that marking a request (twice per request, on the
 * hot path) takes no lock; the list lock only guards insertion, removal and the scan. */
#define HANDLING (-1)
#define CUT (-2)
typedef struct conn_track {
  struct conn_track *prev, *next;
  MHD_socket fd;
  _Atomic int64_t waiting_since;
  _Atomic int64_t upload_since; /* monotonic ns when the body began; -1 when no upload */
  _Atomic int64_t upload_bytes; /* body bytes handed to the request so far */
  int64_t eof_bytes;            /* watchdog thread only: upload_bytes when EOF was first seen; -1 */
  int64_t eof_wait;             /* watchdog thread only: waiting_since when EOF was first seen; -1 */
} conn_track;

struct segops_watchdog {
  pthread_mutex_t mu;
  conn_track head; /* circular list of open connections */
  pthread_t thread;
  atomic_bool stop;
  double limit_s;
  double min_rate;     /* bytes per second an upload must keep up after the grace; 0 = any */
  double upload_max_s; /* longest upload; 0 = unbounded */
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
  if (w->upload_max_s > 0 && el > w->upload_max_s) return cut_upload(t, "longer than --request-timeout");
  if (w->min_rate > 0 && el > w->limit_s && (double)got < w->min_rate * (el - w->limit_s))
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
    nanosleep(&tick, NULL);
    int64_t now = now_ns(), limit = (int64_t)(w->limit_s * 1e9);
    pthread_mutex_lock(&w->mu);
    for (conn_track *t = w->head.next; t != &w->head; t = t->next) {
      check_upload(w, t, now);
      int64_t since = atomic_load(&t->waiting_since);
      if (limit > 0 && since >= 0 && now - since > limit &&
          atomic_compare_exchange_strong(&t->waiting_since, &since, CUT)) {
        /* shutdown, not close: the socket stays libmicrohttpd's, which sees the end of the
         * stream and closes the connection itself. The list lock is held, and the CLOSED
         * notification removes a connection under it before its socket is closed. */
        shutdown(t->fd, SHUT_RDWR);
        SEGOPS_LOGD("cut a connection that sent no complete request head within %.0f s", w->limit_s);
        continue;
      }
      check_waiting(t, since);
    }
    pthread_mutex_unlock(&w->mu);
  }
  return NULL;
}

segops_watchdog *segops_watchdog_new(double limit_s, double min_rate, double upload_max_s) {
  segops_watchdog *w = calloc(1, sizeof *w);
  if (!w) return NULL;
  w->min_rate = min_rate;
  w->upload_max_s = upload_max_s;
  pthread_mutex_init(&w->mu, NULL);
  w->head.next = w->head.prev = &w->head;
  w->limit_s = limit_s;
  atomic_init(&w->stop, false);
  if (pthread_create(&w->thread, NULL, watch, w) != 0) {
    pthread_mutex_destroy(&w->mu);
    free(w);
    return NULL;
  }
  return w;
}

void segops_watchdog_free(segops_watchdog *w) {
  if (!w) return;
  atomic_store(&w->stop, true);
  pthread_join(w->thread, NULL);
  for (conn_track *t = w->head.next; t != &w->head;) { /* none left after MHD_stop_daemon */
    conn_track *n = t->next;
    free(t);
    t = n;
  }
  pthread_mutex_destroy(&w->mu);
  free(w);
}

void segops_watchdog_notify(void *cls, struct MHD_Connection *conn, void **socket_context,
                            enum MHD_ConnectionNotificationCode code) {
  segops_watchdog *w = cls;
  if (code == MHD_CONNECTION_NOTIFY_STARTED) {
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    conn_track *t = ci ? calloc(1, sizeof *t) : NULL;
    *socket_context = t;
    if (!t) return; /* untracked: libmicrohttpd's idle timeout still applies */
    t->fd = ci->connect_fd;
    atomic_init(&t->waiting_since, now_ns());
    atomic_init(&t->upload_since, -1);
    atomic_init(&t->upload_bytes, 0);
    t->eof_bytes = -1;
    t->eof_wait = -1;
    pthread_mutex_lock(&w->mu);
    t->next = w->head.next;
    t->prev = &w->head;
    w->head.next->prev = t;
    w->head.next = t;
    pthread_mutex_unlock(&w->mu);
  } else if (code == MHD_CONNECTION_NOTIFY_CLOSED) {
    conn_track *t = *socket_context;
    if (!t) return;
    pthread_mutex_lock(&w->mu);
    t->prev->next = t->next;
    t->next->prev = t->prev;
    pthread_mutex_unlock(&w->mu);
    free(t);
    *socket_context = NULL;
  }
}

static conn_track *track_of(struct MHD_Connection *conn) {
  const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
  return ci ? ci->socket_context : NULL; /* alive: its connection is in a request callback */
}

void segops_watchdog_upload(segops_watchdog *w, struct MHD_Connection *conn, int64_t bytes) {
  conn_track *t = w ? track_of(conn) : NULL;
  if (!t) return;
  if (bytes < 0) {
    atomic_store(&t->upload_since, -1);
    return;
  }
  atomic_store(&t->upload_bytes, bytes);
  if (bytes == 0) atomic_store(&t->upload_since, now_ns());
}

static void mark(segops_watchdog *w, struct MHD_Connection *conn, bool handling) {
  if (!w) return;
  conn_track *t = track_of(conn);
  if (!t) return;
  atomic_store(&t->upload_since, -1);
  int64_t cur = atomic_load(&t->waiting_since);
  while (cur != CUT && !atomic_compare_exchange_weak(&t->waiting_since, &cur, handling ? HANDLING : now_ns())) {
  }
}

void segops_watchdog_request_begin(segops_watchdog *w, struct MHD_Connection *conn) { mark(w, conn, true); }
void segops_watchdog_request_end(segops_watchdog *w, struct MHD_Connection *conn) { mark(w, conn, false); }

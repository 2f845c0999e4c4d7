/* http_server.c: libmicrohttpd setup (epoll, internal thread pool, suspend/resume), routing,
 * auth, the request life cycle (state created on the first callback, freed on completion;
 * on_request alone moves it between phases, from the outcomes the route handlers return), and
 * the graceful drain. Routes: http_routes.c. */
#include <arpa/inet.h>
#include <netdb.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "errors.h"
#include "http.h"
#include "http_conn.h"
#include "http_connmem.h"
#include "listen_unix.h"
#include "log.h"

/* The one place a request changes phase: after every handler, from the outcome it returned. */
static enum MHD_Result advance(segops_http_req *r, segops_http_outcome o) {
  switch (o) {
    case SEGOPS_HTTP_ANSWERED:
      r->phase = PH_DONE;
      return MHD_YES;
    case SEGOPS_HTTP_DEFERRED:
      r->phase = PH_ERROR;
      return MHD_YES;
    case SEGOPS_HTTP_ANSWER_LATER:
      r->phase = PH_GET;
      return MHD_YES;
    case SEGOPS_HTTP_READ_BODY:
      r->phase = PH_BODY;
      return MHD_YES;
    case SEGOPS_HTTP_SUSPENDED:
      r->phase = PH_WAIT;
      return MHD_YES;
    case SEGOPS_HTTP_DRAIN:
      r->phase = PH_DRAIN;
      return MHD_YES;
    default:
      r->phase = PH_DONE;
      return MHD_NO;
  }
}

static unsigned method_bit(const char *method) {
  if (strcmp(method, MHD_HTTP_METHOD_GET) == 0) return SEGOPS_M_GET;
  if (strcmp(method, MHD_HTTP_METHOD_HEAD) == 0) return SEGOPS_M_HEAD;
  if (strcmp(method, MHD_HTTP_METHOD_POST) == 0) return SEGOPS_M_POST;
  return 0;
}

/* Decides what a request gets from its headers alone. Errors found here are deferred (see
 * PH_ERROR and segops_http_error) unless the body is large or of unknown length: then the answer
 * goes out at once and libmicrohttpd closes the connection instead of reading the body. */
static segops_http_outcome first_call(segops_http_req *r, const char *url, const char *method, const char *version) {
  segops_server *srv = r->srv;
  char msg[256];
  r->rt = segops_http_route_find(url, r, msg, sizeof msg);
  r->route = r->rt ? r->rt->metric : SEGOPS_ROUTE_OTHER;
  r->oip_errors = r->rt ? (r->rt->flags & SEGOPS_RF_OIP) != 0 : strncmp(url, "/v2/", 4) == 0 || !strcmp(url, "/v2");
  segops_http_outcome ret;
  if (segops_http_strict_head(r, url, version, &ret)) return ret;
  bool open = r->rt && (r->rt->flags & SEGOPS_RF_OPEN);
  /* Authentication is decided on the head: a request with a body is answered at once and its
   * connection closed, so no byte of an unauthenticated body is read. */
  if (!open && srv->cfg->token &&
      !segops_http_auth_ok(MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION),
                           srv->cfg->token))
    return segops_http_error(r, SEGOPS_E_UNAUTHENTICATED, 0, "a valid 'Authorization: Bearer <token>' is required",
                             NULL, segops_http_has_body(r->conn));
  if (!r->rt) return segops_http_error(r, SEGOPS_E_NOT_FOUND, 0, msg, NULL, false);
  if (!(r->rt->methods & method_bit(method))) {
    snprintf(msg, sizeof msg, "%.16s is not allowed on %.80s; use %s", method, url,
             r->rt->methods & SEGOPS_M_POST ? "POST" : "GET");
    return segops_http_error(r, SEGOPS_E_METHOD_NOT_ALLOWED, 0, msg, segops_http_route_allow(r->rt), false);
  }
  /* A connection admitted past --max-connections is there for health checks alone. */
  if (r->cn && r->cn->reserve && !open)
    return segops_http_error(r, SEGOPS_E_RESOURCE_EXHAUSTED, 0,
                             "the server has --max-connections connections open; this one answers /healthz and "
                             "/readyz only",
                             NULL, true);
  if ((r->rt->flags & SEGOPS_RF_WORK) && !segops_server_takes_work(atomic_load(&srv->state)))
    return segops_http_error(r, SEGOPS_E_UNAVAILABLE, 0, "the server is draining", NULL, true);
  return r->rt->begin ? r->rt->begin(r) : SEGOPS_HTTP_ANSWER_LATER;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
                                  const char *version, const char *upload_data, size_t *upload_data_size,
                                  void **con_cls) {
  segops_server *srv = cls;
  segops_http_req *r = *con_cls;
  if (!r) {
    r = calloc(1, sizeof *r);
    if (!r) return MHD_NO;
    r->srv = srv;
    r->conn = conn;
    r->t_start = segops_now();
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    r->cn = ci ? ci->socket_context : NULL;
    *con_cls = r;
    segops_watchdog_request_begin(r->cn ? r->cn->watch : NULL);
    atomic_fetch_add(&srv->active, 1);
    segops_metrics_inflight_add(1);
    r->first_call = true;
    segops_http_outcome o = first_call(r, url, method, version);
    r->first_call = false;
    /* A body that will be read and dropped (a GET's, or one after a deferred error) is watched
     * like an op's upload: a dead or trickling one does not hold its connection. */
    enum MHD_Result res = advance(r, o);
    if ((r->phase == PH_GET || r->phase == PH_ERROR || r->phase == PH_DRAIN) && segops_http_has_body(conn))
      segops_watchdog_upload(segops_http_watch(r), 0);
    return res;
  }
  switch (r->phase) {
    case PH_BODY:
      if (*upload_data_size) return segops_http_op_body(r, upload_data, upload_data_size);
      return advance(r, r->rt->finish(r));
    case PH_WAIT:
      return advance(r, r->rt->resume(r));
    case PH_DRAIN: /* answered already: the body goes, then the connection */
      if (!*upload_data_size) return MHD_NO;
      r->bytes_in += *upload_data_size;
      *upload_data_size = 0;
      segops_watchdog_upload(segops_http_watch(r), (int64_t)r->bytes_in);
      return MHD_YES;
    case PH_GET:
    case PH_ERROR:
      if (*upload_data_size) { /* a body nobody will read: count it and drop it */
        r->bytes_in += *upload_data_size;
        *upload_data_size = 0;
        segops_watchdog_upload(segops_http_watch(r), (int64_t)r->bytes_in);
        return MHD_YES;
      }
      if (r->phase == PH_GET) return advance(r, r->rt->finish(r));
      return advance(r, segops_http_error(r, r->deferred.err, r->deferred.http_status, r->deferred.message,
                                          r->deferred.allow, false));
    default:
      /* A response could not be queued: nothing more to do. */
      return MHD_NO;
  }
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls, enum MHD_RequestTerminationCode toe) {
  segops_server *srv = cls;
  (void)conn;
  segops_http_req *r = *con_cls;
  if (!r) return;
  segops_watchdog_request_end(segops_http_watch(r)); /* a keep-alive connection waits for its next head */
  *con_cls = NULL;
  if (r->status && segops_log_level >= SEGOPS_LOG_DEBUG) {
    SEGOPS_LOGD("%s%s%s%s%s -> %d, %llu bytes in, %llu out, %.3f ms%s", r->rt ? r->rt->pattern : "(no route)",
                r->route == SEGOPS_ROUTE_OP && r->op >= 0 ? " " : "",
                r->route == SEGOPS_ROUTE_OP && r->op >= 0 ? segops_op_name((segops_op)r->op) : "",
                r->route == SEGOPS_ROUTE_OP && r->pass >= 0 ? "/" : "",
                r->route == SEGOPS_ROUTE_OP && r->pass >= 0 ? segops_pass_name((segops_pass)r->pass) : "", r->status,
                (unsigned long long)r->bytes_in, (unsigned long long)r->bytes_out, (segops_now() - r->t_start) * 1e3,
                toe == MHD_REQUEST_TERMINATED_COMPLETED_OK ? "" : " (connection ended early)");
  }
  if (r->status && !r->counted) {
    segops_metrics_request(r->route, r->op, r->pass, r->status, r->bytes_in,
                           toe == MHD_REQUEST_TERMINATED_COMPLETED_OK ? r->bytes_out : 0);
    if (r->route == SEGOPS_ROUTE_OP)
      segops_metrics_observe(SEGOPS_HIST_TOTAL, r->op, r->pass, segops_now() - r->t_start);
  }
  if (toe != MHD_REQUEST_TERMINATED_COMPLETED_OK && toe != MHD_REQUEST_TERMINATED_CLIENT_ABORT)
    SEGOPS_LOGD("request ended early (termination code %d)", (int)toe);
  segops_http_op_free(r);
  if (r->busy) atomic_fetch_sub(&srv->busy, 1);
  free(r);
  segops_metrics_inflight_add(-1);
  atomic_fetch_sub(&srv->active, 1);
}

/* A connection refused at its start (its peer is at --max-connections-per-peer, or even the health
 * reserve is full) gets this answer written straight to its socket, then is shut down. */
static void refuse_connection(segops_server *srv, int fd, const segops_peer *p) {
  char who[96], body[320], msg[640];
  int bl = snprintf(body, sizeof body,
                    "{\"error\":{\"code\":\"resource_exhausted\",\"message\":\"too many connections: %s has %lld "
                    "open (--max-connections-per-peer), or the server is full; retry later\"}}",
                    segops_peer_text(p, who, sizeof who), (long long)srv->cfg->max_connections_per_peer);
  int ml = snprintf(msg, sizeof msg,
                    "HTTP/1.1 503 Service Unavailable\r\nConnection: close\r\nContent-Type: application/json\r\n"
                    "Retry-After: 1\r\nContent-Length: %d\r\n\r\n%s",
                    bl, body);
  if (ml > 0 && (size_t)ml < sizeof msg) (void)!send(fd, msg, (size_t)ml, MSG_NOSIGNAL | MSG_DONTWAIT);
  shutdown(fd, SHUT_RDWR); /* libmicrohttpd sees the end and closes it */
  segops_metrics_rejected(SEGOPS_E_RESOURCE_EXHAUSTED);
  SEGOPS_LOGD("refused a connection from %s", who);
}

/* MHD_OPTION_NOTIFY_CONNECTION: the connection's context (http_conn.h) lives from its start to
 * its close; its peer is identified once, here, and counted against the limits. */
static void on_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
                          enum MHD_ConnectionNotificationCode code) {
  segops_server *srv = cls;
  if (code == MHD_CONNECTION_NOTIFY_STARTED) {
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    segops_http_conn *cn = ci ? calloc(1, sizeof *cn) : NULL;
    *socket_context = cn;
    if (!cn) return; /* untracked: libmicrohttpd's limits and idle timeout still apply */
    segops_peer_identify(ci->connect_fd, &cn->peer);
    cn->watch = segops_watchdog_add(srv->watchdog, ci->connect_fd);
    if (segops_conns_admit(srv->conns, cn) == SEGOPS_CONN_REFUSED) refuse_connection(srv, ci->connect_fd, &cn->peer);
  } else if (code == MHD_CONNECTION_NOTIFY_CLOSED) {
    segops_http_conn *cn = *socket_context;
    if (!cn) return;
    segops_conns_leave(srv->conns, cn);
    segops_watchdog_remove(srv->watchdog, cn->watch);
    free(cn);
    *socket_context = NULL;
  }
}

static void mhd_log(void *cls, const char *fmt, va_list ap) {
  (void)cls;
  char msg[512];
  vsnprintf(msg, sizeof msg, fmt, ap);
  size_t n = strlen(msg);
  while (n > 0 && msg[n - 1] == '\n') msg[--n] = 0;
  SEGOPS_LOGD("libmicrohttpd: %s", msg);
}

/* Starts the daemon of one listener: TCP by address, a unix socket as a ready listening fd. */
static int start_listener(segops_server *srv, const segops_listen_addr *a, segops_listener *l) {
  const segops_config *c = srv->cfg;
  unsigned int flags = MHD_USE_EPOLL_INTERNAL_THREAD | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ITC | MHD_USE_ERROR_LOG;
  struct addrinfo *ai = NULL;
  int fd = -1;
  if (a->is_unix) {
    char err[320];
    fd = segops_unix_listen(a->path, c->socket_mode, &l->dev, &l->ino, err, sizeof err);
    if (fd < 0) {
      SEGOPS_LOGE("cannot listen: %s", err);
      return -1;
    }
    snprintf(l->unix_path, sizeof l->unix_path, "%s", a->path);
  } else {
    struct addrinfo hints;
    memset(&hints, 0, sizeof hints);
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE;
    char port[16];
    snprintf(port, sizeof port, "%d", a->port);
    int gai = getaddrinfo(a->host, port, &hints, &ai);
    if (gai != 0 || !ai) {
      SEGOPS_LOGE("cannot resolve listen address '%s': %s", a->host, gai_strerror(gai));
      return -1;
    }
    if (ai->ai_family == AF_INET6) flags |= MHD_USE_IPv6;
  }
  /* The address option comes first in the list: a TCP listener gives libmicrohttpd the address,
   * a unix one its ready socket. */
  l->mhd = MHD_start_daemon(
      flags, 0, NULL, NULL, on_request, srv, a->is_unix ? MHD_OPTION_LISTEN_SOCKET : MHD_OPTION_SOCK_ADDR,
      a->is_unix ? (void *)(intptr_t)fd : (void *)ai->ai_addr, MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL,
      MHD_OPTION_THREAD_POOL_SIZE, (unsigned int)c->http_threads, MHD_OPTION_CONNECTION_LIMIT,
      (unsigned int)(c->max_connections + SEGOPS_HTTP_HEALTH_RESERVE), MHD_OPTION_CONNECTION_TIMEOUT,
      (unsigned int)c->idle_timeout_s, MHD_OPTION_NOTIFY_COMPLETED, on_completed, srv,
      MHD_OPTION_CONNECTION_MEMORY_LIMIT, segops_http_connection_memory(), MHD_OPTION_LISTEN_BACKLOG_SIZE,
      (unsigned int)1024, MHD_OPTION_NOTIFY_CONNECTION, on_connection, srv, MHD_OPTION_UNESCAPE_CALLBACK,
      segops_http_unescape, NULL, MHD_OPTION_URI_LOG_CALLBACK, segops_http_uri_seen, NULL, MHD_OPTION_END);
  if (ai) freeaddrinfo(ai);
  if (!l->mhd) {
    if (a->is_unix) {
      close(fd);
      segops_unix_unlink(l->unix_path, l->dev, l->ino);
      SEGOPS_LOGE("cannot serve unix:%s", a->path);
    } else {
      SEGOPS_LOGE("cannot listen on %s:%d (address in use, or not permitted)", a->host, a->port);
    }
    return -1;
  }
  if (a->is_unix) {
    snprintf(l->url, sizeof l->url, "unix:%s", a->path);
  } else {
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(l->mhd, MHD_DAEMON_INFO_BIND_PORT);
    l->port = di ? di->port : a->port;
    bool v6 = strchr(a->host, ':') != NULL;
    snprintf(l->url, sizeof l->url, "http://%s%.128s%s:%d", v6 ? "[" : "", a->host, v6 ? "]" : "", l->port);
  }
  return 0;
}

/* Stops every listener's daemon (a unix listener's fd is closed by libmicrohttpd) and removes
 * the socket files. */
static void stop_listeners(segops_server *srv) {
  for (int k = 0; k < srv->n_listeners; k++) {
    segops_listener *l = &srv->listeners[k];
    if (l->mhd) MHD_stop_daemon(l->mhd);
    l->mhd = NULL;
    segops_unix_unlink(l->unix_path, l->dev, l->ino);
  }
  srv->n_listeners = 0;
  srv->mhd = NULL;
}

int segops_server_start(segops_server *srv) {
  const segops_config *c = srv->cfg;
  srv->limits.max_elements = c->max_elements;
  srv->limits.max_segments = c->max_segments;
  srv->limits.max_output_bytes = c->max_output_bytes;
  srv->codec_limits.max_depth = 32;
  /* The body cap alone would let a JSON body of "1,1,1,..." build a tree of ~25x its size
   * (jansson spends ~50 bytes per number), so items are capped on their own. msgpack bodies
   * carry tensor data as bin, a single item, and need few. */
  srv->codec_limits.max_items = (size_t)c->max_body_items;
  segops_watchdog_opts wo = {c->head_timeout_s,    (double)c->idle_timeout_s,    (double)c->min_upload_rate,
                             c->request_timeout_s, (double)c->min_download_rate, c->answer_stall_timeout_s};
  srv->watchdog = segops_watchdog_new(&wo);
  srv->conns = segops_conns_new(c->max_connections, c->max_connections_per_peer);
  if (!srv->watchdog || !srv->conns) {
    segops_watchdog_free(srv->watchdog);
    segops_conns_free(srv->conns);
    srv->watchdog = NULL;
    srv->conns = NULL;
    SEGOPS_LOGE("cannot start the connection watchdog thread");
    return -1;
  }
  srv->shm = segops_shm_new((uint64_t)c->max_shm_bytes, srv->backend);
  if (srv->shm)
    segops_shm_set_shares(srv->shm, (uint64_t)c->max_shm_bytes_per_uid, (int)c->max_shm_regions,
                          (int)c->max_shm_regions_per_uid);
  if (!srv->shm) {
    segops_watchdog_free(srv->watchdog);
    srv->watchdog = NULL;
    segops_conns_free(srv->conns);
    srv->conns = NULL;
    SEGOPS_LOGE("cannot set up the shared-memory registry");
    return -1;
  }
  srv->n_listeners = 0;
  srv->port = 0;
  for (int k = 0; k < c->n_listen; k++) {
    segops_listener *l = &srv->listeners[srv->n_listeners];
    memset(l, 0, sizeof *l);
    if (start_listener(srv, &c->listen[k], l) != 0) {
      stop_listeners(srv);
      segops_shm_free(srv->shm);
      srv->shm = NULL;
      segops_watchdog_free(srv->watchdog);
      srv->watchdog = NULL;
      segops_conns_free(srv->conns);
      srv->conns = NULL;
      return -1;
    }
    srv->n_listeners++;
    if (!c->listen[k].is_unix && !srv->port) srv->port = l->port;
  }
  srv->mhd = srv->listeners[0].mhd;
  return 0;
}

static void sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

void segops_server_drain_and_stop(segops_server *srv) {
  const segops_config *c = srv->cfg;
  /* 1. Lame duck: /readyz says 503 at once, so load balancers and clients over many daemons
   * stop sending here, while work that still arrives is served for --drain-seconds. */
  atomic_store(&srv->state, SEGOPS_STATE_LAME_DUCK);
  if (c->drain_seconds > 0) {
    SEGOPS_LOGI("draining: /readyz is 503; still serving for %.3g s (--drain-seconds)", c->drain_seconds);
    double until = segops_now() + c->drain_seconds;
    for (double now = segops_now(); now < until; now = segops_now()) sleep_ms((long)((until - now) * 1e3) + 1);
  }
  /* 2. New work is refused from here on: op requests get 503 unavailable + Retry-After +
   * Connection: close; the listening socket closes with MHD_stop_daemon below.
   * MHD_quiesce_daemon is not used: with an epoll thread pool (libmicrohttpd 0.9.75) it races
   * with the worker threads removing the listen socket from their epoll sets and can abort the
   * process ("Failed to remove listen FD from epoll set"), seen in a test run. */
  atomic_store(&srv->state, SEGOPS_STATE_DRAINING);
  SEGOPS_LOGI("draining: new requests get 503; %ld request(s) open, %ld accepted; finishing within %.3g s",
              (long)atomic_load(&srv->active), (long)atomic_load(&srv->busy), c->shutdown_timeout_s);
  /* Every accepted request (queued, running, or being answered) is finished and its answer
   * sent. A request still uploading its body gets a grace period to complete it (it may then
   * be accepted and answered); after that it is cut. All within --shutdown-timeout. */
  double t0 = segops_now();
  double deadline = t0 + c->shutdown_timeout_s;
  double grace = (double)c->idle_timeout_s < 5 ? (double)c->idle_timeout_s : 5;
  for (;;) {
    long active = atomic_load(&srv->active), busy = atomic_load(&srv->busy);
    double now = segops_now();
    if (active == 0 || (busy == 0 && now >= t0 + grace)) break;
    if (now >= deadline) {
      /* Work that outlives the timeout (a hung device call) cannot be waited for: the
       * orchestrator would kill the process anyway. Say so and leave. */
      SEGOPS_LOGE("shutdown timeout (%.3g s): %ld request(s) still running; exiting without them",
                  c->shutdown_timeout_s, busy);
      fflush(stderr);
      _exit(1);
    }
    sleep_ms(5);
  }
  /* No more jobs; the accepted ones were all answered, so this returns at once. After it no
   * connection is suspended (only a job in the scheduler holds one suspended). */
  segops_sched_close(srv->sched);
  segops_sched_drain(srv->sched);
  long left = atomic_load(&srv->active);
  if (left > 0) SEGOPS_LOGW("closing %ld unfinished connection(s) (incomplete uploads or stalled clients)", left);
  stop_listeners(srv);
  segops_shm_free(srv->shm); /* every request is over: unregister everything */
  srv->shm = NULL;
  segops_watchdog_free(srv->watchdog);
  srv->watchdog = NULL;
  segops_conns_free(srv->conns);
  srv->conns = NULL;
}

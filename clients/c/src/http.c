/* http.c: the HTTP transport (transport.h): HTTP/1.1 through libcurl over TCP or a unix socket,
 * msgpack bodies (http_body.c). Easy handles are kept in a small pool, each with its keep-alive
 * connection, so a thread reuses a warm connection and threads never share one. The call's
 * deadline bounds the whole exchange (connecting, sending and reading: a daemon that trickles its
 * answer does not hold a call past it), and answers are bounded while they arrive: a body longer
 * than the call's answer can be, or an error body past 64 KiB, ends the exchange. */
#include <curl/curl.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "http_body.h"

#define MAX_IDLE 64                           /* pooled handles (connections) kept */
#define INFO_CAP ((size_t)1 << 20)            /* /v1/info */
#define KEEP_BUFFERS_BELOW ((size_t)16 << 20) /* a pooled handle keeps buffers up to this */

/* A pooled easy handle, its buffers and the state of its exchange in progress. */
typedef struct hconn {
  CURL *h;
  segops_buf req, resp;
  char errbuf[CURL_ERROR_SIZE];
  size_t cap_ok;      /* bound of a 2xx body of this exchange */
  bool too_big;       /* the body passed its bound: the exchange was cut */
  char why[200];      /* ... and what it declared */
  bool is_msgpack;    /* Content-Type of the answer */
  double retry_after; /* Retry-After of the answer (s) */
  struct hconn *next;
} hconn;

typedef struct {
  segops_transport base;
  char *shown;     /* the URL as given, for messages */
  char *base_url;  /* "http://host:port/prefix" (or "http://localhost" over a unix socket) */
  char *unix_path; /* NULL over TCP */
  char *host;      /* the URL's host (TCP), for messages */
  bool tls;
  char *fn_url[SEGOPS_FN_COUNT], *info_url, *ready_url;
  struct curl_slist *post_hdrs, *get_hdrs;
  pthread_mutex_t mu; /* guards idle */
  hconn *idle;
  int n_idle;
} http_t;

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_rc;
static void curl_init(void) { curl_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT); }

/* ---- the handle pool ---- */

static void hconn_free(hconn *hc) {
  if (!hc) return;
  if (hc->h) curl_easy_cleanup(hc->h);
  segops_buf_free(&hc->req);
  segops_buf_free(&hc->resp);
  free(hc);
}

static size_t on_body(char *p, size_t size, size_t n, void *arg);
static size_t on_header(char *p, size_t size, size_t n, void *arg);

static hconn *hconn_new(http_t *ht) {
  hconn *hc = calloc(1, sizeof *hc);
  if (!hc || !(hc->h = curl_easy_init())) {
    free(hc);
    return NULL;
  }
  CURL *h = hc->h;
  curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L); /* threads: no SIGALRM for timeouts */
  curl_easy_setopt(h, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
  curl_easy_setopt(h, CURLOPT_PROXY, ""); /* a daemon is called directly, never through $http_proxy */
  curl_easy_setopt(h, CURLOPT_TCP_NODELAY, 1L);
  curl_easy_setopt(h, CURLOPT_ERRORBUFFER, hc->errbuf);
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
  curl_easy_setopt(h, CURLOPT_WRITEDATA, hc);
  curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
  curl_easy_setopt(h, CURLOPT_HEADERDATA, hc);
  if (ht->unix_path) curl_easy_setopt(h, CURLOPT_UNIX_SOCKET_PATH, ht->unix_path);
  return hc;
}

static hconn *conn_get(http_t *ht) {
  pthread_mutex_lock(&ht->mu);
  hconn *hc = ht->idle;
  if (hc) {
    ht->idle = hc->next;
    ht->n_idle--;
  }
  pthread_mutex_unlock(&ht->mu);
  return hc ? hc : hconn_new(ht);
}

static void conn_put(http_t *ht, hconn *hc) {
  if (hc->req.cap > KEEP_BUFFERS_BELOW) segops_buf_free(&hc->req);
  if (hc->resp.cap > KEEP_BUFFERS_BELOW) segops_buf_free(&hc->resp);
  pthread_mutex_lock(&ht->mu);
  bool keep = ht->n_idle < MAX_IDLE;
  if (keep) {
    hc->next = ht->idle;
    ht->idle = hc;
    ht->n_idle++;
  }
  pthread_mutex_unlock(&ht->mu);
  if (!keep) hconn_free(hc);
}

/* ---- one exchange ---- */

/* Whether the answer's declared length fits what this call's answer may be (its status and length are
 * known once its head is in); else hc->why says so. Sets the bound the body is read against. */
static bool declared_fits(hconn *hc) {
  long status = 0;
  curl_off_t declared = -1;
  curl_easy_getinfo(hc->h, CURLINFO_RESPONSE_CODE, &status);
  curl_easy_getinfo(hc->h, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &declared);
  size_t cap = status >= 200 && status < 300 ? hc->cap_ok : SEGOPS_ERROR_BODY_CAP;
  if (declared > (curl_off_t)cap) {
    snprintf(hc->why, sizeof hc->why, "declares a body of %lld bytes; an answer to this call has at most %zu",
             (long long)declared, cap);
    hc->too_big = true;
    return false;
  }
  hc->cap_ok = cap;
  return true;
}

static size_t on_header(char *p, size_t size, size_t n, void *arg) {
  hconn *hc = arg;
  size_t len = size * n;
  if (len == 2 && p[0] == '\r' && p[1] == '\n') { /* the end of a head: refuse a length past the bound now, not
                                                     after waiting for bytes that may never come */
    long status = 0;
    curl_easy_getinfo(hc->h, CURLINFO_RESPONSE_CODE, &status);
    return status >= 200 && !declared_fits(hc) ? 0 : len;
  }
  if (len >= 5 && !strncmp(p, "HTTP/", 5)) { /* a new answer (after a 100 Continue) */
    hc->is_msgpack = false;
    hc->retry_after = 0;
  } else if (len > 12 && !strncasecmp(p, "Retry-After:", 12)) {
    hc->retry_after = strtod(p + 12, NULL);
    if (!(hc->retry_after >= 0 && hc->retry_after < 3600)) hc->retry_after = 0;
  } else if (len > 13 && !strncasecmp(p, "Content-Type:", 13)) {
    const char *v = p + 13;
    while (*v == ' ' || *v == '\t') v++;
    hc->is_msgpack = !strncasecmp(v, "application/msgpack", 19) || !strncasecmp(v, "application/x-msgpack", 21) ||
                     !strncasecmp(v, "application/vnd.msgpack", 23);
  }
  return len;
}

static size_t on_body(char *p, size_t size, size_t n, void *arg) {
  hconn *hc = arg;
  size_t len = size * n;
  if (hc->resp.len == 0) { /* first bytes: the status and the declared length are known */
    curl_off_t declared = -1;
    if (!declared_fits(hc)) return 0;
    curl_easy_getinfo(hc->h, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &declared);
    if (declared > 0 && !segops_buf_reserve(&hc->resp, (size_t)declared)) return 0;
  }
  if (hc->resp.len + len > hc->cap_ok) {
    snprintf(hc->why, sizeof hc->why, "sent a body longer than the %zu bytes an answer to this call can have",
             hc->cap_ok);
    hc->too_big = true;
    return 0;
  }
  if (!segops_buf_reserve(&hc->resp, len)) return 0;
  memcpy(hc->resp.p + hc->resp.len, p, len);
  hc->resp.len += len;
  return len;
}

/* Why no connection was made, in words a person acts on: the socket path that does not exist, the
 * address nothing listens on, the host name that does not resolve. */
static int connect_error(CURLcode rc, http_t *ht, hconn *hc, const char *where, segops_error *e) {
  long oserr = 0;
  curl_easy_getinfo(hc->h, CURLINFO_OS_ERRNO, &oserr);
  if (ht->unix_path) {
    struct stat st;
    if (stat(ht->unix_path, &st) != 0)
      return segops_client_err(e, SEGOPS_E_CONNECTION, "%s: no such socket: %s does not exist", where, ht->unix_path);
    if (!S_ISSOCK(st.st_mode))
      return segops_client_err(e, SEGOPS_E_CONNECTION, "%s: %s is not a socket", where, ht->unix_path);
    if (oserr == ECONNREFUSED)
      return segops_client_err(e, SEGOPS_E_CONNECTION, "%s: connection refused: nothing listens on %s", where,
                               ht->unix_path);
    return segops_client_err(e, SEGOPS_E_CONNECTION, "%s: cannot connect to %s: %s", where, ht->unix_path,
                             oserr ? strerror((int)oserr) : curl_easy_strerror(rc));
  }
  if (rc == CURLE_COULDNT_RESOLVE_HOST) {
    segops_no_such_host = true;
    return segops_client_err(e, SEGOPS_E_CONNECTION, "%s: no such host: '%s' does not resolve", where,
                             ht->host ? ht->host : "?");
  }
  if (oserr == ECONNREFUSED) {
    char *ip = NULL;
    long port = 0;
    curl_easy_getinfo(hc->h, CURLINFO_PRIMARY_IP, &ip);
    curl_easy_getinfo(hc->h, CURLINFO_PRIMARY_PORT, &port);
    if (ip && *ip && port > 0)
      return segops_client_err(e, SEGOPS_E_CONNECTION, "%s: connection refused: nothing listens on %s port %ld", where,
                               ip, port);
    return segops_client_err(e, SEGOPS_E_CONNECTION, "%s: connection refused: nothing listens there", where);
  }
  const char *detail = hc->errbuf[0] ? hc->errbuf : curl_easy_strerror(rc);
  return segops_client_err(e, SEGOPS_E_CONNECTION, "%s: %s", where, detail);
}

/* A failed exchange as a segops error. */
static int transfer_error(CURLcode rc, http_t *ht, hconn *hc, const char *where, double timeout_s, bool connect_bound,
                          segops_error *e) {
  const char *detail = hc->errbuf[0] ? hc->errbuf : curl_easy_strerror(rc);
  switch (rc) {
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_CONNECT:
      return connect_error(rc, ht, hc, where, e);
    case CURLE_OPERATION_TIMEDOUT:
      /* The connection's own bound (first contact) passed, not the call's: nobody answered. */
      if (connect_bound)
        return segops_client_err(e, SEGOPS_E_CONNECTION, "%s: no connection in %.3g s (%s)", where, timeout_s, detail);
      return segops_client_err(e, SEGOPS_E_TIMEOUT, "%s: no answer within the call's timeout (%.3g s left): %s", where,
                               timeout_s, detail);
    case CURLE_WRITE_ERROR:
      if (hc->too_big) return segops_client_err(e, SEGOPS_E_PROTOCOL, "%s: the daemon %s", where, hc->why);
      return segops_client_err(e, SEGOPS_E_NOMEM, "%s: out of memory for the answer", where);
    case CURLE_OUT_OF_MEMORY:
      return segops_client_err(e, SEGOPS_E_NOMEM, "%s: %s", where, detail);
    case CURLE_WEIRD_SERVER_REPLY:
    case CURLE_UNSUPPORTED_PROTOCOL:
    case CURLE_BAD_CONTENT_ENCODING:
      return segops_client_err(e, SEGOPS_E_PROTOCOL, "%s: %s", where, detail);
    default: /* refused, reset, closed mid-answer, unresolvable: another daemon may answer */
      return segops_client_err(e, SEGOPS_E_CONNECTION, "%s: %s", where, detail);
  }
}

/* Sends one request (body NULL: GET) and reads the answer into hc->resp; *status: its HTTP status. */
static int exchange(http_t *ht, hconn *hc, const char *url, const char *body, size_t len, size_t cap_ok,
                    double deadline, const char *where, long *status, segops_error *e) {
  double left = deadline - segops_client_now();
  if (left <= 0)
    return segops_client_err(e, SEGOPS_E_TIMEOUT, "%s: the call's timeout passed before it was sent", where);
  long ms = (long)(left * 1000) + 1;
  CURL *h = hc->h;
  curl_easy_setopt(h, CURLOPT_URL, url);
  if (body) {
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, ht->post_hdrs);
  } else {
    curl_easy_setopt(h, CURLOPT_HTTPGET, 1L);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, ht->get_hdrs);
  }
  curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, ms);
  long cms = ms;
  if (segops_connect_by > 0) { /* first contact: a connection (DNS included) by then, or none */
    double cleft = segops_connect_by - segops_client_now();
    cms = cleft <= 0 ? 1 : (long)(cleft * 1000) + 1;
    if (cms > ms) cms = ms;
  }
  curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, cms);
  hc->errbuf[0] = 0;
  hc->resp.len = 0;
  hc->cap_ok = cap_ok;
  hc->too_big = false;
  hc->is_msgpack = false;
  hc->retry_after = 0;
  CURLcode rc = curl_easy_perform(h);
  if (rc != CURLE_OK) {
    bool connect_bound = rc == CURLE_OPERATION_TIMEDOUT && cms < ms && segops_client_now() < deadline - 0.002;
    return transfer_error(rc, ht, hc, where, connect_bound ? (double)cms / 1000 : left, connect_bound, e);
  }
  curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, status);
  return SEGOPS_OK;
}

/* ---- the transport ---- */

/* A 401 says how a token is passed, whatever the daemon's own words. */
static void token_hint(long status, segops_error *e) {
  if (status != 401 || !e || strstr(e->message, "SEGOPS_TOKEN")) return;
  size_t n = strlen(e->message);
  snprintf(e->message + n, sizeof e->message - n,
           " (pass the daemon's token: $SEGOPS_TOKEN, or the client's token option)");
}

static int http_call(segops_transport *t, const segops_tcall *tc, double deadline, segops_error *e) {
  http_t *ht = (http_t *)t;
  char where[512];
  snprintf(where, sizeof where, "POST %s/v1/%s/%s", ht->shown, tc->op, tc->pass);
  hconn *hc = conn_get(ht);
  if (!hc) return segops_client_err(e, SEGOPS_E_NOMEM, "%s: no curl handle", where);
  long status = 0;
  int rc = segops_body_encode(tc, &hc->req, e);
  if (!rc)
    rc = exchange(ht, hc, ht->fn_url[tc->fn], hc->req.p, hc->req.len, segops_body_answer_cap(tc), deadline, where,
                  &status, e);
  if (!rc && status != 200) {
    rc = segops_body_error((int)status, hc->resp.p, hc->resp.len, hc->retry_after, where, e);
    token_hint(status, e);
  } else if (!rc && !hc->is_msgpack)
    rc = segops_client_err(e, SEGOPS_E_PROTOCOL, "%s: the answer is not application/msgpack", where);
  else if (!rc)
    rc = segops_body_decode_answer(tc, (const uint8_t *)hc->resp.p, hc->resp.len, where, e);
  conn_put(ht, hc);
  return rc;
}

/* GET url with a body bound: the answer's text (malloc'd, NUL-terminated) or NULL on 200; an error otherwise. */
static int http_get(http_t *ht, const char *url, size_t cap, double deadline, char **text, segops_error *e) {
  char where[512];
  snprintf(where, sizeof where, "GET %s", url);
  hconn *hc = conn_get(ht);
  if (!hc) return segops_client_err(e, SEGOPS_E_NOMEM, "%s: no curl handle", where);
  long status = 0;
  int rc = exchange(ht, hc, url, NULL, 0, cap, deadline, where, &status, e);
  if (!rc && status != 200) {
    rc = segops_body_error((int)status, hc->resp.p, hc->resp.len, hc->retry_after, where, e);
    token_hint(status, e);
  } else if (!rc && text) {
    *text = malloc(hc->resp.len + 1);
    if (!*text) rc = segops_client_err(e, SEGOPS_E_NOMEM, "%s: out of memory", where);
    if (*text) {
      if (hc->resp.len) memcpy(*text, hc->resp.p, hc->resp.len);
      (*text)[hc->resp.len] = 0;
    }
  }
  conn_put(ht, hc);
  return rc;
}

static int http_info(segops_transport *t, char **json, double deadline, segops_error *e) {
  http_t *ht = (http_t *)t;
  return http_get(ht, ht->info_url, INFO_CAP, deadline, json, e);
}

int segops_http_ready(segops_transport *t, double deadline, segops_error *e) {
  http_t *ht = (http_t *)t;
  return http_get(ht, ht->ready_url, SEGOPS_ERROR_BODY_CAP, deadline, NULL, e);
}

static void http_free(http_t *ht, bool close_handles) {
  for (hconn *hc = ht->idle, *next; hc; hc = next) {
    next = hc->next;
    if (!close_handles) hc->h = NULL; /* left to the parent: not a word on its TLS session */
    hconn_free(hc);
  }
  for (int k = 0; k < SEGOPS_FN_COUNT; k++) free(ht->fn_url[k]);
  free(ht->info_url);
  free(ht->ready_url);
  free(ht->shown);
  free(ht->base_url);
  free(ht->unix_path);
  free(ht->host);
  curl_slist_free_all(ht->post_hdrs);
  curl_slist_free_all(ht->get_hdrs);
  pthread_mutex_destroy(&ht->mu);
  free(ht);
}

static void http_close(segops_transport *t) {
  if (t) http_free((http_t *)t, true);
}

/* In a forked child: a plain connection's socket is closed (the parent's end stays open); a TLS
 * one is left alone, since closing it would send the parent's session a close_notify. A handle
 * that a parent thread had in use at the fork is not in the pool: it stays with the parent. */
static void http_forget(segops_transport *t) {
  http_t *ht = (http_t *)t;
  if (pthread_mutex_trylock(&ht->mu) != 0) return; /* held at the fork: leave it all */
  pthread_mutex_unlock(&ht->mu);
  http_free(ht, !ht->tls);
}

static const segops_transport_vt HTTP_VT = {"http", http_call, http_info, http_close, http_forget};
static const segops_transport_vt UNIX_VT = {"unix", http_call, http_info, http_close, http_forget};

/* ---- opening ---- */

static char *join(const char *a, const char *b, const char *c) {
  size_t n = strlen(a) + strlen(b) + strlen(c) + 1;
  char *s = malloc(n);
  if (s) snprintf(s, n, "%s%s%s", a, b, c);
  return s;
}

/* base_url and unix_path of url; SEGOPS_OK or INVALID_ARGUMENT. */
static int parse_url(http_t *ht, const char *url, segops_error *e) {
  if (!strncmp(url, "unix:", 5)) {
    const char *path = url + (strncmp(url, "unix://", 7) ? 5 : 7);
    if (path[0] != '/')
      return segops_client_err(e, SEGOPS_E_INVALID_ARGUMENT, "\"%.200s\": a unix URL is unix:///absolute/path", url);
    ht->unix_path = strdup(path);
    ht->base_url = strdup("http://localhost");
    return ht->unix_path && ht->base_url ? SEGOPS_OK : segops_client_err(e, SEGOPS_E_NOMEM, "out of memory");
  }
  const char *sep = strstr(url, "://");
  if (sep && strncasecmp(url, "http://", 7) && strncasecmp(url, "https://", 8))
    return segops_client_err(e, SEGOPS_E_INVALID_ARGUMENT,
                             "\"%.200s\": unsupported URL (want http://host:port, unix:///path or local)", url);
  ht->tls = !strncasecmp(url, "https://", 8);
  ht->base_url = sep ? strdup(url) : join("http://", url, "");
  if (!ht->base_url) return SEGOPS_OK;
  size_t n = strlen(ht->base_url);
  while (n && ht->base_url[n - 1] == '/') ht->base_url[--n] = 0;
  CURLU *u = curl_url();
  char *host = NULL;
  bool ok = u && curl_url_set(u, CURLUPART_URL, ht->base_url, 0) == CURLUE_OK &&
            curl_url_get(u, CURLUPART_HOST, &host, 0) == CURLUE_OK && host && *host;
  if (ok) ht->host = strdup(host);
  curl_free(host);
  curl_url_cleanup(u);
  if (!ok) return segops_client_err(e, SEGOPS_E_INVALID_ARGUMENT, "\"%.200s\" is not a URL of a host", url);
  return SEGOPS_OK;
}

static int make_headers(http_t *ht, const char *token, segops_error *e) {
  char auth[4200];
  if (token &&
      (strpbrk(token, "\r\n") || snprintf(auth, sizeof auth, "Authorization: Bearer %s", token) >= (int)sizeof auth))
    return segops_client_err(e, SEGOPS_E_INVALID_ARGUMENT, "the token must be one line of at most 4096 bytes");
  const char *post[] = {"Content-Type: application/msgpack", "Accept: application/msgpack", "Expect:"};
  for (int i = 0; i < 3; i++) ht->post_hdrs = curl_slist_append(ht->post_hdrs, post[i]);
  ht->get_hdrs = curl_slist_append(NULL, "Accept: application/json");
  if (token) {
    ht->post_hdrs = curl_slist_append(ht->post_hdrs, auth);
    ht->get_hdrs = curl_slist_append(ht->get_hdrs, auth);
  }
  return SEGOPS_OK;
}

static bool make_urls(http_t *ht) {
  bool ok = (ht->info_url = join(ht->base_url, "/v1/info", "")) && (ht->ready_url = join(ht->base_url, "/readyz", ""));
  for (int k = 0; k < SEGOPS_FN_COUNT && ok; k++) {
    char path[96];
    snprintf(path, sizeof path, "/v1/%s/%s", segops_fn_op(k), segops_fn_pass(k));
    ok = (ht->fn_url[k] = join(ht->base_url, path, "")) != NULL;
  }
  return ok;
}

segops_transport *segops_http_open(const char *url, const char *token, segops_error *e) {
  pthread_once(&curl_once, curl_init);
  if (curl_init_rc != CURLE_OK) {
    segops_client_err(e, SEGOPS_E_INTERNAL, "libcurl: %s", curl_easy_strerror(curl_init_rc));
    return NULL;
  }
  http_t *ht = calloc(1, sizeof *ht);
  if (!ht) {
    segops_client_err(e, SEGOPS_E_NOMEM, "out of memory");
    return NULL;
  }
  pthread_mutex_init(&ht->mu, NULL);
  int rc = parse_url(ht, url, e);
  if (!rc) rc = make_headers(ht, token, e);
  ht->shown = strdup(url);
  if (!rc && (!ht->base_url || !ht->shown || !ht->post_hdrs || !ht->get_hdrs || !make_urls(ht)))
    rc = segops_client_err(e, SEGOPS_E_NOMEM, "out of memory");
  if (rc) {
    http_free(ht, true);
    return NULL;
  }
  ht->base.vt = ht->unix_path ? &UNIX_VT : &HTTP_VT;
  return &ht->base;
}

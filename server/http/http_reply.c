/* http_reply.c: content negotiation (Content-Type, Accept), bearer-token auth, and the JSON error
 * responses of proto/API.md, whose codes and statuses come from core/errors.h alone. */
#include <ctype.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#include "errors.h"
#include "http.h"
#include "log.h"
#include "segops_token.h"

static const char *skip_ws(const char *p, const char *end) {
  while (p < end && (*p == ' ' || *p == '\t')) p++;
  return p;
}

static size_t trim_len(const char *p, size_t n) {
  while (n > 0 && (p[n - 1] == ' ' || p[n - 1] == '\t')) n--;
  return n;
}

static bool token_is(const char *p, size_t n, const char *lit) {
  return strlen(lit) == n && strncasecmp(p, lit, n) == 0;
}

/* Classifies a bare media type: SEGOPS_ENC_*, 2 for a wildcard, 3 for application/star, -1. */
enum { MT_ANY = 2, MT_APP_ANY = 3 };
static int media_kind(const char *p, size_t n, const char **type) {
  if (token_is(p, n, "application/msgpack")) {
    *type = "application/msgpack";
    return SEGOPS_ENC_MSGPACK;
  }
  if (token_is(p, n, "application/x-msgpack")) {
    *type = "application/x-msgpack";
    return SEGOPS_ENC_MSGPACK;
  }
  if (token_is(p, n, "application/vnd.msgpack")) {
    *type = "application/vnd.msgpack";
    return SEGOPS_ENC_MSGPACK;
  }
  if (token_is(p, n, "application/json")) {
    *type = "application/json";
    return SEGOPS_ENC_JSON;
  }
  if (token_is(p, n, "*/*")) return MT_ANY;
  if (token_is(p, n, "application/*")) return MT_APP_ANY;
  return -1;
}

int segops_http_content_type(const char *ct) {
  if (!ct) return -1;
  const char *end = ct + strlen(ct);
  const char *p = skip_ws(ct, end);
  const char *semi = memchr(p, ';', (size_t)(end - p));
  size_t n = trim_len(p, (size_t)((semi ? semi : end) - p));
  const char *type;
  int k = media_kind(p, n, &type);
  if (k != SEGOPS_ENC_MSGPACK && k != SEGOPS_ENC_JSON) return -1;
  /* Parameters: JSON is UTF-8 by definition; refuse a body that claims another charset. */
  while (semi) {
    p = skip_ws(semi + 1, end);
    semi = memchr(p, ';', (size_t)(end - p));
    size_t pn = trim_len(p, (size_t)((semi ? semi : end) - p));
    if (pn > 8 && strncasecmp(p, "charset=", 8) == 0 && k == SEGOPS_ENC_JSON) {
      const char *v = p + 8;
      size_t vn = pn - 8;
      if (vn >= 2 && v[0] == '"' && v[vn - 1] == '"') v++, vn -= 2;
      if (!token_is(v, vn, "utf-8") && !token_is(v, vn, "utf8")) return -1;
    }
  }
  return k;
}

/* Parses "q=0.5" out of a parameter list; 1 when absent, -1 when malformed. */
static double parse_q(const char *p, const char *end) {
  double q = 1.0;
  while (p < end) {
    p = skip_ws(p, end);
    if (p >= end) break; /* also tells gcc 13 the memchr bound below is not negative */
    const char *semi = memchr(p, ';', (size_t)(end - p));
    const char *pe = semi ? semi : end;
    if (pe - p >= 2 && (p[0] == 'q' || p[0] == 'Q') && p[1] == '=') {
      char buf[16];
      size_t n = trim_len(p + 2, (size_t)(pe - p - 2));
      if (n == 0 || n >= sizeof buf) return -1;
      memcpy(buf, p + 2, n);
      buf[n] = 0;
      char *e;
      q = strtod(buf, &e);
      if (*e || q < 0 || q > 1) return -1;
    }
    p = semi ? semi + 1 : end;
  }
  return q;
}

int segops_http_accept(const char *accept, int req_enc, const char **type) {
  static const char *const DEFAULT_TYPE[2] = {"application/msgpack", "application/json"};
  if (!accept || !*skip_ws(accept, accept + strlen(accept))) {
    *type = DEFAULT_TYPE[req_enc];
    return req_enc;
  }
  /* q by specificity: an exact type beats application/star, which beats star/star. */
  double q_exact[2] = {-1, -1}, q_app = -1, q_any = -1;
  const char *exact_type[2] = {DEFAULT_TYPE[0], DEFAULT_TYPE[1]};
  const char *end = accept + strlen(accept);
  const char *p = accept;
  while (p < end) {
    const char *comma = memchr(p, ',', (size_t)(end - p));
    const char *ie = comma ? comma : end;
    const char *s = skip_ws(p, ie);
    const char *semi = memchr(s, ';', (size_t)(ie - s));
    size_t n = trim_len(s, (size_t)((semi ? semi : ie) - s));
    double q = semi ? parse_q(semi + 1, ie) : 1.0;
    const char *t = NULL;
    int k = n ? media_kind(s, n, &t) : -1;
    if (q >= 0) {
      if (k == SEGOPS_ENC_MSGPACK || k == SEGOPS_ENC_JSON) {
        if (q > q_exact[k]) {
          q_exact[k] = q;
          exact_type[k] = t;
        }
      } else if (k == MT_APP_ANY) {
        if (q > q_app) q_app = q;
      } else if (k == MT_ANY) {
        if (q > q_any) q_any = q;
      }
    }
    p = comma ? comma + 1 : end;
  }
  double q[2];
  for (int e = 0; e < 2; e++) {
    q[e] = q_exact[e] >= 0 ? q_exact[e] : q_app >= 0 ? q_app : q_any >= 0 ? q_any : 0;
  }
  if (q[0] <= 0 && q[1] <= 0) return -1;
  int pick = q[req_enc] >= q[1 - req_enc] ? req_enc : 1 - req_enc;
  *type = q_exact[pick] >= 0 ? exact_type[pick] : DEFAULT_TYPE[pick];
  return pick;
}

bool segops_http_auth_ok(const char *h, const char *token) {
  if (!token) return true;
  if (!h) return false;
  while (*h == ' ') h++;
  if (strncasecmp(h, "Bearer ", 7) != 0) return false;
  h += 7;
  while (*h == ' ') h++;
  size_t hl = strlen(h);
  while (hl > 0 && h[hl - 1] == ' ') hl--;
  return segops_token_equal(h, hl, token, strlen(token));
}

/* Length of the valid UTF-8 sequence at s (1-4), or 0 when the bytes there are not one. */
static int utf8_len(const unsigned char *s) {
  unsigned c = s[0];
  int n = c < 0x80 ? 1 : (c & 0xe0) == 0xc0 ? 2 : (c & 0xf0) == 0xe0 ? 3 : (c & 0xf8) == 0xf0 ? 4 : 0;
  if (n == 0 || (n == 2 && c < 0xc2) || (n == 4 && c > 0xf4)) return 0;
  for (int i = 1; i < n; i++)
    if ((s[i] & 0xc0) != 0x80) return 0;
  if (n == 3 && ((c == 0xe0 && s[1] < 0xa0) || (c == 0xed && s[1] >= 0xa0))) return 0; /* overlong, surrogate */
  if (n == 4 && ((c == 0xf0 && s[1] < 0x90) || (c == 0xf4 && s[1] >= 0x90))) return 0;
  return n;
}

/* Writes s JSON-escaped into out: quotes, backslash and control bytes escaped, valid UTF-8 kept,
 * any other byte (messages may quote names from a hostile body) replaced by U+FFFD, so the
 * error body is always valid JSON. */
static size_t json_escape(char *out, size_t cap, const char *s) {
  size_t o = 0;
  const unsigned char *p = (const unsigned char *)s;
  while (*p && o + 8 < cap) {
    unsigned char c = *p;
    if (c == '"' || c == '\\') {
      out[o++] = '\\';
      out[o++] = (char)c;
      p++;
    } else if (c < 0x20 || c == 0x7f) {
      o += (size_t)snprintf(out + o, cap - o, "\\u%04x", c);
      p++;
    } else if (c < 0x80) {
      out[o++] = (char)c;
      p++;
    } else {
      int n = utf8_len(p);
      if (n) {
        memcpy(out + o, p, (size_t)n);
        o += (size_t)n;
        p += n;
      } else {
        memcpy(out + o, "\\ufffd", 6);
        o += 6;
        p++;
      }
    }
  }
  out[o] = 0;
  return o;
}

void segops_http_busy(segops_http_req *r) {
  if (r->busy) return;
  r->busy = true;
  atomic_fetch_add(&r->srv->busy, 1);
}

segops_http_outcome segops_http_send_buffer(segops_http_req *r, int status, const char *ctype, char *buf, size_t len) {
  if (!buf) return SEGOPS_HTTP_FAIL;
  struct MHD_Response *resp = MHD_create_response_from_buffer(len, buf, MHD_RESPMEM_MUST_FREE);
  if (!resp) {
    free(buf);
    return SEGOPS_HTTP_FAIL;
  }
  if (ctype) MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, ctype);
  /* A connection admitted past --max-connections serves its health check and goes. */
  if (r->cn && r->cn->reserve) MHD_add_response_header(resp, MHD_HTTP_HEADER_CONNECTION, "close");
  enum MHD_Result ret = MHD_queue_response(r->conn, (unsigned)status, resp);
  MHD_destroy_response(resp);
  if (ret == MHD_YES) {
    r->status = status;
    r->bytes_out = len;
    segops_http_busy(r);
    segops_watchdog_answer(segops_http_watch(r), len);
  }
  return ret == MHD_YES ? SEGOPS_HTTP_ANSWERED : SEGOPS_HTTP_FAIL;
}

segops_http_outcome segops_http_send_json(segops_http_req *r, void *json) {
  json_t *j = json;
  char *text = j ? json_dumps(j, JSON_COMPACT) : NULL;
  json_decref(j);
  if (!text) return segops_http_error(r, SEGOPS_E_NOMEM, 0, NULL, NULL, false);
  return segops_http_send_buffer(r, 200, "application/json", text, strlen(text));
}

/* An answer that must go on the first callback while the client sends a body of a known length
 * (at most --max-body-bytes; not one waiting for 100 Continue, which sends none): written to the
 * socket whole, the socket half-closed (the client sees the answer end), the body then dropped. */
static bool drain_after_answer(segops_http_req *r) {
  struct MHD_Connection *c = r->conn;
  const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
  if (!r->first_call || !cl || MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_TRANSFER_ENCODING) ||
      MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_EXPECT))
    return false;
  char *end;
  unsigned long long v = strtoull(cl, &end, 10);
  return end != cl && !*end && v > 0 && (int64_t)v <= r->srv->cfg->max_body_bytes;
}

static bool answer_on_socket(segops_http_req *r, int status, const char *body, int n) {
  const union MHD_ConnectionInfo *ci = MHD_get_connection_info(r->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
  char msg[2048];
  int ml = snprintf(msg, sizeof msg,
                    "HTTP/1.1 %d %s\r\nConnection: close\r\nContent-Type: application/json\r\n%s%s"
                    "Content-Length: %d\r\n\r\n%s",
                    status, MHD_get_reason_phrase_for((unsigned)status),
                    status == 401 ? "WWW-Authenticate: Bearer realm=\"segops\"\r\n" : "",
                    status == 503 ? "Retry-After: 1\r\n" : "", n, body);
  if (!ci || ml <= 0 || (size_t)ml >= sizeof msg) return false;
  if (send(ci->connect_fd, msg, (size_t)ml, MSG_NOSIGNAL | MSG_DONTWAIT) != ml) return false;
  shutdown(ci->connect_fd, SHUT_WR);
  r->raw_answered = true;
  r->status = status;
  r->bytes_out = (uint64_t)n; /* not busy: a drain does not wait for a body nobody will use */
  return true;
}

/* Whether an error is recorded now and answered once the body is dropped (PH_ERROR): only on the
 * first callback, and only for a small or absent body (a large one, or one of unknown length, is
 * not read for an error: the answer goes at once), and not when the client waits for 100
 * Continue (answering now sends no 100). */
static bool defers_errors(const segops_http_req *r) {
  struct MHD_Connection *c = r->conn;
  if (!r->first_call) return false;
  const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
  return !MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_TRANSFER_ENCODING) &&
         (!cl || strtoull(cl, NULL, 10) <= 64 * 1024) &&
         !MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_EXPECT);
}

segops_http_outcome segops_http_error(segops_http_req *r, int err, int http_status, const char *message,
                                      const char *allow, bool close) {
  if (!close && defers_errors(r)) {
    r->deferred.err = err;
    r->deferred.http_status = http_status;
    r->deferred.allow = allow;
    snprintf(r->deferred.message, sizeof r->deferred.message, "%s", message ? message : "");
    return SEGOPS_HTTP_DEFERRED;
  }
  int status = http_status > 0 ? http_status : segops_err_http_status(err);
  const char *code = segops_err_code(err);
  /* Not twice: a mid-upload answer that could not be written at once was counted when decided. */
  if (r->route != SEGOPS_ROUTE_HEALTHZ && r->route != SEGOPS_ROUTE_READYZ && !r->counted) segops_metrics_rejected(err);
  char esc[1200];
  json_escape(esc, sizeof esc, message && *message ? message : segops_err_message(err));
  size_t cap = strlen(esc) + strlen(code) + 64;
  char *buf = malloc(cap);
  if (!buf) return SEGOPS_HTTP_FAIL;
  /* The Open Inference Protocol's error body is a bare message; v1's carries the code too. */
  int n = r->oip_errors ? snprintf(buf, cap, "{\"error\":\"%s\"}", esc)
                        : snprintf(buf, cap, "{\"error\":{\"code\":\"%s\",\"message\":\"%s\"}}", code, esc);
  if (close && drain_after_answer(r) && answer_on_socket(r, status, buf, n)) {
    free(buf);
    return SEGOPS_HTTP_DRAIN;
  }
  struct MHD_Response *resp = MHD_create_response_from_buffer((size_t)n, buf, MHD_RESPMEM_MUST_FREE);
  if (!resp) {
    free(buf);
    return SEGOPS_HTTP_FAIL;
  }
  MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
  if (status == 405 && allow) MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW, allow);
  if (status == 401) MHD_add_response_header(resp, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer realm=\"segops\"");
  if (status == 503) MHD_add_response_header(resp, MHD_HTTP_HEADER_RETRY_AFTER, "1");
  if (close || (r->cn && r->cn->reserve)) MHD_add_response_header(resp, MHD_HTTP_HEADER_CONNECTION, "close");
  if (r->timing[0]) MHD_add_response_header(resp, "Server-Timing", r->timing);
  enum MHD_Result ret = MHD_queue_response(r->conn, (unsigned)status, resp);
  MHD_destroy_response(resp);
  if (ret == MHD_YES) {
    r->status = status;
    r->bytes_out = (uint64_t)n;
    segops_http_busy(r);
    segops_watchdog_answer(segops_http_watch(r), (uint64_t)n);
  }
  SEGOPS_LOGD("%d %s: %s", status, code, message ? message : "");
  return ret == MHD_YES ? SEGOPS_HTTP_ANSWERED : SEGOPS_HTTP_FAIL;
}

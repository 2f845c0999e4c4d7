/* http_strict.c: the request-head rules libmicrohttpd 0.9.75 does not enforce (RFC 9112 framing,
 * Host, encoded NUL and slash in paths), checked once on the first access-handler call, and the
 * unescape callback that keeps "%2F" and "%00" out of route matching. */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "errors.h"
#include "http.h"

static int hexval(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

size_t segops_http_unescape(void *cls, struct MHD_Connection *conn, char *s) {
  (void)cls;
  (void)conn;
  char *w = s;
  for (const char *p = s; *p; p++) {
    int hi, lo;
    if (*p == '%' && (hi = hexval(p[1])) >= 0 && (lo = hexval(p[2])) >= 0) {
      int v = hi * 16 + lo;
      /* An encoded slash stays data, never a path separator; an encoded NUL would cut the
       * string: both stay as written (segops_http_strict_head refuses the NUL). */
      if (v != '/' && v != 0) {
        *w++ = (char)v;
        p += 2;
        continue;
      }
    }
    *w++ = *p;
  }
  *w = 0;
  return (size_t)(w - s);
}

/* No route takes query parameters. libmicrohttpd 0.9.x stores each one as a record in the
 * connection's memory pool while it parses the request line; a query of tens of thousands of
 * parameters exhausts the pool, and then even its 431 cannot be built: the connection closes with
 * nothing sent. This callback runs on the request line before that parse (connection.c,
 * parse_initial_message_line, calls it "before we modify URI *or* args") and ends the query right
 * after its '?', so nothing is parsed into the pool and every request gets its answer; the
 * routes never see a query either way. The URI lies in the connection's writable read buffer.
 * Returns NULL: the request's context starts empty. */
void *segops_http_uri_seen(void *cls, const char *uri, struct MHD_Connection *conn) {
  (void)cls;
  (void)conn;
#if MHD_VERSION < 0x01000000
  char *q = uri ? strchr(uri, '?') : NULL;
  if (q && q[1]) q[1] = 0;
#else
  (void)uri; /* another series: its request-line parsing is not the one described above */
#endif
  return NULL;
}

typedef struct {
  int n_cl, n_te;
  bool cl_differ;
  const char *cl;
} head_scan;

static enum MHD_Result scan_header(void *cls, enum MHD_ValueKind kind, const char *key, const char *value) {
  (void)kind;
  head_scan *h = cls;
  if (!strcasecmp(key, MHD_HTTP_HEADER_CONTENT_LENGTH)) {
    if (h->n_cl++ && strcmp(h->cl, value ? value : "")) h->cl_differ = true;
    if (!h->cl) h->cl = value ? value : "";
  } else if (!strcasecmp(key, MHD_HTTP_HEADER_TRANSFER_ENCODING)) {
    h->n_te++;
  }
  return MHD_YES;
}

bool segops_http_has_body(struct MHD_Connection *conn) {
  const char *cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
  const char *te = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_TRANSFER_ENCODING);
  return te || (cl && strcmp(cl, "0") != 0);
}

bool segops_http_strict_head(segops_http_req *r, const char *url, const char *version, segops_http_outcome *ret) {
  struct MHD_Connection *c = r->conn;
  head_scan h = {0};
  MHD_get_connection_values(c, MHD_HEADER_KIND, scan_header, &h);
  const char *te = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_TRANSFER_ENCODING);
  const char *msg = NULL;
  int err = SEGOPS_E_INVALID_ARGUMENT, status = 400;
  /* Framing first: a request whose body length is ambiguous could smuggle a second request,
   * so it is answered and the connection closed without reading any of it (RFC 9112 §6.3). */
  if (h.cl_differ)
    msg = "the request has several Content-Length headers with different values";
  else if (h.n_cl && h.n_te)
    msg = "the request has both Content-Length and Transfer-Encoding";
  else if (h.n_te > 1 || (te && strcasecmp(te, "chunked") != 0))
    err = SEGOPS_E_NOT_IMPLEMENTED, status = 501, msg = "Transfer-Encoding other than 'chunked' is not supported";
  else if (version && !strcmp(version, MHD_HTTP_VERSION_1_1) &&
           !MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_HOST))
    msg = "an HTTP/1.1 request needs a Host header";
  else if (strstr(url, "%00"))
    msg = "the request path contains an encoded NUL (%00)";
  if (!msg) return false;
  *ret = segops_http_error(r, err, status, msg, NULL, true);
  return true;
}

/* resolve.c: the transport of one daemon, found on its first call (and again after it went away).
 * "auto": GET /v1/info over HTTP; a native channel socket it names for same-host peers, when it
 * opens; else a unix listener it lists that answers here as the same daemon (the same listener
 * list), HTTP over it; else HTTP over the URL. "native", "unix", "http" and "local" force one and
 * say plainly when it cannot be used. */
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "client.h"

/* The daemon's /v1/info, parsed; NULL with e filled. */
static json_t *fetch_info(segops_transport *t, double deadline, segops_error *e) {
  char *text = NULL;
  int rc = t->vt->info(t, &text, deadline, e);
  if (rc) return NULL;
  json_error_t jerr;
  json_t *info = json_loads(text, 0, &jerr);
  free(text);
  if (!json_is_object(info)) {
    json_decref(info);
    segops_client_err(e, SEGOPS_E_PROTOCOL, "/v1/info is not a JSON object (%s)", jerr.text);
    return NULL;
  }
  return info;
}

/* The native channel the daemon names, opened, or NULL with why in e. */
static segops_transport *try_native(segops_client *c, segops_endpoint *ep, json_t *info, double deadline,
                                    segops_error *e) {
  json_t *native = json_object_get(info, "native");
  const char *path = json_string_value(json_object_get(native, "socket"));
  if (!path) {
    segops_client_err(e, SEGOPS_E_INVALID_ARGUMENT, "transport \"native\": %s names no native channel here", ep->url);
    return NULL;
  }
  /* Who must be listening there: the daemon's uid (the first one this client saw: a restart never
   * changes it), and its pid where this process shares its pid namespace. */
  json_t *ju = json_object_get(native, "uid");
  if (!json_is_integer(ju) || json_integer_value(ju) < 0 || json_integer_value(ju) > (json_int_t)UINT32_MAX - 1) {
    segops_client_err(e, SEGOPS_E_PROTOCOL,
                      "transport \"native\": %s does not say which uid serves its native channel %s (an older "
                      "segopsd?); its peer cannot be checked, so nothing is sent there",
                      ep->url, path);
    return NULL;
  }
  uid_t uid = (uid_t)json_integer_value(ju);
  if (ep->native_uid_known && uid != ep->native_uid) {
    segops_client_err(e, SEGOPS_E_CONNECTION,
                      "transport \"native\": %s now says uid %u serves its native channel %s, but it was uid %u; "
                      "nothing is sent there",
                      ep->url, (unsigned)uid, path, (unsigned)ep->native_uid);
    return NULL;
  }
  pid_t pid = 0;
  struct stat ns;
  json_t *jp = json_object_get(native, "pid"), *jn = json_object_get(native, "pid_ns");
  if (json_is_integer(jp) && json_is_integer(jn) && stat("/proc/self/ns/pid", &ns) == 0 &&
      (json_int_t)ns.st_ino == json_integer_value(jn) && json_integer_value(jp) > 0 &&
      json_integer_value(jp) <= INT32_MAX)
    pid = (pid_t)json_integer_value(jp);
  /* "auto" gives the native attempt a third of what is left, at most 1 s, and keeps the rest for
   * HTTP: a native socket held up by others never costs the call. */
  if (c->want == SEGOPS_WANT_AUTO) {
    double now = segops_client_now(), share = (deadline - now) / 3;
    if (share > 1.0) share = 1.0;
    deadline = now + (share > 0 ? share : 0);
  }
  segops_transport *t = segops_native_open(path, c->mem, c->token, c->spin_us, uid, pid, deadline, e);
  if (t) {
    ep->native_uid = uid;
    ep->native_uid_known = true;
  }
  return t;
}

/* The socket path of a "unix:/path" or "unix:///path" listener, or NULL. */
static const char *unix_path(const char *url) {
  if (!strncmp(url, "unix://", 7)) return url[7] ? url + 7 : NULL;
  if (!strncmp(url, "unix:", 5)) return url[5] ? url + 5 : NULL;
  return NULL;
}

/* HTTP over one of the daemon's unix listeners that answers here with the same listener list
 * (the same daemon, not another one at a stale path), or NULL. */
static segops_transport *try_unix(segops_client *c, json_t *info, double deadline) {
  json_t *listeners = json_object_get(info, "listeners");
  size_t i;
  json_t *v;
  json_array_foreach(listeners, i, v) {
    const char *path = json_is_string(v) ? unix_path(json_string_value(v)) : NULL;
    struct stat st;
    if (!path || stat(path, &st) != 0 || !S_ISSOCK(st.st_mode)) continue;
    char url[4200];
    if (snprintf(url, sizeof url, "unix://%s", path) >= (int)sizeof url) continue;
    segops_error e;
    segops_transport *u = segops_http_open(url, c->token, &e);
    if (!u) continue;
    json_t *there = fetch_info(u, deadline, &e);
    bool same = there && json_equal(json_object_get(there, "listeners"), listeners);
    json_decref(there);
    if (same) return u;
    u->vt->close(u);
  }
  return NULL;
}

/* auto, native or unix on a daemon reached over ep->http. */
static segops_held *resolve_remote(segops_client *c, segops_endpoint *ep, double deadline, segops_error *e) {
  json_t *info = fetch_info(ep->http->t, deadline, e);
  if (!info) {
    /* No answer: the daemon is not there (yet). An answer that is no /v1/info (an older daemon,
     * a proxy that routes only calls): plain HTTP, where calls will tell what is wrong. */
    if (!e || segops_retryable(e->code) || e->code == SEGOPS_E_TIMEOUT || c->want != SEGOPS_WANT_AUTO) return NULL;
    return ep->http;
  }
  segops_transport *t = NULL;
  if (c->want == SEGOPS_WANT_AUTO || c->want == SEGOPS_WANT_NATIVE) {
    segops_error why;
    t = try_native(c, ep, info, deadline, &why);
    if (!t && c->want == SEGOPS_WANT_NATIVE) {
      if (e) *e = why;
      json_decref(info);
      return NULL;
    }
  }
  if (!t && (c->want == SEGOPS_WANT_AUTO || c->want == SEGOPS_WANT_UNIX) && !unix_path(ep->url))
    t = try_unix(c, info, deadline);
  json_decref(info);
  if (!t && c->want == SEGOPS_WANT_UNIX && !unix_path(ep->url)) {
    segops_client_err(e, SEGOPS_E_INVALID_ARGUMENT,
                      "transport \"unix\": %s lists no unix listener that answers here as the same daemon", ep->url);
    return NULL;
  }
  if (!t) return ep->http;
  segops_held *h = segops_held_new(t);
  if (!h) segops_client_err(e, SEGOPS_E_NOMEM, "out of memory");
  return h;
}

segops_held *segops_resolve(segops_client *c, segops_endpoint *ep, double deadline, segops_error *e) {
  if (ep->local) {
    segops_transport *t = segops_local_open(c->threads, e);
    if (!t) return NULL;
    segops_held *h = segops_held_new(t);
    if (!h) segops_client_err(e, SEGOPS_E_NOMEM, "out of memory");
    return h;
  }
  if (!ep->http) { /* a forked child that could not make its own */
    segops_client_err(e, SEGOPS_E_NOMEM, "%s: out of memory for an HTTP transport", ep->url);
    return NULL;
  }
  if (c->want == SEGOPS_WANT_HTTP || (c->want == SEGOPS_WANT_UNIX && unix_path(ep->url))) return ep->http;
  return resolve_remote(c, ep, deadline, e);
}

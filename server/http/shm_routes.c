/* shm_routes.c: the system shared-memory endpoints (Triton's extension, proto/API.md, Shared memory), rows of the
 * route table (http_routes.c):
 *   POST /v2/systemsharedmemory/region/{name}/register   {"key", "offset", "byte_size"}
 *   POST /v2/systemsharedmemory/region/{name}/unregister
 *   POST /v2/systemsharedmemory/unregister                (every region)
 *   GET  /v2/systemsharedmemory[/region/{name}]/status    [{"name", "key", "offset", "byte_size"}]
 * Errors are {"error": "..."} (the rows are OIP routes). Auth is checked before any of this. Every
 * call acts for the peer's uid (peer.h): it sees, registers and unregisters that uid's regions only
 * (shm.h). */
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "errors.h"
#include "http.h"
#include "shm_body.h"

#define SHM_BODY_MAX (64 * 1024) /* a registration is a few dozen bytes */

static const char *region_name(const segops_http_req *r) { return r->param; }

segops_http_outcome segops_http_shm_post_begin(segops_http_req *r) {
  const char *cl = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
  if (cl && strtoull(cl, NULL, 10) > SHM_BODY_MAX) {
    char msg[128];
    snprintf(msg, sizeof msg, "a shared-memory request body is at most %d bytes", SHM_BODY_MAX);
    return segops_http_error(r, SEGOPS_E_TOO_LARGE, 0, msg, NULL, true);
  }
  return segops_http_body_start(r);
}

/* The body of a POST: NULL when it was over the cap (the error is answered then). */
static bool body_ok(segops_http_req *r, segops_http_outcome *o) {
  if (!r->overflow && r->len <= SHM_BODY_MAX) return true;
  char msg[128];
  snprintf(msg, sizeof msg, "a shared-memory request body is at most %d bytes", SHM_BODY_MAX);
  *o = r->raw_answered ? SEGOPS_HTTP_FAIL : segops_http_error(r, SEGOPS_E_TOO_LARGE, 0, msg, NULL, true);
  return false;
}

/* {"key": "/name", "offset": o, "byte_size": n} -> register. */
segops_http_outcome segops_http_shm_register(segops_http_req *r) {
  segops_http_outcome o;
  if (!body_ok(r, &o)) return o;
  const char *name = region_name(r);
  char err[512];
  segops_shm_reg_body b;
  int rc = segops_shm_parse_register(r->body, r->len, name, &b, err, sizeof err);
  if (rc) return segops_http_error(r, rc, 0, err, NULL, false);
  rc = segops_shm_register(r->srv->shm, segops_http_peer_uid(r), name, strlen(name), b.key, b.key_len, b.offset,
                           b.byte_size, err, sizeof err);
  segops_shm_reg_body_free(&b);
  if (rc) return segops_http_error(r, rc, 0, err, NULL, false);
  return segops_http_send_json(r, json_object());
}

segops_http_outcome segops_http_shm_unregister(segops_http_req *r) {
  segops_http_outcome o;
  if (!body_ok(r, &o)) return o;
  char err[256];
  int rc = segops_shm_unregister(r->srv->shm, segops_http_peer_uid(r), region_name(r), strlen(region_name(r)), err,
                                 sizeof err);
  if (rc) return segops_http_error(r, rc, 0, err, NULL, false);
  return segops_http_send_json(r, json_object());
}

segops_http_outcome segops_http_shm_unregister_all(segops_http_req *r) {
  segops_http_outcome o;
  if (!body_ok(r, &o)) return o;
  segops_shm_unregister_all(r->srv->shm, segops_http_peer_uid(r));
  return segops_http_send_json(r, json_object());
}

static segops_http_outcome status(segops_http_req *r, const char *name) {
  segops_shm *reg = r->srv->shm;
  size_t nl = name ? strlen(name) : 0;
  int64_t uid = segops_http_peer_uid(r);
  int n = segops_shm_status(reg, uid, name, nl, NULL, 0);
  if (n == SEGOPS_E_NOT_FOUND) {
    char err[256];
    snprintf(err, sizeof err, "shared-memory region '%s' is not registered", name);
    return segops_http_error(r, SEGOPS_E_NOT_FOUND, 0, err, NULL, false);
  }
  segops_shm_info *info = n > 0 ? calloc((size_t)n, sizeof *info) : NULL;
  if (n > 0 && !info) return segops_http_error(r, SEGOPS_E_NOMEM, 0, NULL, NULL, false);
  int got = n > 0 ? segops_shm_status(reg, uid, name, nl, info, n) : 0;
  json_t *list = json_array();
  for (int i = 0; i < got && i < n; i++)
    json_array_append_new(list, json_pack("{s:s, s:s, s:I, s:I}", "name", info[i].name, "key", info[i].key, "offset",
                                          (json_int_t)info[i].offset, "byte_size", (json_int_t)info[i].byte_size));
  free(info);
  return segops_http_send_json(r, list);
}

segops_http_outcome segops_http_shm_status_all(segops_http_req *r) { return status(r, NULL); }
segops_http_outcome segops_http_shm_status(segops_http_req *r) { return status(r, region_name(r)); }

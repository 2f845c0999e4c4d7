/* http_routes.c: every HTTP route of segopsd in one table ({path pattern, methods, metric,
 * flags, handlers}), and the path matcher. http_server.c looks routes up here; nothing else
 * knows the paths. */
#include <stdio.h>
#include <string.h>

#include "http.h"

#define GET_HEAD (SEGOPS_M_GET | SEGOPS_M_HEAD)

static const segops_http_route ROUTES[] = {
    /* pattern, methods, metric, flags, begin, finish, resume */
    {"/healthz", GET_HEAD, SEGOPS_ROUTE_HEALTHZ, SEGOPS_RF_OPEN, NULL, segops_http_healthz, NULL},
    {"/readyz", GET_HEAD, SEGOPS_ROUTE_READYZ, SEGOPS_RF_OPEN, NULL, segops_http_readyz, NULL},
    {"/metrics", GET_HEAD, SEGOPS_ROUTE_METRICS, 0, NULL, segops_http_metrics, NULL},
    {"/v1/info", GET_HEAD, SEGOPS_ROUTE_INFO, 0, NULL, segops_http_info, NULL},
    {"/v1/{op}/{pass}", SEGOPS_M_POST, SEGOPS_ROUTE_OP, SEGOPS_RF_WORK, segops_http_op_begin, segops_http_op_complete,
     segops_http_op_respond},
    /* The Open Inference Protocol (oip_routes.c). */
    {"/v2/health/live", GET_HEAD, SEGOPS_ROUTE_V2, SEGOPS_RF_OIP, NULL, segops_v2_live, NULL},
    {"/v2/health/ready", GET_HEAD, SEGOPS_ROUTE_V2, SEGOPS_RF_OIP, NULL, segops_v2_ready, NULL},
    {"/v2", GET_HEAD, SEGOPS_ROUTE_V2, SEGOPS_RF_OIP, NULL, segops_v2_server, NULL},
    {"/v2/models/{model}", GET_HEAD, SEGOPS_ROUTE_V2, SEGOPS_RF_OIP, NULL, segops_v2_model, NULL},
    {"/v2/models/{model}/versions/{version}", GET_HEAD, SEGOPS_ROUTE_V2, SEGOPS_RF_OIP, NULL, segops_v2_model, NULL},
    {"/v2/models/{model}/ready", GET_HEAD, SEGOPS_ROUTE_V2, SEGOPS_RF_OIP, NULL, segops_v2_model_ready, NULL},
    {"/v2/models/{model}/versions/{version}/ready", GET_HEAD, SEGOPS_ROUTE_V2, SEGOPS_RF_OIP, NULL,
     segops_v2_model_ready, NULL},
    {"/v2/models/{model}/infer", SEGOPS_M_POST, SEGOPS_ROUTE_OP, SEGOPS_RF_OIP | SEGOPS_RF_WORK, segops_v2_infer_begin,
     segops_http_op_complete, segops_http_op_respond},
    {"/v2/models/{model}/versions/{version}/infer", SEGOPS_M_POST, SEGOPS_ROUTE_OP, SEGOPS_RF_OIP | SEGOPS_RF_WORK,
     segops_v2_infer_begin, segops_http_op_complete, segops_http_op_respond},
    /* System shared memory (shm_routes.c). */
    {"/v2/systemsharedmemory/status", GET_HEAD, SEGOPS_ROUTE_SHM, SEGOPS_RF_OIP, NULL, segops_http_shm_status_all,
     NULL},
    {"/v2/systemsharedmemory/region/{name}/status", GET_HEAD, SEGOPS_ROUTE_SHM, SEGOPS_RF_OIP, NULL,
     segops_http_shm_status, NULL},
    {"/v2/systemsharedmemory/region/{name}/register", SEGOPS_M_POST, SEGOPS_ROUTE_SHM, SEGOPS_RF_OIP,
     segops_http_shm_post_begin, segops_http_shm_register, NULL},
    {"/v2/systemsharedmemory/region/{name}/unregister", SEGOPS_M_POST, SEGOPS_ROUTE_SHM, SEGOPS_RF_OIP,
     segops_http_shm_post_begin, segops_http_shm_unregister, NULL},
    {"/v2/systemsharedmemory/unregister", SEGOPS_M_POST, SEGOPS_ROUTE_SHM, SEGOPS_RF_OIP, segops_http_shm_post_begin,
     segops_http_shm_unregister_all, NULL},
};
#define N_ROUTES (sizeof ROUTES / sizeof ROUTES[0])

static bool seg_is(const char *s, size_t n, const char *lit) { return strlen(lit) == n && memcmp(s, lit, n) == 0; }

/* One segment of the path against one of the pattern: 1 match, 0 no match, -1 the segment is
 * in a capture's place but names nothing known (msg says what). */
static int match_seg(const char *ps, size_t pn, const char *us, size_t un, const char *url, segops_http_req *r,
                     char *msg, size_t msglen) {
  if (pn < 2 || ps[0] != '{') return pn == un && memcmp(ps, us, un) == 0;
  if (seg_is(ps, pn, "{op}")) {
    r->op = segops_op_parse(us, un);
    if (r->op >= 0) return 1;
    snprintf(msg, msglen, "unknown op in '%.120s' (GET /v1/info lists them)", url);
    return -1;
  }
  if (seg_is(ps, pn, "{pass}")) {
    r->pass = segops_pass_parse(us, un);
    if (r->pass >= 0) return 1;
    snprintf(msg, msglen, "unknown pass in '%.120s' (forward, backward or double_backward)", url);
    return -1;
  }
  if (seg_is(ps, pn, "{model}")) {
    segops_op op;
    segops_pass pass;
    if (un > 0 && segops_oip_model_parse(us, un, &op, &pass) == 0) {
      r->op = (int)op;
      r->pass = (int)pass;
      return 1;
    }
    snprintf(msg, msglen, "unknown model '%.*s' (models are <op>_<pass>, e.g. segmented_sum_forward)",
             (int)(un > 96 ? 96 : un), us);
    return -1;
  }
  if (seg_is(ps, pn, "{version}")) {
    if (seg_is(us, un, "1")) return 1;
    snprintf(msg, msglen, "unknown version '%.*s' of the model (every model has version 1 only)",
             (int)(un > 32 ? 32 : un), us);
    return -1;
  }
  if (seg_is(ps, pn, "{name}")) {
    if (un == 0 || un >= sizeof r->param) return 0;
    memcpy(r->param, us, un);
    r->param[un] = 0;
    return 1;
  }
  return 0;
}

/* 1, 0 or -1 as match_seg, for a whole path. */
static int match(const char *pat, const char *url, segops_http_req *r, char *msg, size_t msglen) {
  const char *p = pat, *u = url;
  int bad = 0;
  r->op = r->pass = -1;
  while (*p && *u) {
    if (*p != '/' || *u != '/') return 0;
    p++, u++;
    const char *pe = strchr(p, '/'), *ue = strchr(u, '/');
    size_t pn = pe ? (size_t)(pe - p) : strlen(p), un = ue ? (size_t)(ue - u) : strlen(u);
    int m = match_seg(p, pn, u, un, url, r, msg, msglen);
    if (m == 0) return 0;
    if (m < 0 && !bad) bad = -1;
    if (bad) msglen = 0; /* keep the first message */
    p += pn, u += un;
  }
  if (*p || *u) return 0;
  return bad ? -1 : 1;
}

const segops_http_route *segops_http_route_find(const char *url, segops_http_req *r, char *msg, size_t msglen) {
  char why[256] = "";
  for (size_t i = 0; i < N_ROUTES; i++) {
    char m[256] = "";
    int k = match(ROUTES[i].pattern, url, r, m, sizeof m);
    if (k > 0) return &ROUTES[i];
    if (k < 0 && !why[0]) snprintf(why, sizeof why, "%s", m);
  }
  r->op = r->pass = -1;
  if (why[0])
    snprintf(msg, msglen, "%s", why);
  else
    snprintf(msg, msglen, "no route for '%.120s'", url);
  return NULL;
}

const char *segops_http_route_allow(const segops_http_route *rt) {
  return rt->methods & SEGOPS_M_POST ? "POST" : "GET, HEAD";
}

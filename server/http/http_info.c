/* http_info.c: the non-op routes: /healthz, /readyz (and the readiness the v2 routes share), /metrics and /v1/info
 * (whose op table is generated from core/ops.c's table, never written twice). */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "errors.h"
#include "http.h"
#include "segops_ring.h"

segops_http_outcome segops_http_healthz(segops_http_req *r) {
  char *b = strdup("{\"status\":\"ok\"}");
  if (!b) return SEGOPS_HTTP_FAIL;
  return segops_http_send_buffer(r, 200, "application/json", b, strlen(b));
}

const char *segops_http_not_ready(segops_server *srv) {
  int st = atomic_load(&srv->state);
  if (st == SEGOPS_STATE_STARTING) return "starting";
  if (st == SEGOPS_STATE_DRAINING || st == SEGOPS_STATE_LAME_DUCK) return "draining";
  if (srv->backend->ready && !srv->backend->ready(srv->backend->ctx)) return "the backend cannot take work";
  return NULL;
}

segops_http_outcome segops_http_readyz(segops_http_req *r) {
  const char *why = segops_http_not_ready(r->srv);
  if (why) return segops_http_error(r, SEGOPS_E_UNAVAILABLE, 0, why, NULL, false);
  char *b = strdup("{\"status\":\"ready\"}");
  if (!b) return SEGOPS_HTTP_FAIL;
  return segops_http_send_buffer(r, 200, "application/json", b, strlen(b));
}

segops_http_outcome segops_http_metrics(segops_http_req *r) {
  size_t len = 0;
  char *text = segops_metrics_render(segops_sched_depth(r->srv->sched), r->srv->backend, &len);
  if (!text) return segops_http_error(r, SEGOPS_E_NOMEM, 0, NULL, NULL, false);
  return segops_http_send_buffer(r, 200, "text/plain; version=0.0.4; charset=utf-8", text, len);
}

static const char *use_text(segops_arg_use u) {
  return u == SEGOPS_ARG_REQ ? "required" : u == SEGOPS_ARG_COTAN ? "cotangent" : "unread";
}

/* The op table as JSON: {op: {pass: {"inputs": [...], "outputs": [...]}}}. */
static json_t *op_table_json(void) {
  json_t *ops = json_object();
  for (int o = 0; o < SEGOPS_OP_COUNT; o++) {
    json_t *passes = json_object();
    for (int p = 0; p < SEGOPS_PASS_COUNT; p++) {
      const segops_fn_desc *fn = segops_fn((segops_op)o, (segops_pass)p);
      json_t *in = json_array(), *out = json_array();
      for (int k = 0; k < fn->n_in; k++)
        json_array_append_new(in, json_pack("{s:s, s:b, s:s, s:s}", "name", fn->in[k].name, "optional",
                                            fn->in[k].use != SEGOPS_ARG_REQ, "use", use_text(fn->in[k].use), "shape",
                                            segops_shape_text(fn->in[k].shape, fn->vec3_only ? 3 : 0)));
      json_array_append_new(
          in, json_pack("{s:s, s:b, s:s, s:s}", "name", "idx", "optional", 0, "use", "required", "shape", "(N,)"));
      json_array_append_new(in, json_pack("{s:s, s:b, s:s, s:s}", "name", "num_segments", "optional", 0, "use",
                                          "required", "shape", "integer"));
      for (int k = 0; k < fn->n_out; k++)
        json_array_append_new(out, json_pack("{s:s, s:s}", "name", fn->out[k].name, "shape",
                                             segops_shape_text(fn->out[k].shape, fn->vec3_only ? 3 : 0)));
      json_object_set_new(passes, segops_pass_name((segops_pass)p),
                          json_pack("{s:o, s:o, s:b}", "inputs", in, "outputs", out, "vec3_only", fn->vec3_only));
    }
    json_object_set_new(ops, segops_op_name((segops_op)o), passes);
  }
  return ops;
}

/* One setting's value as JSON, by its type: numbers for sizes, counts and seconds ("auto" where the
 * owner decides), true/false for flags, a list of strings for lists, else the text. */
static json_t *setting_json(const segops_settings_group *g, const segops_setting *s) {
  char text[1024];
  segops_settings_text(g, s, text, sizeof text);
  switch (s->type) {
    case SEGOPS_SET_BYTES:
    case SEGOPS_SET_INT:
      return strcmp(text, "auto") ? json_integer((json_int_t)segops_settings_int(g, s)) : json_string(text);
    case SEGOPS_SET_SECONDS:
      return json_real(segops_settings_seconds(g, s));
    case SEGOPS_SET_FLAG:
      return json_boolean(segops_settings_int(g, s));
    case SEGOPS_SET_LIST: {
      json_t *a = json_array();
      for (char *save = NULL, *t = strtok_r(text, ",", &save); t; t = strtok_r(NULL, ",", &save))
        json_array_append_new(a, json_string(t));
      return a;
    }
    default:
      return s->flags & SEGOPS_SET_SECRET ? json_boolean(text[0] != 0) : json_string(text);
  }
}

/* Every row of the configuration table by option name: what this daemon runs with. Paths on this
 * host (SEGOPS_SET_HOST_ONLY) only for a peer on this host. */
static json_t *settings_json(bool local) {
  json_t *o = json_object();
  for (segops_settings_group *const *g = segops_config_groups(); *g; g++)
    for (size_t k = 0; k < (*g)->n_rows; k++)
      if (local || !((*g)->rows[k].flags & SEGOPS_SET_HOST_ONLY))
        json_object_set_new(o, (*g)->rows[k].name, setting_json(*g, &(*g)->rows[k]));
  return o;
}

segops_http_outcome segops_http_info(segops_http_req *r) {
  segops_server *srv = r->srv;
  const segops_config *c = srv->cfg;
  const segops_backend *be = srv->backend;
  /* One entry per physical device (a GPU, or the host for the CPU backend) with its worker
   * count: workers sharing a device do not each report its whole memory. */
  json_t *devs = json_array();
  for (int d = 0; d < be->n_devices; d++) {
    segops_device_info di;
    memset(&di, 0, sizeof di);
    if (be->device_info && be->device_info(be->ctx, d, &di) != 0) continue;
    di.name[sizeof di.name - 1] = 0;
    json_t *seen = NULL;
    for (size_t k = 0; !seen && k < json_array_size(devs); k++) {
      json_t *e = json_array_get(devs, k);
      if (json_integer_value(json_object_get(e, "index")) == di.physical) seen = e;
    }
    if (seen) {
      json_object_set_new(seen, "workers", json_integer(json_integer_value(json_object_get(seen, "workers")) + 1));
      continue;
    }
    json_t *dev = json_pack("{s:i, s:s, s:I, s:I, s:i}", "index", di.physical, "name", di.name, "memory_total",
                            (json_int_t)di.memory_total, "memory_used", (json_int_t)di.memory_used, "workers", 1);
    di.wait[sizeof di.wait - 1] = 0;
    if (dev && di.wait[0]) json_object_set_new(dev, "wait", json_string(di.wait));
    json_array_append_new(devs, dev);
  }
  json_t *limits = json_pack(
      "{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:f, s:I, s:I, s:I, s:f, s:f}", "max_body_bytes",
      (json_int_t)c->max_body_bytes, "max_body_items", (json_int_t)c->max_body_items, "max_inflight_bytes",
      (json_int_t)c->max_inflight_bytes, "max_elements", (json_int_t)c->max_elements, "max_segments",
      (json_int_t)c->max_segments, "max_connections", (json_int_t)c->max_connections, "idle_timeout_s",
      (json_int_t)c->idle_timeout_s, "request_timeout_s", c->request_timeout_s, "max_queue", (json_int_t)c->max_queue,
      "max_batch_elements", (json_int_t)c->max_batch_elements, "max_queue_delay_us", (json_int_t)c->max_queue_delay_us,
      "drain_seconds", c->drain_seconds, "shutdown_timeout_s", c->shutdown_timeout_s);
  if (limits) {
    json_object_set_new(limits, "max_output_bytes", json_integer((json_int_t)c->max_output_bytes));
    json_object_set_new(limits, "max_ndim", json_integer(SEGOPS_MAX_NDIM)); /* (N, *F): 1 + rank of F */
    json_object_set_new(limits, "min_upload_rate", json_integer((json_int_t)c->min_upload_rate));
    json_object_set_new(limits, "max_connections_per_peer", json_integer((json_int_t)c->max_connections_per_peer));
    json_object_set_new(limits, "max_inflight_bytes_per_peer",
                        json_integer((json_int_t)c->max_inflight_bytes_per_peer));
    json_object_set_new(limits, "min_download_rate", json_integer((json_int_t)c->min_download_rate));
    json_object_set_new(limits, "answer_stall_timeout_s", json_real(c->answer_stall_timeout_s));
    json_object_set_new(limits, "head_timeout_s", json_real(c->head_timeout_s));
  }
  /* Unix socket paths are told to peers on this host only: elsewhere they are no use, and they
   * say something about the host. */
  bool same_host = r->cn && segops_peer_same_host(&r->cn->peer);
  json_t *listeners = json_array();
  for (int k = 0; k < srv->n_listeners; k++)
    if (same_host || !srv->listeners[k].unix_path[0])
      json_array_append_new(listeners, json_string(srv->listeners[k].url));
  json_t *shm = json_pack("{s:I, s:I}", "max_shm_bytes", (json_int_t)c->max_shm_bytes, "registered_bytes",
                          (json_int_t)segops_shm_registered_bytes(srv->shm));
  json_t *root =
      json_pack("{s:s, s:s, s:s, s:o, s:o, s:o, s:o, s:b, s:[s,s,s,s], s:o}", "version", SEGOPS_VERSION, "api", "v1",
                "backend", be->name ? be->name : "?", "devices", devs, "listeners", listeners, "shm", shm, "limits",
                limits, "auth", c->token != NULL, "encodings", "application/msgpack", "application/x-msgpack",
                "application/vnd.msgpack", "application/json", "ops", op_table_json());
  if (root && srv->native_socket[0] && same_host) /* only such a peer can use it */
    json_object_set_new(root, "native",
                        json_pack("{s:s, s:i}", "socket", srv->native_socket, "version", (int)SEGOPS_NATIVE_VERSION));
  if (root && be->feature_shapes) json_object_set_new(root, "feature_shapes", json_string(be->feature_shapes));
  if (root) json_object_set_new(root, "settings", settings_json(same_host));
  return segops_http_send_json(r, root);
}

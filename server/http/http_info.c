/* http_info.c: the non-op routes: /healthz, /readyz (and the readiness the v2 routes share), /metrics and /v1/info
 * (whose op table is segops_optable_json's, the table's one printer). */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "errors.h"
#include "http.h"
#include "optable_json.h"
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
/* The native channel for same-host peers: its socket, its version, and who serves it (a client
 * checks that its socket's peer is this uid, and this pid where it shares this pid namespace,
 * before it sends the token or any memory: proto/native.md, Trust). */
static json_t *native_json(const segops_server *srv) {
  json_t *o = json_pack("{s:s, s:i, s:I, s:I}", "socket", srv->native_socket, "version", (int)SEGOPS_NATIVE_VERSION,
                        "uid", (json_int_t)geteuid(), "pid", (json_int_t)getpid());
  struct stat st;
  if (o && stat("/proc/self/ns/pid", &st) == 0) json_object_set_new(o, "pid_ns", json_integer((json_int_t)st.st_ino));
  return o;
}

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
    json_object_set_new(
        limits, "max_queue_per_uid",
        json_integer((json_int_t)(c->max_queue_per_uid > 0 ? c->max_queue_per_uid
                                                           : (c->max_queue / 2 > 0 ? c->max_queue / 2 : 1))));
    json_object_set_new(limits, "max_ndim", json_integer(SEGOPS_MAX_NDIM)); /* (N, *F): 1 + rank of F */
    json_object_set_new(limits, "min_upload_rate", json_integer((json_int_t)c->min_upload_rate));
    json_object_set_new(limits, "max_connections_per_peer", json_integer((json_int_t)c->max_connections_per_peer));
    json_object_set_new(limits, "max_inflight_bytes_per_peer",
                        json_integer((json_int_t)c->max_inflight_bytes_per_peer));
    json_object_set_new(limits, "min_download_rate", json_integer((json_int_t)c->min_download_rate));
    json_object_set_new(limits, "answer_stall_timeout_s", json_real(c->answer_stall_timeout_s));
    json_object_set_new(limits, "head_timeout_s", json_real(c->head_timeout_s));
    /* Every uid's shares, as settled (auto: half of each whole). */
    json_t *u =
        json_pack("{s:I, s:I, s:I, s:I, s:I, s:I, s:I}", "max_running_per_uid", (json_int_t)c->max_running_per_uid,
                  "max_mappings_per_uid", (json_int_t)c->max_mappings_per_uid, "max_mapped_bytes",
                  (json_int_t)c->max_mapped_bytes, "max_mapped_bytes_per_uid", (json_int_t)c->max_mapped_bytes_per_uid,
                  "max_pinned_bytes", (json_int_t)c->max_pinned_bytes, "max_pinned_bytes_per_uid",
                  (json_int_t)c->max_pinned_bytes_per_uid, "max_mappings", (json_int_t)SEGOPS_GUARD_TABLE_SLOTS);
    if (u) json_object_update(limits, u);
    json_decref(u);
  }
  /* Unix socket paths are told to peers on this host only: elsewhere they are no use, and they
   * say something about the host. */
  bool same_host = r->cn && segops_peer_same_host(&r->cn->peer);
  json_t *listeners = json_array();
  for (int k = 0; k < srv->n_listeners; k++)
    if (same_host || !srv->listeners[k].unix_path[0])
      json_array_append_new(listeners, json_string(srv->listeners[k].url));
  json_t *shm = json_pack("{s:I, s:I, s:I, s:I, s:I}", "max_shm_bytes", (json_int_t)c->max_shm_bytes,
                          "max_shm_bytes_per_uid", (json_int_t)c->max_shm_bytes_per_uid, "max_regions",
                          (json_int_t)c->max_shm_regions, "max_regions_per_uid", (json_int_t)c->max_shm_regions_per_uid,
                          "registered_bytes", (json_int_t)segops_shm_registered_bytes(srv->shm));
  json_t *root =
      json_pack("{s:s, s:s, s:s, s:o, s:o, s:o, s:o, s:b, s:[s,s,s,s], s:o}", "version", SEGOPS_VERSION, "api", "v1",
                "backend", be->name ? be->name : "?", "devices", devs, "listeners", listeners, "shm", shm, "limits",
                limits, "auth", c->token != NULL, "encodings", "application/msgpack", "application/x-msgpack",
                "application/vnd.msgpack", "application/json", "ops", segops_optable_json(false));
  if (root && srv->native_socket[0] && same_host) /* only such a peer can use it */
    json_object_set_new(root, "native", native_json(srv));
  if (root && be->feature_shapes) json_object_set_new(root, "feature_shapes", json_string(be->feature_shapes));
  if (root) json_object_set_new(root, "settings", settings_json(same_host));
  return segops_http_send_json(r, root);
}

/* oip_routes.c: the Open Inference Protocol's (KServe v2 REST) routes: health, server and model
 * metadata (generated from core/ops.c's table, one model per function), and the start of an
 * infer request, which then runs through http_ops.c like a v1 one (SEGOPS_ENC_OIP). */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "errors.h"
#include "http.h"

segops_http_outcome segops_v2_live(segops_http_req *r) {
  return segops_http_send_json(r, json_pack("{s:b}", "live", 1));
}

segops_http_outcome segops_v2_ready(segops_http_req *r) {
  const char *why = segops_http_not_ready(r->srv);
  if (why) return segops_http_error(r, SEGOPS_E_UNAVAILABLE, 0, why, NULL, false);
  return segops_http_send_json(r, json_pack("{s:b}", "ready", 1));
}

segops_http_outcome segops_v2_server(segops_http_req *r) {
  return segops_http_send_json(r, json_pack("{s:s, s:s, s:[s,s]}", "name", "segopsd", "version", SEGOPS_VERSION,
                                            "extensions", "binary_tensor_data", "system_shared_memory"));
}

/* One tensor of the metadata: its shape with -1 for the variable dims (N, S), and the datatypes
 * it takes (the first is the one "datatype" names). */
static json_t *tensor_meta(const char *name, segops_shape_kind k, int width, bool is_int, const char *rule) {
  int64_t shape[SEGOPS_MAX_NDIM];
  int nd = segops_shape_dims(k, width, -1, -1, shape);
  json_t *sh = json_array();
  for (int d = 0; d < nd; d++) json_array_append_new(sh, json_integer(shape[d]));
  return json_pack("{s:s, s:s, s:o, s:[s,s], s:s}", "name", name, "datatype", is_int ? "INT32" : "FP32", "shape", sh,
                   "datatypes", is_int ? "INT32" : "FP32", is_int ? "INT64" : "FP64", "segops_shape", rule);
}

segops_http_outcome segops_v2_model(segops_http_req *r) {
  const segops_fn_desc *fn = segops_fn((segops_op)r->op, (segops_pass)r->pass);
  int width = fn->vec3_only ? 3 : 1;
  json_t *in = json_array(), *out = json_array();
  for (int k = 0; k < fn->n_in; k++) {
    json_t *t = tensor_meta(fn->in[k].name, fn->in[k].shape, width, false,
                            segops_shape_text(fn->in[k].shape, fn->vec3_only ? 3 : 0));
    json_object_set_new(t, "optional", json_boolean(fn->in[k].use != SEGOPS_ARG_REQ));
    json_array_append_new(in, t);
  }
  json_array_append_new(in, tensor_meta("idx", SEGOPS_SH_ELEM, 1, true, "(N,)"));
  json_array_append_new(in, json_pack("{s:s, s:s, s:[i], s:[s,s], s:s}", "name", "num_segments", "datatype", "INT64",
                                      "shape", 1, "datatypes", "INT64", "INT32", "segops_shape", "[1]"));
  for (int k = 0; k < fn->n_out; k++)
    json_array_append_new(out, tensor_meta(fn->out[k].name, fn->out[k].shape, width, false,
                                           segops_shape_text(fn->out[k].shape, fn->vec3_only ? 3 : 0)));
  char name[SEGOPS_OIP_MODEL_NAME_MAX];
  return segops_http_send_json(
      r, json_pack("{s:s, s:[s], s:s, s:o, s:o}", "name", segops_oip_model_name(fn->op, fn->pass, name), "versions",
                   "1", "platform", "segops", "inputs", in, "outputs", out));
}

segops_http_outcome segops_v2_model_ready(segops_http_req *r) {
  const char *why = segops_http_not_ready(r->srv);
  if (why) return segops_http_error(r, SEGOPS_E_UNAVAILABLE, 0, why, NULL, false);
  char name[SEGOPS_OIP_MODEL_NAME_MAX];
  return segops_http_send_json(
      r,
      json_pack("{s:s, s:b}", "name", segops_oip_model_name((segops_op)r->op, (segops_pass)r->pass, name), "ready", 1));
}

static enum MHD_Result count_header(void *cls, enum MHD_ValueKind kind, const char *key, const char *value) {
  (void)kind;
  (void)value;
  if (!strcasecmp(key, "Inference-Header-Content-Length")) (*(int *)cls)++;
  return MHD_YES;
}

/* Any Content-Type is taken (tritonclient sends none for JSON, octet-stream for binary); the
 * body is a JSON header, followed by binary data when Inference-Header-Content-Length says so. That
 * header comes once, as a plain count: a second one or a "+N" would leave the split of the body
 * to whichever reading a proxy made. */
segops_http_outcome segops_v2_infer_begin(segops_http_req *r) {
  r->req_enc = r->resp_enc = SEGOPS_ENC_OIP;
  r->resp_type = "application/json";
  int n = 0;
  MHD_get_connection_values(r->conn, MHD_HEADER_KIND, count_header, &n);
  if (n > 1)
    return segops_http_error(r, SEGOPS_E_MALFORMED_BODY, 0, "Inference-Header-Content-Length is given more than once",
                             NULL, false);
  const char *h = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Inference-Header-Content-Length");
  if (h && segops_oip_header_length(h, (size_t)r->srv->cfg->max_body_bytes, &r->oip.header_len) != 0)
    return segops_http_error(r, SEGOPS_E_MALFORMED_BODY, 0,
                             "Inference-Header-Content-Length must be a byte count from 1 to the body's length "
                             "(digits only): the JSON header cannot be empty",
                             NULL, false);
  return segops_http_body_start(r);
}

/* oip_decode.c: the Open Inference Protocol's infer request decoder. The JSON header (jansson, after
 * the v1 JSON decoder's depth/item pre-scan) names inputs {name, datatype, shape, data |
 * parameters.binary_data_size | parameters.shared_memory_*} and outputs {name, parameters}; the
 * decoder only tokenizes them into the records the v1 codecs make (codec_record.h), so a tensor is
 * checked, and the request validated (core/prepare.c), with v1's rules and messages.
 * Binary tensor data is not copied: tensors point into the body after the header. */
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codec_internal.h"
#include "errors.h"
#include "oip.h"

static const char *const DATATYPES[SEGOPS_DTYPE_COUNT] = {
    [SEGOPS_F32] = "FP32", [SEGOPS_F64] = "FP64", [SEGOPS_I32] = "INT32", [SEGOPS_I64] = "INT64"};

const char *segops_oip_datatype(segops_dtype dt) { return (unsigned)dt < SEGOPS_DTYPE_COUNT ? DATATYPES[dt] : "?"; }

const segops_wire_words segops_wire_oip = {segops_oip_datatype, ".datatype", "datatype"};

const char *segops_oip_model_name(segops_op op, segops_pass pass, char *buf) {
  snprintf(buf, SEGOPS_OIP_MODEL_NAME_MAX, "%s_%s", segops_op_name(op), segops_pass_name(pass));
  return buf;
}

int segops_oip_model_parse(const char *s, size_t len, segops_op *op, segops_pass *pass) {
  for (int o = 0; o < SEGOPS_OP_COUNT; o++) {
    const char *on = segops_op_name((segops_op)o);
    size_t ol = strlen(on);
    if (len <= ol + 1 || memcmp(s, on, ol) != 0 || s[ol] != '_') continue;
    int p = segops_pass_parse(s + ol + 1, len - ol - 1);
    if (p < 0) continue;
    *op = (segops_op)o;
    *pass = (segops_pass)p;
    return 0;
  }
  return -1;
}

int segops_oip_header_length(const char *value, size_t max, size_t *out) {
  if (!value) return -1;
  size_t n = strlen(value);
  if (n == 0 || n > 20) return -1;
  uint64_t v = 0;
  for (size_t i = 0; i < n; i++) {
    if (value[i] < '0' || value[i] > '9') return -1;
    uint64_t d = (uint64_t)(value[i] - '0');
    if (v > (UINT64_MAX - d) / 10) return -1;
    v = v * 10 + d;
  }
  if (v == 0 || v > (uint64_t)max) return -1;
  *out = (size_t)v;
  return 0;
}

/* ---- one input --------------------------------------------------------------------------- */

typedef struct {
  segops_op op;
  segops_pass pass;
  char *err;
  size_t errlen;
  const char *bin; /* the binary part of the body */
  size_t bin_len, bin_used;
} v2ctx;

static int fail(const v2ctx *c, int code, const char *fmt, const char *an, const char *detail) {
  return segops_codec_fail(code, c->err, c->errlen, c->op, fmt, an, detail);
}

/* Counts the numbers of a (nested) JSON list; -1 when a leaf is not a number. */
static int count_numbers(json_t *v, int depth, size_t *n) {
  if (!json_is_array(v)) {
    if (!json_is_number(v)) return -1;
    (*n)++;
    return 0;
  }
  if (depth > SEGOPS_MAX_NDIM) return -1;
  for (size_t i = 0; i < json_array_size(v); i++)
    if (count_numbers(json_array_get(v, i), depth + 1, n) < 0) return -1;
  return 0;
}

/* A list of numbers only (the flat form: prepare checks its length against the shape). */
static bool flat(json_t *v) {
  for (size_t i = 0; i < json_array_size(v); i++)
    if (json_is_array(json_array_get(v, i))) return false;
  return true;
}

/* Lists nested exactly as shape[d..ndim): every list at depth d has shape[d] items, numbers at
 * the last depth. Ragged lists ([[1, 2], [3]]) or another rank are not. */
static bool nested_as(json_t *v, const int64_t *shape, size_t ndim, size_t d) {
  if (d == ndim) return json_is_number(v);
  if (!json_is_array(v) || shape[d] < 0 || json_array_size(v) != (size_t)shape[d]) return false;
  for (size_t i = 0; i < json_array_size(v); i++)
    if (!nested_as(json_array_get(v, i), shape, ndim, d + 1)) return false;
  return true;
}

static int non_negative_int(json_t *v, uint64_t *out) {
  if (!json_is_integer(v) || json_integer_value(v) < 0) return -1;
  *out = (uint64_t)json_integer_value(v);
  return 0;
}

/* A tensor's shared-memory reference: parameters.shared_memory_region (a string), _offset
 * (default 0) and _byte_size (required). *region is NULL when the parameters name no region. */
static int shm_params(const v2ctx *c, const char *an, json_t *params, json_t **region, uint64_t *offset,
                      uint64_t *byte_size) {
  *region = params ? json_object_get(params, "shared_memory_region") : NULL;
  if (!*region) return SEGOPS_OK;
  if (!json_is_string(*region))
    return fail(c, SEGOPS_E_MALFORMED_BODY, "%s: parameters.shared_memory_region must be a string%s", an, "");
  json_t *o = json_object_get(params, "shared_memory_offset"), *b = json_object_get(params, "shared_memory_byte_size");
  *offset = 0;
  if (o && non_negative_int(o, offset) < 0)
    return fail(c, SEGOPS_E_MALFORMED_BODY, "%s: parameters.shared_memory_offset must be a non-negative integer%s", an,
                "");
  if (!b || non_negative_int(b, byte_size) < 0)
    return fail(c, SEGOPS_E_MALFORMED_BODY,
                "%s: parameters.shared_memory_byte_size must be a non-negative integer (it is required with "
                "shared_memory_region)%s",
                an, "");
  return SEGOPS_OK;
}

/* An input in shared memory: the region, offset and declared byte size (which the record check
 * holds against the shape). */
static int input_shm(const v2ctx *c, const char *an, json_t *data, json_t *params, segops_tensor_record *r) {
  json_t *region;
  uint64_t offset, byte_size;
  int rc = shm_params(c, an, params, &region, &offset, &byte_size);
  if (rc || !region) return rc;
  if (data || json_object_get(params, "binary_data_size"))
    return fail(c, SEGOPS_E_MALFORMED_BODY,
                "%s has shared_memory_region and also \"data\" or binary_data_size (a tensor comes from one place)%s",
                an, "");
  r->src = SEGOPS_REC_SHM;
  r->region = json_string_value(region);
  r->region_len = json_string_length(region);
  r->offset = offset;
  r->has_byte_size = true;
  r->byte_size = byte_size;
  return SEGOPS_OK;
}

/* An input in the binary part: parameters.binary_data_size bytes, the next unclaimed ones. */
static int input_binary(v2ctx *c, const char *an, json_t *data, json_t *bsz, segops_tensor_record *r) {
  uint64_t n;
  if (non_negative_int(bsz, &n) < 0)
    return fail(c, SEGOPS_E_MALFORMED_BODY, "%s: parameters.binary_data_size must be a non-negative integer%s", an, "");
  if (data) return fail(c, SEGOPS_E_MALFORMED_BODY, "%s has both \"data\" and parameters.binary_data_size%s", an, "");
  if (!c->bin)
    return fail(c, SEGOPS_E_MALFORMED_BODY,
                "%s: parameters.binary_data_size is given but the request has no binary data "
                "(no Inference-Header-Content-Length header)%s",
                an, "");
  if (n > c->bin_len - c->bin_used) {
    char d[96];
    snprintf(d, sizeof d, " (%" PRIu64 " bytes asked, %zu left)", n, c->bin_len - c->bin_used);
    return fail(c, SEGOPS_E_MALFORMED_BODY, "%s: binary_data_size runs past the end of the body%s", an, d);
  }
  r->src = SEGOPS_REC_BYTES;
  r->bytes = c->bin + c->bin_used;
  r->nbytes = (size_t)n;
  c->bin_used += (size_t)n;
  return SEGOPS_OK;
}

/* An input's JSON "data": numbers, flat or nested as the shape says. */
static int input_numbers(const v2ctx *c, const char *an, json_t *data, segops_tensor_record *r) {
  if (!data)
    return fail(c, SEGOPS_E_MALFORMED_BODY, "%s has neither \"data\" nor parameters.binary_data_size%s", an, "");
  size_t n = 0;
  if (count_numbers(data, 0, &n) < 0 || !json_is_array(data))
    return fail(c, SEGOPS_E_MALFORMED_BODY, "%s.data must be a (nested) list of numbers%s", an, "");
  /* more than SEGOPS_MAX_NDIM dimensions: refused by the record check, the nesting unread */
  if (r->ndim <= SEGOPS_MAX_NDIM && !flat(data) && !nested_as(data, r->shape, r->ndim, 0)) {
    char d[96] = " [";
    for (size_t k = 0; k < r->ndim; k++)
      snprintf(d + strlen(d), sizeof d - strlen(d), "%s%lld", k ? ", " : "", (long long)r->shape[k]);
    snprintf(d + strlen(d), sizeof d - strlen(d), "]");
    return fail(c, SEGOPS_E_INVALID_ARGUMENT,
                "%s.data: nested lists must follow the shape%s (or be one flat list); these are ragged or of "
                "another rank",
                an, d);
  }
  r->src = SEGOPS_REC_NUMBERS;
  r->list = data;
  r->count = n;
  r->visit = segops_codec_json_numbers_visit;
  return SEGOPS_OK;
}

/* Where an input's data comes from: a shared-memory region (parameters.shared_memory_region),
 * the binary part (parameters.binary_data_size) or its JSON "data". */
static int input_source(v2ctx *c, const char *an, json_t *data, json_t *params, segops_tensor_record *r) {
  int rc = input_shm(c, an, data, params, r);
  if (rc || r->src == SEGOPS_REC_SHM) return rc;
  json_t *bsz = params ? json_object_get(params, "binary_data_size") : NULL;
  if (bsz) return input_binary(c, an, data, bsz, r);
  return input_numbers(c, an, data, r);
}

/* An input's values by key: name, datatype, shape, data, parameters (nothing else). */
typedef struct {
  json_t *name, *dtype, *shape, *data, *params;
} input_keys;

static int keys_of(const v2ctx *c, const char *an, json_t *in, input_keys *ik) {
  *ik = (input_keys){0};
  const char *k;
  json_t *kv;
  json_object_foreach(in, k, kv) {
    json_t **slot = !strcmp(k, "name")         ? &ik->name
                    : !strcmp(k, "datatype")   ? &ik->dtype
                    : !strcmp(k, "shape")      ? &ik->shape
                    : !strcmp(k, "data")       ? &ik->data
                    : !strcmp(k, "parameters") ? &ik->params
                                               : NULL;
    if (!slot) {
      char kb[64];
      return fail(c, SEGOPS_E_MALFORMED_BODY,
                  "%s has unknown key '%s' (expected name, datatype, shape, data, parameters)", an,
                  segops_codec_printable(kb, sizeof kb, k, strlen(k)));
    }
    *slot = kv;
  }
  return SEGOPS_OK;
}

/* The rest of an input, once its name is known: datatype, shape, parameters, data. */
static int input_record(v2ctx *c, const char *an, const input_keys *ik, segops_tensor_record *r) {
  if (!ik->dtype || !json_is_string(ik->dtype))
    return fail(c, SEGOPS_E_MALFORMED_BODY, "%s needs a string \"datatype\"%s", an, "");
  r->dtype_text = json_string_value(ik->dtype);
  r->dtype_len = json_string_length(ik->dtype);
  if (!ik->shape || !json_is_array(ik->shape))
    return fail(c, SEGOPS_E_MALFORMED_BODY, "%s.shape must be a list of non-negative integers%s", an, "");
  r->ndim = json_array_size(ik->shape);
  for (size_t d = 0; d < r->ndim && r->ndim <= SEGOPS_MAX_NDIM; d++) {
    json_t *e = json_array_get(ik->shape, d);
    if (!json_is_integer(e))
      return fail(c, SEGOPS_E_MALFORMED_BODY, "%s.shape must be a list of non-negative integers%s", an, "");
    r->shape[d] = (int64_t)json_integer_value(e); /* negatives are refused by prepare, by value */
  }
  if (ik->params && !json_is_object(ik->params))
    return fail(c, SEGOPS_E_MALFORMED_BODY, "%s.parameters must be an object%s", an, "");
  return input_source(c, an, ik->data, ik->params, r);
}

/* Reads entry i of "inputs" into a record (an unknown name is the error when the rest is bad). */
static int read_input(v2ctx *c, size_t i, json_t *in, segops_tensor_record *r) {
  char an[200];
  snprintf(an, sizeof an, "inputs[%zu]", i);
  memset(r, 0, sizeof *r);
  if (!json_is_object(in)) return fail(c, SEGOPS_E_MALFORMED_BODY, "%s must be an object%s", an, "");
  input_keys ik;
  int rc = keys_of(c, an, in, &ik);
  if (rc) return rc;
  if (!ik.name || !json_is_string(ik.name))
    return fail(c, SEGOPS_E_MALFORMED_BODY, "%s needs a string \"name\"%s", an, "");
  r->name = json_string_value(ik.name);
  r->name_len = json_string_length(ik.name);
  segops_codec_printable(an, sizeof an, r->name, r->name_len);
  rc = input_record(c, an, &ik, r);
  return segops_codec_unknown_arg(rc, c->op, c->pass, r->name, r->name_len, c->err, c->errlen);
}

/* num_segments is an INT64 or INT32 input of shape [1] (or a scalar []), checked as every tensor is;
 * a float one is "not an integer" to prepare, as a float num_segments is in v1. */
static int num_segments_from(const v2ctx *c, const segops_tensor_record *r, segops_decoded *out) {
  segops_request *req = &out->req;
  if (req->ns_kind != SEGOPS_NS_ABSENT)
    return fail(c, SEGOPS_E_INVALID_ARGUMENT, "argument '%s' is given more than once%s", "num_segments", "");
  if (r->src == SEGOPS_REC_SHM)
    return fail(c, SEGOPS_E_INVALID_ARGUMENT,
                "%s must be sent inline (\"data\" or binary data), not in shared memory%s", "num_segments", "");
  segops_record_ctx rc_ctx = {SEGOPS_WIRE_OIP, c->op, c->pass, SEGOPS_F64, out};
  segops_named_tensor t;
  int rc = segops_record_check(&rc_ctx, r, &t, c->err, c->errlen);
  if (rc) return rc;
  size_t isz = segops_dtype_size(t.t.dtype);
  bool one = (t.t.ndim == 0 || (t.t.ndim == 1 && t.t.shape[0] == 1)) && t.t.nbytes == isz;
  if (!one)
    return fail(c, SEGOPS_E_INVALID_ARGUMENT, "%s must be an INT64 or INT32 input of shape [1] holding one value%s",
                "num_segments", "");
  req->ns_kind = SEGOPS_NS_NOT_INT;
  if (t.t.dtype == SEGOPS_F32 || t.t.dtype == SEGOPS_F64) return SEGOPS_OK;
  req->ns_kind = SEGOPS_NS_INT;
  if (t.t.dtype == SEGOPS_I64) {
    memcpy(&req->ns_value, t.t.data, 8);
  } else {
    int32_t v;
    memcpy(&v, t.t.data, 4);
    req->ns_value = v;
  }
  return SEGOPS_OK;
}

/* Every entry of "inputs": num_segments into the request, the tensors into records; then every
 * byte of the binary part must have been claimed. */
static int read_inputs(v2ctx *c, json_t *inputs, segops_records *rs, segops_decoded *out) {
  if (!inputs || !json_is_array(inputs))
    return fail(c, SEGOPS_E_MALFORMED_BODY, "%s must be a list of input tensors%s", "inputs", "");
  for (size_t i = 0; i < json_array_size(inputs); i++) {
    segops_tensor_record r;
    int rc = read_input(c, i, json_array_get(inputs, i), &r);
    if (!rc && r.name_len == 12 && memcmp(r.name, "num_segments", 12) == 0) {
      rc = num_segments_from(c, &r, out);
    } else if (!rc) {
      if (rs->n >= SEGOPS_MAX_REQ_ARGS) return segops_codec_too_many_args(c->op, c->err, c->errlen);
      rs->rec[rs->n++] = r;
    }
    if (rc) return rc;
  }
  if (c->bin && c->bin_used != c->bin_len) {
    char d[96];
    snprintf(d, sizeof d, "%zu bytes of binary data", c->bin_len - c->bin_used);
    return fail(c, SEGOPS_E_MALFORMED_BODY, "the body has %s that no input's binary_data_size claims%s", d, "");
  }
  return SEGOPS_OK;
}

/* ---- outputs ------------------------------------------------------------------------------ */

static int out_index(segops_op op, segops_pass pass, const char *name, size_t len) {
  const segops_fn_desc *fn = segops_fn(op, pass);
  for (int k = 0; k < fn->n_out; k++)
    if (strlen(fn->out[k].name) == len && memcmp(fn->out[k].name, name, len) == 0) return k;
  return -1;
}

/* Where output `name` goes: a shared-memory region (parameters.shared_memory_region; the server
 * checks its byte size once the output's shape is known), binary data after the header, or JSON
 * "data" (parameters.binary_data; the request's binary_data_output when absent). */
static int output_target(const v2ctx *c, const char *an, json_t *params, json_t *name, segops_request *req,
                         segops_oip_opts *opts) {
  if (!params) return SEGOPS_OK;
  if (!json_is_object(params)) return fail(c, SEGOPS_E_MALFORMED_BODY, "%s.parameters must be an object%s", an, "");
  json_t *region;
  uint64_t offset, byte_size;
  int rc = shm_params(c, an, params, &region, &offset, &byte_size);
  if (rc) return rc;
  if (region) {
    if (json_is_true(json_object_get(params, "binary_data")))
      return fail(c, SEGOPS_E_MALFORMED_BODY,
                  "%s has shared_memory_region and also binary_data true (an output goes to one place)%s", an, "");
    req->outputs_shm[req->n_outputs_shm++] = (segops_output_shm){json_string_value(name),
                                                                 json_string_value(region),
                                                                 json_string_length(name),
                                                                 json_string_length(region),
                                                                 offset,
                                                                 byte_size,
                                                                 true};
    return SEGOPS_OK;
  }
  json_t *b = json_object_get(params, "binary_data");
  if (!b) return SEGOPS_OK;
  if (!json_is_boolean(b))
    return fail(c, SEGOPS_E_MALFORMED_BODY, "%s: parameters.binary_data must be true or false%s", an, "");
  int k = out_index(c->op, c->pass, json_string_value(name), json_string_length(name));
  if (k >= 0) {
    opts->out_set[k] = true;
    opts->out_binary[k] = json_is_true(b);
  }
  return SEGOPS_OK;
}

/* One entry of "outputs": {"name", "parameters"}. */
static int read_output(const v2ctx *c, size_t i, json_t *o, segops_request *req, segops_oip_opts *opts) {
  json_t *name = json_is_object(o) ? json_object_get(o, "name") : NULL;
  char an[64];
  snprintf(an, sizeof an, "outputs[%zu]", i);
  if (!name || !json_is_string(name))
    return fail(c, SEGOPS_E_MALFORMED_BODY, "%s must be an object with a string \"name\"%s", an, "");
  const char *k;
  json_t *kv;
  json_object_foreach(o, k, kv) {
    if (strcmp(k, "name") != 0 && strcmp(k, "parameters") != 0) {
      char kb[64];
      return fail(c, SEGOPS_E_MALFORMED_BODY, "%s has unknown key '%s' (expected name, parameters)", an,
                  segops_codec_printable(kb, sizeof kb, k, strlen(k)));
    }
  }
  segops_codec_printable(an, sizeof an, json_string_value(name), json_string_length(name));
  int rc = output_target(c, an, json_object_get(o, "parameters"), name, req, opts);
  if (rc) return rc;
  req->outputs[req->n_outputs].name = json_string_value(name);
  req->outputs[req->n_outputs].len = json_string_length(name);
  req->n_outputs++;
  return SEGOPS_OK;
}

static int read_outputs(const v2ctx *c, json_t *outputs, segops_request *req, segops_oip_opts *opts) {
  if (!json_is_array(outputs))
    return fail(c, SEGOPS_E_MALFORMED_BODY, "%s must be a list of {\"name\": ...} objects%s", "outputs", "");
  if (json_array_size(outputs) > SEGOPS_MAX_OUTPUTS * 2)
    return segops_codec_too_many_outputs(c->op, false, json_array_size(outputs), c->err, c->errlen);
  req->has_outputs = true;
  for (size_t i = 0; i < json_array_size(outputs); i++) {
    int rc = read_output(c, i, json_array_get(outputs, i), req, opts);
    if (rc) return rc;
  }
  return SEGOPS_OK;
}

/* ---- request ------------------------------------------------------------------------------ */

static int request_params(const v2ctx *c, json_t *params, segops_oip_opts *opts) {
  if (!params) return SEGOPS_OK;
  if (!json_is_object(params)) return fail(c, SEGOPS_E_MALFORMED_BODY, "%s must be an object%s", "parameters", "");
  json_t *b = json_object_get(params, "binary_data_output");
  if (b && !json_is_boolean(b))
    return fail(c, SEGOPS_E_MALFORMED_BODY, "%s must be true or false%s", "parameters.binary_data_output", "");
  opts->binary_default = b && json_is_true(b);
  return SEGOPS_OK; /* other parameters (priority, timeout, ...) do not apply here */
}

/* The inference request's keys: inputs, outputs, parameters and the id (echoed). */
typedef struct {
  json_t *inputs, *outputs, *params;
} root_keys;

static int root_keys_of(const v2ctx *c, json_t *root, root_keys *rk, segops_oip_opts *opts) {
  if (!json_is_object(root))
    return fail(c, SEGOPS_E_MALFORMED_BODY, "%s must be a JSON object with \"inputs\"%s", "the inference request", "");
  *rk = (root_keys){0};
  const char *k;
  json_t *v;
  json_object_foreach(root, k, v) {
    if (!strcmp(k, "inputs")) {
      rk->inputs = v;
    } else if (!strcmp(k, "outputs")) {
      rk->outputs = v;
    } else if (!strcmp(k, "parameters")) {
      rk->params = v;
    } else if (!strcmp(k, "id")) {
      if (!json_is_string(v) || json_string_length(v) >= sizeof opts->id)
        return fail(c, SEGOPS_E_INVALID_ARGUMENT, "%s must be a string of at most 127 bytes%s", "id", "");
      memcpy(opts->id, json_string_value(v), json_string_length(v) + 1);
      opts->has_id = true;
    } else {
      char kb[64];
      return fail(c, SEGOPS_E_MALFORMED_BODY, "the inference request has unknown key '%s' (expected %s)",
                  segops_codec_printable(kb, sizeof kb, k, strlen(k)), "id, parameters, inputs, outputs");
    }
  }
  return SEGOPS_OK;
}

static int tokenize(v2ctx *c, json_t *root, segops_records *rs, segops_decoded *out, segops_oip_opts *opts) {
  root_keys rk = {NULL, NULL, NULL};
  int rc = root_keys_of(c, root, &rk, opts);
  if (!rc) rc = request_params(c, rk.params, opts);
  if (!rc) rc = read_inputs(c, rk.inputs, rs, out);
  if (!rc && rk.outputs) rc = read_outputs(c, rk.outputs, &out->req, opts);
  return rc;
}

int segops_decode_oip(const char *body, size_t len, segops_op op, segops_pass pass, const segops_codec_limits *lim,
                      segops_decoded *out, segops_oip_opts *opts, char *err, size_t errlen) {
  segops_codec_reset(out, op, pass);
  size_t header_len = opts->header_len;
  memset(opts, 0, sizeof *opts);
  opts->header_len = header_len;
  if (!segops_fn(op, pass)) return segops_errf(SEGOPS_E_NOT_FOUND, err, errlen, "unknown op or pass");
  if (!body) len = 0;
  if (header_len > len)
    return segops_codec_fail(SEGOPS_E_MALFORMED_BODY, err, errlen, op,
                             "Inference-Header-Content-Length (%zu) exceeds the body (%zu bytes)", header_len, len);
  size_t hl = header_len ? header_len : len;
  v2ctx c = {op, pass, err, errlen, header_len ? body + hl : NULL, len - hl, 0};
  segops_codec_limits l = segops_codec_limits_eff(lim);
  int rc = segops_codec_json_prescan(body, hl, &l, op, err, errlen);
  if (rc) return rc;
  json_error_t je;
  json_t *root = json_loadb(body ? body : "", hl, JSON_REJECT_DUPLICATES, &je);
  if (!root) return segops_codec_json_syntax_error(&je, hl, op, err, errlen);
  segops_records rs;
  rs.n = 0;
  rs.dtype_text = NULL;
  rc = tokenize(&c, root, &rs, out, opts);
  /* The numbers are materialised and the strings copied before the tree goes. */
  if (!rc) rc = segops_records_finish(SEGOPS_WIRE_OIP, &rs, true, out, err, errlen);
  json_decref(root);
  if (rc) {
    segops_decoded_free(out);
    segops_codec_reset(out, op, pass);
  }
  return rc;
}

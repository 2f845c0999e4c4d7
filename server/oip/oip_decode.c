/* oip_decode.c: the Open Inference Protocol's infer request decoder. The JSON header (jansson, after
 * the v1 JSON decoder's depth/item pre-scan) names inputs {name, datatype, shape, data |
 * parameters.binary_data_size} and outputs {name, parameters.binary_data}; it becomes the same
 * segops_request the v1 codecs produce, so core/prepare.c validates it with v1's messages.
 * Binary tensor data is not copied: tensors point into the body after the header. */
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codec_internal.h"
#include "errors.h"
#include "oip.h"

static const char *const DATATYPES[SEGOPS_DTYPE_COUNT] = {
    [SEGOPS_F32] = "FP32", [SEGOPS_F64] = "FP64", [SEGOPS_I32] = "INT32", [SEGOPS_I64] = "INT64"};

const char *segops_oip_datatype(segops_dtype dt) { return (unsigned)dt < SEGOPS_DTYPE_COUNT ? DATATYPES[dt] : "?"; }

int segops_oip_datatype_parse(const char *s, size_t len) {
  for (int d = 0; d < SEGOPS_DTYPE_COUNT; d++)
    if (DATATYPES[d] && strlen(DATATYPES[d]) == len && memcmp(DATATYPES[d], s, len) == 0) return d;
  return -1;
}

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
  char *err;
  size_t errlen;
  const char *bin; /* the binary part of the body */
  size_t bin_len, bin_used;
} v2ctx;

/* An input between the two passes: where its numbers come from. */
typedef struct {
  const char *name;
  size_t nlen;
  segops_dtype dt;
  int ndim;
  int64_t shape[SEGOPS_MAX_NDIM];
  json_t *data;      /* JSON data (flat or nested list), or NULL */
  const void *bytes; /* binary data (borrowed from the body), when data is NULL */
  size_t count;      /* JSON: numbers to materialise; binary: bytes */
  json_t *shm;       /* by reference: parameters.shared_memory_region (a string), else NULL */
  uint64_t shm_offset;
} v2input;

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
static bool nested_as(json_t *v, const int64_t *shape, int ndim, int d) {
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

/* An input in shared memory: its byte size must be the tensor's, prod(shape) * itemsize (a
 * negative dimension is left for prepare to refuse by value). */
static int input_shm(v2ctx *c, const char *an, json_t *data, json_t *params, json_t *region, uint64_t offset,
                     uint64_t byte_size, v2input *t) {
  if (data || json_object_get(params, "binary_data_size"))
    return fail(c, SEGOPS_E_MALFORMED_BODY,
                "%s has shared_memory_region and also \"data\" or binary_data_size (a tensor comes from one place)%s",
                an, "");
  uint64_t count = segops_dtype_size(t->dt);
  for (int d = 0; d < t->ndim; d++) {
    if (t->shape[d] < 0) count = UINT64_MAX - 1; /* prepare refuses the shape */
    if (count == UINT64_MAX - 1) break;
    if (t->shape[d] && count > (UINT64_MAX >> 4) / (uint64_t)t->shape[d])
      return fail(c, SEGOPS_E_TOO_LARGE, "%s: its shape is too large%s", an, "");
    count *= (uint64_t)t->shape[d];
  }
  if (count != UINT64_MAX - 1 && count != byte_size) {
    char d[128];
    snprintf(d, sizeof d, " (%" PRIu64 " given; the %s tensor's shape and datatype make %" PRIu64 ")", byte_size,
             segops_oip_datatype(t->dt), count);
    return fail(c, SEGOPS_E_INVALID_ARGUMENT,
                "%s: parameters.shared_memory_byte_size must equal the tensor's byte size%s", an, d);
  }
  t->shm = region;
  t->shm_offset = offset;
  return SEGOPS_OK;
}

/* Where an input's data comes from: a shared-memory region (parameters.shared_memory_region),
 * the binary part (parameters.binary_data_size) or its JSON "data". */
static int input_source(v2ctx *c, const char *an, json_t *data, json_t *params, v2input *t) {
  json_t *bsz = params ? json_object_get(params, "binary_data_size") : NULL;
  json_t *region;
  uint64_t offset, byte_size;
  int rc = shm_params(c, an, params, &region, &offset, &byte_size);
  if (rc) return rc;
  if (region) return input_shm(c, an, data, params, region, offset, byte_size, t);
  if (bsz) {
    uint64_t n;
    if (non_negative_int(bsz, &n) < 0)
      return fail(c, SEGOPS_E_MALFORMED_BODY, "%s: parameters.binary_data_size must be a non-negative integer%s", an,
                  "");
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
    t->bytes = c->bin + c->bin_used;
    t->count = (size_t)n;
    c->bin_used += (size_t)n;
    return SEGOPS_OK;
  }
  if (!data)
    return fail(c, SEGOPS_E_MALFORMED_BODY, "%s has neither \"data\" nor parameters.binary_data_size%s", an, "");
  size_t n = 0;
  if (count_numbers(data, 0, &n) < 0 || !json_is_array(data))
    return fail(c, SEGOPS_E_MALFORMED_BODY, "%s.data must be a (nested) list of numbers%s", an, "");
  if (!flat(data) && !nested_as(data, t->shape, t->ndim, 0)) {
    char d[96] = " [";
    for (int k = 0; k < t->ndim; k++)
      snprintf(d + strlen(d), sizeof d - strlen(d), "%s%lld", k ? ", " : "", (long long)t->shape[k]);
    snprintf(d + strlen(d), sizeof d - strlen(d), "]");
    return fail(c, SEGOPS_E_INVALID_ARGUMENT,
                "%s.data: nested lists must follow the shape%s (or be one flat list); these are ragged or of "
                "another rank",
                an, d);
  }
  t->data = data;
  t->count = n;
  return SEGOPS_OK;
}

/* Reads one entry of "inputs" (pass A: nothing is allocated). */
static int read_input(v2ctx *c, size_t i, json_t *in, v2input *t) {
  char an[64];
  snprintf(an, sizeof an, "inputs[%zu]", i);
  if (!json_is_object(in)) return fail(c, SEGOPS_E_MALFORMED_BODY, "%s must be an object%s", an, "");
  json_t *name = NULL, *dtype = NULL, *shape = NULL, *data = NULL, *params = NULL;
  const char *k;
  json_t *kv;
  json_object_foreach(in, k, kv) {
    if (!strcmp(k, "name"))
      name = kv;
    else if (!strcmp(k, "datatype"))
      dtype = kv;
    else if (!strcmp(k, "shape"))
      shape = kv;
    else if (!strcmp(k, "data"))
      data = kv;
    else if (!strcmp(k, "parameters"))
      params = kv;
    else {
      char kb[64];
      return fail(c, SEGOPS_E_MALFORMED_BODY,
                  "%s has unknown key '%s' (expected name, datatype, shape, data, parameters)", an,
                  segops_codec_printable(kb, sizeof kb, k, strlen(k)));
    }
  }
  if (!name || !json_is_string(name)) return fail(c, SEGOPS_E_MALFORMED_BODY, "%s needs a string \"name\"%s", an, "");
  t->name = json_string_value(name);
  t->nlen = json_string_length(name);
  segops_codec_printable(an, sizeof an, t->name, t->nlen);
  if (!dtype || !json_is_string(dtype))
    return fail(c, SEGOPS_E_MALFORMED_BODY, "%s needs a string \"datatype\"%s", an, "");
  int dt = segops_oip_datatype_parse(json_string_value(dtype), json_string_length(dtype));
  if (dt < 0) {
    char db[64];
    const bool integer = !strcmp(an, "idx") || !strcmp(an, "num_segments"); /* the others are float tensors */
    return segops_codec_fail(SEGOPS_E_INVALID_ARGUMENT, c->err, c->errlen, c->op,
                             "%s.datatype: unknown datatype '%s' (expected %s)", an,
                             segops_codec_printable(db, sizeof db, json_string_value(dtype), json_string_length(dtype)),
                             integer ? "INT32 or INT64" : "FP32 or FP64");
  }
  t->dt = (segops_dtype)dt;
  if (!shape || !json_is_array(shape))
    return fail(c, SEGOPS_E_MALFORMED_BODY, "%s.shape must be a list of non-negative integers%s", an, "");
  if (json_array_size(shape) > SEGOPS_MAX_NDIM) {
    char d[64];
    snprintf(d, sizeof d, "%zu dimensions; at most %d are allowed", json_array_size(shape), SEGOPS_MAX_NDIM);
    return fail(c, SEGOPS_E_INVALID_ARGUMENT, "%s has %s", an, d);
  }
  t->ndim = (int)json_array_size(shape);
  for (int d = 0; d < t->ndim; d++) {
    json_t *e = json_array_get(shape, (size_t)d);
    if (!json_is_integer(e))
      return fail(c, SEGOPS_E_MALFORMED_BODY, "%s.shape must be a list of non-negative integers%s", an, "");
    t->shape[d] = (int64_t)json_integer_value(e); /* negatives are refused by prepare, by value */
  }
  if (params && !json_is_object(params))
    return fail(c, SEGOPS_E_MALFORMED_BODY, "%s.parameters must be an object%s", an, "");
  return input_source(c, an, data, params, t);
}

/* Copies s[0, l) and a NUL to *np (the arena's names part) and moves *np past them. */
static const char *arena_str(char **np, const char *s, size_t l) {
  char *d = *np;
  memcpy(d, s, l);
  d[l] = 0;
  *np += l + 1;
  return d;
}

/* Visits a tensor's JSON numbers in row-major order into dst. */
static int store_numbers(const v2ctx *c, const char *an, const v2input *t, json_t *v, size_t *i, char *dst) {
  if (json_is_array(v)) {
    for (size_t k = 0; k < json_array_size(v); k++) {
      int rc = store_numbers(c, an, t, json_array_get(v, k), i, dst);
      if (rc) return rc;
    }
    return SEGOPS_OK;
  }
  char wb[96];
  size_t at = (*i)++;
  snprintf(wb, sizeof wb, "%s.data[%zu]", an, at);
  if (t->dt == SEGOPS_F32 || t->dt == SEGOPS_F64) {
    double x = json_is_real(v) ? json_real_value(v) : (double)json_integer_value(v);
    if (t->dt == SEGOPS_F64) {
      memcpy(dst + at * 8, &x, 8);
      return SEGOPS_OK;
    }
    float f = (float)x;
    if (isinf(f) && !isinf(x)) return fail(c, SEGOPS_E_INVALID_ARGUMENT, "%s is out of float32 range%s", wb, "");
    memcpy(dst + at * 4, &f, 4);
    return SEGOPS_OK;
  }
  if (!json_is_integer(v)) return fail(c, SEGOPS_E_INVALID_ARGUMENT, "%s must be an integer%s", wb, "");
  int64_t x = (int64_t)json_integer_value(v);
  if (t->dt == SEGOPS_I64) {
    memcpy(dst + at * 8, &x, 8);
    return SEGOPS_OK;
  }
  if (x < INT32_MIN || x > INT32_MAX) return fail(c, SEGOPS_E_INVALID_ARGUMENT, "%s is out of int32 range%s", wb, "");
  int32_t y = (int32_t)x;
  memcpy(dst + at * 4, &y, 4);
  return SEGOPS_OK;
}

/* num_segments is an INT64 or INT32 input of shape [1] (or a scalar []); a float one is "not an
 * integer" to prepare, as a float num_segments is in v1. */
static int read_num_segments(const v2ctx *c, const v2input *t, segops_request *req) {
  if (t->shm)
    return fail(c, SEGOPS_E_INVALID_ARGUMENT,
                "%s must be sent inline (\"data\" or binary data), not in shared memory%s", "num_segments", "");
  size_t isz = segops_dtype_size(t->dt);
  size_t elems = t->data ? t->count : t->count / (isz ? isz : 1);
  bool one = (t->ndim == 0 || (t->ndim == 1 && t->shape[0] == 1)) && elems == 1 && (t->data || t->count == isz);
  if (!one)
    return fail(c, SEGOPS_E_INVALID_ARGUMENT, "%s must be an INT64 or INT32 input of shape [1] holding one value%s",
                "num_segments", "");
  if (t->dt == SEGOPS_F32 || t->dt == SEGOPS_F64) {
    req->ns_kind = SEGOPS_NS_NOT_INT;
    return SEGOPS_OK;
  }
  if (t->data) {
    json_t *v = t->data;
    while (json_is_array(v)) v = json_array_get(v, 0);
    if (!json_is_integer(v)) {
      req->ns_kind = SEGOPS_NS_NOT_INT;
      return SEGOPS_OK;
    }
    req->ns_value = (int64_t)json_integer_value(v);
  } else if (t->dt == SEGOPS_I64) {
    memcpy(&req->ns_value, t->bytes, 8);
  } else {
    int32_t v;
    memcpy(&v, t->bytes, 4);
    req->ns_value = v;
  }
  req->ns_kind = SEGOPS_NS_INT;
  return SEGOPS_OK;
}

/* ---- outputs ------------------------------------------------------------------------------ */

static int out_index(segops_op op, segops_pass pass, const char *name, size_t len) {
  const segops_fn_desc *fn = segops_fn(op, pass);
  for (int k = 0; k < fn->n_out; k++)
    if (strlen(fn->out[k].name) == len && memcmp(fn->out[k].name, name, len) == 0) return k;
  return -1;
}

/* Where an output's data goes: a shared-memory region (parameters.shared_memory_region; the server
 * checks its byte size once the output's shape is known), binary data after the header, or JSON
 * "data" (parameters.binary_data; the request's binary_data_output when absent). */
static int output_target(const v2ctx *c, const char *an, json_t *params, int k, segops_request *req,
                         segops_oip_opts *opts, json_t **shm_region, size_t *names_bytes) {
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
    segops_output_shm *o = &req->outputs_shm[req->n_outputs_shm];
    o->offset = offset;
    o->byte_size = byte_size;
    o->has_byte_size = true;
    shm_region[req->n_outputs_shm++] = region; /* name and region go into the arena later */
    *names_bytes += json_string_length(region) + 1;
    return SEGOPS_OK;
  }
  json_t *b = json_object_get(params, "binary_data");
  if (!b) return SEGOPS_OK;
  if (!json_is_boolean(b))
    return fail(c, SEGOPS_E_MALFORMED_BODY, "%s: parameters.binary_data must be true or false%s", an, "");
  if (k >= 0) {
    opts->out_set[k] = true;
    opts->out_binary[k] = json_is_true(b);
  }
  return SEGOPS_OK;
}

static int read_outputs(const v2ctx *c, segops_pass pass, json_t *outputs, segops_request *req, segops_oip_opts *opts,
                        json_t **shm_region, size_t *names_bytes) {
  if (!json_is_array(outputs))
    return fail(c, SEGOPS_E_MALFORMED_BODY, "%s must be a list of {\"name\": ...} objects%s", "outputs", "");
  if (json_array_size(outputs) > SEGOPS_MAX_OUTPUTS * 2) {
    char d[64];
    snprintf(d, sizeof d, "%zu outputs; at most %d are allowed", json_array_size(outputs), SEGOPS_MAX_OUTPUTS * 2);
    return fail(c, SEGOPS_E_INVALID_ARGUMENT, "%s lists %s", "outputs", d);
  }
  req->has_outputs = true;
  for (size_t i = 0; i < json_array_size(outputs); i++) {
    json_t *o = json_array_get(outputs, i), *name = json_is_object(o) ? json_object_get(o, "name") : NULL;
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
    const char *s = json_string_value(name);
    size_t l = json_string_length(name);
    segops_codec_printable(an, sizeof an, s, l);
    int shm_before = req->n_outputs_shm;
    int rc = output_target(c, an, json_object_get(o, "parameters"), out_index(c->op, pass, s, l), req, opts, shm_region,
                           names_bytes);
    if (rc) return rc;
    if (req->n_outputs_shm > shm_before) { /* the name is shared with outputs[] below */
      req->outputs_shm[shm_before].name = s;
      req->outputs_shm[shm_before].len = l;
    }
    req->outputs[req->n_outputs].name = s; /* re-pointed into the arena after allocation */
    req->outputs[req->n_outputs].len = l;
    req->n_outputs++;
    *names_bytes += l + 1;
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

static int decode_tree(v2ctx *c, json_t *root, segops_pass pass, segops_decoded *out, segops_oip_opts *opts) {
  segops_request *req = &out->req;
  if (!json_is_object(root))
    return fail(c, SEGOPS_E_MALFORMED_BODY, "%s must be a JSON object with \"inputs\"%s", "the inference request", "");
  json_t *inputs = NULL, *outputs = NULL, *params = NULL;
  const char *k;
  json_t *v;
  json_object_foreach(root, k, v) {
    if (!strcmp(k, "inputs"))
      inputs = v;
    else if (!strcmp(k, "outputs"))
      outputs = v;
    else if (!strcmp(k, "parameters"))
      params = v;
    else if (!strcmp(k, "id")) {
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
  int rc = request_params(c, params, opts);
  if (rc) return rc;
  if (!inputs || !json_is_array(inputs))
    return fail(c, SEGOPS_E_MALFORMED_BODY, "%s must be a list of input tensors%s", "inputs", "");
  v2input ts[SEGOPS_MAX_REQ_ARGS];
  int nt = 0;
  size_t names_bytes = 0;
  for (size_t i = 0; i < json_array_size(inputs); i++) {
    v2input t;
    memset(&t, 0, sizeof t);
    rc = read_input(c, i, json_array_get(inputs, i), &t);
    if (rc) return rc;
    if (t.nlen == 12 && memcmp(t.name, "num_segments", 12) == 0) {
      if (req->ns_kind != SEGOPS_NS_ABSENT)
        return fail(c, SEGOPS_E_INVALID_ARGUMENT, "argument '%s' is given more than once%s", "num_segments", "");
      rc = read_num_segments(c, &t, req);
      if (rc) return rc;
      continue;
    }
    if (nt >= SEGOPS_MAX_REQ_ARGS) {
      char d[32];
      snprintf(d, sizeof d, "%d", SEGOPS_MAX_REQ_ARGS);
      return fail(c, SEGOPS_E_INVALID_ARGUMENT, "too many arguments (more than %s%s tensors)", d, "");
    }
    ts[nt++] = t;
    names_bytes += t.nlen + 1 + (t.shm ? json_string_length(t.shm) + 1 : 0);
  }
  if (c->bin && c->bin_used != c->bin_len) {
    char d[96];
    snprintf(d, sizeof d, "%zu bytes of binary data", c->bin_len - c->bin_used);
    return fail(c, SEGOPS_E_MALFORMED_BODY, "the body has %s that no input's binary_data_size claims%s", d, "");
  }
  json_t *oshm_region[SEGOPS_MAX_OUTPUTS * 2];
  if (outputs) {
    rc = read_outputs(c, pass, outputs, req, opts, oshm_region, &names_bytes);
    if (rc) return rc;
  }

  /* One arena: the JSON inputs' numbers (64-byte aligned), then the names. */
  size_t total = 0, off[SEGOPS_MAX_REQ_ARGS];
  for (int i = 0; i < nt; i++) {
    size_t sz;
    off[i] = total;
    if (ts[i].data && !segops_codec_align64(ts[i].count * segops_dtype_size(ts[i].dt), &sz))
      return fail(c, SEGOPS_E_TOO_LARGE, "%s is too large%s", "body", "");
    if (ts[i].data) total += sz;
  }
  size_t names_off = total;
  total += names_bytes;
  char *arena = segops_aligned_alloc(total);
  if (!arena) return fail(c, SEGOPS_E_NOMEM, "out of memory decoding the %s%s", "body", "");
  out->owned = arena;
  char *np = arena + names_off;
  for (int i = 0; i < nt; i++) {
    v2input *t = &ts[i];
    segops_named_tensor *a = &req->args[req->nargs++];
    a->name = arena_str(&np, t->name, t->nlen);
    a->name_len = t->nlen;
    a->t.dtype = t->dt;
    a->t.ndim = t->ndim;
    memcpy(a->t.shape, t->shape, sizeof t->shape);
    if (t->data) {
      char an[64];
      size_t at = 0;
      segops_codec_printable(an, sizeof an, t->name, t->nlen);
      rc = store_numbers(c, an, t, t->data, &at, arena + off[i]);
      if (rc) return rc; /* the caller frees the arena */
      a->t.data = arena + off[i];
      a->t.nbytes = t->count * segops_dtype_size(t->dt);
    } else if (t->shm) { /* by reference: resolved by the server (shm_io.h) */
      a->shm_region_len = json_string_length(t->shm);
      a->shm_region = arena_str(&np, json_string_value(t->shm), a->shm_region_len);
      a->shm_offset = t->shm_offset;
    } else {
      a->t.data = t->bytes;
      a->t.nbytes = t->count;
    }
  }
  for (int j = 0; j < req->n_outputs; j++) {
    const char *name = arena_str(&np, req->outputs[j].name, req->outputs[j].len);
    for (int m = 0; m < req->n_outputs_shm; m++)
      if (req->outputs_shm[m].name == req->outputs[j].name) req->outputs_shm[m].name = name;
    req->outputs[j].name = name;
  }
  for (int m = 0; m < req->n_outputs_shm; m++) {
    req->outputs_shm[m].region_len = json_string_length(oshm_region[m]);
    req->outputs_shm[m].region = arena_str(&np, json_string_value(oshm_region[m]), req->outputs_shm[m].region_len);
  }
  return SEGOPS_OK;
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
  v2ctx c = {op, err, errlen, header_len ? body + hl : NULL, len - hl, 0};
  segops_codec_limits l = segops_codec_limits_eff(lim);
  int rc = segops_codec_json_prescan(body, hl, &l, op, err, errlen);
  if (rc) return rc;
  json_error_t je;
  json_t *root = json_loadb(body ? body : "", hl, JSON_REJECT_DUPLICATES, &je);
  if (!root) return segops_codec_json_syntax_error(&je, hl, op, err, errlen);
  rc = decode_tree(&c, root, pass, out, opts);
  json_decref(root);
  if (rc) {
    segops_decoded_free(out);
    segops_codec_reset(out, op, pass);
  }
  return rc;
}

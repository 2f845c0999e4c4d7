/* codec_json.c: JSON request decoder on jansson. Tensors come as {"dtype","shape","data":[...]}
 * maps or as bare nested lists; the decoder only tokenizes them into records, whose numbers
 * codec_record.c checks and materialises. */
#include <inttypes.h>
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codec_internal.h"
#include "errors.h"

/* ---- bounds pre-scan ----------------------------------------------------------------------
 * jansson builds a whole tree (tens of bytes per number) before we could count anything, and
 * its own depth cap is 2048. This linear walk over the raw bytes enforces our depth and item
 * limits first, so an over-limit body is refused before any tree is allocated. Items are the
 * elements of arrays plus the pairs of objects. Syntax is left to jansson. */
int segops_codec_json_prescan(const char *b, size_t len, const segops_codec_limits *lim, segops_op op, char *err,
                              size_t errlen) {
  int depth = 0;
  size_t items = 0;
  bool opened = false; /* just after '[' or '{': the next token decides if the container is empty */
  for (size_t i = 0; i < len; i++) {
    char c = b[i];
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r') continue;
    if (opened && c != ']' && c != '}') items++;
    opened = false;
    if (c == '"') {
      for (i++; i < len && b[i] != '"'; i++)
        if (b[i] == '\\') i++;
    } else if (c == '[' || c == '{') {
      if (++depth > lim->max_depth)
        return segops_codec_fail(SEGOPS_E_MALFORMED_BODY, err, errlen, op,
                                 "body is nested too deeply (more than %d levels at byte %zu)", lim->max_depth, i);
      opened = true;
    } else if (c == ']' || c == '}') {
      depth--;
    } else if (c == ',') {
      items++;
    }
    if (items > lim->max_items)
      return segops_codec_fail(SEGOPS_E_TOO_LARGE, err, errlen, op,
                               "body has more than %zu array/map items (the limit, --max-body-items)", lim->max_items);
  }
  return SEGOPS_OK;
}

int segops_codec_json_syntax_error(const json_error_t *je, size_t len, segops_op op, char *err, size_t errlen) {
  char tb[200];
  const char *text = je->text;
  if (json_error_code(je) == json_error_duplicate_key) {
    /* jansson says: duplicate object key near '"x"' */
    const char *near = strstr(text, "near '");
    const char *key = near ? near + 6 : "";
    size_t kl = strlen(key);
    if (kl && key[kl - 1] == '\'') kl--;
    if (kl >= 2 && key[0] == '"' && key[kl - 1] == '"') key++, kl -= 2;
    return segops_codec_fail(SEGOPS_E_INVALID_ARGUMENT, err, errlen, op,
                             "key '%s' is given more than once (line %d, column %d)",
                             segops_codec_printable(tb, sizeof tb, key, kl), je->line, je->column);
  }
  if (len == 0)
    return segops_codec_fail(SEGOPS_E_MALFORMED_BODY, err, errlen, op, "body is not valid JSON (empty body)");
  return segops_codec_fail(
      SEGOPS_E_MALFORMED_BODY, err, errlen, op, "body is not valid JSON (%s; line %d, column %d, byte %d)",
      segops_codec_printable(tb, sizeof tb, text, strlen(text)), je->line, je->column, je->position);
}

/* ---- numbers -------------------------------------------------------------------------------- */

static int visit(json_t *v, size_t *i, segops_number_fn f, void *cls) {
  for (size_t k = 0; k < json_array_size(v); k++) {
    json_t *e = json_array_get(v, k);
    if (json_is_array(e)) {
      int rc = visit(e, i, f, cls);
      if (rc) return rc;
      continue;
    }
    segops_wire_number n = {SEGOPS_NUM_OTHER, 0, 0};
    if (json_is_integer(e))
      n = (segops_wire_number){SEGOPS_NUM_INT, (int64_t)json_integer_value(e), 0};
    else if (json_is_real(e))
      n = (segops_wire_number){SEGOPS_NUM_REAL, 0, json_real_value(e)};
    int rc = f(cls, (*i)++, &n);
    if (rc) return rc;
  }
  return SEGOPS_OK;
}

/* The lists visited are a tensor's, as tokenized: nested no deeper than SEGOPS_MAX_NDIM (bare
 * lists, OIP data following its shape) or flat, so the recursion is bounded. */
int segops_codec_json_numbers_visit(const void *list, segops_number_fn f, void *cls) {
  size_t i = 0;
  return visit((json_t *)list, &i, f, cls);
}

/* ---- tensors -------------------------------------------------------------------------------- */

/* Checks that a bare nested list is rectangular with leaves that are not lists. */
static int check_rect(segops_op op, const char *an, const segops_tensor_record *r, json_t *v, size_t level, char *err,
                      size_t errlen) {
  if (level == r->ndim - 1) {
    for (size_t i = 0; i < json_array_size(v); i++)
      if (json_is_array(json_array_get(v, i)))
        return segops_codec_fail(SEGOPS_E_INVALID_ARGUMENT, err, errlen, op,
                                 "%s is not a rectangular nested list of numbers", an);
    return SEGOPS_OK;
  }
  if (level + 1 >= SEGOPS_MAX_NDIM) return SEGOPS_E_INTERNAL; /* ndim <= SEGOPS_MAX_NDIM here: bounds the recursion */
  for (size_t i = 0; i < json_array_size(v); i++) {
    json_t *e = json_array_get(v, i);
    if (!json_is_array(e) || (int64_t)json_array_size(e) != r->shape[level + 1])
      return segops_codec_fail(SEGOPS_E_INVALID_ARGUMENT, err, errlen, op,
                               "%s is not a rectangular nested list of numbers (%s[%zu] should be a list of %" PRId64
                               " items)",
                               an, an, i, r->shape[level + 1]);
    int rc = check_rect(op, an, r, e, level + 1, err, errlen);
    if (rc) return rc;
  }
  return SEGOPS_OK;
}

/* A bare (nested) list: its shape from the nesting (counted to one level past the rank limit),
 * numbers in the request's float dtype, or for idx in int32 (int64 when a value needs it). */
static int bare_record(segops_op op, const char *an, json_t *v, segops_tensor_record *r, char *err, size_t errlen) {
  json_t *e = v;
  while (json_is_array(e) && !r->ndim_open) {
    if (r->ndim == SEGOPS_MAX_NDIM) {
      r->ndim_open = true; /* refused by the record check */
      return SEGOPS_OK;
    }
    r->shape[r->ndim++] = (int64_t)json_array_size(e);
    e = json_array_size(e) ? json_array_get(e, 0) : NULL;
  }
  int rc = check_rect(op, an, r, v, 0, err, errlen);
  if (rc) return rc;
  r->count = 1;
  for (size_t d = 0; d < r->ndim; d++) r->count *= (size_t)r->shape[d]; /* bounded by the item limit */
  r->dtype_code = r->name_len == 3 && memcmp(r->name, "idx", 3) == 0 ? SEGOPS_REC_DTYPE_INT : SEGOPS_REC_DTYPE_CALL;
  r->src = SEGOPS_REC_NUMBERS;
  r->list = v;
  r->visit = segops_codec_json_numbers_visit;
  r->nested = true;
  return SEGOPS_OK;
}

/* A shared-memory reference {"region": str, "offset": int >= 0} (offset optional). */
static int shm_ref(segops_op op, const char *label, json_t *v, const char **region, size_t *region_len,
                   uint64_t *offset, char *err, size_t errlen) {
  json_t *rg = json_is_object(v) ? json_object_get(v, "region") : NULL;
  json_t *of = json_is_object(v) ? json_object_get(v, "offset") : NULL;
  size_t want = (rg ? 1u : 0u) + (of ? 1u : 0u);
  if (!json_is_object(v) || !json_is_string(rg) || (of && (!json_is_integer(of) || json_integer_value(of) < 0)) ||
      json_object_size(v) != want)
    return segops_codec_fail(SEGOPS_E_MALFORMED_BODY, err, errlen, op,
                             "%s must be a map {\"region\": name, \"offset\": bytes} (a string and a non-negative "
                             "integer)",
                             label);
  *region = json_string_value(rg);
  *region_len = json_string_length(rg);
  *offset = of ? (uint64_t)json_integer_value(of) : 0;
  return SEGOPS_OK;
}

/* A tensor map's values by key: dtype, shape, data, shm (jansson refuses repeated keys). */
static int map_keys(segops_op op, const char *an, json_t *v, json_t **dtype, json_t **shape, json_t **data,
                    json_t **shm, char *err, size_t errlen) {
  const char *k;
  json_t *kv;
  *dtype = *shape = *data = *shm = NULL;
  json_object_foreach(v, k, kv) {
    json_t **slot = !strcmp(k, "shm")     ? shm
                    : !strcmp(k, "dtype") ? dtype
                    : !strcmp(k, "shape") ? shape
                    : !strcmp(k, "data")  ? data
                                          : NULL;
    if (!slot) {
      char kb[200];
      return segops_codec_fail(SEGOPS_E_MALFORMED_BODY, err, errlen, op,
                               "%s has unknown key '%s' (expected dtype, shape, data or shm)", an,
                               segops_codec_printable(kb, sizeof kb, k, strlen(k)));
    }
    *slot = kv;
  }
  if (*data && *shm)
    return segops_codec_fail(SEGOPS_E_MALFORMED_BODY, err, errlen, op,
                             "%s has both \"data\" and \"shm\" (a tensor is inline or by reference)", an);
  if (!*dtype || !*shape || !(*data || *shm))
    return segops_codec_fail(SEGOPS_E_MALFORMED_BODY, err, errlen, op,
                             "%s is missing \"%s\" (a tensor map has \"dtype\", \"shape\" and \"data\")", an,
                             !*dtype   ? "dtype"
                             : !*shape ? "shape"
                                       : "data");
  return SEGOPS_OK;
}

/* The map form's shape list: integers (negatives are left for prepare to refuse by value, more
 * than SEGOPS_MAX_NDIM entries for the record check). */
static int map_shape(segops_op op, const char *an, json_t *shape, segops_tensor_record *r, char *err, size_t errlen) {
  if (!json_is_array(shape))
    return segops_codec_fail(SEGOPS_E_MALFORMED_BODY, err, errlen, op,
                             "%s.shape must be a list of non-negative integers", an);
  r->ndim = json_array_size(shape);
  for (size_t d = 0; d < r->ndim && r->ndim <= SEGOPS_MAX_NDIM; d++) {
    json_t *e = json_array_get(shape, d);
    if (!json_is_integer(e))
      return segops_codec_fail(SEGOPS_E_MALFORMED_BODY, err, errlen, op,
                               "%s.shape must be a list of non-negative integers", an);
    r->shape[d] = (int64_t)json_integer_value(e);
  }
  return SEGOPS_OK;
}

/* {"dtype", "shape", "data": [flat numbers]} or, by reference, {"dtype", "shape", "shm": {...}}. */
static int map_record(segops_op op, const char *an, json_t *v, segops_tensor_record *r, char *err, size_t errlen) {
  json_t *dtype, *shape, *data, *shm;
  int rc = map_keys(op, an, v, &dtype, &shape, &data, &shm, err, errlen);
  if (rc) return rc;
  if (!json_is_string(dtype))
    return segops_codec_fail(SEGOPS_E_MALFORMED_BODY, err, errlen, op, "%s.dtype must be a string", an);
  r->dtype_text = json_string_value(dtype);
  r->dtype_len = json_string_length(dtype);
  rc = map_shape(op, an, shape, r, err, errlen);
  if (rc) return rc;
  if (shm) {
    char label[224];
    snprintf(label, sizeof label, "%s.shm", an);
    r->src = SEGOPS_REC_SHM;
    return shm_ref(op, label, shm, &r->region, &r->region_len, &r->offset, err, errlen);
  }
  if (!json_is_array(data))
    return segops_codec_fail(SEGOPS_E_MALFORMED_BODY, err, errlen, op, "%s.data must be a flat list of numbers", an);
  for (size_t i = 0; i < json_array_size(data); i++)
    if (!json_is_number(json_array_get(data, i)))
      return segops_codec_fail(SEGOPS_E_MALFORMED_BODY, err, errlen, op,
                               "%s.data must be a flat list of numbers (%s.data[%zu] is not a number)", an, an, i);
  r->src = SEGOPS_REC_NUMBERS;
  r->list = data;
  r->count = json_array_size(data);
  r->visit = segops_codec_json_numbers_visit;
  return SEGOPS_OK;
}

/* A tensor-valued key: its record (an unknown name is the error when the value is no tensor). */
static int tensor_record(segops_op op, segops_pass pass, const char *key, json_t *v, segops_records *rs, char *err,
                         size_t errlen) {
  if (rs->n >= SEGOPS_MAX_REQ_ARGS) return segops_codec_too_many_args(op, err, errlen);
  segops_tensor_record *r = &rs->rec[rs->n];
  memset(r, 0, sizeof *r);
  r->name = key;
  r->name_len = strlen(key);
  char an[200];
  segops_codec_printable(an, sizeof an, key, r->name_len);
  int rc;
  if (json_is_array(v))
    rc = bare_record(op, an, v, r, err, errlen);
  else if (json_is_object(v))
    rc = map_record(op, an, v, r, err, errlen);
  else
    rc = segops_codec_fail(SEGOPS_E_MALFORMED_BODY, err, errlen, op,
                           "%s must be a tensor: a (nested) list of numbers or a map {\"dtype\", \"shape\", \"data\"}",
                           an);
  if (rc) return segops_codec_unknown_arg(rc, op, pass, key, r->name_len, err, errlen);
  rs->n++;
  return SEGOPS_OK;
}

/* ---- request ------------------------------------------------------------------------------ */

/* "outputs_shm": {output name: {"region", "offset"}}. */
static int outputs_shm_of(segops_op op, json_t *v, segops_request *req, char *err, size_t errlen) {
  if (!json_is_object(v))
    return segops_codec_fail(SEGOPS_E_MALFORMED_BODY, err, errlen, op,
                             "outputs_shm must be a map {output name: {\"region\", \"offset\"}}");
  if (json_object_size(v) > SEGOPS_MAX_OUTPUTS * 2)
    return segops_codec_too_many_outputs(op, true, json_object_size(v), err, errlen);
  const char *on;
  json_t *ov;
  json_object_foreach(v, on, ov) {
    segops_output_shm *o = &req->outputs_shm[req->n_outputs_shm];
    char label[224], ob[200];
    snprintf(label, sizeof label, "outputs_shm.%s", segops_codec_printable(ob, sizeof ob, on, strlen(on)));
    int rc = shm_ref(op, label, ov, &o->region, &o->region_len, &o->offset, err, errlen);
    if (rc) return rc;
    o->name = on;
    o->len = strlen(on);
    req->n_outputs_shm++;
  }
  return SEGOPS_OK;
}

static int outputs_of(segops_op op, json_t *v, segops_request *req, char *err, size_t errlen) {
  if (!json_is_array(v))
    return segops_codec_fail(SEGOPS_E_MALFORMED_BODY, err, errlen, op, "outputs must be a list of output names");
  if (json_array_size(v) > SEGOPS_MAX_OUTPUTS * 2)
    return segops_codec_too_many_outputs(op, false, json_array_size(v), err, errlen);
  for (size_t i = 0; i < json_array_size(v); i++) {
    json_t *e = json_array_get(v, i);
    if (!json_is_string(e))
      return segops_codec_fail(SEGOPS_E_MALFORMED_BODY, err, errlen, op, "outputs must be a list of output names");
    req->outputs[i].name = json_string_value(e);
    req->outputs[i].len = json_string_length(e);
  }
  req->has_outputs = true;
  req->n_outputs = (int)json_array_size(v);
  return SEGOPS_OK;
}

/* The body's keys into the request (num_segments, outputs, outputs_shm) and records (tensors, the
 * top-level dtype). Strings stay borrowed from the tree. */
static int tokenize(json_t *root, segops_op op, segops_pass pass, segops_request *req, segops_records *rs, char *err,
                    size_t errlen) {
  if (!json_is_object(root))
    return segops_codec_fail(SEGOPS_E_MALFORMED_BODY, err, errlen, op, "body must be a map of argument names");
  json_t *jd = json_object_get(root, "dtype"); /* first: it types every bare-list float tensor */
  if (jd && !json_is_string(jd))
    return segops_codec_fail(SEGOPS_E_MALFORMED_BODY, err, errlen, op, "dtype must be a string");
  if (jd) {
    rs->dtype_text = json_string_value(jd);
    rs->dtype_len = json_string_length(jd);
  }
  const char *key;
  json_t *v;
  json_object_foreach(root, key, v) {
    int rc = SEGOPS_OK;
    switch (segops_codec_key_kind(key, strlen(key))) {
      case SEGOPS_KEY_NUM_SEGMENTS:
        req->ns_kind = json_is_integer(v) ? SEGOPS_NS_INT : SEGOPS_NS_NOT_INT;
        req->ns_value = json_is_integer(v) ? (int64_t)json_integer_value(v) : 0;
        break;
      case SEGOPS_KEY_DTYPE:
        break;
      case SEGOPS_KEY_OUTPUTS_SHM:
        rc = outputs_shm_of(op, v, req, err, errlen);
        break;
      case SEGOPS_KEY_OUTPUTS:
        rc = outputs_of(op, v, req, err, errlen);
        break;
      case SEGOPS_KEY_TENSOR:
        rc = tensor_record(op, pass, key, v, rs, err, errlen);
        break;
    }
    if (rc) return rc;
  }
  return SEGOPS_OK;
}

int segops_decode_json(const char *body, size_t len, segops_op op, segops_pass pass, const segops_codec_limits *lim,
                       segops_decoded *out, char *err, size_t errlen) {
  segops_codec_reset(out, op, pass);
  if (!segops_fn(op, pass)) return segops_errf(SEGOPS_E_NOT_FOUND, err, errlen, "unknown op or pass");
  if (!body) len = 0;
  segops_codec_limits l = segops_codec_limits_eff(lim);
  int rc = segops_codec_json_prescan(body, len, &l, op, err, errlen);
  if (rc) return rc;
  json_error_t je;
  /* Duplicate keys are refused by name; trailing bytes after the value are refused too. */
  json_t *root = json_loadb(body ? body : "", len, JSON_REJECT_DUPLICATES, &je);
  if (!root) return segops_codec_json_syntax_error(&je, len, op, err, errlen);
  segops_records rs;
  rs.n = 0;
  rs.dtype_text = NULL;
  rc = tokenize(root, op, pass, &out->req, &rs, err, errlen);
  /* The numbers are materialised and the strings copied before the tree goes. */
  if (!rc) rc = segops_records_finish(SEGOPS_WIRE_V1, &rs, true, out, err, errlen);
  json_decref(root);
  if (rc) {
    segops_decoded_free(out);
    segops_codec_reset(out, op, pass);
  }
  return rc;
}

/* codec_json.c: JSON request decoder on jansson. Tensors come as {"dtype","shape","data":[...]}
 * maps or as bare nested lists; their numbers are materialised into one aligned arena. */
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
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

/* ---- tensors ------------------------------------------------------------------------------ */

typedef struct {
  const char *name; /* jansson's key (tree-owned until copied into the arena) */
  size_t nlen;
  json_t *data; /* map form: the flat data list; bare form: the nested list itself */
  bool bare;
  segops_dtype dt;
  int ndim;
  int64_t shape[SEGOPS_MAX_NDIM];
  size_t count;       /* numbers to materialise */
  json_t *shm_region; /* by reference: the region name (a string), else NULL */
  uint64_t shm_offset;
} jtensor;

typedef struct {
  segops_op op;
  char *err;
  size_t errlen;
} jctx;

/* "x[1][2]" for bare lists, "x.data[5]" for map form: where a bad number sits. */
static const char *where(char *buf, size_t len, const char *an, const jtensor *t, size_t flat) {
  if (!t->bare) {
    snprintf(buf, len, "%s.data[%zu]", an, flat);
    return buf;
  }
  size_t ix[SEGOPS_MAX_NDIM] = {0};
  for (int d = t->ndim - 1; d >= 0; d--) {
    size_t dim = (size_t)t->shape[d];
    ix[d] = dim ? flat % dim : 0;
    flat = dim ? flat / dim : 0;
  }
  int o = snprintf(buf, len, "%s", an);
  for (int d = 0; d < t->ndim && o >= 0 && (size_t)o < len; d++)
    o += snprintf(buf + o, len - (size_t)o, "[%zu]", ix[d]);
  return buf;
}

/* Checks that a bare nested list is rectangular with leaves that are not lists. */
static int check_rect(const jctx *c, const char *an, const jtensor *t, json_t *v, int level) {
  if (level == t->ndim - 1) {
    for (size_t i = 0; i < json_array_size(v); i++)
      if (json_is_array(json_array_get(v, i)))
        return segops_codec_fail(SEGOPS_E_INVALID_ARGUMENT, c->err, c->errlen, c->op,
                                 "%s is not a rectangular nested list of numbers", an);
    return SEGOPS_OK;
  }
  if (level + 1 >= SEGOPS_MAX_NDIM) return SEGOPS_E_INTERNAL; /* ndim <= 3 is checked before; bounds the recursion */
  for (size_t i = 0; i < json_array_size(v); i++) {
    json_t *e = json_array_get(v, i);
    if (!json_is_array(e) || (int64_t)json_array_size(e) != t->shape[level + 1])
      return segops_codec_fail(SEGOPS_E_INVALID_ARGUMENT, c->err, c->errlen, c->op,
                               "%s is not a rectangular nested list of numbers (%s[%zu] should be a list of %" PRId64
                               " items)",
                               an, an, i, t->shape[level + 1]);
    int rc = check_rect(c, an, t, e, level + 1);
    if (rc) return rc;
  }
  return SEGOPS_OK;
}

/* Visits the leaves of a tensor's numbers in row-major order. */
typedef int (*leaf_fn)(const jctx *c, const char *an, const jtensor *t, json_t *v, size_t i, void *dst);

static int each_leaf(const jctx *c, const char *an, const jtensor *t, json_t *v, int level, size_t *i, leaf_fn f,
                     void *dst) {
  bool leaf_level = !t->bare || level == t->ndim - 1;
  for (size_t k = 0; k < json_array_size(v); k++) {
    json_t *e = json_array_get(v, k);
    int rc = leaf_level ? f(c, an, t, e, (*i)++, dst) : each_leaf(c, an, t, e, level + 1, i, f, dst);
    if (rc) return rc;
  }
  return SEGOPS_OK;
}

static int not_number(const jctx *c, const char *an, const jtensor *t, size_t i) {
  char wb[128];
  return segops_codec_fail(SEGOPS_E_MALFORMED_BODY, c->err, c->errlen, c->op, "%s must be a number",
                           where(wb, sizeof wb, an, t, i));
}

/* Bare idx lists: every value an integer; int64 is needed when one falls outside int32. */
static int idx_kind(const jctx *c, const char *an, const jtensor *t, json_t *v, size_t i, void *dst) {
  char wb[128];
  if (json_is_integer(v)) {
    json_int_t x = json_integer_value(v);
    if (x < INT32_MIN || x > INT32_MAX) *(bool *)dst = true;
    return SEGOPS_OK;
  }
  if (json_is_real(v))
    return segops_codec_fail(SEGOPS_E_INVALID_ARGUMENT, c->err, c->errlen, c->op, "%s (%.17g) must be an integer",
                             where(wb, sizeof wb, an, t, i), json_real_value(v));
  return not_number(c, an, t, i);
}

static int store(const jctx *c, const char *an, const jtensor *t, json_t *v, size_t i, void *dst) {
  char wb[128];
  if (t->dt == SEGOPS_F32 || t->dt == SEGOPS_F64) {
    double x;
    if (json_is_real(v))
      x = json_real_value(v);
    else if (json_is_integer(v))
      x = (double)json_integer_value(v);
    else
      return not_number(c, an, t, i);
    if (t->dt == SEGOPS_F64) {
      ((double *)dst)[i] = x;
    } else {
      float f = (float)x;
      /* A finite number that float32 cannot hold is refused rather than silently made inf. */
      if (isinf(f) && !isinf(x))
        return segops_codec_fail(SEGOPS_E_INVALID_ARGUMENT, c->err, c->errlen, c->op,
                                 "%s (%.17g) is out of float32 range", where(wb, sizeof wb, an, t, i), x);
      ((float *)dst)[i] = f;
    }
    return SEGOPS_OK;
  }
  if (!json_is_integer(v)) {
    if (json_is_real(v))
      return segops_codec_fail(SEGOPS_E_INVALID_ARGUMENT, c->err, c->errlen, c->op, "%s (%.17g) must be an integer",
                               where(wb, sizeof wb, an, t, i), json_real_value(v));
    return not_number(c, an, t, i);
  }
  json_int_t x = json_integer_value(v);
  if (t->dt == SEGOPS_I64) {
    ((int64_t *)dst)[i] = (int64_t)x;
  } else {
    if (x < INT32_MIN || x > INT32_MAX)
      return segops_codec_fail(SEGOPS_E_INVALID_ARGUMENT, c->err, c->errlen, c->op,
                               "%s (%" PRId64 ") is out of int32 range", where(wb, sizeof wb, an, t, i), (int64_t)x);
    ((int32_t *)dst)[i] = (int32_t)x;
  }
  return SEGOPS_OK;
}

/* Reads a tensor's form, dtype and shape (pass A; nothing is allocated). */
/* A shared-memory reference {"region": str, "offset": int >= 0} (offset optional). */
static int shm_ref(const jctx *c, const char *label, json_t *v, json_t **region, uint64_t *offset) {
  json_t *rg = json_is_object(v) ? json_object_get(v, "region") : NULL;
  json_t *of = json_is_object(v) ? json_object_get(v, "offset") : NULL;
  size_t want = (rg ? 1u : 0u) + (of ? 1u : 0u);
  if (!json_is_object(v) || !json_is_string(rg) || (of && (!json_is_integer(of) || json_integer_value(of) < 0)) ||
      json_object_size(v) != want)
    return segops_codec_fail(SEGOPS_E_MALFORMED_BODY, c->err, c->errlen, c->op,
                             "%s must be a map {\"region\": name, \"offset\": bytes} (a string and a non-negative "
                             "integer)",
                             label);
  *region = rg;
  *offset = of ? (uint64_t)json_integer_value(of) : 0;
  return SEGOPS_OK;
}

static int tensor_shape(const jctx *c, const char *an, json_t *v, segops_dtype top_dt, jtensor *t) {
  if (json_is_array(v)) {
    t->bare = true;
    t->data = v;
    json_t *e = v;
    t->ndim = 0;
    while (json_is_array(e)) {
      if (t->ndim == SEGOPS_MAX_NDIM)
        return segops_codec_fail(SEGOPS_E_INVALID_ARGUMENT, c->err, c->errlen, c->op,
                                 "%s has more than %d dimensions; at most %d are allowed", an, SEGOPS_MAX_NDIM,
                                 SEGOPS_MAX_NDIM);
      t->shape[t->ndim++] = (int64_t)json_array_size(e);
      e = json_array_size(e) ? json_array_get(e, 0) : NULL;
    }
    int rc = check_rect(c, an, t, v, 0);
    if (rc) return rc;
    t->count = 1;
    for (int d = 0; d < t->ndim; d++) t->count *= (size_t)t->shape[d]; /* bounded by the item limit */
    if (strcmp(an, "idx") == 0 && t->nlen == 3) {
      bool wide = false;
      size_t i = 0;
      rc = each_leaf(c, an, t, v, 0, &i, idx_kind, &wide);
      if (rc) return rc;
      t->dt = wide ? SEGOPS_I64 : SEGOPS_I32;
    } else {
      t->dt = top_dt;
    }
    return SEGOPS_OK;
  }
  if (!json_is_object(v))
    return segops_codec_fail(
        SEGOPS_E_MALFORMED_BODY, c->err, c->errlen, c->op,
        "%s must be a tensor: a (nested) list of numbers or a map {\"dtype\", \"shape\", \"data\"}", an);
  json_t *dtype = NULL, *shape = NULL, *data = NULL, *shm = NULL;
  const char *k;
  json_t *kv;
  json_object_foreach(v, k, kv) {
    if (!strcmp(k, "shm"))
      shm = kv;
    else if (!strcmp(k, "dtype"))
      dtype = kv;
    else if (!strcmp(k, "shape"))
      shape = kv;
    else if (!strcmp(k, "data"))
      data = kv;
    else {
      char kb[200];
      return segops_codec_fail(SEGOPS_E_MALFORMED_BODY, c->err, c->errlen, c->op,
                               "%s has unknown key '%s' (expected dtype, shape, data or shm)", an,
                               segops_codec_printable(kb, sizeof kb, k, strlen(k)));
    }
  }
  if (data && shm)
    return segops_codec_fail(SEGOPS_E_MALFORMED_BODY, c->err, c->errlen, c->op,
                             "%s has both \"data\" and \"shm\" (a tensor is inline or by reference)", an);
  if (!dtype || !shape || !(data || shm))
    return segops_codec_fail(SEGOPS_E_MALFORMED_BODY, c->err, c->errlen, c->op,
                             "%s is missing \"%s\" (a tensor map has \"dtype\", \"shape\" and \"data\")", an,
                             !dtype   ? "dtype"
                             : !shape ? "shape"
                                      : "data");
  if (!json_is_string(dtype))
    return segops_codec_fail(SEGOPS_E_MALFORMED_BODY, c->err, c->errlen, c->op, "%s.dtype must be a string", an);
  int rc =
      segops_codec_dtype(c->op, an, json_string_value(dtype), json_string_length(dtype), &t->dt, c->err, c->errlen);
  if (rc) return rc;
  if (!json_is_array(shape))
    return segops_codec_fail(SEGOPS_E_MALFORMED_BODY, c->err, c->errlen, c->op,
                             "%s.shape must be a list of non-negative integers", an);
  if (json_array_size(shape) > SEGOPS_MAX_NDIM)
    return segops_codec_fail(SEGOPS_E_INVALID_ARGUMENT, c->err, c->errlen, c->op,
                             "%s has %zu dimensions; at most %d are allowed", an, json_array_size(shape),
                             SEGOPS_MAX_NDIM);
  t->ndim = (int)json_array_size(shape);
  for (int d = 0; d < t->ndim; d++) {
    json_t *e = json_array_get(shape, (size_t)d);
    if (!json_is_integer(e))
      return segops_codec_fail(SEGOPS_E_MALFORMED_BODY, c->err, c->errlen, c->op,
                               "%s.shape must be a list of non-negative integers", an);
    t->shape[d] = (int64_t)json_integer_value(e); /* negatives are refused by prepare, by value */
  }
  if (shm) {
    char label[224];
    snprintf(label, sizeof label, "%s.shm", an);
    t->count = 0;
    return shm_ref(c, label, shm, &t->shm_region, &t->shm_offset);
  }
  if (!json_is_array(data))
    return segops_codec_fail(SEGOPS_E_MALFORMED_BODY, c->err, c->errlen, c->op,
                             "%s.data must be a flat list of numbers", an);
  for (size_t i = 0; i < json_array_size(data); i++)
    if (!json_is_number(json_array_get(data, i))) {
      char wb[128];
      return segops_codec_fail(SEGOPS_E_MALFORMED_BODY, c->err, c->errlen, c->op,
                               "%s.data must be a flat list of numbers (%s is not a number)", an,
                               where(wb, sizeof wb, an, t, i));
    }
  t->data = data;
  t->count = json_array_size(data);
  return SEGOPS_OK;
}

/* ---- request ------------------------------------------------------------------------------ */

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

static int decode_tree(json_t *root, segops_op op, segops_pass pass, segops_decoded *out, char *err, size_t errlen) {
  jctx c = {op, err, errlen};
  segops_request *req = &out->req;
  if (!json_is_object(root))
    return segops_codec_fail(SEGOPS_E_MALFORMED_BODY, err, errlen, op, "body must be a map of argument names");

  /* The top-level dtype first: it types every bare-list float tensor. */
  segops_dtype top_dt = SEGOPS_F64;
  json_t *jd = json_object_get(root, "dtype");
  if (jd) {
    if (!json_is_string(jd))
      return segops_codec_fail(SEGOPS_E_MALFORMED_BODY, err, errlen, op, "dtype must be a string");
    int rc = segops_codec_dtype(op, "dtype", json_string_value(jd), json_string_length(jd), &top_dt, err, errlen);
    if (rc) return rc;
    if (top_dt != SEGOPS_F32 && top_dt != SEGOPS_F64)
      return segops_codec_fail(SEGOPS_E_INVALID_ARGUMENT, err, errlen, op,
                               "dtype must be float32 or float64 (it is the dtype of list-form float tensors), got %s",
                               segops_dtype_name(top_dt));
    req->has_dtype = true;
    req->dtype = top_dt;
  }

  jtensor ts[SEGOPS_MAX_REQ_ARGS];
  int nt = 0;
  json_t *outputs = NULL, *outputs_shm = NULL;
  json_t *oshm_region[SEGOPS_MAX_OUTPUTS * 2];
  size_t names_bytes = 0;
  const char *key;
  json_t *v;
  json_object_foreach(root, key, v) {
    size_t klen = strlen(key);
    char an[200];
    segops_codec_printable(an, sizeof an, key, klen);
    switch (segops_codec_key_kind(key, klen)) {
      case SEGOPS_KEY_NUM_SEGMENTS:
        if (json_is_integer(v)) {
          req->ns_kind = SEGOPS_NS_INT;
          req->ns_value = (int64_t)json_integer_value(v);
        } else {
          req->ns_kind = SEGOPS_NS_NOT_INT;
        }
        break;
      case SEGOPS_KEY_DTYPE:
        break;
      case SEGOPS_KEY_OUTPUTS_SHM: {
        if (!json_is_object(v))
          return segops_codec_fail(SEGOPS_E_MALFORMED_BODY, err, errlen, op,
                                   "outputs_shm must be a map {output name: {\"region\", \"offset\"}}");
        if (json_object_size(v) > SEGOPS_MAX_OUTPUTS * 2)
          return segops_codec_fail(SEGOPS_E_INVALID_ARGUMENT, err, errlen, op,
                                   "outputs_shm lists %zu outputs; at most %d are allowed", json_object_size(v),
                                   SEGOPS_MAX_OUTPUTS * 2);
        const char *on;
        json_t *ov;
        int i = 0;
        json_object_foreach(v, on, ov) {
          char label[224], ob[200];
          snprintf(label, sizeof label, "outputs_shm.%s", segops_codec_printable(ob, sizeof ob, on, strlen(on)));
          int rc = shm_ref(&c, label, ov, &oshm_region[i], &req->outputs_shm[i].offset);
          if (rc) return rc;
          names_bytes += strlen(on) + json_string_length(oshm_region[i]) + 2;
          i++;
        }
        outputs_shm = v;
        break;
      }
      case SEGOPS_KEY_OUTPUTS:
        if (!json_is_array(v))
          return segops_codec_fail(SEGOPS_E_MALFORMED_BODY, err, errlen, op, "outputs must be a list of output names");
        if (json_array_size(v) > SEGOPS_MAX_OUTPUTS * 2)
          return segops_codec_fail(SEGOPS_E_INVALID_ARGUMENT, err, errlen, op,
                                   "outputs lists %zu names; at most %d are allowed", json_array_size(v),
                                   SEGOPS_MAX_OUTPUTS * 2);
        for (size_t i = 0; i < json_array_size(v); i++) {
          json_t *e = json_array_get(v, i);
          if (!json_is_string(e))
            return segops_codec_fail(SEGOPS_E_MALFORMED_BODY, err, errlen, op,
                                     "outputs must be a list of output names");
          names_bytes += json_string_length(e) + 1;
        }
        outputs = v;
        break;
      case SEGOPS_KEY_TENSOR: {
        if (nt >= SEGOPS_MAX_REQ_ARGS)
          return segops_codec_fail(SEGOPS_E_INVALID_ARGUMENT, err, errlen, op,
                                   "too many arguments (more than %d tensors)", SEGOPS_MAX_REQ_ARGS);
        jtensor *t = &ts[nt];
        memset(t, 0, sizeof *t);
        t->name = key;
        t->nlen = klen;
        int rc = tensor_shape(&c, an, v, top_dt, t);
        if (rc && !segops_codec_arg_known(op, pass, key, klen))
          return segops_codec_fail(SEGOPS_E_INVALID_ARGUMENT, err, errlen, op, "unknown argument '%s' for %s", an,
                                   segops_pass_name(pass));
        if (rc) return rc;
        names_bytes += klen + 1 + (t->shm_region ? json_string_length(t->shm_region) + 1 : 0);
        nt++;
        break;
      }
    }
  }

  /* One arena: every tensor's numbers (64-byte aligned), then the names. */
  size_t total = 0, off[SEGOPS_MAX_REQ_ARGS];
  for (int i = 0; i < nt; i++) {
    size_t sz;
    off[i] = total;
    if (!segops_codec_align64(ts[i].count * segops_dtype_size(ts[i].dt), &sz))
      return segops_codec_fail(SEGOPS_E_TOO_LARGE, err, errlen, op, "body is too large");
    total += sz;
  }
  size_t names_off = total;
  total += names_bytes;
  char *arena = segops_aligned_alloc(total);
  if (!arena) return segops_codec_fail(SEGOPS_E_NOMEM, err, errlen, op, "out of memory decoding the body");
  out->owned = arena;
  char *np = arena + names_off;
  for (int i = 0; i < nt; i++) {
    jtensor *t = &ts[i];
    char an[200];
    segops_codec_printable(an, sizeof an, t->name, t->nlen);
    size_t k = 0;
    int rc = each_leaf(&c, an, t, t->data, 0, &k, store, arena + off[i]);
    if (rc) return rc; /* the caller frees the arena */
    segops_named_tensor *a = &req->args[req->nargs++];
    memcpy(np, t->name, t->nlen + 1);
    a->name = np;
    a->name_len = t->nlen;
    np += t->nlen + 1;
    a->t.dtype = t->dt;
    a->t.ndim = t->ndim;
    memcpy(a->t.shape, t->shape, sizeof t->shape);
    a->t.data = arena + off[i];
    a->t.nbytes = t->count * segops_dtype_size(t->dt);
    if (t->shm_region) { /* by reference: resolved by the server */
      size_t l = json_string_length(t->shm_region);
      memcpy(np, json_string_value(t->shm_region), l);
      np[l] = 0;
      a->shm_region = np;
      a->shm_region_len = l;
      a->shm_offset = t->shm_offset;
      a->t.data = NULL;
      np += l + 1;
    }
  }
  if (outputs_shm) {
    const char *on;
    json_t *ov;
    json_object_foreach(outputs_shm, on, ov) {
      (void)ov;
      segops_output_shm *o = &req->outputs_shm[req->n_outputs_shm];
      size_t l = strlen(on), rl = json_string_length(oshm_region[req->n_outputs_shm]);
      memcpy(np, on, l + 1);
      o->name = np;
      o->len = l;
      np += l + 1;
      memcpy(np, json_string_value(oshm_region[req->n_outputs_shm]), rl);
      np[rl] = 0;
      o->region = np;
      o->region_len = rl;
      np += rl + 1;
      req->n_outputs_shm++;
    }
  }
  if (outputs) {
    req->has_outputs = true;
    req->n_outputs = (int)json_array_size(outputs);
    for (size_t i = 0; i < json_array_size(outputs); i++) {
      json_t *e = json_array_get(outputs, i);
      size_t l = json_string_length(e);
      memcpy(np, json_string_value(e), l);
      np[l] = 0;
      req->outputs[i].name = np;
      req->outputs[i].len = l;
      np += l + 1;
    }
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
  rc = decode_tree(root, op, pass, out, err, errlen);
  json_decref(root);
  if (rc) {
    segops_decoded_free(out);
    segops_codec_reset(out, op, pass);
  }
  return rc;
}

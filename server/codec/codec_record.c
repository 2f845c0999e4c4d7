/* codec_record.c: a tensor record becomes a checked tensor, the same way for every wire (see codec_record.h). */
#include "codec_record.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "codec_internal.h"
#include "errors.h"

/* ---- dtype ------------------------------------------------------------------------------- */

/* idx is an integer tensor (and the OIP's num_segments input); every other tensor a float one. */
static bool integer_arg(const char *an) { return !strcmp(an, "idx") || !strcmp(an, "num_segments"); }

/* A dtype given by name, in the wire's words (v1's "float32", ..., the OIP's "FP32", ...). */
static int dtype_by_name(const segops_record_ctx *c, const segops_tensor_record *r, const char *an, segops_dtype *dt,
                         char *err, size_t errlen) {
  const segops_wire_words *w = c->wire;
  for (int d = 0; d < SEGOPS_DTYPE_COUNT; d++) {
    const char *s = w->dtype_name((segops_dtype)d);
    if (strlen(s) == r->dtype_len && memcmp(s, r->dtype_text, r->dtype_len) == 0) {
      *dt = (segops_dtype)d;
      return SEGOPS_OK;
    }
  }
  char db[200];
  const bool integer = integer_arg(an);
  return segops_codec_fail(SEGOPS_E_INVALID_ARGUMENT, err, errlen, c->op, "%s%s: unknown %s '%s' (expected %s or %s)",
                           an, w->field, w->noun, segops_codec_printable(db, sizeof db, r->dtype_text, r->dtype_len),
                           w->dtype_name(integer ? SEGOPS_I32 : SEGOPS_F32),
                           w->dtype_name(integer ? SEGOPS_I64 : SEGOPS_F64));
}

/* Where a number sits, for messages: "x[1][2]" in a bare nested list, "x.data[5]" in a flat one. */
static const char *where(char *buf, size_t len, const char *an, const segops_tensor_record *r, size_t flat) {
  if (!r->nested) {
    snprintf(buf, len, "%s.data[%zu]", an, flat);
    return buf;
  }
  size_t ix[SEGOPS_MAX_NDIM] = {0};
  for (int d = (int)r->ndim - 1; d >= 0; d--) {
    size_t dim = (size_t)r->shape[d];
    ix[d] = dim ? flat % dim : 0;
    flat = dim ? flat / dim : 0;
  }
  int o = snprintf(buf, len, "%s", an);
  for (size_t d = 0; d < r->ndim && o >= 0 && (size_t)o < len; d++)
    o += snprintf(buf + o, len - (size_t)o, "[%zu]", ix[d]);
  return buf;
}

/* Materialising numbers: the record, its dtype, where they go. */
typedef struct {
  const segops_record_ctx *c;
  const segops_tensor_record *r;
  const char *an;
  segops_dtype dt;
  void *dst;
  bool wide; /* SEGOPS_REC_DTYPE_INT: a value needs int64 */
  char *err;
  size_t errlen;
} numbers;

static int not_a_number(const numbers *n, size_t i) {
  char wb[256];
  return segops_codec_fail(SEGOPS_E_MALFORMED_BODY, n->err, n->errlen, n->c->op, "%s must be a number",
                           where(wb, sizeof wb, n->an, n->r, i));
}

/* An integer tensor's number: an integer (1.0 is not one). */
static int integral(const numbers *n, size_t i, const segops_wire_number *v) {
  char wb[256];
  if (v->kind == SEGOPS_NUM_INT) return SEGOPS_OK;
  if (v->kind == SEGOPS_NUM_REAL)
    return segops_codec_fail(SEGOPS_E_INVALID_ARGUMENT, n->err, n->errlen, n->c->op, "%s (%.17g) must be an integer",
                             where(wb, sizeof wb, n->an, n->r, i), v->d);
  return not_a_number(n, i);
}

/* SEGOPS_REC_DTYPE_INT's first pass: every value an integer; int64 when one falls outside int32. */
static int widest(void *cls, size_t i, const segops_wire_number *v) {
  numbers *n = cls;
  int rc = integral(n, i, v);
  if (!rc && (v->i < INT32_MIN || v->i > INT32_MAX)) n->wide = true;
  return rc;
}

static int store_float(numbers *n, size_t i, const segops_wire_number *v) {
  double x;
  if (v->kind == SEGOPS_NUM_REAL)
    x = v->d;
  else if (v->kind == SEGOPS_NUM_INT)
    x = (double)v->i;
  else
    return not_a_number(n, i);
  if (n->dt == SEGOPS_F64) {
    ((double *)n->dst)[i] = x;
    return SEGOPS_OK;
  }
  float f = (float)x;
  /* A finite number that float32 cannot hold is refused rather than silently made inf. */
  if (isinf(f) && !isinf(x)) {
    char wb[256];
    return segops_codec_fail(SEGOPS_E_INVALID_ARGUMENT, n->err, n->errlen, n->c->op,
                             "%s (%.17g) is out of float32 range", where(wb, sizeof wb, n->an, n->r, i), x);
  }
  ((float *)n->dst)[i] = f;
  return SEGOPS_OK;
}

static int store(void *cls, size_t i, const segops_wire_number *v) {
  numbers *n = cls;
  if (n->dt == SEGOPS_F32 || n->dt == SEGOPS_F64) return store_float(n, i, v);
  int rc = integral(n, i, v);
  if (rc) return rc;
  if (n->dt == SEGOPS_I64) {
    ((int64_t *)n->dst)[i] = v->i;
    return SEGOPS_OK;
  }
  if (v->i < INT32_MIN || v->i > INT32_MAX) {
    char wb[256];
    return segops_codec_fail(SEGOPS_E_INVALID_ARGUMENT, n->err, n->errlen, n->c->op,
                             "%s (%" PRId64 ") is out of int32 range", where(wb, sizeof wb, n->an, n->r, i), v->i);
  }
  ((int32_t *)n->dst)[i] = (int32_t)v->i;
  return SEGOPS_OK;
}

/* 1. The dtype: by name, by the call, by code, or (a bare idx list) by the values. */
static int check_dtype(const segops_record_ctx *c, const segops_tensor_record *r, const char *an, segops_dtype *dt,
                       char *err, size_t errlen) {
  if (r->dtype_text) return dtype_by_name(c, r, an, dt, err, errlen);
  if (r->dtype_code == SEGOPS_REC_DTYPE_CALL) {
    *dt = c->call_dtype;
    return SEGOPS_OK;
  }
  if (r->dtype_code == SEGOPS_REC_DTYPE_INT) {
    numbers n = {c, r, an, SEGOPS_I32, NULL, false, err, errlen};
    int rc = r->src == SEGOPS_REC_NUMBERS && !r->ndim_open && r->ndim <= SEGOPS_MAX_NDIM
                 ? r->visit(r->list, widest, &n)
                 : SEGOPS_OK; /* a rank refused next */
    *dt = n.wide ? SEGOPS_I64 : SEGOPS_I32;
    return rc;
  }
  if (r->dtype_code < 0 || r->dtype_code >= SEGOPS_DTYPE_COUNT)
    return segops_codec_fail(
        SEGOPS_E_INVALID_ARGUMENT, err, errlen, c->op,
        "%s has dtype %" PRId64 ", which is none of float32 (0), float64 (1), int32 (2), int64 (3)", an, r->dtype_code);
  *dt = (segops_dtype)r->dtype_code;
  return SEGOPS_OK;
}

/* 2. The rank: at most SEGOPS_MAX_NDIM dimensions. */
static int check_rank(const segops_record_ctx *c, const segops_tensor_record *r, const char *an, char *err,
                      size_t errlen) {
  if (r->ndim_open)
    return segops_codec_fail(SEGOPS_E_INVALID_ARGUMENT, err, errlen, c->op,
                             "%s has more than %d dimensions; at most %d are allowed", an, SEGOPS_MAX_NDIM,
                             SEGOPS_MAX_NDIM);
  if (r->ndim > SEGOPS_MAX_NDIM)
    return segops_codec_fail(SEGOPS_E_INVALID_ARGUMENT, err, errlen, c->op,
                             "%s has %zu dimensions; at most %d are allowed", an, r->ndim, SEGOPS_MAX_NDIM);
  return SEGOPS_OK;
}

/* 3a. A list of numbers, materialised in the dtype into storage the request owns. */
static int take_numbers(const segops_record_ctx *c, const segops_tensor_record *r, const char *an, segops_dtype dt,
                        segops_tensor *t, char *err, size_t errlen) {
  size_t isz = segops_dtype_size(dt), bytes;
  if (r->count > SIZE_MAX / isz || !segops_codec_align64(r->count * isz, &bytes))
    return segops_codec_fail(SEGOPS_E_TOO_LARGE, err, errlen, c->op, "body is too large");
  void *dst = segops_decoded_alloc(c->store, bytes);
  if (!dst) return segops_codec_fail(SEGOPS_E_NOMEM, err, errlen, c->op, "out of memory decoding the body");
  numbers n = {c, r, an, dt, dst, false, err, errlen};
  int rc = r->visit(r->list, store, &n);
  if (rc) return rc;
  t->data = dst;
  t->nbytes = r->count * isz;
  return SEGOPS_OK;
}

/* 3b. A shared-memory reference covers prod(shape) * itemsize bytes: the size the client declared,
 * where it declared one. A negative dimension leaves it unsized, for prepare to refuse by value. */
static int take_shm(const segops_record_ctx *c, const segops_tensor_record *r, const char *an, segops_dtype dt,
                    segops_named_tensor *out, char *err, size_t errlen) {
  uint64_t bytes = segops_dtype_size(dt);
  bool sized = true;
  for (size_t d = 0; d < r->ndim; d++)
    if (r->shape[d] < 0) sized = false;
  for (size_t d = 0; sized && d < r->ndim; d++) {
    if (r->shape[d] && bytes > (UINT64_MAX >> 4) / (uint64_t)r->shape[d])
      return segops_codec_fail(SEGOPS_E_TOO_LARGE, err, errlen, c->op, "%s: its shape is too large", an);
    bytes *= (uint64_t)r->shape[d];
  }
  if (sized && r->has_byte_size && r->byte_size != bytes)
    return segops_codec_fail(SEGOPS_E_INVALID_ARGUMENT, err, errlen, c->op,
                             "%s: parameters.shared_memory_byte_size must equal the tensor's byte size (%" PRIu64
                             " given; the %s tensor's shape and datatype make %" PRIu64 ")",
                             an, r->byte_size, c->wire->dtype_name(dt), bytes);
  out->shm_region = r->region;
  out->shm_region_len = r->region_len;
  out->shm_offset = r->offset;
  out->shm_sized = sized;
  out->shm_bytes = sized ? bytes : 0;
  return SEGOPS_OK;
}

static int check(const segops_record_ctx *c, const segops_tensor_record *r, const char *an, segops_named_tensor *out,
                 char *err, size_t errlen) {
  segops_dtype dt = SEGOPS_F64; /* set by check_dtype on success */
  int rc = check_dtype(c, r, an, &dt, err, errlen);
  if (!rc) rc = check_rank(c, r, an, err, errlen);
  if (rc) return rc;
  memset(out, 0, sizeof *out);
  out->name = r->name;
  out->name_len = r->name_len;
  out->t.dtype = dt;
  out->t.ndim = (int)r->ndim;
  memcpy(out->t.shape, r->shape, sizeof r->shape);
  switch (r->src) {
    case SEGOPS_REC_NUMBERS:
      return take_numbers(c, r, an, dt, &out->t, err, errlen);
    case SEGOPS_REC_SHM:
      return take_shm(c, r, an, dt, out, err, errlen);
    case SEGOPS_REC_BYTES:
      out->t.data = r->bytes;
      out->t.nbytes = r->nbytes;
      out->t.shared = r->shared;
      return SEGOPS_OK;
  }
  return segops_codec_fail(SEGOPS_E_INTERNAL, err, errlen, c->op, "%s: no source", an);
}

int segops_record_check(const segops_record_ctx *c, const segops_tensor_record *r, segops_named_tensor *out, char *err,
                        size_t errlen) {
  char an[200];
  segops_codec_printable(an, sizeof an, r->name, r->name_len);
  int rc = check(c, r, an, out, err, errlen);
  return segops_codec_unknown_arg(rc, c->op, c->pass, r->name, r->name_len, err, errlen);
}

int segops_record_call_dtype(segops_wire wire, segops_op op, const char *text, size_t len, int64_t code,
                             segops_dtype *dt, char *err, size_t errlen) {
  if (!text) {
    if (code != SEGOPS_F32 && code != SEGOPS_F64)
      return segops_codec_fail(SEGOPS_E_INVALID_ARGUMENT, err, errlen, op,
                               "the request's dtype %" PRId64 " is neither float32 (0) nor float64 (1)", code);
    *dt = (segops_dtype)code;
    return SEGOPS_OK;
  }
  (void)wire; /* only v1 (JSON) names a request-level dtype */
  int rc = segops_codec_dtype(op, "dtype", text, len, dt, err, errlen);
  if (rc) return rc;
  if (*dt != SEGOPS_F32 && *dt != SEGOPS_F64)
    return segops_codec_fail(SEGOPS_E_INVALID_ARGUMENT, err, errlen, op,
                             "dtype must be float32 or float64 (it is the dtype of list-form float tensors), got %s",
                             segops_dtype_name(*dt));
  return SEGOPS_OK;
}

/* ---- a whole request ---------------------------------------------------------------------- */

static size_t strings_bytes(const segops_records *rs, const segops_request *req) {
  size_t n = 0;
  for (int i = 0; i < rs->n; i++) n += rs->rec[i].name_len + 1 + (rs->rec[i].region ? rs->rec[i].region_len + 1 : 0);
  for (int j = 0; j < req->n_outputs; j++) n += req->outputs[j].len + 1;
  for (int m = 0; m < req->n_outputs_shm; m++) n += req->outputs_shm[m].len + req->outputs_shm[m].region_len + 2;
  return n;
}

/* Copies s[0, l) and a NUL to *np and moves *np past them; returns the copy. */
static const char *copy_str(char **np, const char *s, size_t l) {
  char *d = *np;
  if (l) memcpy(d, s, l);
  d[l] = 0;
  *np += l + 1;
  return d;
}

/* Every string the request borrows, copied into one block out owns. */
static int copy_strings(segops_records *rs, segops_decoded *out, segops_op op, char *err, size_t errlen) {
  segops_request *req = &out->req;
  char *np = segops_decoded_alloc(out, strings_bytes(rs, req));
  if (!np) return segops_codec_fail(SEGOPS_E_NOMEM, err, errlen, op, "out of memory decoding the body");
  for (int i = 0; i < rs->n; i++) {
    segops_tensor_record *r = &rs->rec[i];
    r->name = copy_str(&np, r->name, r->name_len);
    if (r->region) r->region = copy_str(&np, r->region, r->region_len);
  }
  for (int j = 0; j < req->n_outputs; j++)
    req->outputs[j].name = copy_str(&np, req->outputs[j].name, req->outputs[j].len);
  for (int m = 0; m < req->n_outputs_shm; m++) {
    segops_output_shm *o = &req->outputs_shm[m];
    o->name = copy_str(&np, o->name, o->len);
    o->region = copy_str(&np, o->region, o->region_len);
  }
  return SEGOPS_OK;
}

int segops_records_finish(segops_wire wire, segops_records *rs, bool copy, segops_decoded *out, char *err,
                          size_t errlen) {
  segops_request *req = &out->req;
  segops_record_ctx c = {wire, req->op, req->pass, SEGOPS_F64, out};
  if (rs->dtype_text) {
    int rc = segops_record_call_dtype(wire, req->op, rs->dtype_text, rs->dtype_len, 0, &c.call_dtype, err, errlen);
    if (rc) return rc;
    req->has_dtype = true;
    req->dtype = c.call_dtype;
  }
  if (copy) {
    int rc = copy_strings(rs, out, req->op, err, errlen);
    if (rc) return rc;
  }
  for (int i = 0; i < rs->n; i++) {
    int rc = segops_record_check(&c, &rs->rec[i], &req->args[req->nargs], err, errlen);
    if (rc) return rc;
    req->nargs++; /* duplicates are kept: prepare reports them by name */
  }
  return SEGOPS_OK;
}

/* call_check.c: a caller's arguments checked for what the library cannot send (proto/API.md: the daemon
 * validates the rest, with its own messages), then resolved into the segops_tcall every transport
 * takes, with the answer the call should get (shapes by the table's rules, as core/prepare.c
 * infers them), so transports can refuse an answer that does not fit. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "client.h"
#include "ops.h"

static const char *shape_str(char *buf, size_t len, int ndim, const int64_t *shape) {
  size_t o = (size_t)snprintf(buf, len, "(");
  for (int i = 0; i < ndim && o < len; i++)
    o += (size_t)snprintf(buf + o, len - o, "%s%" PRId64, i ? "," : "", shape[i]);
  if (o < len) snprintf(buf + o, len - o, ndim == 1 ? ",)" : ")");
  return buf;
}

/* dtype, ndim, shape and data of one array; its byte count into *nbytes. */
static int check_array(const char *fname, const char *name, const segops_array *a, size_t *nbytes, segops_error *e) {
  if ((unsigned)a->dtype >= SEGOPS_DTYPE_COUNT)
    return segops_client_err(e, SEGOPS_E_INVALID_ARGUMENT, "%s: %s.dtype (%d) is not a segops_dtype", fname, name,
                             (int)a->dtype);
  if (a->ndim < 0 || a->ndim > SEGOPS_MAX_NDIM)
    return segops_client_err(e, SEGOPS_E_INVALID_ARGUMENT, "%s: %s.ndim (%d) must be 0 to %d", fname, name, a->ndim,
                             SEGOPS_MAX_NDIM);
  uint64_t bytes = segops_dtype_size(a->dtype);
  bool overflow = false;
  for (int i = 0; i < a->ndim; i++) {
    if (a->shape[i] < 0)
      return segops_client_err(e, SEGOPS_E_INVALID_ARGUMENT, "%s: %s.shape[%d] (%" PRId64 ") must be >= 0", fname, name,
                               i, a->shape[i]);
    overflow |= __builtin_mul_overflow(bytes, (uint64_t)a->shape[i], &bytes);
  }
  if (overflow || bytes > (uint64_t)INT64_MAX) {
    char sb[128];
    return segops_client_err(e, SEGOPS_E_INVALID_ARGUMENT, "%s: %s has shape %s: more bytes than memory can hold",
                             fname, name, shape_str(sb, sizeof sb, a->ndim, a->shape));
  }
  if (bytes > 0 && !a->data)
    return segops_client_err(e, SEGOPS_E_INVALID_ARGUMENT, "%s: %s.data is NULL but %s holds %" PRIu64 " bytes", fname,
                             name, name, bytes);
  *nbytes = (size_t)bytes;
  return SEGOPS_OK;
}

/* The call's feature shape F (proto/API.md: every (N,)/(N,3) of the table may be any (N, *F)), as
 * core/prepare.c infers it: (3,) for vec3-only rows, else the trailing dimensions of the first given input of an
 * element or segment shape. Returns F's rank, or -1 when that input has no leading dimension (the daemon refuses it).
 */
static int feature_shape(const segops_fn_desc *row, const segops_tcall *tc, int64_t f[SEGOPS_MAX_NDIM]) {
  if (row->vec3_only) {
    f[0] = 3;
    return 1;
  }
  for (int k = 0; k < row->n_in; k++) {
    const segops_array *a = tc->in[k];
    if (!a || (row->in[k].shape != SEGOPS_SH_ELEM && row->in[k].shape != SEGOPS_SH_SEG)) continue;
    if (a->ndim < 1 || a->ndim > SEGOPS_MAX_NDIM) return -1;
    for (int d = 1; d < a->ndim; d++) f[d - 1] = a->shape[d];
    return a->ndim - 1;
  }
  return 0;
}

/* Output o's shape: a gradient is shaped like its input when that input is given (mul's grad_y is
 * (S,) or (S, *F) as y is); else the row's kind with F: (N, *F), (S, *F), (S,), (N,3), (S,3,3).
 * Returns its rank, -1 for a kind this library does not know. */
static int output_dims(const segops_fn_desc *row, const segops_tcall *tc, int o, const int64_t *f, int nf,
                       int64_t shape[SEGOPS_MAX_NDIM]) {
  const char *name = row->out[o].name;
  for (int k = 0; k < row->n_in; k++)
    if (tc->in[k] && !strncmp(name, "grad_", 5) && !strcmp(name + 5, row->in[k].name)) {
      if (tc->in[k]->ndim < 0 || tc->in[k]->ndim > SEGOPS_MAX_NDIM) return -1;
      for (int d = 0; d < tc->in[k]->ndim; d++) shape[d] = tc->in[k]->shape[d];
      return tc->in[k]->ndim;
    }
  const int64_t n = tc->idx->shape[0], s = tc->num_segments;
  const segops_shape_kind kind = row->out[o].shape;
  if (kind == SEGOPS_SH_ELEM || kind == SEGOPS_SH_SEG) {
    shape[0] = kind == SEGOPS_SH_ELEM ? n : s;
    for (int d = 0; d < nf; d++) shape[d + 1] = f[d];
    return nf + 1;
  }
  if (kind == SEGOPS_SH_ELEM3) return shape[0] = n, shape[1] = 3, 2;
  if (kind == SEGOPS_SH_SEG1) return shape[0] = s, 1;
  if (kind == SEGOPS_SH_MAT) return shape[0] = s, shape[1] = 3, shape[2] = 3, 3;
  return -1;
}

/* The answer a valid call gets: the inputs' float dtype (float64 when none is given) and each
 * requested output's shape. expect_known stays false where the daemon must refuse the call. */
static void expect_outputs(const segops_fn_desc *row, segops_tcall *tc) {
  tc->expect_known = false;
  const segops_array *idx = tc->idx;
  if (!idx || idx->ndim != 1 || (idx->dtype != SEGOPS_I32 && idx->dtype != SEGOPS_I64) || tc->num_segments < 0) return;
  int dtype = -1;
  for (int k = 0; k < row->n_in; k++) {
    const segops_array *a = tc->in[k];
    if (!a) continue;
    if ((a->dtype != SEGOPS_F32 && a->dtype != SEGOPS_F64) || (dtype >= 0 && (int)a->dtype != dtype)) return;
    dtype = (int)a->dtype;
  }
  int64_t f[SEGOPS_MAX_NDIM];
  const int nf = feature_shape(row, tc, f);
  if (nf < 0) return;
  tc->out_dtype = dtype < 0 ? SEGOPS_F64 : (segops_dtype)dtype;
  for (int o = 0; o < row->n_out; o++) {
    tc->out_ndim[o] = output_dims(row, tc, o, f, nf, tc->out_shape[o]);
    if (tc->out_ndim[o] < 0) return;
    uint64_t bytes = segops_dtype_size(tc->out_dtype);
    for (int i = 0; i < tc->out_ndim[o]; i++)
      if (__builtin_mul_overflow(bytes, (uint64_t)tc->out_shape[o][i], &bytes)) return; /* the daemon refuses it */
    tc->out_nbytes[o] = (size_t)bytes;
  }
  tc->expect_known = true;
}

void segops_call_expect(segops_tcall *tc) {
  if (tc->fn < 0 || tc->fn >= SEGOPS_FN_COUNT) return;
  expect_outputs(segops_fn((segops_op)(tc->fn / SEGOPS_PASS_COUNT), (segops_pass)(tc->fn % SEGOPS_PASS_COUNT)), tc);
}

static bool overlaps(const segops_array *a, const segops_array *b) {
  uintptr_t x = (uintptr_t)a->data, y = (uintptr_t)b->data;
  return a->nbytes && b->nbytes && x < y + b->nbytes && y < x + a->nbytes;
}

/* Requested outputs: present, apart, and where the caller gave memory, large enough for the answer. */
static int check_outputs(const char *fname, segops_tcall *tc, segops_error *e) {
  if (!tc->want) return segops_client_err(e, SEGOPS_E_INVALID_ARGUMENT, "%s: no output is asked for", fname);
  for (int o = 0; o < tc->n_out; o++) {
    const segops_array *a = tc->out[o];
    for (int k = 0; a && k < o; k++)
      if (tc->out[k] && (tc->out[k] == a || (a->data && tc->out[k]->data && overlaps(tc->out[k], a))))
        return segops_client_err(e, SEGOPS_E_INVALID_ARGUMENT, "%s: outputs %s and %s share memory", fname,
                                 tc->out_name[k], tc->out_name[o]);
    if (!a || !a->data || !tc->expect_known || a->nbytes >= tc->out_nbytes[o]) continue;
    char sb[128];
    return segops_client_err(e, SEGOPS_E_INVALID_ARGUMENT, "%s: %s needs %zu bytes (%s %s) but %s.nbytes is %zu", fname,
                             tc->out_name[o], tc->out_nbytes[o], segops_dtype_name(tc->out_dtype),
                             shape_str(sb, sizeof sb, tc->out_ndim[o], tc->out_shape[o]), tc->out_name[o], a->nbytes);
  }
  return SEGOPS_OK;
}

int segops_call_build(int fn, const segops_array *const *in, const segops_array *idx, int64_t num_segments,
                      segops_array *const *outs, segops_tcall *tc, segops_error *e) {
  memset(tc, 0, sizeof *tc);
  if (fn < 0 || fn >= SEGOPS_FN_COUNT)
    return segops_client_err(e, SEGOPS_E_INVALID_ARGUMENT, "function %d does not exist (SEGOPS_FN_*: 0 to %d)", fn,
                             SEGOPS_FN_COUNT - 1);
  const segops_fn_desc *row = segops_fn((segops_op)(fn / SEGOPS_PASS_COUNT), (segops_pass)(fn % SEGOPS_PASS_COUNT));
  char fname[64];
  snprintf(fname, sizeof fname, "%s %s", segops_op_name(row->op), segops_pass_name(row->pass));
  tc->fn = fn;
  tc->op = segops_op_name(row->op);
  tc->pass = segops_pass_name(row->pass);
  tc->n_in = row->n_in;
  tc->n_out = row->n_out;
  tc->idx = idx;
  tc->num_segments = num_segments;
  for (int k = 0; k < row->n_in; k++) {
    tc->in_name[k] = row->in[k].name;
    tc->in[k] = in ? in[k] : NULL;
    if (!tc->in[k]) continue;
    int rc = check_array(fname, row->in[k].name, tc->in[k], &tc->in_nbytes[k], e);
    if (rc) return rc;
  }
  if (idx) {
    int rc = check_array(fname, "idx", idx, &tc->idx_nbytes, e);
    if (rc) return rc;
  }
  for (int o = 0; o < row->n_out; o++) {
    tc->out_name[o] = row->out[o].name;
    tc->out[o] = outs ? outs[o] : NULL;
    if (tc->out[o]) tc->want |= 1u << o;
  }
  expect_outputs(row, tc);
  return check_outputs(fname, tc, e);
}

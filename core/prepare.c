/* prepare.c: backend-independent validation and shape inference, driven by the op table alone. */
#include "prepare.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "errors.h"
#include "hash.h"
#include "hostbuf.h"
#include "idx_cache.h"

void *segops_aligned_alloc(size_t nbytes) {
  size_t sz = (nbytes + 63) & ~(size_t)63;
  if (sz < nbytes) return NULL; /* wrapped */
  if (sz == 0) sz = 64;
  return aligned_alloc(64, sz);
}

void segops_prepared_free(segops_prepared *p) {
  if (!p) return;
  free(p->idx_buf);
  segops_hostbuf_free(p->out_buf);
  segops_idx_cache_release(p->idx_hold);
  p->idx_hold = NULL;
  p->idx_buf = NULL;
  p->out_buf = NULL;
}

static bool name_eq(const char *a, size_t alen, const char *b) { return strlen(b) == alen && memcmp(a, b, alen) == 0; }

/* "(5,3)" */
static const char *fmt_shape(char *buf, size_t len, int ndim, const int64_t *shape) {
  size_t o = 0;
  o += (size_t)snprintf(buf + o, len - o, "(");
  for (int i = 0; i < ndim && o < len; i++)
    o += (size_t)snprintf(buf + o, len - o, "%s%" PRId64, i ? "," : "", shape[i]);
  if (o < len) o += (size_t)snprintf(buf + o, len - o, ndim == 1 ? ",)" : ")");
  return buf;
}

static bool kind_is_elem(segops_shape_kind k) { return k == SEGOPS_SH_ELEM || k == SEGOPS_SH_ELEM3; }

/* Checks a tensor's byte length against shape x itemsize, with overflow and element limits. */
static int check_tensor_size(const char *op, const char *name, const segops_tensor *t, const segops_limits *lim,
                             char *err, size_t errlen) {
  char sb[96];
  if (t->ndim < 0 || t->ndim > SEGOPS_MAX_NDIM)
    return segops_errf(SEGOPS_E_INVALID_ARGUMENT, err, errlen, "%s: %s has %d dimensions; at most %d are allowed", op,
                       name, t->ndim, SEGOPS_MAX_NDIM);
  int64_t count = 1;
  bool overflow = false;
  for (int i = 0; i < t->ndim; i++) {
    if (t->shape[i] < 0)
      return segops_errf(SEGOPS_E_INVALID_ARGUMENT, err, errlen, "%s: %s.shape[%d] (%" PRId64 ") must be >= 0", op,
                         name, i, t->shape[i]);
    if (__builtin_mul_overflow(count, t->shape[i], &count)) overflow = true;
  }
  if (overflow || count > lim->max_elements)
    return segops_errf(SEGOPS_E_TOO_LARGE, err, errlen,
                       "%s: %s %s has more elements than the limit (--max-elements %" PRId64 ")", op, name,
                       fmt_shape(sb, sizeof sb, t->ndim, t->shape), lim->max_elements);
  uint64_t need = (uint64_t)count * segops_dtype_size(t->dtype);
  if ((uint64_t)t->nbytes != need)
    return segops_errf(SEGOPS_E_INVALID_ARGUMENT, err, errlen,
                       "%s: %s data has %zu bytes but shape %s x %s needs %" PRIu64, op, name, t->nbytes,
                       fmt_shape(sb, sizeof sb, t->ndim, t->shape), segops_dtype_name(t->dtype), need);
  return SEGOPS_OK;
}

/* The leading dimension of a tensor of kind k: N (element kinds) or S, with the message naming
 * which it must equal. */
static int check_lead(const char *op, const char *name, segops_shape_kind k, int64_t n, int64_t s,
                      const segops_tensor *t, char *err, size_t errlen) {
  if (kind_is_elem(k) && t->shape[0] != n)
    return segops_errf(SEGOPS_E_INVALID_ARGUMENT, err, errlen,
                       "%s: %s.shape[0] (%" PRId64 ") must equal idx.shape[0] (%" PRId64 ")", op, name, t->shape[0], n);
  if (!kind_is_elem(k) && t->shape[0] != s)
    return segops_errf(SEGOPS_E_INVALID_ARGUMENT, err, errlen,
                       "%s: num_segments (%" PRId64 ") must equal %s.shape[0] (%" PRId64 ")", op, s, name, t->shape[0]);
  return SEGOPS_OK;
}

/* A tensor of a fixed shape kind (ELEM3, SEG1, MAT): rank and trailing dimensions, then the lead. */
static int check_fixed(const char *op, const char *name, segops_shape_kind k, int64_t n, int64_t s,
                       const segops_tensor *t, char *err, size_t errlen) {
  int64_t want[SEGOPS_MAX_NDIM];
  int nd = segops_shape_dims(k, 1, n, s, want);
  bool trailing_ok = t->ndim == nd;
  for (int i = 1; trailing_ok && i < nd; i++) trailing_ok = t->shape[i] == want[i];
  if (!trailing_ok) {
    char got[96];
    return segops_errf(SEGOPS_E_INVALID_ARGUMENT, err, errlen, "%s: %s must have shape %s, got %s", op, name,
                       segops_shape_text(k, 0), fmt_shape(got, sizeof got, t->ndim, t->shape));
  }
  return check_lead(op, name, k, n, s, t, err, errlen);
}

/* Whether t's trailing dimensions (all but the first) are F. */
static bool trailing_is(const segops_tensor *t, int nf, const int64_t *f) {
  if (t->ndim < 1 || t->ndim - 1 != nf) return false;
  for (int i = 0; i < nf; i++)
    if (t->shape[1 + i] != f[i]) return false;
  return true;
}
static void list_names(char *buf, size_t len, const segops_fn_desc *fn, bool outputs) {
  size_t o = 0;
  buf[0] = 0;
  int cnt = outputs ? fn->n_out : fn->n_in;
  for (int i = 0; i < cnt && o < len; i++)
    o += (size_t)snprintf(buf + o, len - o, "%s%s", i ? ", " : "", outputs ? fn->out[i].name : fn->in[i].name);
  if (!outputs && o < len) snprintf(buf + o, len - o, ", idx, num_segments");
}

/* The first element of v[0, n) outside [0, s), or -1; *sorted = whether v never decreases.
 * Branch-free over blocks (vectorised), so a valid idx costs one streaming pass. Not inlined:
 * inside segops_prepare GCC 12 left both loops scalar. */
static __attribute__((noinline)) int64_t check_idx32(const int32_t *v, int64_t n, int64_t s, bool *sorted) {
  const uint32_t us = (uint32_t)s; /* s <= INT32_MAX (num_segments' limit) */
  enum { BLOCK = 4096 };
  unsigned down = 0;
  for (int64_t b = 0; b < n; b += BLOCK) {
    const int64_t e = b + BLOCK < n ? b + BLOCK : n;
    unsigned out = 0;
    for (int64_t i = b; i < e; i++) out |= (uint32_t)v[i] >= us; /* negatives wrap past s */
    for (int64_t i = b > 0 ? b : 1; i < e; i++) down |= v[i] < v[i - 1];
    if (out)
      for (int64_t i = b; i < e; i++)
        if ((uint32_t)v[i] >= us) return i;
  }
  *sorted = !down;
  return -1;
}

/* What the steps of segops_prepare learn, in their order. */
typedef struct {
  const segops_request *req;
  const segops_limits *lim;
  const segops_fn_desc *fn;
  const char *op;
  char *err;
  size_t errlen;
  const segops_tensor *in[SEGOPS_MAX_INPUTS]; /* 1: by the row's input order; NULL when not given */
  const segops_tensor *idx;
  int64_t s;                      /* 2 */
  int64_t n;                      /* 3 */
  int dtype;                      /* 4 */
  int64_t width;                  /* 5: w = prod(F) */
  int nf;                         /* 5: F, the feature shape */
  int64_t f[SEGOPS_MAX_NDIM];     /* 5 */
  bool y_wide;                    /* 5: mul's y is (S,*F) */
  bool want[SEGOPS_MAX_OUTPUTS];  /* 6 */
  int32_t *copy;                  /* 7: owned: idx checked, narrowed or realigned; or NULL */
  segops_idx_entry *hold;         /* 7: the validated-idx cache's copy, held; or NULL */
  const int32_t *cached;          /* 7: its values */
  uint64_t ih[2];                 /* 7: the hash of idx's bytes, when hashed */
  bool hashed, cacheable, sorted; /* 7 */
  size_t total;                   /* 8: bytes of the requested outputs, 64-byte aligned each */
} prep;

/* 1. Argument names: known, not repeated. */
static int bind_arguments(prep *x) {
  const segops_fn_desc *fn = x->fn;
  for (int a = 0; a < x->req->nargs; a++) {
    const segops_named_tensor *nt = &x->req->args[a];
    const segops_tensor **slot = NULL;
    if (name_eq(nt->name, nt->name_len, "idx")) slot = &x->idx;
    for (int k = 0; !slot && k < fn->n_in; k++)
      if (name_eq(nt->name, nt->name_len, fn->in[k].name)) slot = &x->in[k];
    if (!slot) {
      char names[256];
      list_names(names, sizeof names, fn, false);
      return segops_errf(SEGOPS_E_INVALID_ARGUMENT, x->err, x->errlen,
                         "%s: unknown argument '%.*s' for %s (expected: %s)", x->op,
                         (int)(nt->name_len > 64 ? 64 : nt->name_len), nt->name, segops_pass_name(fn->pass), names);
    }
    if (*slot)
      return segops_errf(SEGOPS_E_INVALID_ARGUMENT, x->err, x->errlen, "%s: argument '%.*s' is given more than once",
                         x->op, (int)nt->name_len, nt->name);
    *slot = &nt->t;
  }
  return SEGOPS_OK;
}

/* 2. num_segments: given, an integer, >= 0, within the limit. */
static int check_num_segments(prep *x) {
  const segops_request *req = x->req;
  if (req->ns_kind == SEGOPS_NS_ABSENT)
    return segops_errf(SEGOPS_E_INVALID_ARGUMENT, x->err, x->errlen, "%s: num_segments is required", x->op);
  if (req->ns_kind == SEGOPS_NS_NOT_INT)
    return segops_errf(SEGOPS_E_INVALID_ARGUMENT, x->err, x->errlen, "%s: num_segments must be an integer", x->op);
  if (!req->ns_overflow && req->ns_value < 0)
    return segops_errf(SEGOPS_E_INVALID_ARGUMENT, x->err, x->errlen, "%s: num_segments (%" PRId64 ") must be >= 0",
                       x->op, req->ns_value);
  /* idx is narrowed to int32 below, so no limit may let num_segments past INT32_MAX. */
  const int64_t max_segments = x->lim->max_segments < INT32_MAX ? x->lim->max_segments : INT32_MAX;
  if (req->ns_overflow)
    return segops_errf(SEGOPS_E_TOO_LARGE, x->err, x->errlen,
                       "%s: num_segments exceeds the limit (--max-segments %" PRId64 ")", x->op, max_segments);
  if (req->ns_value > max_segments)
    return segops_errf(SEGOPS_E_TOO_LARGE, x->err, x->errlen,
                       "%s: num_segments (%" PRId64 ") exceeds the limit (--max-segments %" PRId64 ")", x->op,
                       req->ns_value, max_segments);
  x->s = req->ns_value;
  return SEGOPS_OK;
}

/* 3. idx: present, 1-D, integer, sized. */
static int check_idx(prep *x) {
  const segops_tensor *idx = x->idx;
  if (!idx) return segops_errf(SEGOPS_E_INVALID_ARGUMENT, x->err, x->errlen, "%s: idx is required", x->op);
  if (idx->dtype != SEGOPS_I32 && idx->dtype != SEGOPS_I64)
    return segops_errf(SEGOPS_E_INVALID_ARGUMENT, x->err, x->errlen, "%s: idx must be int32 or int64, got %s", x->op,
                       segops_dtype_name(idx->dtype));
  if (idx->ndim != 1)
    return segops_errf(SEGOPS_E_INVALID_ARGUMENT, x->err, x->errlen, "%s: idx must be 1-D, got %d-D", x->op, idx->ndim);
  int rc = check_tensor_size(x->op, "idx", idx, x->lim, x->err, x->errlen);
  if (rc) return rc;
  x->n = idx->shape[0];
  return SEGOPS_OK;
}

/* 4. Required inputs present; float dtypes; one dtype per call; sizes. */
static int check_inputs(prep *x) {
  const segops_fn_desc *fn = x->fn;
  const char *dtype_from = NULL;
  x->dtype = -1;
  for (int k = 0; k < fn->n_in; k++) {
    const char *name = fn->in[k].name;
    const segops_tensor *t = x->in[k];
    if (!t) {
      if (fn->in[k].use == SEGOPS_ARG_REQ)
        return segops_errf(SEGOPS_E_INVALID_ARGUMENT, x->err, x->errlen, "%s: %s is required for %s", x->op, name,
                           segops_pass_name(fn->pass));
      continue;
    }
    if (t->dtype != SEGOPS_F32 && t->dtype != SEGOPS_F64)
      return segops_errf(SEGOPS_E_INVALID_ARGUMENT, x->err, x->errlen, "%s: %s must be float32 or float64, got %s",
                         x->op, name, segops_dtype_name(t->dtype));
    if (x->dtype < 0) {
      x->dtype = (int)t->dtype;
      dtype_from = name;
    } else if ((int)t->dtype != x->dtype) {
      return segops_errf(SEGOPS_E_INVALID_ARGUMENT, x->err, x->errlen,
                         "%s: %s is %s but %s is %s; all float inputs must share one dtype", x->op, name,
                         segops_dtype_name(t->dtype), dtype_from, segops_dtype_name((segops_dtype)x->dtype));
    }
    int rc = check_tensor_size(x->op, name, t, x->lim, x->err, x->errlen);
    if (rc) return rc;
  }
  /* Every float input of this row is optional and none was given (sum and mean double backward
   * with only idx and num_segments): each absent input is zero, so the outputs are zeros of the
   * request's dtype (float64 unless the request names one), in the scalar layout. */
  if (x->dtype < 0) x->dtype = x->req->has_dtype ? (int)x->req->dtype : (int)SEGOPS_F64;
  return SEGOPS_OK;
}

/* 5. The feature shape F (the trailing dimensions of the (N,*F) and (S,*F) arguments, the same
 * for all of them: the first one given fixes it), then every shape against the table. */
static int check_shapes(prep *x) {
  const segops_fn_desc *fn = x->fn;
  const char *from = NULL; /* the argument that fixed F */
  const segops_tensor *ft = NULL;
  x->nf = 0;
  if (fn->vec3_only) { /* (N,3) rows */
    x->nf = 1;
    x->f[0] = 3;
  }
  for (int k = 0; !from && !fn->vec3_only && k < fn->n_in; k++) {
    const segops_tensor *t = x->in[k];
    const segops_shape_kind kind = fn->in[k].shape;
    if (!t || (kind != SEGOPS_SH_ELEM && kind != SEGOPS_SH_SEG)) continue;
    if (t->ndim < 1) {
      char got[96];
      return segops_errf(SEGOPS_E_INVALID_ARGUMENT, x->err, x->errlen, "%s: %s must have shape %s, got %s", x->op,
                         fn->in[k].name, segops_shape_text(kind, 0), fmt_shape(got, sizeof got, t->ndim, t->shape));
    }
    from = fn->in[k].name;
    ft = t;
    x->nf = t->ndim - 1;
    for (int i = 0; i < x->nf; i++) x->f[i] = t->shape[1 + i];
  }
  /* The row's size prod(F): bounded by --max-elements like a tensor's, also where N = 0 leaves the
   * tensor itself empty (its size check saw a product of 0, not of F). */
  x->width = 1;
  bool wide = false;
  for (int i = 0; i < x->nf; i++) wide |= __builtin_mul_overflow(x->width, x->f[i], &x->width);
  if (wide || x->width > x->lim->max_elements) {
    char fs[96];
    return segops_errf(SEGOPS_E_TOO_LARGE, x->err, x->errlen,
                       "%s: a row of %s %s has more elements than the limit (--max-elements %" PRId64 ")", x->op,
                       from, fmt_shape(fs, sizeof fs, ft->ndim, ft->shape), x->lim->max_elements);
  }
  /* mul's y (and gg_y): (S,) scales each row, (S,*F) multiplies element-wise; the first given decides. */
  const char *y_from = NULL;
  x->y_wide = false;
  for (int k = 0; k < fn->n_in; k++) {
    const segops_tensor *t = x->in[k];
    const char *name = fn->in[k].name;
    const segops_shape_kind kind = fn->in[k].shape;
    if (!t) continue;
    char got[96], fs[96];
    int rc;
    switch (kind) {
      case SEGOPS_SH_ELEM:
      case SEGOPS_SH_SEG:
        if (!trailing_is(t, x->nf, x->f))
          return segops_errf(SEGOPS_E_INVALID_ARGUMENT, x->err, x->errlen,
                             "%s: the trailing shapes of %s %s and %s %s differ; every %s and %s argument has the "
                             "same F",
                             x->op, from, fmt_shape(fs, sizeof fs, ft->ndim, ft->shape), name,
                             fmt_shape(got, sizeof got, t->ndim, t->shape), segops_shape_text(SEGOPS_SH_ELEM, 0),
                             segops_shape_text(SEGOPS_SH_SEG, 0));
        rc = check_lead(x->op, name, kind, x->n, x->s, t, x->err, x->errlen);
        break;
      case SEGOPS_SH_SEG1F: {
        const bool wide = t->ndim != 1;
        if (wide && !trailing_is(t, x->nf, x->f))
          return segops_errf(SEGOPS_E_INVALID_ARGUMENT, x->err, x->errlen,
                             "%s: %s must have shape (S,) or (S,*F) with the trailing shape of %s %s, got %s", x->op,
                             name, from, fmt_shape(fs, sizeof fs, ft->ndim, ft->shape),
                             fmt_shape(got, sizeof got, t->ndim, t->shape));
        if (!y_from) {
          y_from = name;
          x->y_wide = wide && x->nf > 0;
        } else if ((wide && x->nf > 0) != x->y_wide) {
          return segops_errf(SEGOPS_E_INVALID_ARGUMENT, x->err, x->errlen,
                             "%s: %s is %s but %s is %s; both must be (S,) or both (S,*F)", x->op, name,
                             fmt_shape(got, sizeof got, t->ndim, t->shape), y_from, x->y_wide ? "(S,*F)" : "(S,)");
        }
        rc = check_lead(x->op, name, kind, x->n, x->s, t, x->err, x->errlen);
        break;
      }
      default:
        rc = check_fixed(x->op, name, kind, x->n, x->s, t, x->err, x->errlen);
        break;
    }
    if (rc) return rc;
  }
  return SEGOPS_OK;
}

/* 6. outputs selection: every output, or those "outputs" names (at least one, each of the row). */
static int select_outputs(prep *x) {
  const segops_fn_desc *fn = x->fn;
  const segops_request *req = x->req;
  if (!req->has_outputs) {
    for (int o = 0; o < fn->n_out; o++) x->want[o] = true;
    return SEGOPS_OK;
  }
  if (req->n_outputs == 0)
    return segops_errf(SEGOPS_E_INVALID_ARGUMENT, x->err, x->errlen, "%s: outputs must name at least one output",
                       x->op);
  for (int j = 0; j < req->n_outputs; j++) {
    int found = -1;
    for (int o = 0; o < fn->n_out; o++)
      if (name_eq(req->outputs[j].name, req->outputs[j].len, fn->out[o].name)) found = o;
    if (found < 0) {
      char names[256];
      list_names(names, sizeof names, fn, true);
      return segops_errf(SEGOPS_E_INVALID_ARGUMENT, x->err, x->errlen,
                         "%s: unknown output '%.*s' for %s (expected: %s)", x->op,
                         (int)(req->outputs[j].len > 64 ? 64 : req->outputs[j].len), req->outputs[j].name,
                         segops_pass_name(fn->pass), names);
    }
    x->want[found] = true;
  }
  return SEGOPS_OK;
}

/* 7a. A large int32 idx from a region: a validated copy of the same bytes (for the same N and S)
 * in the validated-idx cache (idx_cache.h) is held instead of a check. The region's bytes are read
 * once, to hash them; on a hit nothing reads them again. */
static void find_cached_idx(prep *x, const unsigned char *ib, int esize) {
  x->cacheable = x->idx->shared && (size_t)x->n * 4 >= SEGOPS_IDX_CACHE_MIN_BYTES && segops_idx_cache_enabled();
  if (!x->cacheable) return;
  segops_hash_idx(ib, (size_t)x->n * (size_t)esize, x->ih);
  /* Entries are per owner (the client's uid): another uid's lookup never finds, and so never
   * learns of, an idx this one sent. The hash is keyed, so mixing the owner in keeps it unforgeable. */
  x->ih[1] ^= (uint64_t)x->req->owner * 0x9E3779B97F4A7C15ull;
  x->hold = segops_idx_cache_find(x->ih, esize, x->n, x->s, &x->cached, &x->sorted);
  if (x->hold) x->hashed = true;
}

/* 7b. The first element of an int64 idx outside [0, s), or -1, narrowing it into copy as it goes. */
static int64_t check_idx64(const unsigned char *ib, int64_t n, int64_t s, int32_t *copy, bool *sorted) {
  int64_t prev = 0;
  for (int64_t i = 0; i < n; i++) {
    int64_t v;
    memcpy(&v, ib + i * 8, 8);
    if (v < 0 || v >= s) return i;
    if (v < prev) *sorted = false;
    prev = v;
    copy[i] = (int32_t)v;
  }
  return -1;
}

/* 7. idx values: range, sortedness; narrow int64 and realign when needed. An idx in shared
 * memory is always copied first, and only the copy is checked: its owner could rewrite it
 * between the check and the backend's reads (out-of-range segment numbers index the outputs),
 * and the backend reads the checked copy only. */
static int check_idx_values(prep *x) {
  const segops_tensor *idx = x->idx;
  const unsigned char *ib = (const unsigned char *)idx->data;
  const int esize = idx->dtype == SEGOPS_I64 ? 8 : 4;
  x->sorted = true;
  find_cached_idx(x, ib, esize);
  if (x->hold) return SEGOPS_OK; /* validated when it went into the cache, for this N and S */
  if (idx->dtype == SEGOPS_I64 || ((uintptr_t)ib % sizeof(int32_t)) != 0 || idx->shared) {
    x->copy = segops_aligned_alloc((size_t)x->n * sizeof(int32_t));
    if (!x->copy) return segops_errf(SEGOPS_E_NOMEM, x->err, x->errlen, "%s: out of memory for idx", x->op);
  }
  int64_t bad, v = 0;
  if (idx->dtype == SEGOPS_I32) {
    /* Copied whole (memcpy's speed), then one branch-free pass the compiler vectorises: a
     * request's idx is its largest index array, and a branch per element cost more than the
     * backend's own pass over it. The first bad element is looked for only when there is one. */
    if (x->copy) memcpy(x->copy, ib, (size_t)x->n * sizeof(int32_t));
    const int32_t *vals = x->copy ? x->copy : (const int32_t *)(const void *)ib;
    bad = check_idx32(vals, x->n, x->s, &x->sorted);
    if (bad >= 0) v = vals[bad];
  } else {
    bad = check_idx64(ib, x->n, x->s, x->copy, &x->sorted);
    if (bad >= 0) memcpy(&v, ib + bad * 8, 8);
  }
  if (bad < 0) return SEGOPS_OK;
  return segops_errf(SEGOPS_E_INVALID_ARGUMENT, x->err, x->errlen,
                     "%s: idx[%" PRId64 "] = %" PRId64 " is out of range [0, num_segments = %" PRId64 ")", x->op, bad,
                     v, x->s);
}

/* 8. Outputs: shapes, limits and one allocation. The element limit holds for answers too,
 * and so does the output-bytes limit: an empty x with a huge num_segments would otherwise turn
 * a few bytes of request into gigabytes of answer. */
static int size_outputs(prep *x, segops_prepared *p) {
  const segops_fn_desc *fn = x->fn;
  x->total = 0;
  segops_call *c = &p->call; /* its shape facts, for the shapes of the outputs */
  c->fn = fn;
  c->width = x->width;
  c->nf = x->nf;
  memcpy(c->f, x->f, sizeof c->f);
  c->y_wide = x->y_wide;
  c->n = x->n;
  c->s = x->s;
  for (int o = 0; o < fn->n_out; o++) {
    p->out_ndim[o] = segops_call_dims(c, fn->out[o].shape, p->out_shape[o]);
    int64_t cnt = segops_call_count(c, fn->out[o].shape);
    p->out_nbytes[o] = (size_t)cnt * segops_dtype_size((segops_dtype)x->dtype);
    p->requested[o] = x->want[o];
    if (!x->want[o]) continue;
    if (cnt > x->lim->max_elements)
      return segops_errf(SEGOPS_E_TOO_LARGE, x->err, x->errlen,
                         "%s: output %s would have %" PRId64 " elements, more than the limit (--max-elements %" PRId64
                         ")",
                         x->op, fn->out[o].name, cnt, x->lim->max_elements);
    x->total += (p->out_nbytes[o] + 63) & ~(size_t)63;
  }
  if (x->lim->max_output_bytes > 0 && x->total > (uint64_t)x->lim->max_output_bytes)
    return segops_errf(SEGOPS_E_TOO_LARGE, x->err, x->errlen,
                       "%s: the outputs would take %zu bytes, more than the limit (--max-output-bytes %" PRId64 ")",
                       x->op, x->total, x->lim->max_output_bytes);
  return SEGOPS_OK;
}

static int allocate_outputs(prep *x, segops_prepared *p) {
  if (x->req->outputs_placed) return SEGOPS_OK; /* the caller points call.out at its own places */
  p->out_buf = segops_hostbuf_alloc(x->total);
  if (!p->out_buf)
    return segops_errf(SEGOPS_E_NOMEM, x->err, x->errlen, "%s: out of memory for outputs (%zu bytes)", x->op, x->total);
  size_t off = 0;
  for (int o = 0; o < x->fn->n_out; o++) {
    if (!x->want[o]) continue;
    p->call.out[o] = (char *)p->out_buf + off;
    off += (p->out_nbytes[o] + 63) & ~(size_t)63;
  }
  return SEGOPS_OK;
}

/* 9. A large idx from a region, validated just now: the copy goes into the cache under the hash
 * of the bytes it was made from, recomputed from the copy (the region's may have changed since
 * they were hashed in 7a): an int64 idx's are its values widened back. */
static void cache_idx(prep *x) {
  if (!x->cacheable || x->hold || !x->copy) return;
  const int esize = x->idx->dtype == SEGOPS_I64 ? 8 : 4;
  if (esize == 8)
    segops_hash_idx_widened(x->copy, x->n, x->ih);
  else
    segops_hash_idx(x->copy, (size_t)x->n * 4, x->ih);
  x->ih[1] ^= (uint64_t)x->req->owner * 0x9E3779B97F4A7C15ull; /* per owner, as in 7a */
  x->hold = segops_idx_cache_put(x->copy, x->ih, esize, x->n, x->s, x->sorted);
  if (!x->hold) return;
  x->cached = x->copy;
  x->copy = NULL;
  x->hashed = true;
}

/* 10. The call, handing p what it now owns. */
static void fill_call(prep *x, segops_prepared *p) {
  p->idx_buf = x->copy;
  p->idx_hold = x->hold;
  p->call.idx_hashed = x->hashed;
  p->call.idx_hash[0] = x->ih[0];
  p->call.idx_hash[1] = x->ih[1];
  p->call.fn = x->fn;
  p->call.dtype = (segops_dtype)x->dtype;
  p->call.width = x->width;
  p->call.nf = x->nf;
  memcpy(p->call.f, x->f, sizeof p->call.f);
  p->call.y_wide = x->y_wide;
  p->call.n = x->n;
  p->call.s = x->s;
  p->call.idx = x->hold ? x->cached : x->copy ? x->copy : (const int32_t *)x->idx->data;
  p->call.idx_sorted = x->sorted;
  for (int k = 0; k < x->fn->n_in; k++) p->call.in[k] = x->in[k] ? x->in[k]->data : NULL;
}

int segops_prepare(const segops_request *req, const segops_limits *lim, segops_prepared *p, char *err, size_t errlen) {
  memset(p, 0, sizeof *p);
  prep x = {.req = req, .lim = lim, .fn = segops_fn(req->op, req->pass), .err = err, .errlen = errlen};
  if (!x.fn) return segops_errf(SEGOPS_E_NOT_FOUND, err, errlen, "unknown op or pass");
  x.op = segops_op_name(x.fn->op);
  int rc = bind_arguments(&x);
  if (!rc) rc = check_num_segments(&x);
  if (!rc) rc = check_idx(&x);
  if (!rc) rc = check_inputs(&x);
  if (!rc) rc = check_shapes(&x);
  if (!rc) rc = select_outputs(&x);
  if (!rc) rc = check_idx_values(&x);
  if (!rc) rc = size_outputs(&x, p);
  if (!rc) rc = allocate_outputs(&x, p);
  if (rc) { /* p owns nothing on error */
    free(x.copy);
    segops_idx_cache_release(x.hold);
    segops_hostbuf_free(p->out_buf);
    p->out_buf = NULL;
    return rc;
  }
  cache_idx(&x);
  fill_call(&x, p);
  return SEGOPS_OK;
}

/* cuda_test_util.c: shared helpers of the CUDA tests (see cuda_test_util.h). */
#include "cuda_test_util.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ref.h"

segops_backend *ct_backend_or_skip(const char *test) {
  char err[256] = "";
  segops_backend *b = segops_cuda_backend_new(NULL, 0, NULL, err, sizeof err);
  if (b) return b;
  const char *req = getenv("SEGOPS_REQUIRE_CUDA");
  if (req && strcmp(req, "1") == 0) {
    fprintf(stderr, "%s: FAIL: SEGOPS_REQUIRE_CUDA=1 but no CUDA backend: %s\n", test, err);
    exit(1);
  }
  printf("%s: SKIP: no usable GPU (%s)\n", test, err);
  exit(SKIP_CODE);
}

uint64_t ct_rand(uint64_t *st) {
  uint64_t z = (*st += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

double ct_uniform(uint64_t *st) { return (double)(ct_rand(st) >> 11) * (2.0 / 9007199254740992.0) - 1.0; }

static void make_idx(int32_t *idx, int64_t n, int64_t s, ct_layout layout, uint64_t *st) {
  if (n == 0) return;
  switch (layout) {
    case CT_ONE_SEG:
      for (int64_t i = 0; i < n; i++) idx[i] = (int32_t)(s - 1);
      return;
    case CT_EMPTY_SEGS: /* only even segments used: the odd ones stay empty */
      for (int64_t i = 0; i < n; i++) idx[i] = (int32_t)((ct_rand(st) % (uint64_t)((s + 1) / 2)) * 2);
      break;
    default:
      for (int64_t i = 0; i < n; i++) idx[i] = (int32_t)(ct_rand(st) % (uint64_t)s);
  }
  if (layout != CT_UNSORTED) {
    /* counting sort keeps it O(n + s) */
    int64_t *cnt = calloc((size_t)s + 1, sizeof *cnt);
    for (int64_t i = 0; i < n; i++) cnt[idx[i]]++;
    int64_t at = 0;
    for (int64_t v = 0; v < s; v++)
      for (int64_t k = 0; k < cnt[v]; k++) idx[at++] = (int32_t)v;
    free(cnt);
  }
}

static int fill(ct_call *tc, const segops_fn_desc *fn, segops_dtype dt, int64_t width, bool y_wide, int64_t n,
                int64_t s, unsigned cotan_mask, unsigned out_mask, uint64_t *st) {
  segops_call *c = &tc->call;
  size_t isz = segops_dtype_size(dt);
  c->fn = fn;
  c->dtype = dt;
  c->width = width;
  c->y_wide = y_wide;
  c->n = n;
  c->s = s;
  c->idx = tc->idx;
  c->idx_sorted = true;
  for (int64_t i = 1; i < n; i++)
    if (tc->idx[i] < tc->idx[i - 1]) c->idx_sorted = false;
  for (int k = 0; k < fn->n_in; k++) {
    if (fn->in[k].use == SEGOPS_ARG_COTAN && !(cotan_mask & (1u << k))) continue;
    int64_t cnt = segops_call_count(c, fn->in[k].shape);
    char *p = malloc((size_t)cnt * isz + 65);
    if (!p) return -1;
    tc->in_alloc[k] = p;
    char *d = p + 1; /* deliberately unaligned */
    for (int64_t e = 0; e < cnt; e++) {
      double v = ct_uniform(st);
      if (dt == SEGOPS_F32) {
        float f = (float)v;
        memcpy(d + e * 4, &f, 4);
      } else {
        memcpy(d + e * 8, &v, 8);
      }
    }
    c->in[k] = d;
  }
  for (int k = 0; k < fn->n_out; k++) {
    if (!(out_mask & (1u << k))) continue;
    int64_t cnt = segops_call_count(c, fn->out[k].shape);
    tc->out_bytes[k] = (size_t)cnt * isz;
    tc->out[k] = aligned_alloc(64, (tc->out_bytes[k] + 64) / 64 * 64);
    if (!tc->out[k]) return -1;
    c->out[k] = tc->out[k];
  }
  ct_poison(tc);
  return 0;
}

int ct_make(ct_call *tc, const segops_fn_desc *fn, segops_dtype dt, int width, int64_t n, int64_t s, ct_layout layout,
            unsigned cotan_mask, unsigned out_mask, uint64_t seed) {
  memset(tc, 0, sizeof *tc);
  uint64_t st = seed;
  tc->idx = aligned_alloc(64, ((size_t)n * 4 + 64) / 64 * 64);
  if (!tc->idx) return -1;
  make_idx(tc->idx, n, s, layout, &st);
  return fill(tc, fn, dt, width, false, n, s, cotan_mask, out_mask, &st);
}

int ct_make_idx_wide(ct_call *tc, const segops_fn_desc *fn, segops_dtype dt, int64_t width, bool y_wide, int64_t n,
                     int64_t s, const int32_t *idx, unsigned cotan_mask, unsigned out_mask, uint64_t seed) {
  memset(tc, 0, sizeof *tc);
  uint64_t st = seed;
  tc->idx = aligned_alloc(64, ((size_t)n * 4 + 64) / 64 * 64);
  if (!tc->idx) return -1;
  if (n) memcpy(tc->idx, idx, (size_t)n * 4);
  return fill(tc, fn, dt, width, y_wide, n, s, cotan_mask, out_mask, &st);
}

int ct_make_idx(ct_call *tc, const segops_fn_desc *fn, segops_dtype dt, int width, int64_t n, int64_t s,
                const int32_t *idx, unsigned cotan_mask, unsigned out_mask, uint64_t seed) {
  return ct_make_idx_wide(tc, fn, dt, width, false, n, s, idx, cotan_mask, out_mask, seed);
}

void ct_free(ct_call *tc) {
  for (int k = 0; k < SEGOPS_MAX_INPUTS; k++) free(tc->in_alloc[k]);
  for (int k = 0; k < SEGOPS_MAX_OUTPUTS; k++) free(tc->out[k]);
  free(tc->idx);
  memset(tc, 0, sizeof *tc);
}

void ct_poison(ct_call *tc) {
  for (int k = 0; k < SEGOPS_MAX_OUTPUTS; k++)
    if (tc->out[k]) memset(tc->out[k], 0xff, tc->out_bytes[k]); /* all-ones bytes: NaN in both dtypes */
}

/* ---- float64 reference ---- */

static double *load(const segops_call *c, int k, int64_t cnt) {
  double *v = calloc((size_t)cnt + 1, sizeof *v);
  if (!c->in[k]) return v; /* omitted: zeros */
  for (int64_t e = 0; e < cnt; e++) {
    if (c->dtype == SEGOPS_F32) {
      float f;
      memcpy(&f, (const char *)c->in[k] + e * 4, 4);
      v[e] = f;
    } else {
      memcpy(&v[e], (const char *)c->in[k] + e * 8, 8);
    }
  }
  return v;
}

void ct_reference(const segops_call *c, double *ref_out[SEGOPS_MAX_OUTPUTS]) {
  /* The one float64 reference of the tests (tests/core/ref.c), on the call's inputs. */
  const segops_fn_desc *fn = c->fn;
  const int64_t n = c->n, s = c->s;
  double *in[SEGOPS_MAX_INPUTS] = {0};
  for (int k = 0; k < fn->n_in; k++) in[k] = load(c, k, segops_call_count(c, fn->in[k].shape));
  for (int k = 0; k < fn->n_out; k++)
    ref_out[k] = calloc((size_t)segops_call_count(c, fn->out[k].shape) + 1, sizeof(double));
  ref_run_y(fn->op, fn->pass, c->width, c->y_wide, n, s, c->idx, (const double *const *)in, ref_out);
  for (int k = 0; k < fn->n_in; k++) free(in[k]);
}

int ct_check(const ct_call *tc, const char *label, double *max_err_out) {
  const segops_call *c = &tc->call;
  const segops_fn_desc *fn = c->fn;
  double *ref[SEGOPS_MAX_OUTPUTS] = {0};
  ct_reference(c, ref);
  /* largest segment decides the float32 bound */
  int64_t maxc = 0;
  {
    int64_t *cnt = calloc((size_t)c->s + 1, sizeof *cnt);
    for (int64_t i = 0; i < c->n; i++) cnt[c->idx[i]]++;
    for (int64_t g = 0; g < c->s; g++)
      if (cnt[g] > maxc) maxc = cnt[g];
    free(cnt);
  }
  /* float64: the reference sums each segment in order, its own error grows like eps * count
   * (a segment of 10^6 products differs from a blocked GPU sum by ~1e-11 relative, seen on an
   * sm_90 GPU); the bound keeps 1e-12 up to ~560 elements per segment and grows linearly past it. */
  double tol = c->dtype == SEGOPS_F64 ? fmax(1e-12, 8 * DBL_EPSILON * (double)maxc) : (maxc > 10000 ? 1e-4 : 1e-5);
  if (fn->op == SEGOPS_OP_MAX || fn->op == SEGOPS_OP_MIN) tol = 0.0; /* they select an element: exact */
  int fails = 0;
  double worst = 0;
  for (int k = 0; k < fn->n_out; k++) {
    if (!tc->out[k]) {
      free(ref[k]);
      continue;
    }
    int64_t cnt = segops_call_count(c, fn->out[k].shape);
    for (int64_t e = 0; e < cnt; e++) {
      double got;
      if (c->dtype == SEGOPS_F32)
        got = ((const float *)tc->out[k])[e];
      else
        got = ((const double *)tc->out[k])[e];
      double r = ref[k][e];
      double err = fabs(got - r) / fmax(fabs(r), 1.0);
      if (!(err <= tol)) { /* NaN (unwritten poison) fails too */
        printf("FAIL %s: %s/%s %s output %s[%lld] = %.17g, reference %.17g (err %.3g > %.1g)\n", label,
               segops_op_name(fn->op), segops_pass_name(fn->pass), segops_dtype_name(c->dtype), fn->out[k].name,
               (long long)e, got, r, err, tol);
        fails++;
        break;
      }
      if (err > worst) worst = err;
    }
    free(ref[k]);
  }
  if (max_err_out && worst > *max_err_out) *max_err_out = worst;
  return fails;
}

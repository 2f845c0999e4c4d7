/* test_exactsum.c: the order-free segment sum of core/segops_exactsum.h, bit for bit on the CPU:
 *   (a) order: the same bits for any order of the terms, any partition of them into blocks and any
 *       order of combining the blocks (and of pass 1's partial records);
 *   (b) precision: against the exact sum (a big integer), the error is within the header's bound
 *       n * 2^(E-F-1) + half an ulp, and within proto/API.md's Tolerances on conformance-style
 *       inputs (uniform in [-1, 1], the layouts of its Exact cases, segments 2^30 and 2^-30 apart): float64's 1e-12
 * with two words, float32's 1e-5 / 1e-4 with one or two; one word misses float64's bound on a valid input; (c) batch
 * invariance: a segment's bits are the same alone and batched with other requests' segments, over an unsorted idx in
 * random visit order; a scale per call (the thing to avoid) is caught by the same comparison. */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "segops_exactsum.h"
#include "test_util.h"

/* ---- The exact reference: a big integer, radix 2^32, bit 0 worth 2^BIG_BASE ---- */

#define BIG_LIMBS 72
#define BIG_BASE (-1140)

typedef struct {
  int64_t l[BIG_LIMBS];
} big;

/* b += sign * x, exactly (x finite). */
static void big_add(big *b, double x, int sign) {
  if (x == 0.0) return;
  int e;
  double m = frexp(x, &e);
  int64_t mi = (int64_t)ldexp(m, 53); /* exact: |mi| < 2^53, x = mi * 2^(e-53) */
  if (mi < 0) {
    mi = -mi;
    sign = -sign;
  }
  int pos = e - 53 - BIG_BASE, limb = pos / 32, off = pos % 32;
  unsigned __int128 v = (unsigned __int128)(uint64_t)mi << off;
  for (int k = 0; k < 3 && v; k++, v >>= 32) b->l[limb + k] += sign * (int64_t)(uint64_t)(v & 0xffffffffu);
}

/* The value of b as a double (to about 2^-64 relative: three limbs from the top). */
static double big_value(const big *b) {
  int64_t d[BIG_LIMBS], carry = 0;
  for (int i = 0; i < BIG_LIMBS; i++) {
    int64_t v = b->l[i] + carry;
    carry = v >> 32; /* floor division: the digit stays in [0, 2^32) */
    d[i] = v - carry * ((int64_t)1 << 32);
  }
  double sign = 1.0;
  if (carry < 0) { /* negative: the magnitude is the two's complement of the digits */
    sign = -1.0;
    int64_t c = 1;
    for (int i = 0; i < BIG_LIMBS; i++) {
      int64_t v = (0xffffffff - d[i]) + c;
      c = v >> 32;
      d[i] = v & 0xffffffff;
    }
  }
  int top = BIG_LIMBS - 1;
  while (top > 0 && d[top] == 0) top--;
  double v = 0.0;
  for (int i = top; i >= 0 && i >= top - 2; i--) v += ldexp((double)d[i], 32 * i + BIG_BASE);
  return sign * v;
}

/* ---- The model over one segment's terms ---- */

typedef struct {
  segops_xsum_bound bound;
  segops_xsum_scale scale;
  segops_xsum_acc acc;
  double value; /* the result in the output type (a float result is stored widened) */
} seg_result;

/* The segment's sum with its terms visited in order perm[0..n) (NULL: in order), cut into blocks
 * of random sizes, each block's partial record and partial sum combined into the segment's in the
 * a random order (blocks NULL: one block). */
static seg_result model(const double *x, int64_t n, int words, int as_float, const int64_t *perm, tu_rng *blocks) {
  enum { MAXB = 4096 };
  static int64_t cut[MAXB + 1], order[MAXB];
  int nb = 0;
  cut[0] = 0;
  while (cut[nb] < n && nb < MAXB - 1) {
    int64_t len = blocks ? 1 + tu_below(blocks, 96) : n;
    cut[nb + 1] = cut[nb] + len < n ? cut[nb] + len : n;
    nb++;
  }
  if (cut[nb] < n) cut[++nb] = n; /* the block budget spent: the last block takes the rest */
  for (int k = 0; k < nb; k++) order[k] = k;
  if (blocks)
    for (int k = nb - 1; k > 0; k--) {
      int64_t j = tu_below(blocks, k + 1), t = order[k];
      order[k] = order[j];
      order[j] = t;
    }
  seg_result r;
  r.bound = segops_xsum_bound_empty();
  for (int k = 0; k < nb; k++) { /* pass 1: per block, merged in the blocks' order */
    segops_xsum_bound part = segops_xsum_bound_empty();
    for (int64_t p = cut[order[k]]; p < cut[order[k] + 1]; p++) segops_xsum_bound_add(&part, x[perm ? perm[p] : p]);
    segops_xsum_bound_merge(&r.bound, &part);
  }
  r.scale = segops_xsum_scale_of(&r.bound, words);
  r.acc = segops_xsum_zero();
  for (int k = 0; k < nb; k++) { /* pass 2: per block, combined in the blocks' order */
    segops_xsum_acc part = segops_xsum_zero();
    for (int64_t p = cut[order[k]]; p < cut[order[k] + 1]; p++)
      segops_xsum_add(&part, segops_xsum_term(x[perm ? perm[p] : p], r.scale), words);
    segops_xsum_add(&r.acc, part, words);
  }
  r.value = as_float ? (double)segops_xsum_result_f(&r.acc, &r.bound, r.scale)
                     : segops_xsum_result(&r.acc, &r.bound, r.scale);
  return r;
}

static int same_bits(const seg_result *a, const seg_result *b, int words, int as_float) {
  if (a->acc.w[0] != b->acc.w[0] || (words > 1 && a->acc.w[1] != b->acc.w[1])) return 0;
  if (as_float) {
    float fa = (float)a->value, fb = (float)b->value;
    return memcmp(&fa, &fb, sizeof fa) == 0;
  }
  return memcmp(&a->value, &b->value, sizeof a->value) == 0;
}

/* ---- (a) and (b) over one segment ---- */

typedef struct {
  const char *name;
  int words, as_float, spec; /* spec: the tolerance is asserted (else reported) */
  double worst;              /* largest error relative to max(|exact|, 1) seen */
  double worst_ratio;        /* largest error / the header's bound */
} config;

static void check_segment(config *c, const double *x, int64_t n, tu_rng *rng, int assert_tol, const char *what) {
  seg_result base = model(x, n, c->words, c->as_float, NULL, NULL);
  /* (a): random permutations and partitions, blocks combined in random order */
  int64_t *perm = malloc((size_t)(n ? n : 1) * sizeof *perm);
  for (int trial = 0; trial < (n > 20000 ? 3 : 12); trial++) {
    for (int64_t i = 0; i < n; i++) perm[i] = i;
    for (int64_t i = n - 1; i > 0; i--) {
      int64_t j = tu_below(rng, i + 1), t = perm[i];
      perm[i] = perm[j];
      perm[j] = t;
    }
    seg_result r = model(x, n, c->words, c->as_float, perm, rng);
    TU_CHECK(same_bits(&base, &r, c->words, c->as_float), "%s %s n=%lld: order changed the bits (%.17g vs %.17g)",
             c->name, what, (long long)n, base.value, r.value);
  }
  free(perm);
  /* (b): against the exact sum */
  int finite = 1;
  for (int64_t i = 0; i < n; i++) finite &= isfinite(x[i]) != 0;
  if (!finite || !isfinite(base.value)) return;
  big ex, diff;
  memset(&ex, 0, sizeof ex);
  for (int64_t i = 0; i < n; i++) big_add(&ex, x[i], 1);
  diff = ex;
  big_add(&diff, base.value, -1);
  double exact = big_value(&ex), err = fabs(big_value(&diff));
  double half_ulp = c->as_float
                        ? 0.5 * (double)(nextafterf((float)fabs(base.value), INFINITY) - (float)fabs(base.value))
                        : 0.5 * (nextafter(fabs(base.value), INFINITY) - fabs(base.value));
  double bound = (base.bound.emax == SEGOPS_XSUM_EMAX_NONE ? 0.0 : ldexp((double)n, -base.scale.shift - 1)) + half_ulp;
  TU_CHECK(err <= bound * (1 + 1e-9), "%s %s n=%lld: error %.3g beyond the bound %.3g", c->name, what, (long long)n,
           err, bound);
  if (bound > 0 && err / bound > c->worst_ratio) c->worst_ratio = err / bound;
  double rel = err / fmax(fabs(exact), 1.0);
  if (assert_tol) {
    if (rel > c->worst) c->worst = rel;
    double tol = !c->as_float ? 1e-12 : n <= 10000 ? 1e-5 : 1e-4;
    if (c->spec)
      TU_CHECK(rel <= tol, "%s %s n=%lld: relative error %.3g beyond the tolerance %.0e", c->name, what, (long long)n,
               rel, tol);
  }
}

/* Conformance-style values: uniform in [-1, 1], rounded to the dtype, scaled by `scale`. */
static void fill(double *x, int64_t n, int as_float, double scale, tu_rng *rng) {
  for (int64_t i = 0; i < n; i++) {
    double v = tu_uniform(rng, -1.0, 1.0) * scale;
    x[i] = as_float ? (double)(float)v : v;
  }
}

/* The layouts of proto/API.md's Exact cases as segment lengths, each segment 2^30, 1 or 2^-30 in magnitude by turn,
 * plus one segment past 10^4 elements. */
static void layouts(config *c, tu_rng *rng) {
  static const int64_t golden[] = {500, 1, 3, 200, 2, 1, 50, 1, 1, 100};
  static const int64_t single[] = {10000, 8500, 10240, 1 << 17, 0};
  double *x = malloc(sizeof(double) << 17);
  int seg = 0;
  for (int k = 0; k < 10; k++, seg++) {
    fill(x, golden[k], c->as_float, ldexp(1.0, 30 * (seg % 3 - 1)), rng);
    check_segment(c, x, golden[k], rng, 1, "golden");
  }
  for (int k = 0; k < 12; k++, seg++) { /* uniform N = 1200, S = 12 */
    fill(x, 100, c->as_float, ldexp(1.0, 30 * (seg % 3 - 1)), rng);
    check_segment(c, x, 100, rng, 1, "uniform");
  }
  for (int k = 0; k < 5; k++, seg++) {
    fill(x, single[k], c->as_float, ldexp(1.0, 30 * (seg % 3 - 1)), rng);
    check_segment(c, x, single[k], rng, 1, single[k] ? "one segment" : "empty");
  }
  static const int64_t ns[][2] = {{12, 4}, {64, 8}, {100, 5}, {24, 24}};
  for (int k = 0; k < 4; k++)
    for (int64_t s = 0; s < ns[k][1]; s++, seg++) {
      int64_t len = ns[k][0] / ns[k][1];
      fill(x, len, c->as_float, ldexp(1.0, 30 * (seg % 3 - 1)), rng);
      check_segment(c, x, len, rng, 1, "(N,S)");
    }
  /* Cancellation: pairs x, -x and one small term: the exact sum is the small term. */
  fill(x, 500, c->as_float, 1.0, rng);
  for (int i = 0; i < 500; i++) x[500 + i] = -x[i];
  x[1000] = c->as_float ? 0x1p-20 : 1e-20;
  check_segment(c, x, 1001, rng, 1, "cancellation");
  /* Subnormals and zeros. */
  for (int i = 0; i < 64; i++) x[i] = (i % 3 ? 1 : -1) * ldexp((double)(i + 1), c->as_float ? -149 : -1074);
  for (int i = 64; i < 80; i++) x[i] = (i % 2) ? 0.0 : -0.0;
  check_segment(c, x, 80, rng, 1, "subnormal");
  /* Beyond what the tolerance can hold: 1e308 - 1e308 + 1 (the 1 is far below the segment's quantum),
   * checked against the header's bound only. */
  x[0] = c->as_float ? 3e38 : 1e308;
  x[1] = -x[0];
  x[2] = 1.0;
  check_segment(c, x, 3, rng, 0, "huge cancellation");
  free(x);
}

/* Exact zeros, non-finite terms, overflow. */
static void edges(void) {
  const int words[] = {1, 2};
  for (int k = 0; k < 2; k++) {
    int w = words[k];
    seg_result r = model(NULL, 0, w, 0, NULL, NULL);
    uint64_t bits;
    memcpy(&bits, &r.value, sizeof bits);
    TU_CHECK(bits == 0, "empty segment: not +0.0 (%.17g)", r.value);
    double z[] = {0.0, -0.0, 0.0};
    r = model(z, 3, w, 0, NULL, NULL);
    memcpy(&bits, &r.value, sizeof bits);
    TU_CHECK(bits == 0, "zeros: not +0.0 (%.17g)", r.value);
    double a[] = {1.0, NAN, 2.0};
    TU_CHECK(isnan(model(a, 3, w, 0, NULL, NULL).value), "a NaN term: no NaN");
    double b[] = {1.0, INFINITY, -5.0};
    TU_CHECK(model(b, 3, w, 0, NULL, NULL).value == INFINITY, "+Inf term: not +Inf");
    double c[] = {-INFINITY, 1.0};
    TU_CHECK(model(c, 2, w, 1, NULL, NULL).value == -INFINITY, "-Inf term: not -Inf");
    double d[] = {INFINITY, 1.0, -INFINITY};
    TU_CHECK(isnan(model(d, 3, w, 0, NULL, NULL).value), "+Inf and -Inf: not NaN");
    double e[] = {DBL_MAX, DBL_MAX};
    TU_CHECK(model(e, 2, w, 0, NULL, NULL).value == INFINITY, "DBL_MAX + DBL_MAX: not +Inf");
    double f[] = {FLT_MAX, FLT_MAX, -1.0};
    TU_CHECK(model(f, 3, w, 1, NULL, NULL).value == INFINITY, "FLT_MAX + FLT_MAX in float: not +Inf");
    double g[] = {DBL_MAX, -DBL_MAX, DBL_MAX};
    TU_CHECK(model(g, 3, w, 0, NULL, NULL).value == DBL_MAX, "DBL_MAX - DBL_MAX + DBL_MAX: not DBL_MAX");
  }
}

/* One word cannot meet float64's bound: 10^4 terms of 0.49 quantum beside a term of 1 each round
 * to 0 (the error 4900 quanta, ~3.5e-11 against 1e-12); two words hold it on the same input. */
static void one_word_misses_float64(void) {
  enum { N = 10000 };
  double *x = malloc(N * sizeof *x);
  x[0] = 1.0;
  segops_xsum_bound b = segops_xsum_bound_empty();
  for (int i = 0; i < N; i++) segops_xsum_bound_add(&b, 1.0);
  double q = ldexp(1.0, -segops_xsum_scale_of(&b, 1).shift);
  for (int i = 1; i < N; i++) x[i] = 0.49 * q;
  big ex;
  memset(&ex, 0, sizeof ex);
  for (int i = 0; i < N; i++) big_add(&ex, x[i], 1);
  double exact = big_value(&ex);
  double e1 = fabs(model(x, N, 1, 0, NULL, NULL).value - exact) / fmax(fabs(exact), 1.0);
  double e2 = fabs(model(x, N, 2, 0, NULL, NULL).value - exact) / fmax(fabs(exact), 1.0);
  TU_CHECK(e1 > 1e-12, "one word: error %.3g is within float64's bound on the input built to miss it", e1);
  TU_CHECK(e2 <= 1e-12, "two words: error %.3g beyond float64's bound", e2);
  printf("one word on float64 (10^4 terms of 0.49 quantum): error %.3g, two words %.3g\n", e1, e2);
  free(x);
}

/* ---- (c) Batch invariance over a whole call ---- */

/* The call's segment sums over an unsorted idx, the elements visited in order vis[] (as threads
 * would arrive), pass 1 then pass 2 as a kernel would run them. per_call: one scale for the whole
 * call (emax and count over all its elements), the thing the header's design avoids. */
static void call_sums(const double *x, const int32_t *idx, int64_t n, int64_t s, const int64_t *vis, int words,
                      int per_call, double *out) {
  segops_xsum_bound *b = malloc((size_t)(s ? s : 1) * sizeof *b);
  segops_xsum_acc *a = malloc((size_t)(s ? s : 1) * sizeof *a);
  segops_xsum_bound all = segops_xsum_bound_empty();
  for (int64_t k = 0; k < s; k++) {
    b[k] = segops_xsum_bound_empty();
    a[k] = segops_xsum_zero();
  }
  for (int64_t p = 0; p < n; p++) segops_xsum_bound_add(per_call ? &all : &b[idx[vis[p]]], x[vis[p]]);
  for (int64_t p = 0; p < n; p++) {
    const segops_xsum_bound *sb = per_call ? &all : &b[idx[vis[p]]];
    segops_xsum_add(&a[idx[vis[p]]], segops_xsum_term(x[vis[p]], segops_xsum_scale_of(sb, words)), words);
  }
  for (int64_t k = 0; k < s; k++) {
    const segops_xsum_bound *sb = per_call ? &all : &b[k];
    out[k] = segops_xsum_result(&a[k], sb, segops_xsum_scale_of(sb, words));
  }
  free(b);
  free(a);
}

static void shuffle(int64_t *v, int64_t n, tu_rng *rng) {
  for (int64_t i = 0; i < n; i++) v[i] = i;
  for (int64_t i = n - 1; i > 0; i--) {
    int64_t j = tu_below(rng, i + 1), t = v[i];
    v[i] = v[j];
    v[j] = t;
  }
}

/* Requests A (N=859, the lengths of proto/API.md's layouts, magnitude 1) and B (N=1200, S=12, magnitude 2^30, plus a
 * segment of 2^-30), alone and batched (B's segments after A's), each in random visit order. */
static int batch_case(int words, int per_call, tu_rng *rng) {
  static const int64_t la[] = {500, 1, 3, 200, 2, 1, 50, 1, 1, 100};
  int64_t lb[13];
  for (int k = 0; k < 12; k++) lb[k] = 100;
  lb[12] = 7;
  tu_layout A = tu_layout_from_lengths("A", la, 10, rng), B = tu_layout_from_lengths("B", lb, 13, rng);
  int64_t n = A.n + B.n, s = A.s + B.s;
  double *x = malloc((size_t)n * sizeof *x), *alone = malloc((size_t)s * sizeof *alone),
         *batched = malloc((size_t)s * sizeof *batched);
  int32_t *idx = malloc((size_t)n * sizeof *idx);
  int64_t *vis = malloc((size_t)n * sizeof *vis);
  fill(x, A.n, 0, 1.0, rng);
  for (int64_t i = 0; i < B.n; i++) x[A.n + i] = tu_uniform(rng, -1, 1) * (B.idx[i] == 12 ? 0x1p-30 : 0x1p30);
  for (int64_t i = 0; i < A.n; i++) idx[i] = A.idx[i];
  for (int64_t i = 0; i < B.n; i++) idx[A.n + i] = (int32_t)(B.idx[i] + A.s);
  shuffle(vis, A.n, rng);
  call_sums(x, A.idx, A.n, A.s, vis, words, per_call, alone);
  shuffle(vis, B.n, rng);
  call_sums(x + A.n, B.idx, B.n, B.s, vis, words, per_call, alone + A.s);
  shuffle(vis, n, rng);
  call_sums(x, idx, n, s, vis, words, per_call, batched);
  int differ = 0;
  for (int64_t k = 0; k < s; k++) differ += memcmp(&alone[k], &batched[k], sizeof alone[k]) != 0;
  free(x);
  free(alone);
  free(batched);
  free(idx);
  free(vis);
  tu_layout_free(&A);
  tu_layout_free(&B);
  return differ;
}

int main(void) {
  tu_rng rng = {0x5e6e0b5u};
  config cfg[] = {
      {"float64, two words", 2, 0, 1, 0, 0},
      {"float32, one word", 1, 1, 1, 0, 0},
      {"float32, two words", 2, 1, 1, 0, 0},
      {"float64, one word (not for float64: reported)", 1, 0, 0, 0, 0},
  };
  for (size_t k = 0; k < sizeof cfg / sizeof cfg[0]; k++) {
    layouts(&cfg[k], &rng);
    printf("%-46s worst relative error %.3g (tolerance %s), worst error / bound %.3f\n", cfg[k].name, cfg[k].worst,
           cfg[k].as_float ? "1e-5, 1e-4 past 10^4" : "1e-12", cfg[k].worst_ratio);
  }
  edges();
  one_word_misses_float64();
  for (int words = 1; words <= 2; words++)
    for (int rep = 0; rep < 4; rep++) {
      int d = batch_case(words, 0, &rng);
      TU_CHECK(d == 0, "%d word(s): %d segment(s) changed bits when batched", words, d);
    }
  int control = batch_case(1, 1, &rng);
  TU_CHECK(control > 0, "a scale per call went unnoticed by the batch comparison");
  printf("batch invariance: per-segment scale 0 segments differ; a per-call scale (control) changes %d of 23\n",
         control);
  return tu_summary("test_exactsum");
}

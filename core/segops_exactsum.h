/* segops_exactsum.h: an order-free segment sum: the model, in plain C, of how an unsorted scatter can
 * accumulate with atomics and still give the same bits on every run and in every batch. Compiled by
 * the C compiler (static inline) and by nvcc (__host__ __device__), like segops_rowmath.h; the CPU
 * model and its CTest (tests/core/test_exactsum.c) fix the bits a kernel must reproduce.
 *
 * Why: a float sum depends on the order of its additions, and atomics add in the order threads
 * arrive. Integer addition does not depend on order (it is associative and commutative, even when
 * it wraps modulo 2^64), so each term is rounded once to a fixed-point integer, the integers are
 * added in any order and by any partition into blocks, and the exact integer total is converted
 * back to float once. Integer atomics keep STYLE's purpose (the same bits on every run, alone or
 * batched) but not its letter (one writer per output): many threads write one accumulator, and
 * the result does not depend on which wrote first.
 *
 * Two passes over a segment's terms, both order-free:
 *   1. bound  per segment: the count of terms, the largest binary exponent E of a finite nonzero
 *             term (frexp's: |x| < 2^E), and flags for NaN, +Inf and -Inf (atomicAdd, atomicMax,
 *             atomicOr on a GPU);
 *   2. add    each term x becomes round_to_nearest_even(x * 2^k), a signed integer of `words`
 *             64-bit words in two's complement, with k = F - E and F = 64 * words - 2 -
 *             ceil(log2(count)) fraction bits: every term is at most 2^F in magnitude, so the
 *             exact total fits (|total| <= count * 2^F <= 2^(64 words - 2)); the integers add
 *             with a carry from the low word into the high one (on a GPU: atomicAdd on the low
 *             word, the carry read from the value it returns, atomicAdd on the high word).
 * Then result = total * 2^-k, rounded once to the output's float type (round to nearest even),
 * or NaN / +-Inf by the flags (NaN when a NaN or both infinities were added).
 *
 * Every floating-point step (frexp, ldexp, rint, the split into words, the final conversion) is exact
 * or one correctly rounded operation, so the CPU and a GPU (fused multiply-add or not) give the same
 * bits.
 *
 * The scale depends on the segment alone (its count and largest term), never on the call or on a
 * block: a segment's bits are the same whatever else is batched with it (batch invariance), and
 * whatever the order and partition of its terms (determinism).
 *
 * Precision guaranteed, n = count, M = max |x| over the segment's terms: each term is rounded by
 * at most half a quantum 2^(E-F), and 2^E <= 2M, so
 *   |result - exact sum| <= n * 2^(E-F-1) + half an ulp of result < n^2 * M * 2^(2 - 64 words)
 *                           + half an ulp of result
 * (ulp of the output type; in the subnormal range the final scaling may round a second time).
 *   words = 2 (128-bit): n^2 M 2^-126: at n <= 2^31, <= 2^-64 M. This meets float64's bound
 *           (1e-12 relative to max(|ref|, 1), proto/API.md, Tolerances) whenever M <= 1.8e7 max(|ref|, 1), i.e.
 *           unless the segment cancels to less than 1/18,000,000 of its largest term; float64
 *           summation in any fixed order is only bounded by (n-1) 2^-53 sum|x| <= n^2 M 2^-53,
 *           2^73 times looser. For float64 and float32.
 *   words = 1 (64-bit):  n^2 M 2^-62 (n <= 2^32). Serves float32 only: for n <= 10^4 it is
 *           below 2.2e-11 M, within float32's 1e-5 whenever M <= 4.5e5 max(|ref|, 1); it cannot
 *           meet float64's 1e-12 (test_exactsum shows a segment of 10^4 terms missing it).
 * The sign of a zero total is +0 (IEEE would give -0 for a sum of -0s); an empty segment or one
 * of zeros gives exact +0; a total beyond the float range gives +-Inf. */
#ifndef SEGOPS_EXACTSUM_H
#define SEGOPS_EXACTSUM_H

#include <math.h>
#include <stdint.h>

#ifdef __CUDACC__
#define SEGOPS_XS_HD __host__ __device__ static inline
#else
#define SEGOPS_XS_HD static inline
#endif

#define SEGOPS_XSUM_NAN 1u     /* a NaN was added */
#define SEGOPS_XSUM_POS_INF 2u /* +Inf was added */
#define SEGOPS_XSUM_NEG_INF 4u /* -Inf was added */
/* emax of a segment without a finite nonzero term: below every double's exponent (-1073). */
#define SEGOPS_XSUM_EMAX_NONE (-2000)

/* Pass 1's per-segment record. On a GPU: three words updated with atomicAdd, atomicMax, atomicOr. */
typedef struct {
  uint64_t count; /* terms added, finite or not */
  int32_t emax;   /* largest frexp exponent of a finite nonzero term, or SEGOPS_XSUM_EMAX_NONE */
  uint32_t flags; /* SEGOPS_XSUM_NAN | _POS_INF | _NEG_INF */
} segops_xsum_bound;

/* A fixed-point integer of 1 or 2 words, two's complement, w[0] the low word. With one word, w[1]
 * is not used. */
typedef struct {
  uint64_t w[2];
} segops_xsum_acc;

/* Pass 2's per-segment scale: terms are x * 2^shift, `words` words wide. */
typedef struct {
  int shift;
  int words;
} segops_xsum_scale;

SEGOPS_XS_HD segops_xsum_bound segops_xsum_bound_empty(void) {
  segops_xsum_bound b = {0, SEGOPS_XSUM_EMAX_NONE, 0u};
  return b;
}

/* Pass 1: one term. */
SEGOPS_XS_HD void segops_xsum_bound_add(segops_xsum_bound *b, double x) {
  b->count++;
  if (isnan(x)) {
    b->flags |= SEGOPS_XSUM_NAN;
  } else if (isinf(x)) {
    b->flags |= x > 0 ? SEGOPS_XSUM_POS_INF : SEGOPS_XSUM_NEG_INF;
  } else if (x != 0.0) {
    int e;
    (void)frexp(x, &e);
    if (e > b->emax) b->emax = e;
  }
}

/* Pass 1: two partial records of one segment (any order, any partition). */
SEGOPS_XS_HD void segops_xsum_bound_merge(segops_xsum_bound *a, const segops_xsum_bound *b) {
  a->count += b->count;
  if (b->emax > a->emax) a->emax = b->emax;
  a->flags |= b->flags;
}

/* ceil(log2(n)) for n >= 1. */
SEGOPS_XS_HD int segops_xsum_clog2(uint64_t n) {
  int k = 0;
  while (k < 64 && ((uint64_t)1 << k) < n) k++;
  return k;
}

/* The segment's scale, from its bound alone (never from the call or a block). */
SEGOPS_XS_HD segops_xsum_scale segops_xsum_scale_of(const segops_xsum_bound *b, int words) {
  segops_xsum_scale s;
  s.words = words;
  s.shift = b->emax == SEGOPS_XSUM_EMAX_NONE ? 0 : 64 * words - 2 - segops_xsum_clog2(b->count) - b->emax;
  return s;
}

SEGOPS_XS_HD segops_xsum_acc segops_xsum_zero(void) {
  segops_xsum_acc a = {{0u, 0u}};
  return a;
}

/* Pass 2: the fixed-point integer of one term: round_to_nearest_even(x * 2^shift); 0 for a zero
 * or non-finite term (the flags carry those). */
SEGOPS_XS_HD segops_xsum_acc segops_xsum_term(double x, segops_xsum_scale s) {
  segops_xsum_acc t = segops_xsum_zero();
  if (!isfinite(x) || x == 0.0) return t;
  /* |x| < 2^emax, so |x * 2^shift| < 2^F <= 2^126: the scaling is exact (or, scaling down, only
   * loses what rounds to 0 anyway), and rint rounds to an integer of at most 2^F. */
  double r = fabs(rint(ldexp(x, s.shift)));
  double hi = floor(r * 0x1p-64);
  uint64_t whi = (uint64_t)hi, wlo = (uint64_t)(r - hi * 0x1p64); /* both exact: r < 2^127 */
  if (x < 0) {                                                    /* two's complement */
    wlo = ~wlo + 1u;
    whi = ~whi + (wlo == 0u ? 1u : 0u);
  }
  t.w[0] = wlo;
  t.w[1] = whi;
  return t;
}

/* a += t, modulo 2^(64 words): what atomicAdd on the low word then on the high word (with the
 * carry read from the low word's old value) gives, in any order of the additions. */
SEGOPS_XS_HD void segops_xsum_add(segops_xsum_acc *a, segops_xsum_acc t, int words) {
  uint64_t old = a->w[0];
  a->w[0] = old + t.w[0];
  if (words > 1) a->w[1] += t.w[1] + (a->w[0] < old ? 1u : 0u);
}

/* |total| as (hi, lo) and its sign. */
SEGOPS_XS_HD int segops_xsum_magnitude(const segops_xsum_acc *a, int words, uint64_t *hi, uint64_t *lo) {
  uint64_t h = words > 1 ? a->w[1] : 0u, l = a->w[0];
  int neg = words > 1 ? (int)(h >> 63) : (int)(l >> 63);
  if (neg) {
    l = ~l + 1u;
    h = words > 1 ? ~h + (l == 0u ? 1u : 0u) : 0u;
  }
  *hi = h;
  *lo = l;
  return neg;
}

SEGOPS_XS_HD int segops_xsum_clz64(uint64_t v) {
#ifdef __CUDA_ARCH__
  return __clzll((long long)v);
#else
  return v ? __builtin_clzll(v) : 64;
#endif
}

/* The total's top 64 bits with every lower bit folded into bit 0 (sticky), and the power of two
 * they are scaled by: total = m * 2^e up to the sticky bit, so converting m to a float of 53 or 24
 * bits rounds as converting the whole total would (round to nearest even). */
SEGOPS_XS_HD uint64_t segops_xsum_top64(uint64_t hi, uint64_t lo, int *e) {
  if (hi == 0u) {
    *e = 0;
    return lo;
  }
  int n = segops_xsum_clz64(hi);
  uint64_t m = n ? (hi << n) | (lo >> (64 - n)) : hi;
  uint64_t lost = n ? lo << n : lo;
  *e = 64 - n;
  return m | (lost != 0u ? 1u : 0u);
}

/* Non-finite results by the flags: NaN for a NaN or both infinities; 0 when none. */
SEGOPS_XS_HD int segops_xsum_special(const segops_xsum_bound *b, double *v) {
  unsigned f = b->flags;
  if (!f) return 0;
  if ((f & SEGOPS_XSUM_NAN) || ((f & SEGOPS_XSUM_POS_INF) && (f & SEGOPS_XSUM_NEG_INF)))
    *v = NAN;
  else
    *v = (f & SEGOPS_XSUM_POS_INF) ? INFINITY : -INFINITY;
  return 1;
}

/* The segment's sum as a double: the exact total rounded once. */
SEGOPS_XS_HD double segops_xsum_result(const segops_xsum_acc *a, const segops_xsum_bound *b, segops_xsum_scale s) {
  double v;
  if (segops_xsum_special(b, &v)) return v;
  uint64_t hi, lo;
  int neg = segops_xsum_magnitude(a, s.words, &hi, &lo), e;
  uint64_t m = segops_xsum_top64(hi, lo, &e);
  v = ldexp((double)m, e - s.shift);
  return neg ? -v : v;
}

/* The segment's sum as a float: the exact total rounded once (not through a double). */
SEGOPS_XS_HD float segops_xsum_result_f(const segops_xsum_acc *a, const segops_xsum_bound *b, segops_xsum_scale s) {
  double d;
  if (segops_xsum_special(b, &d)) return (float)d;
  uint64_t hi, lo;
  int neg = segops_xsum_magnitude(a, s.words, &hi, &lo), e;
  uint64_t m = segops_xsum_top64(hi, lo, &e);
  float v = ldexpf((float)m, e - s.shift);
  return neg ? -v : v;
}

#endif

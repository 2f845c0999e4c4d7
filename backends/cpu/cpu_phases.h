/* cpu_phases.h: the one per-segment body of the CPU backend and its three drivers (walk, reduce,
 * elems: see cpu_internal.h), written once for every function. A function is its hooks and its
 * reducer (segops_rowmath.h's phase names), passed as constants to these always-inline drivers,
 * so each function's tasks compile to straight loops; a hook a function lacks is NULL and its
 * phase vanishes. The drivers start and combine accumulators only through the reducer, so a
 * reduction other than a sum (tests/core/test_reducer_max.c) runs through them unchanged.
 * Included by cpu_ops_table.h (and by that test). */
#ifndef SEGOPS_CPU_PHASES_H
#define SEGOPS_CPU_PHASES_H

#include <stdlib.h>
#include <string.h>
#ifdef __AVX__
#include <immintrin.h>
#elif defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "cpu_internal.h"
#include "segops_rowmath.h"

#define SEGOPS_CPU_INLINE static inline __attribute__((always_inline))
/* Per-segment storage on the stack, sized from the op table (ops.h): the most accumulators and
 * segment values of any ops.def row (at least one, so no array is empty), and the values of the
 * segment rows a gather reads (row hooks): at most every input of a function (SEGOPS_MAX_INPUTS)
 * with a row of the widest segment shape, (S,3,3)'s 9 (SEGOPS_SEG_ROW_MAX, ops.h). */
#define SEGOPS_CPU_MAX_ACC (SEGOPS_FN_MAX_ACC > 0 ? SEGOPS_FN_MAX_ACC : 1)
#define SEGOPS_CPU_MAX_SEGVAL (SEGOPS_FN_MAX_SEGVAL > 0 ? SEGOPS_FN_MAX_SEGVAL : 1)
#define SEGOPS_CPU_MAX_ROW (SEGOPS_MAX_INPUTS * SEGOPS_SEG_ROW_MAX)

/* Four doubles in a vector register (GCC/clang vector extension): one per lane, or one per
 * component of a width-3 row. Plain C arithmetic on them is the same IEEE operation per element
 * as on a double; the target decides whether that is one AVX instruction or two SSE2 ones. */
typedef double segops_v4d __attribute__((vector_size(32)));
#if defined(__clang__) || __GNUC__ >= 12
#define SEGOPS_CPU_SHUF(a, b, i, j, k, l) __builtin_shufflevector(a, b, i, j, k, l)
#else
typedef long long segops_v4i __attribute__((vector_size(32)));
#define SEGOPS_CPU_SHUF(a, b, i, j, k, l) __builtin_shuffle(a, b, (segops_v4i){i, j, k, l})
#endif

/* Lanes [0, m) of v as they are, the others +0.0: a segment's last group of four adds +0.0 in
 * the lanes past its end instead of branching on how many elements are left. Adding +0.0 leaves
 * an accumulator's bits as they were: x + 0 is x for every x but -0.0, and an accumulator never
 * is -0.0 (it starts at +0.0, and a sum is -0.0 only when both terms are). */
typedef long long segops_v4l __attribute__((vector_size(32)));
SEGOPS_CPU_INLINE void segops_cpu_keep(segops_v4d *v, int m) {
  const segops_v4l lane = {0, 1, 2, 3}, keep = lane < (segops_v4l){m, m, m, m};
  *v = (segops_v4d)((segops_v4l)*v & keep);
}

/* Four rows of width 3 as loaded, F = {r0.0 r0.1 r0.2 r1.0 | r1.1 r1.2 r2.0 r2.1 | r2.2 r3.0 r3.1 r3.2},
 * to one vector per component, C[c] = {r0.c r1.c r2.c r3.c}, and back: moves only, six
 * shuffles each way. */
SEGOPS_CPU_INLINE void segops_cpu_rows_to_cols(const segops_v4d *F, segops_v4d *C) {
  const segops_v4d t0 = SEGOPS_CPU_SHUF(F[0], F[1], 0, 1, 6, 7), t1 = SEGOPS_CPU_SHUF(F[0], F[2], 2, 3, 4, 5),
                   t2 = SEGOPS_CPU_SHUF(F[1], F[2], 0, 1, 6, 7);
  C[0] = SEGOPS_CPU_SHUF(t0, t1, 0, 5, 2, 7);
  C[1] = SEGOPS_CPU_SHUF(t0, t2, 1, 4, 3, 6);
  C[2] = SEGOPS_CPU_SHUF(t1, t2, 0, 5, 2, 7);
}
SEGOPS_CPU_INLINE void segops_cpu_cols_to_rows(const segops_v4d *C, segops_v4d *F) {
  const segops_v4d t0 = SEGOPS_CPU_SHUF(C[0], C[1], 0, 4, 2, 6), t1 = SEGOPS_CPU_SHUF(C[2], C[0], 0, 5, 2, 7),
                   t2 = SEGOPS_CPU_SHUF(C[1], C[2], 1, 5, 3, 7);
  F[0] = SEGOPS_CPU_SHUF(t0, t1, 0, 1, 4, 5);
  F[1] = SEGOPS_CPU_SHUF(t2, t0, 0, 1, 6, 7);
  F[2] = SEGOPS_CPU_SHUF(t1, t2, 2, 3, 6, 7);
}

/* Hooks. w is the row width: the constant 1 or 3 in the constant-width instantiations of the
 * drivers, the call's prod(F) in the general one (see segops_cpu_general below).
 *   row     loads what gather reads of segment s (y[s], g_out[s], m[s], g_out[s] / c_s, ...)
 *           into r; cnt = c_s where the plan has counts
 *   visit   adds element i's terms to acc
 *   visit4  adds the terms of elements i .. i+m-1 as visits would (element i+q to lane q), with
 *           the accumulators in vectors A laid out as the hooks' acc_layout says, so that the
 *           loads and the four lanes' arithmetic go into vector registers. m < 4 only for a
 *           segment's last elements: rows up to i+3 are still read (they exist), and the lanes
 *           from m on add +0.0 (segops_cpu_keep), which leaves every accumulator as it was
 *   finish  writes segment s's requested outputs from acc and cnt; fills sv for post
 *   post    writes the outputs of elements [i, j) (all of one segment) from its values sv
 *   gather  writes the outputs of elements [i, j) (all of one segment) from their inputs and r
 * post and gather take a range so their loops hoist the per-call checks and vectorise. */
typedef void (*segops_cpu_row_fn)(const segops_cpu_job *J, int64_t s, int64_t cnt, double *r, int64_t w);
typedef void (*segops_cpu_visit_fn)(const segops_cpu_job *J, int64_t i, double *acc, int64_t w);
typedef void (*segops_cpu_visit4_fn)(const segops_cpu_job *J, int64_t i, segops_v4d *A, int m, int64_t w);
typedef void (*segops_cpu_finish_fn)(const segops_cpu_job *J, int64_t s, int64_t cnt, const double *acc, double *sv,
                                     int64_t w);
typedef void (*segops_cpu_post_fn)(const segops_cpu_job *J, int64_t i, int64_t j, const double *sv, int64_t w);
typedef void (*segops_cpu_gather_fn)(const segops_cpu_job *J, int64_t i, int64_t j, const double *r, int64_t w);
/* fast: all of segment s (sorted idx, from element i, heap as segops_cpu_segment's) by a faster
 * route, or nothing: returns the segment's end j, or -1 where that route declines the segment (then
 * the body of phases above runs it, from its reduction on). */
typedef int64_t (*segops_cpu_fast_fn)(const segops_cpu_job *J, int64_t s, int64_t i, int64_t w, double *heap);

/* The reducer (segops_rowmath.h): accumulators start at identity; two partial accumulations of a
 * segment combine with combine. visit and visit4 add elements with the function's own arithmetic;
 * visit4 (vectors, lanes past a segment's end kept at +0.0) suits only a reducer whose identity
 * is +0.0 and whose combine adds, or an arg reducer's, whose visit4 keeps the lanes past the end
 * as they were (max, min): a function with another leaves visit4 NULL.
 * An arg reducer (max, min) carries a value with its index: pair is not NULL, the accumulators are
 * pairs (acc[2k] a value, acc[2k+1] the index of the element holding it), identity is the value of
 * an empty pair (its index +inf), and pair(a, b) keeps in a the better of a and b (combine unused). */
typedef struct {
  double identity;
  double (*combine)(double a, double b);
  void (*pair)(double *a, const double *b);
} segops_cpu_reducer;
#define SEGOPS_CPU_SUM ((segops_cpu_reducer){segops_sum_identity(), segops_sum_combine, NULL})
SEGOPS_CPU_INLINE void segops_cpu_argmax_pair(double *a, const double *b) {
  if (segops_arg_beats(a[0], a[1], b[0], b[1], 1)) a[0] = b[0], a[1] = b[1];
}
SEGOPS_CPU_INLINE void segops_cpu_argmin_pair(double *a, const double *b) {
  if (segops_arg_beats(a[0], a[1], b[0], b[1], 0)) a[0] = b[0], a[1] = b[1];
}
#define SEGOPS_CPU_ARGMAX ((segops_cpu_reducer){segops_arg_identity(1), NULL, segops_cpu_argmax_pair})
#define SEGOPS_CPU_ARGMIN ((segops_cpu_reducer){segops_arg_identity(0), NULL, segops_cpu_argmin_pair})

/* How visit4 keeps the accumulators (acc[a] of lane q) in A. */

typedef enum {
  SEGOPS_CPU_ACC_LANES, /* A[a][q]: one vector per accumulator, its lanes side by side */
  SEGOPS_CPU_ACC_FLAT,  /* A[k / 4][k % 4], k = q*w + a: w accumulators, lane by lane (as rows load) */
  SEGOPS_CPU_ACC_ROWS3, /* one lane (every element into lane 0): acc[a] = A[a / 3][a % 3], lane 3 unused */
} segops_cpu_acc_layout;

typedef struct {
  segops_cpu_row_fn row;
  segops_cpu_visit_fn visit;   /* reduce (unsorted idx) */
  segops_cpu_visit4_fn visit4; /* walk (sorted idx) */
  segops_cpu_acc_layout acc_layout;
  segops_cpu_finish_fn finish;
  segops_cpu_post_fn post;
  segops_cpu_gather_fn gather;
  segops_cpu_reducer red;
  segops_cpu_fast_fn fast; /* walk (sorted idx): NULL, or tried first for every segment */
} segops_cpu_hooks;

/* The better of two sets of four pairs, lane by lane, as segops_arg_beats says (b's where b beats
 * a), in the lanes of live: pair values (av, bv) and indices (ai, bi) in vectors; is_max a constant.
 * The one vector form of the arg order: visits (arg_visit4) and the fold below. With a not NaN,
 * "not (b <= a)" (max; "not (b >= a)" for min) is b further or b NaN: b beats a. Else b beats a
 * only when the two tie (equal, or both NaN) and b's index is lower. Five compares, a few masks and
 * two selects: max and min's exact route (unsorted idx, and segments their fast route declines,
 * cpu_ops_arg.h); segops_cpu_best4 below is the fast route's one compare. */
SEGOPS_CPU_INLINE void segops_cpu_pair_best4(segops_v4d *av, segops_v4d *ai, const segops_v4d bv,
                                             const segops_v4d bi, const segops_v4l live, const int is_max) {
  const segops_v4d a = *av;
  const segops_v4l an = (segops_v4l)(a != a), bn = (segops_v4l)(bv != bv);
  const segops_v4l not_behind = is_max ? ~(segops_v4l)(bv <= a) : ~(segops_v4l)(bv >= a);
  const segops_v4l tie = (segops_v4l)(bv == a) | (an & bn);
  const segops_v4l take = live & ((not_behind & ~an) | (tie & (segops_v4l)(bi < *ai)));
  *av = (segops_v4d)((segops_v4l)a ^ (((segops_v4l)a ^ (segops_v4l)bv) & take));
  *ai = (segops_v4d)((segops_v4l)*ai ^ (((segops_v4l)*ai ^ (segops_v4l)bi) & take));
}

/* The value half of the arg order without its ties, four lanes: b where it is strictly further
 * than a (max: b > a), else a; a NaN b leaves a and sets its lane in *nan. With with_index, the
 * index bi goes with b into *ai. Lanes that see their elements in increasing index keep the lowest
 * index of their best value (+0.0 and -0.0 included: neither is further than the other), so this
 * is segops_arg_beats wherever no NaN came (max and min's fast route, cpu_ops_arg.h). */
SEGOPS_CPU_INLINE void segops_cpu_best4(segops_v4d *av, segops_v4d *ai, segops_v4l *nan, const segops_v4d bv,
                                        const segops_v4d bi, const int is_max, const bool with_index) {
  *nan |= (segops_v4l)(bv != bv);
  const segops_v4l take = is_max ? (segops_v4l)(bv > *av) : (segops_v4l)(bv < *av);
  if (with_index) *ai = (segops_v4d)((segops_v4l)*ai ^ (((segops_v4l)*ai ^ (segops_v4l)bi) & take));
#ifdef __AVX__ /* one max (min): b > a ? b : a, a where either is NaN */
  *av = is_max ? (segops_v4d)_mm256_max_pd((__m256d)bv, (__m256d)*av)
               : (segops_v4d)_mm256_min_pd((__m256d)bv, (__m256d)*av);
#else
  *av = (segops_v4d)((segops_v4l)*av ^ (((segops_v4l)*av ^ (segops_v4l)bv) & take));
#endif
}
/* Whether b is strictly further than a (max: b > a); false with a NaN. */
SEGOPS_CPU_INLINE bool segops_cpu_further(double a, double b, const int is_max) { return is_max ? b > a : b < a; }

/* An arg reducer's four lanes (layout SEGOPS_CPU_ACC_LANES: A[2c] the values of column c's pairs,
 * A[2c+1] their indices) folded into one pair per column in the registers: lanes (0 . 1) and
 * (2 . 3), then the two results, as segops_cpu_combine groups them; the order is total, so the pair
 * is the one any grouping gives. acc[2c], acc[2c+1] = column c's pair, for the count/2 columns. */
SEGOPS_CPU_INLINE void segops_cpu_pair_fold4(const segops_cpu_hooks H, const segops_v4d *A, int64_t count,
                                             double *acc) {
  const int is_max = H.red.identity < 0;
  const segops_v4l all = {-1, -1, -1, -1};
  for (int a = 0; a + 1 < count && a + 1 < SEGOPS_CPU_MAX_ACC; a += 2) {
    segops_v4d v = A[a], ix = A[a + 1];
    segops_cpu_pair_best4(&v, &ix, SEGOPS_CPU_SHUF(v, v, 1, 0, 3, 2), SEGOPS_CPU_SHUF(ix, ix, 1, 0, 3, 2), all, is_max);
    segops_cpu_pair_best4(&v, &ix, SEGOPS_CPU_SHUF(v, v, 2, 3, 0, 1), SEGOPS_CPU_SHUF(ix, ix, 2, 3, 0, 1), all, is_max);
    acc[a] = v[0], acc[a + 1] = ix[0];
  }
}

/* acc[0 .. count) = the reducer's identity: the accumulators of a segment before any visit (an arg
 * reducer's: pairs from acc[0], each index +inf). +0.0 (the sum's) is all zero bytes: a memset,
 * which the compiler treats as it treats zero initialisation. */
SEGOPS_CPU_INLINE void segops_cpu_init(const segops_cpu_hooks H, double *acc, int64_t count) {
  if (!H.red.pair && H.red.identity == 0.0 && !__builtin_signbit(H.red.identity)) {
    memset(acc, 0, (size_t)count * sizeof *acc);
    return;
  }
  for (int64_t a = 0; a < count; a++) acc[a] = H.red.pair && (a & 1) ? INFINITY : H.red.identity;
}

/* The general width. The drivers take a heap pointer: NULL in the instantiations for width 1 and
 * 3 (a constant: the code below is the constant-width code, with its per-segment storage on the
 * stack, sized by the op table), else the task's own storage (segops_cpu_heap) of J->n_acc
 * accumulators and J->n_row row values, sized at run time, for any width (w = 10^6 too). At a
 * general width visit4 is not used, and every element of a segment goes into one set of
 * accumulators, in increasing i (a width other than 1 or 3 has independent chains across its
 * columns or within its row dots): the order of a segment's sums still depends only on the
 * segment, sorted or not, whatever the chunks or threads. */
SEGOPS_CPU_INLINE bool segops_cpu_gen(const double *heap) { return heap != NULL; }
/* Where finish puts a segment's values for post: the stack array sv_s at width 1 and 3, the
 * task's heap at a general width (values per column: as many as the row is wide). */
SEGOPS_CPU_INLINE double *segops_cpu_sv(const segops_cpu_job *J, double *heap, double *sv_s) {
  return heap ? heap + J->n_acc + J->n_row : sv_s;
}
/* Storage of a task at a general width, or NULL (then *J->failed is set: the call fails): J->n_acc
 * accumulators, then J->n_row row values, then J->n_segval segment values (segops_cpu_sv). */
static inline double *segops_cpu_heap(const segops_cpu_job *J) {
  double *h = malloc((size_t)(J->n_acc + J->n_row + J->n_segval + 1) * sizeof *h);
  if (!h) __atomic_store_n(J->failed, 1, __ATOMIC_RELAXED);
  return h;
}

/* A segment's visits go round-robin to SEGOPS_CPU_LANES sets of accumulators by position in the
 * segment (element p of the segment into lane p % LANES), combined as (l0 + l1) + (l2 + l3):
 * independent add chains, and an order that depends only on the segment's own elements, the
 * same in walk and reduce. A function whose visit4 keeps SEGOPS_CPU_ACC_ROWS3 (matvec's nine
 * accumulators in float64, three vectors of three: enough chains) uses lane 0 alone, in walk and
 * reduce alike. */
SEGOPS_CPU_INLINE bool segops_cpu_one_lane(const segops_cpu_hooks H, const bool gen) {
  return gen || H.acc_layout == SEGOPS_CPU_ACC_ROWS3;
}
SEGOPS_CPU_INLINE void segops_cpu_combine(const segops_cpu_hooks H, const double *l0, const double *l1,
                                          const double *l2, const double *l3, double *acc) {
  if (H.red.pair) { /* pairs: (l0 . l1) . (l2 . l3) as the sums */
    for (int a = 0; a + 1 < SEGOPS_CPU_MAX_ACC; a += 2) {
      double t[2] = {l2[a], l2[a + 1]};
      acc[a] = l0[a], acc[a + 1] = l0[a + 1];
      H.red.pair(acc + a, l1 + a);
      H.red.pair(t, l3 + a);
      H.red.pair(acc + a, t);
    }
    return;
  }
  for (int a = 0; a < SEGOPS_CPU_MAX_ACC; a++)
    acc[a] = H.red.combine(H.red.combine(l0[a], l1[a]), H.red.combine(l2[a], l3[a]));
}

/* Ids p .. p+3 (they exist) against s: bit k set where idx[p+k] != s. On x86-64 one vector
 * compare and mask (compilers leave the plain loop as a compare, set and shift per id). */
SEGOPS_CPU_INLINE unsigned segops_cpu_diff4(const int32_t *idx, int64_t p, int32_t s) {
#ifdef __SSE2__
  const __m128i eq = _mm_cmpeq_epi32(_mm_loadu_si128((const __m128i *)(const void *)(idx + p)), _mm_set1_epi32(s));
  return ~(unsigned)_mm_movemask_ps(_mm_castsi128_ps(eq)) & 0xFu;
#else
  unsigned diff = 0;
  for (int k = 0; k < 4; k++) diff |= (unsigned)(idx[p + k] != s) << k;
  return diff;
#endif
}

/* The end of segment s from j on (sorted idx): the first index >= j whose id is not s, or n.
 * Compares eight ids at a time (one branch per eight, not per id). */
SEGOPS_CPU_INLINE int64_t segops_cpu_seg_end(const int32_t *idx, int64_t n, int64_t j, int32_t s) {
  for (; j + 8 <= n; j += 8) {
    const unsigned diff = segops_cpu_diff4(idx, j, s) | segops_cpu_diff4(idx, j + 4, s) << 4;
    if (diff) return j + __builtin_ctz(diff);
  }
  while (j < n && idx[j] == s) j++;
  return j;
}

/* Visits elements [p, j) of a segment into its four lane sets, element p + q into lane q % 4 (p is
 * a multiple of four past the segment's start), or all into lane 0 (segops_cpu_one_lane), then
 * combines the lanes into acc. The lane order of segops_cpu_reduce, so the bits are the same
 * sorted or not. tail: the caller knows that at most 3 elements are left (no loop over groups of
 * four). */
SEGOPS_CPU_INLINE void segops_cpu_lanes(const segops_cpu_job *J, const segops_cpu_hooks H, int64_t p, int64_t j,
                                        const int64_t w, const bool tail, double *l0, double *l1, double *l2,
                                        double *l3, double *acc) {
  if (segops_cpu_one_lane(H, false))
    for (; p < j; p++) H.visit(J, p, l0, w);
  for (; !tail && p + SEGOPS_CPU_LANES <= j; p += SEGOPS_CPU_LANES) {
    H.visit(J, p, l0, w);
    H.visit(J, p + 1, l1, w);
    H.visit(J, p + 2, l2, w);
    H.visit(J, p + 3, l3, w);
  }
  if (p < j) H.visit(J, p++, l0, w);
  if (p < j) H.visit(J, p++, l1, w);
  if (p < j) H.visit(J, p, l2, w);
  segops_cpu_combine(H, l0, l1, l2, l3, acc);
}

/* The reduction of a function that reduces in vectors (visit4), sorted idx: segment s starts at
 * element i (idx[i] == s); fills acc and returns the segment's end j, found by the reduction
 * itself. Each group of four compares its four ids with s before it is visited, and the group that
 * holds the end is visited with its lanes past the end kept at +0.0, as a segment's last group
 * always is. One loop and one exit per segment instead of a scan for the end and then a loop to it
 * (two exits that the branch predictor misses for segments of varying length). The groups through
 * visit4, in vectors; then the lanes as arrays, for the last 0-3 elements (visit) and the
 * combination (segops_cpu_lanes). */
SEGOPS_CPU_INLINE int64_t segops_cpu_reduce4(const segops_cpu_job *J, const segops_cpu_hooks H, int32_t s, int64_t i,
                                             const int64_t w, double *acc) {
  segops_v4d A[SEGOPS_CPU_MAX_ACC];
  const double id = H.red.identity;
  for (int a = 0; a < SEGOPS_CPU_MAX_ACC; a++) {
    const double v = H.red.pair && (a & 1) ? INFINITY : id; /* an arg reducer's index: none */
    A[a] = (segops_v4d){v, v, v, v};
  }
  int64_t p = i, j;
  for (;;) {
    if (p + SEGOPS_CPU_LANES > J->n) {            /* the end of idx: the last 0-3 as visits, below */
      j = segops_cpu_seg_end(J->idx, J->n, p, s); /* p may already be past the segment */
      break;
    }
    const unsigned diff = segops_cpu_diff4(J->idx, p, s);
    if (!diff) {
      H.visit4(J, p, A, SEGOPS_CPU_LANES, w);
      p += SEGOPS_CPU_LANES;
      continue;
    }
    j = p + __builtin_ctz(diff);
    H.visit4(J, p, A, (int)(j - p), w); /* 0-3 lanes; with none it adds +0.0 only (no branch) */
    p = j;
    break;
  }
  if (H.red.pair && H.acc_layout == SEGOPS_CPU_ACC_LANES && p == j) { /* pairs, nothing left to visit */
    segops_cpu_pair_fold4(H, A, J->n_acc, acc);
    return j;
  }
  double l[SEGOPS_CPU_LANES][SEGOPS_CPU_MAX_ACC];
  for (int q = 0; q < SEGOPS_CPU_LANES; q++) segops_cpu_init(H, l[q], SEGOPS_CPU_MAX_ACC);
  for (int q = 0; q < SEGOPS_CPU_LANES; q++)
    for (int a = 0; a < SEGOPS_CPU_MAX_ACC; a++) {
      const int64_t k = q * w + a;
      if (H.acc_layout == SEGOPS_CPU_ACC_LANES)
        l[q][a] = A[a][q];
      else if (H.acc_layout == SEGOPS_CPU_ACC_FLAT)
        l[q][a] = a < w ? A[k / 4][k % 4] : id;
      else if (q == 0)
        l[q][a] = A[a / 3][a % 3];
    }
  segops_cpu_lanes(J, H, p, j, w, true, l[0], l[1], l[2], l[3], acc);
  return j;
}

/* The reduction of elements [i, j) one at a time (visit), in four lanes. */
SEGOPS_CPU_INLINE void segops_cpu_reduce1(const segops_cpu_job *J, const segops_cpu_hooks H, int64_t i, int64_t j,
                                          const int64_t w, double *acc) {
  /* Four separate arrays with constant indices: the compiler keeps them in registers. */
  double l0[SEGOPS_CPU_MAX_ACC], l1[SEGOPS_CPU_MAX_ACC], l2[SEGOPS_CPU_MAX_ACC], l3[SEGOPS_CPU_MAX_ACC];
  segops_cpu_init(H, l0, SEGOPS_CPU_MAX_ACC);
  segops_cpu_init(H, l1, SEGOPS_CPU_MAX_ACC);
  segops_cpu_init(H, l2, SEGOPS_CPU_MAX_ACC);
  segops_cpu_init(H, l3, SEGOPS_CPU_MAX_ACC);
  segops_cpu_lanes(J, H, i, j, w, false, l0, l1, l2, l3, acc);
}

/* The per-segment body (sorted idx): segment s starts at element i (idx[i] == s) and holds
 * [i, j); returns j. A function that reduces in vectors finds j in its reduction
 * (segops_cpu_reduce4); the others scan for it first. */
SEGOPS_CPU_INLINE int64_t segops_cpu_segment(const segops_cpu_job *J, const segops_cpu_hooks H, int64_t s, int64_t i,
                                             const int64_t w, double *heap) {
  const bool gen = segops_cpu_gen(heap);
  double acc_s[SEGOPS_CPU_MAX_ACC] = {0}, sv_s[SEGOPS_CPU_MAX_SEGVAL] = {0};
  double *acc = gen ? heap : acc_s, *sv = segops_cpu_sv(J, heap, sv_s);
  const bool reduce = H.finish && J->plan.reduce;
  int64_t j;
  if (reduce && H.visit4 && !gen) {
    j = segops_cpu_reduce4(J, H, (int32_t)s, i, w, acc);
  } else {
    j = segops_cpu_seg_end(J->idx, J->n, i + 1, (int32_t)s);
    if (reduce && H.visit && gen) {
      segops_cpu_init(H, acc, J->n_acc);
      for (int64_t p = i; p < j; p++) H.visit(J, p, acc, w);
    } else if (reduce && H.visit) {
      segops_cpu_reduce1(J, H, i, j, w, acc);
    }
  }
  if (reduce) H.finish(J, s, j - i, acc, sv, w);
  if (H.post && J->plan.post) H.post(J, i, j, sv, w);
  if (H.gather && J->plan.gather) {
    double r_s[SEGOPS_CPU_MAX_ROW];
    double *r = gen ? heap + J->n_acc : r_s;
    if (H.row) H.row(J, s, j - i, r, w);
    H.gather(J, i, j, r, w);
  }
  return j;
}

/* Empty segments [s0, s1): their segment outputs are zeros (finish of nothing). */
SEGOPS_CPU_INLINE void segops_cpu_empty(const segops_cpu_job *J, const segops_cpu_hooks H, int64_t s0, int64_t s1,
                                        const int64_t w, double *heap) {
  if (!H.finish || !J->plan.seg_outs) return;
  const bool gen = segops_cpu_gen(heap);
  for (int64_t s = s0; s < s1; s++) {
    double acc_s[SEGOPS_CPU_MAX_ACC], sv_s[SEGOPS_CPU_MAX_SEGVAL] = {0};
    double *acc = gen ? heap : acc_s, *sv = segops_cpu_sv(J, heap, sv_s);
    segops_cpu_init(H, acc, gen ? J->n_acc : SEGOPS_CPU_MAX_ACC);
    H.finish(J, s, 0, acc, sv, w);
  }
}

/* Sorted idx, chunk c: every segment starting in it, in order, through the one body. */
SEGOPS_CPU_INLINE void segops_cpu_walk(const segops_cpu_job *J, const segops_cpu_hooks H, int64_t c, const int64_t w,
                                       double *heap) {
  const int32_t *idx = J->idx;
  const int64_t n = J->n, last = J->nchunks - 1;
  int64_t i = segops_cpu_seg_start(idx, n, segops_cpu_split(n, J->nchunks, c));
  const int64_t end = c == last ? n : segops_cpu_seg_start(idx, n, segops_cpu_split(n, J->nchunks, c + 1));
  int64_t prev = i == 0 ? -1 : idx[i - 1];
  while (i < end) {
    const int64_t s = idx[i];
    segops_cpu_empty(J, H, prev + 1, s, w, heap);
    int64_t j = H.fast ? H.fast(J, s, i, w, heap) : -1;
    if (j < 0) j = segops_cpu_segment(J, H, s, i, w, heap);
    prev = s;
    i = j;
  }
  if (c == last) segops_cpu_empty(J, H, prev + 1, J->s, w, heap);
}

/* The segment values of segment s for post (elems) to J->segval. An arg reducer's segment values
 * are element indices: in a bucket of cpu_unsorted.c positions in its copy, taken back to the
 * call's through J->orig (+inf, none, stays). */
SEGOPS_CPU_INLINE void segops_cpu_keep_sv(const segops_cpu_job *J, const segops_cpu_hooks H, int64_t s,
                                          const double *sv) {
  double *d = J->segval + s * J->n_segval;
  for (int64_t v = 0; v < J->n_segval; v++)
    d[v] = H.red.pair && J->orig && sv[v] < INFINITY ? (double)J->orig[(int64_t)sv[v]] : sv[v];
}

/* Unsorted idx, chunk c: segments [bounds[c], bounds[c+1]) accumulated over all of idx (or a
 * bucket's elements, cpu_unsorted.c); acc holds SEGOPS_CPU_LANES sets per segment from segment
 * acc_s0 on, filled by position in the segment as the walk does. */
SEGOPS_CPU_INLINE void segops_cpu_reduce(const segops_cpu_job *J, const segops_cpu_hooks H, int64_t c, const int64_t w,
                                         double *heap) {
  const bool gen = segops_cpu_gen(heap);
  const int64_t s0 = J->bounds[c], s1 = J->bounds[c + 1], n = J->n;
  const uint64_t span = (uint64_t)(s1 - s0);
  const int64_t k = J->n_acc, stride = gen ? k : SEGOPS_CPU_LANES * k;
  double *acc = J->acc;
  const int64_t a0 = J->acc_s0;
  int64_t *cnt = J->cnt;
  if (s1 <= s0) return;
  memset(cnt + s0, 0, (size_t)(s1 - s0) * sizeof *cnt);
  if (k) segops_cpu_init(H, acc + (s0 - a0) * stride, (s1 - s0) * stride);
  for (int64_t i = 0; i < n; i++) {
    const int64_t s = J->idx[i];
    if ((uint64_t)(s - s0) >= span) continue;
    const int64_t lane = segops_cpu_one_lane(H, gen) ? (cnt[s]++, 0) : cnt[s]++ % SEGOPS_CPU_LANES;
    if (H.visit) H.visit(J, i, acc + (s - a0) * stride + lane * k, w);
  }
  if (!H.finish || !J->plan.reduce) return;
  for (int64_t s = s0; s < s1; s++) {
    double sv_s[SEGOPS_CPU_MAX_SEGVAL] = {0}, *sv = segops_cpu_sv(J, heap, sv_s);
    if (gen) { /* one set of accumulators, in place */
      H.finish(J, s, cnt[s], acc + (s - a0) * stride, sv, w);
      if (J->n_segval) segops_cpu_keep_sv(J, H, s, sv);
      continue;
    }
    double sum[SEGOPS_CPU_MAX_ACC] = {0}, l[SEGOPS_CPU_LANES][SEGOPS_CPU_MAX_ACC];
    for (int q = 0; q < SEGOPS_CPU_LANES; q++) segops_cpu_init(H, l[q], SEGOPS_CPU_MAX_ACC);
    for (int q = 0; q < SEGOPS_CPU_LANES; q++)
      for (int a = 0; a < k; a++) l[q][a] = acc[(s - a0) * stride + q * k + a];
    segops_cpu_combine(H, l[0], l[1], l[2], l[3], sum);
    H.finish(J, s, cnt[s], sum, sv, w);
    if (J->n_segval) segops_cpu_keep_sv(J, H, s, sv);
  }
}

/* Unsorted idx, chunk c of the elements: post and gather in element order. */
SEGOPS_CPU_INLINE void segops_cpu_elems(const segops_cpu_job *J, const segops_cpu_hooks H, int64_t c, const int64_t w,
                                        double *heap) {
  const int64_t i0 = segops_cpu_split(J->n, J->nchunks, c), i1 = segops_cpu_split(J->n, J->nchunks, c + 1);
  for (int64_t i = i0; i < i1; i++) {
    const int64_t s = J->idx[i];
    if (H.post && J->plan.post) H.post(J, i, i + 1, J->segval + s * J->n_segval, w);
    if (H.gather && J->plan.gather) {
      double r_s[SEGOPS_CPU_MAX_ROW];
      double *r = segops_cpu_gen(heap) ? heap + J->n_acc : r_s;
      if (H.row) H.row(J, s, J->plan.counts ? J->cnt[s] : 0, r, w);
      H.gather(J, i, i + 1, r, w);
    }
  }
}

#endif

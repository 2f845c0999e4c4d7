/* cpu_phases.h: the one per-segment body of the CPU backend and its three drivers (walk, reduce,
 * elems: see cpu_internal.h), written once for every function. A function is its hooks
 * (segops_rowmath.h's phase names), passed as constants to these always-inline drivers, so each
 * function's tasks compile to straight loops; a hook a function lacks is NULL and its phase
 * vanishes. Included once by cpu_ops.c. */
#ifndef SEGOPS_CPU_PHASES_H
#define SEGOPS_CPU_PHASES_H

#include <string.h>

#include "cpu_internal.h"

#define SEGOPS_CPU_INLINE static inline __attribute__((always_inline))
#define SEGOPS_CPU_MAX_ACC 9    /* matvec's 3x3 */
#define SEGOPS_CPU_MAX_SEGVAL 2 /* rms_norm double backward */
#define SEGOPS_CPU_MAX_ROW 18   /* segment rows a gather reads: m[s] and gg_m[s] */

/* Hooks. w is the row width (a constant once inlined).
 *   row     loads what gather reads of segment s (y[s], g_out[s], m[s], g_out[s] / c_s, ...)
 *           into r; cnt = c_s where the plan has counts
 *   visit   adds element i's terms to acc
 *   finish  writes segment s's requested outputs from acc and cnt; fills sv for post
 *   post    writes the outputs of elements [i, j) (all of one segment) from its values sv
 *   gather  writes the outputs of elements [i, j) (all of one segment) from their inputs and r
 * post and gather take a range so their loops hoist the per-call checks and vectorise. */
typedef void (*segops_cpu_row_fn)(const segops_cpu_job *J, int64_t s, int64_t cnt, double *r, int w);
typedef void (*segops_cpu_visit_fn)(const segops_cpu_job *J, int64_t i, double *acc, int w);
typedef void (*segops_cpu_finish_fn)(const segops_cpu_job *J, int64_t s, int64_t cnt, const double *acc, double *sv,
                                     int w);
typedef void (*segops_cpu_post_fn)(const segops_cpu_job *J, int64_t i, int64_t j, const double *sv, int w);
typedef void (*segops_cpu_gather_fn)(const segops_cpu_job *J, int64_t i, int64_t j, const double *r, int w);

typedef struct {
  segops_cpu_row_fn row;
  segops_cpu_visit_fn visit;
  segops_cpu_finish_fn finish;
  segops_cpu_post_fn post;
  segops_cpu_gather_fn gather;
} segops_cpu_hooks;

/* A segment's visits go round-robin to SEGOPS_CPU_LANES sets of accumulators by position in the
 * segment (element p of the segment into lane p % LANES), combined as (l0 + l1) + (l2 + l3):
 * independent add chains, and an order that depends only on the segment's own elements, the
 * same in walk and reduce. Functions with more than SEGOPS_CPU_ONE_LANE_ACC accumulators (matvec's
 * 9) have enough chains: they use lane 0 alone (fewer registers). */
#define SEGOPS_CPU_ONE_LANE_ACC 3
SEGOPS_CPU_INLINE void segops_cpu_combine(const double *l0, const double *l1, const double *l2, const double *l3,
                                          double *acc) {
  for (int a = 0; a < SEGOPS_CPU_MAX_ACC; a++) acc[a] = (l0[a] + l1[a]) + (l2[a] + l3[a]);
}

/* The per-segment body: segment s holds elements [i, j) (consecutive, increasing i). */
SEGOPS_CPU_INLINE void segops_cpu_segment(const segops_cpu_job *J, const segops_cpu_hooks H, int64_t s, int64_t i,
                                          int64_t j, const int w) {
  double acc[SEGOPS_CPU_MAX_ACC] = {0}, sv[SEGOPS_CPU_MAX_SEGVAL] = {0};
  if (H.finish && J->plan.reduce) {
    if (H.visit) {
      /* Four separate arrays with constant indices: the compiler keeps them in registers. */
      double l0[SEGOPS_CPU_MAX_ACC] = {0}, l1[SEGOPS_CPU_MAX_ACC] = {0}, l2[SEGOPS_CPU_MAX_ACC] = {0},
             l3[SEGOPS_CPU_MAX_ACC] = {0};
      int64_t p = i;
      if (J->n_acc > SEGOPS_CPU_ONE_LANE_ACC) /* enough independent chains already: one lane */
        for (; p < j; p++) H.visit(J, p, l0, w);
      for (; p + SEGOPS_CPU_LANES <= j; p += SEGOPS_CPU_LANES) {
        H.visit(J, p, l0, w);
        H.visit(J, p + 1, l1, w);
        H.visit(J, p + 2, l2, w);
        H.visit(J, p + 3, l3, w);
      }
      if (p < j) H.visit(J, p++, l0, w);
      if (p < j) H.visit(J, p++, l1, w);
      if (p < j) H.visit(J, p, l2, w);
      segops_cpu_combine(l0, l1, l2, l3, acc);
    }
    H.finish(J, s, j - i, acc, sv, w);
  }
  if (H.post && J->plan.post) H.post(J, i, j, sv, w);
  if (H.gather && J->plan.gather) {
    double r[SEGOPS_CPU_MAX_ROW];
    if (H.row) H.row(J, s, j - i, r, w);
    H.gather(J, i, j, r, w);
  }
}

/* Empty segments [s0, s1): their segment outputs are zeros (finish of nothing). */
SEGOPS_CPU_INLINE void segops_cpu_empty(const segops_cpu_job *J, const segops_cpu_hooks H, int64_t s0, int64_t s1,
                                        const int w) {
  if (!H.finish || !J->plan.seg_outs) return;
  for (int64_t s = s0; s < s1; s++) segops_cpu_segment(J, H, s, 0, 0, w);
}

/* Sorted idx, chunk c: every segment starting in it, in order, through the one body. */
SEGOPS_CPU_INLINE void segops_cpu_walk(const segops_cpu_job *J, const segops_cpu_hooks H, int64_t c, const int w) {
  const int32_t *idx = J->idx;
  const int64_t n = J->n, last = J->nchunks - 1;
  int64_t i = segops_cpu_seg_start(idx, n, segops_cpu_split(n, J->nchunks, c));
  const int64_t end = c == last ? n : segops_cpu_seg_start(idx, n, segops_cpu_split(n, J->nchunks, c + 1));
  int64_t prev = i == 0 ? -1 : idx[i - 1];
  while (i < end) {
    const int64_t s = idx[i];
    segops_cpu_empty(J, H, prev + 1, s, w);
    int64_t j = i + 1;
    while (j < n && idx[j] == s) j++;
    segops_cpu_segment(J, H, s, i, j, w);
    prev = s;
    i = j;
  }
  if (c == last) segops_cpu_empty(J, H, prev + 1, J->s, w);
}

/* Unsorted idx, chunk c: segments [bounds[c], bounds[c+1]) accumulated over all of idx; acc holds
 * SEGOPS_CPU_LANES sets per segment, filled by position in the segment as the walk does. */
SEGOPS_CPU_INLINE void segops_cpu_reduce(const segops_cpu_job *J, const segops_cpu_hooks H, int64_t c, const int w) {
  const int64_t s0 = J->bounds[c], s1 = J->bounds[c + 1], n = J->n;
  const uint64_t span = (uint64_t)(s1 - s0);
  const int k = J->n_acc, stride = SEGOPS_CPU_LANES * J->n_acc;
  double *acc = J->acc;
  int64_t *cnt = J->cnt;
  if (s1 <= s0) return;
  memset(cnt + s0, 0, (size_t)(s1 - s0) * sizeof *cnt);
  if (k) memset(acc + s0 * stride, 0, (size_t)((s1 - s0) * stride) * sizeof *acc);
  for (int64_t i = 0; i < n; i++) {
    const int64_t s = J->idx[i];
    if ((uint64_t)(s - s0) >= span) continue;
    const int64_t lane = k > SEGOPS_CPU_ONE_LANE_ACC ? (cnt[s]++, 0) : cnt[s]++ % SEGOPS_CPU_LANES;
    if (H.visit) H.visit(J, i, acc + s * stride + lane * k, w);
  }
  if (!H.finish || !J->plan.reduce) return;
  for (int64_t s = s0; s < s1; s++) {
    double sum[SEGOPS_CPU_MAX_ACC] = {0}, sv[SEGOPS_CPU_MAX_SEGVAL] = {0},
           l[SEGOPS_CPU_LANES][SEGOPS_CPU_MAX_ACC] = {0};
    for (int q = 0; q < SEGOPS_CPU_LANES; q++)
      for (int a = 0; a < k; a++) l[q][a] = acc[s * stride + q * k + a];
    segops_cpu_combine(l[0], l[1], l[2], l[3], sum);
    H.finish(J, s, cnt[s], sum, sv, w);
    for (int v = 0; v < J->n_segval; v++) J->segval[s * J->n_segval + v] = sv[v];
  }
}

/* Unsorted idx, chunk c of the elements: post and gather in element order. */
SEGOPS_CPU_INLINE void segops_cpu_elems(const segops_cpu_job *J, const segops_cpu_hooks H, int64_t c, const int w) {
  const int64_t i0 = segops_cpu_split(J->n, J->nchunks, c), i1 = segops_cpu_split(J->n, J->nchunks, c + 1);
  for (int64_t i = i0; i < i1; i++) {
    const int64_t s = J->idx[i];
    if (H.post && J->plan.post) H.post(J, i, i + 1, J->segval + s * J->n_segval, w);
    if (H.gather && J->plan.gather) {
      double r[SEGOPS_CPU_MAX_ROW];
      if (H.row) H.row(J, s, J->plan.counts ? J->cnt[s] : 0, r, w);
      H.gather(J, i, i + 1, r, w);
    }
  }
}

#endif

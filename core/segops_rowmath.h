/* segops_rowmath.h: the per-row math of proto/API.md (Formulas), written once in plain C and compiled by both
 * backends: the C compiler for the CPU backend (static inline) and nvcc for the CUDA kernels
 * (__host__ __device__). Everything is in double; loads, stores and reductions stay with the
 * backend. No templates, no references: plain C. The CUDA kernels call the reducer, rms_norm's
 * finish and backward post and the outer product from here; the few formulas a kernel writes out
 * instead (matvec's mᵀv and m v, rms_norm's double-backward post, the visits' per-component
 * accumulation) say there why: calling these functions compiles to other SASS in those kernels.
 *
 * Phase vocabulary, the same on both backends (names of the functions that implement them):
 *   reducer how a segment's accumulators start (identity) and how two partial accumulations of
 *           one segment combine (combine): the drivers' only arithmetic of their own (lanes,
 *           warps, chunks), so a reduction other than a sum plugs in without touching a driver
 *           (pytorch_scatter's Reducer, CUB's (op, init)); every op reduces by sum but max and
 *           min, whose accumulators are (value, index) pairs (segops_arg_beats)
 *   visit   add one element's terms to its segment's accumulators (acc[]), elements of a
 *           segment in increasing i; the accumulators of a function are listed in ops.h
 *           (segops_fn_desc.n_acc)
 *   finish  turn a segment's accumulators and count into its segment outputs and into the
 *           segment values (segval[], segops_fn_desc.n_segval) that post reads
 *   post    element outputs that read segment values (the row's elem_reads is SEGOPS_READS_NORMS)
 *   gather  element outputs that read only inputs at i and at s = idx[i] (and c_s for COUNTS)
 * A function runs the subset its row (ops.def, ops.h) says it needs. */
#ifndef SEGOPS_ROWMATH_H
#define SEGOPS_ROWMATH_H

#include <math.h>
#include <stdint.h>

#ifdef __CUDACC__
#define SEGOPS_HD __host__ __device__ static inline
#else
#define SEGOPS_HD static inline
#endif

/* ---- The sum reducer (every op's): accumulators start at +0.0 and partials add ---- */

SEGOPS_HD double segops_sum_identity(void) { return 0.0; }
SEGOPS_HD double segops_sum_combine(double a, double b) { return a + b; }

/* ---- The arg reducers of segmented_max and segmented_min ----
 * An accumulator is a pair (value, index): the value of one element of the segment and that
 * element's index, or (the identity) -inf for max, +inf for min, with index +inf (no element).
 * Pair b beats pair a when its value lies further in the reduction's direction, a NaN beyond every
 * number, or when the two tie (==, so +0.0 and -0.0 tie; two NaNs tie) and b's index is lower. That
 * order is total, so keeping the better of two pairs is associative and commutative: any grouping
 * of a segment's elements (lanes, chunks, warps) ends at the same pair, the lowest index among the
 * extrema (proto/API.md, Formulas). */
SEGOPS_HD int segops_arg_beats(double av, double ai, double bv, double bi, int is_max) {
  const int an = av != av, bn = bv != bv;
  if (an || bn) return bn && (!an || bi < ai);
  if (bv == av) return bi < ai;
  return is_max ? bv > av : bv < av;
}
SEGOPS_HD double segops_arg_identity(int is_max) { return is_max ? -INFINITY : INFINITY; }

/* ---- Rows of width 1 or 3 ---- */

/* dot(a, b) over w components (a*b for scalars). */
SEGOPS_HD double segops_dot_w(const double *a, const double *b, int w) {
  double d = a[0] * b[0];
  for (int c = 1; c < w; c++) d += a[c] * b[c];
  return d;
}

/* acc[c] += a[c] for c < w. */
SEGOPS_HD void segops_add_w(double *acc, const double *a, int w) {
  for (int c = 0; c < w; c++) acc[c] += a[c];
}

/* mean of a sum over cnt elements; 0 for an empty segment (proto/API.md, Edge rules: never NaN). */
SEGOPS_HD double segops_mean_of(double sum, int64_t cnt) { return cnt > 0 ? sum / (double)cnt : 0.0; }

/* ---- segmented_rms_norm ---- */

/* r_s = sqrt(sumsq / c_s), 0 where c_s = 0. */
SEGOPS_HD double segops_rms_value(double sumsq, int64_t cnt) { return cnt > 0 ? sqrt(sumsq / (double)cnt) : 0.0; }

/* inv_s = 1 / (c_s * r_s), and 0 where c_s * r_s = 0. */
SEGOPS_HD double segops_rms_inv(double sumsq, int64_t cnt) {
  if (cnt == 0) return 0.0;
  const double cr = (double)cnt * sqrt(sumsq / (double)cnt);
  return cr == 0.0 ? 0.0 : 1.0 / cr;
}

/* Accumulators of rms_norm: acc[0] += |x|^2 (every pass), acc[1] += dot(gg_x, x) (double
 * backward). gg may be NULL (an omitted cotangent). */
SEGOPS_HD void segops_rms_visit(double *acc, const double x[3], const double *gg) {
  acc[0] += x[0] * x[0] + x[1] * x[1] + x[2] * x[2];
  if (gg) acc[1] += gg[0] * x[0] + gg[1] * x[1] + gg[2] * x[2];
}

/* Segment values of the backward: sv[0] = g_out[s] * inv_s (grad_x[i] = sv[0] * x[i]). */
SEGOPS_HD void segops_rms_bwd_finish(double g, double sumsq, int64_t cnt, double sv[1]) {
  sv[0] = g * segops_rms_inv(sumsq, cnt);
}
/* Component c of the backward's grad_x[i] from its segment values and x[i][c]. */
SEGOPS_HD double segops_rms_bwd_post_c(const double sv[1], double x) { return sv[0] * x; }

/* Double backward, from inv_s and q_s = sum dot(gg_x, x): grad_g_out[s] = q_s * inv_s, and the
 * segment values sv[0] = g * inv and sv[1] = g * inv^3 * c_s * q_s, so that
 * grad_x[i] = sv[0] * gg_x[i] - sv[1] * x[i] (segops_rms_dbl_post). */
SEGOPS_HD double segops_rms_dbl_ggo(double inv, double q) { return q * inv; }
SEGOPS_HD void segops_rms_dbl_segvals(double g, double inv, double q, int64_t cnt, double sv[2]) {
  sv[0] = g * inv;
  sv[1] = g * inv * inv * inv * (double)cnt * q;
}
/* All of the double backward's finish from sumsq and q_s. */
SEGOPS_HD void segops_rms_dbl_finish(double g, double sumsq, double q, int64_t cnt, double *ggo, double sv[2]) {
  const double inv = segops_rms_inv(sumsq, cnt);
  *ggo = segops_rms_dbl_ggo(inv, q);
  segops_rms_dbl_segvals(g, inv, q, cnt, sv);
}
/* Component c of the double backward's grad_x[i]: sv[0] * gg_x[i][c] - sv[1] * x[i][c]. */
SEGOPS_HD double segops_rms_dbl_post_c(const double sv[2], double gg, double x) { return sv[0] * gg - sv[1] * x; }
SEGOPS_HD void segops_rms_dbl_post(const double sv[2], const double gg[3], const double x[3], double r[3]) {
  for (int c = 0; c < 3; c++) r[c] = segops_rms_dbl_post_c(sv, gg[c], x[c]);
}

/* ---- segmented_matvec: m is 3x3 row-major, m[j][k] = m[3*j+k] ---- */

/* r = mᵀ v: r[k] = Σ_j m[j][k] v[j] (the forward's transpose convention). */
SEGOPS_HD void segops_mtv(const double m[9], const double v[3], double r[3]) {
  for (int k = 0; k < 3; k++) r[k] = m[k] * v[0] + m[3 + k] * v[1] + m[6 + k] * v[2];
}

/* r = m v: r[j] = Σ_k m[j][k] v[k]. */
SEGOPS_HD void segops_mv(const double m[9], const double v[3], double r[3]) {
  for (int j = 0; j < 3; j++) r[j] = m[3 * j] * v[0] + m[3 * j + 1] * v[1] + m[3 * j + 2] * v[2];
}

/* acc[3*j+k] += a[j] * b[k] (outer(a, b) summed into a 3x3 accumulator). */
SEGOPS_HD void segops_outer_add(double acc[9], const double a[3], const double b[3]) {
  for (int j = 0; j < 3; j++)
    for (int k = 0; k < 3; k++) acc[3 * j + k] += a[j] * b[k];
}

/* Matvec double backward's grad_g_out[i] = mᵀ gg_v[i] + gg_mᵀ v[i]. */
SEGOPS_HD void segops_matvec_dbl_ggo(const double m[9], const double ggv[3], const double ggm[9], const double v[3],
                                     double r[3]) {
  double r2[3];
  segops_mtv(m, ggv, r);
  segops_mtv(ggm, v, r2);
  for (int k = 0; k < 3; k++) r[k] += r2[k];
}

#endif

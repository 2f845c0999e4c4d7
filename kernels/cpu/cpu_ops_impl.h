/* cpu_ops_impl.h: the 18 functions of SPEC §2 as CPU kernels, written once for a float type T.
 * Included by cpu_ops.c with T (float or double) and SFX (f32 or f64) defined.
 * Every value is loaded into double and every accumulation is in double (float32 too); a
 * result is rounded to T once, when stored. Inputs may be unaligned: loads go through memcpy.
 * A NULL input is an omitted cotangent and reads as zeros. A NULL output is not requested. */
#if !defined(T) || !defined(SFX)
#error "define T and SFX before including cpu_ops_impl.h"
#endif

#define CAT_(a, b) a##_##b
#define CAT(a, b) CAT_(a, b)
#define FN(name) CAT(name, SFX)

/* Loads element k of p as double. */
static inline double FN(ld)(const void *p, int64_t k) {
  T v;
  memcpy(&v, (const char *)p + k * (int64_t)sizeof(T), sizeof v);
  return (double)v;
}
/* Same, with NULL (an omitted cotangent) reading as zero. */
static inline double FN(ldz)(const void *p, int64_t k) { return p ? FN(ld)(p, k) : 0.0; }
static inline void FN(st)(void *p, int64_t k, double v) {
  T t = (T)v;
  memcpy((char *)p + k * (int64_t)sizeof(T), &t, sizeof t);
}

#define LD FN(ld)
#define LDZ FN(ldz)
#define ST FN(st)
#define IN(k) (J->c->in[k])
#define OUT(k) (J->c->out[k])
#define SEG_OF(i) ((int64_t)J->c->idx[i])
/* The element at segment-order position p. */
#define ELEM(p) (J->perm ? J->perm[p] : (p))
#define COUNT(s) (J->off[(s) + 1] - J->off[s])
#define INLINE static inline __attribute__((always_inline))
/* Defines kernel `name` for rows of width w (1 or 3). The body gets w as a compile-time constant,
 * so its loops over components unroll; the kernel picks the instance for the call's width. */
#define WIDTH_KERNEL(name, lo, hi)                                                        \
  INLINE void FN(name##_w)(const segops_cpu_job *J, int64_t lo, int64_t hi, const int w); \
  static void FN(name)(const segops_cpu_job *J, int64_t lo, int64_t hi) {                 \
    if (J->w == 3)                                                                        \
      FN(name##_w)(J, lo, hi, 3);                                                         \
    else                                                                                  \
      FN(name##_w)(J, lo, hi, 1);                                                         \
  }                                                                                       \
  INLINE void FN(name##_w)(const segops_cpu_job *J, int64_t lo, int64_t hi, const int w)

/* ---- segmented_sum and segmented_mean ---- */

/* dst[s] = sum of src over segment s (divided by c_s when mean; 0 for an empty segment). */
INLINE void FN(seg_sum)(const segops_cpu_job *J, int64_t s0, int64_t s1, const void *src, void *dst, bool mean,
                        const int w) {
  if (!dst) return;
  for (int64_t s = s0; s < s1; s++) {
    double acc[3] = {0, 0, 0};
    if (src)
      for (int64_t p = J->off[s]; p < J->off[s + 1]; p++) {
        int64_t i = ELEM(p);
        for (int c = 0; c < w; c++) acc[c] += LD(src, i * w + c);
      }
    int64_t cnt = COUNT(s);
    for (int c = 0; c < w; c++) ST(dst, s * w + c, mean && cnt > 0 ? acc[c] / (double)cnt : acc[c]);
  }
}

/* sum forward and double backward have the same shape: out[s] = sum of in[0] (gg_x may be NULL). */
WIDTH_KERNEL(sum_seg, s0, s1) { FN(seg_sum)(J, s0, s1, IN(0), OUT(0), false, w); }
WIDTH_KERNEL(mean_seg, s0, s1) { FN(seg_sum)(J, s0, s1, IN(0), OUT(0), true, w); }

/* grad_x[i] = g_out[s] (sum) or g_out[s] / c_s (mean). */
INLINE void FN(gather)(const segops_cpu_job *J, int64_t i0, int64_t i1, bool mean, const int w) {
  const void *g = IN(0);
  void *gx = OUT(0);
  if (!gx) return;
  for (int64_t i = i0; i < i1; i++) {
    int64_t s = SEG_OF(i);
    double cnt = mean ? (double)COUNT(s) : 1.0; /* >= 1: element i is in segment s */
    for (int c = 0; c < w; c++) ST(gx, i * w + c, mean ? LD(g, s * w + c) / cnt : LD(g, s * w + c));
  }
}
WIDTH_KERNEL(sum_bwd_elem, i0, i1) { FN(gather)(J, i0, i1, false, w); }
WIDTH_KERNEL(mean_bwd_elem, i0, i1) { FN(gather)(J, i0, i1, true, w); }

/* ---- segmented_dot ---- */

/* out[s] = sum_i dot(x[i], y[i]). */
WIDTH_KERNEL(dot_fwd_seg, s0, s1) {
  const void *x = IN(0), *y = IN(1);
  for (int64_t s = s0; s < s1; s++) {
    double acc = 0;
    for (int64_t p = J->off[s]; p < J->off[s + 1]; p++) {
      int64_t i = ELEM(p);
      double d = 0;
      for (int c = 0; c < w; c++) d += LD(x, i * w + c) * LD(y, i * w + c);
      acc += d;
    }
    ST(OUT(0), s, acc);
  }
}

/* backward: grad_x[i] = g_out[s]*y[i]; grad_y[i] = g_out[s]*x[i]. */
WIDTH_KERNEL(dot_bwd_elem, i0, i1) {
  const void *g = IN(0), *x = IN(1), *y = IN(2);
  void *gx = OUT(0), *gy = OUT(1);
  for (int64_t i = i0; i < i1; i++) {
    double gs = LD(g, SEG_OF(i));
    for (int c = 0; c < w; c++) {
      int64_t k = i * w + c;
      if (gx) ST(gx, k, gs * LD(y, k));
      if (gy) ST(gy, k, gs * LD(x, k));
    }
  }
}

/* double backward, in: gg_x, gg_y, g_out, x, y. grad_g_out[s] = sum dot(gg_x,y) + dot(gg_y,x). */
WIDTH_KERNEL(dot_dbl_seg, s0, s1) {
  const void *ggx = IN(0), *ggy = IN(1), *x = IN(3), *y = IN(4);
  for (int64_t s = s0; s < s1; s++) {
    double acc = 0;
    for (int64_t p = J->off[s]; p < J->off[s + 1]; p++) {
      int64_t i = ELEM(p);
      double d = 0;
      for (int c = 0; c < w; c++) {
        int64_t k = i * w + c;
        d += LDZ(ggx, k) * LD(y, k) + LDZ(ggy, k) * LD(x, k);
      }
      acc += d;
    }
    ST(OUT(0), s, acc);
  }
}

/* grad_x[i] = g_out[s]*gg_y[i]; grad_y[i] = g_out[s]*gg_x[i]. */
WIDTH_KERNEL(dot_dbl_elem, i0, i1) {
  const void *ggx = IN(0), *ggy = IN(1), *g = IN(2);
  void *gx = OUT(1), *gy = OUT(2);
  for (int64_t i = i0; i < i1; i++) {
    double gs = LD(g, SEG_OF(i));
    for (int c = 0; c < w; c++) {
      int64_t k = i * w + c;
      if (gx) ST(gx, k, gs * LDZ(ggy, k));
      if (gy) ST(gy, k, gs * LDZ(ggx, k));
    }
  }
}

/* ---- segmented_mul ---- */

/* out[i] = x[i]*y[s]. */
WIDTH_KERNEL(mul_fwd_elem, i0, i1) {
  const void *x = IN(0), *y = IN(1);
  for (int64_t i = i0; i < i1; i++) {
    double ys = LD(y, SEG_OF(i));
    for (int c = 0; c < w; c++) ST(OUT(0), i * w + c, LD(x, i * w + c) * ys);
  }
}

/* dst[s] = sum_i dot(a[i], b[i]); a NULL reads as zeros. Used for grad_y of mul's passes. */
INLINE void FN(seg_dot)(const segops_cpu_job *J, int64_t s0, int64_t s1, const void *a, const void *b, void *dst,
                        const int w) {
  if (!dst) return;
  for (int64_t s = s0; s < s1; s++) {
    double acc = 0;
    if (a)
      for (int64_t p = J->off[s]; p < J->off[s + 1]; p++) {
        int64_t i = ELEM(p);
        double d = 0;
        for (int c = 0; c < w; c++) d += LD(a, i * w + c) * LD(b, i * w + c);
        acc += d;
      }
    ST(dst, s, acc);
  }
}

/* backward, in: g_out, x, y. grad_x[i] = g_out[i]*y[s] (element); grad_y[s] = sum dot(g_out, x). */
WIDTH_KERNEL(mul_bwd_elem, i0, i1) {
  const void *g = IN(0), *y = IN(2);
  for (int64_t i = i0; i < i1; i++) {
    double ys = LD(y, SEG_OF(i));
    for (int c = 0; c < w; c++) ST(OUT(0), i * w + c, LD(g, i * w + c) * ys);
  }
}
WIDTH_KERNEL(mul_bwd_seg, s0, s1) { FN(seg_dot)(J, s0, s1, IN(0), IN(1), OUT(1), w); }

/* double backward, in: gg_x, gg_y, g_out, x, y.
 * grad_g_out[i] = gg_x[i]*y[s] + gg_y[s]*x[i]; grad_x[i] = gg_y[s]*g_out[i];
 * grad_y[s] = sum dot(gg_x, g_out). */
WIDTH_KERNEL(mul_dbl_elem, i0, i1) {
  const void *ggx = IN(0), *ggy = IN(1), *g = IN(2), *x = IN(3), *y = IN(4);
  void *ggo = OUT(0), *gx = OUT(1);
  for (int64_t i = i0; i < i1; i++) {
    int64_t s = SEG_OF(i);
    double ys = LD(y, s), ggys = LDZ(ggy, s);
    for (int c = 0; c < w; c++) {
      int64_t k = i * w + c;
      if (ggo) ST(ggo, k, LDZ(ggx, k) * ys + ggys * LD(x, k));
      if (gx) ST(gx, k, ggys * LD(g, k));
    }
  }
}
WIDTH_KERNEL(mul_dbl_seg, s0, s1) { FN(seg_dot)(J, s0, s1, IN(0), IN(2), OUT(2), w); }

/* ---- segmented_rms_norm (width 3) ---- */

/* r_s and inv_s = 1/(c_s*r_s) from the sum of squares (segops_rowmath.h). */
static inline void FN(rms_of)(double sumsq, int64_t cnt, double *r, double *inv) {
  *r = segops_rms_value(sumsq, cnt);
  *inv = segops_rms_inv(sumsq, cnt);
}

/* Sum over segment s of |x[i]|^2 and, when gg is not NULL, of dot(gg[i], x[i]). */
static inline void FN(rms_sums)(const segops_cpu_job *J, int64_t s, const void *x, const void *gg, double *sumsq,
                                double *q) {
  double a = 0, b = 0;
  for (int64_t p = J->off[s]; p < J->off[s + 1]; p++) {
    int64_t i = ELEM(p);
    double x0 = LD(x, 3 * i), x1 = LD(x, 3 * i + 1), x2 = LD(x, 3 * i + 2);
    a += x0 * x0 + x1 * x1 + x2 * x2;
    if (gg) b += LD(gg, 3 * i) * x0 + LD(gg, 3 * i + 1) * x1 + LD(gg, 3 * i + 2) * x2;
  }
  *sumsq = a;
  *q = b;
}

static void FN(rms_fwd_seg)(const segops_cpu_job *J, int64_t s0, int64_t s1) {
  for (int64_t s = s0; s < s1; s++) {
    double sumsq, q, r, inv;
    FN(rms_sums)(J, s, IN(0), NULL, &sumsq, &q);
    FN(rms_of)(sumsq, COUNT(s), &r, &inv);
    ST(OUT(0), s, r);
  }
}

/* backward, in: g_out, x. The segment phase stores sa[s] = g_out[s]*inv_s;
 * the element phase writes grad_x[i] = sa[s]*x[i]. */
static void FN(rms_bwd_seg)(const segops_cpu_job *J, int64_t s0, int64_t s1) {
  for (int64_t s = s0; s < s1; s++) {
    double sumsq, q, r, inv;
    FN(rms_sums)(J, s, IN(1), NULL, &sumsq, &q);
    FN(rms_of)(sumsq, COUNT(s), &r, &inv);
    J->sa[s] = LD(IN(0), s) * inv;
  }
}
static void FN(rms_bwd_elem)(const segops_cpu_job *J, int64_t i0, int64_t i1) {
  const void *x = IN(1);
  for (int64_t i = i0; i < i1; i++) {
    double a = J->sa[SEG_OF(i)];
    for (int c = 0; c < 3; c++) ST(OUT(0), 3 * i + c, a * LD(x, 3 * i + c));
  }
}

/* double backward, in: gg_x, g_out, x. q_s = sum dot(gg_x, x); grad_g_out[s] = q_s*inv_s;
 * grad_x[i] = sa[s]*gg_x[i] - sb[s]*x[i] with sa = g_out*inv, sb = g_out*inv^3*c*q. */
static void FN(rms_dbl_seg)(const segops_cpu_job *J, int64_t s0, int64_t s1) {
  const void *ggx = IN(0), *g = IN(1), *x = IN(2);
  for (int64_t s = s0; s < s1; s++) {
    double sumsq, q, r, inv;
    int64_t cnt = COUNT(s);
    FN(rms_sums)(J, s, x, ggx, &sumsq, &q);
    FN(rms_of)(sumsq, cnt, &r, &inv);
    if (OUT(0)) ST(OUT(0), s, q * inv);
    double gs = LD(g, s);
    J->sa[s] = gs * inv;
    J->sb[s] = gs * inv * inv * inv * (double)cnt * q;
  }
}
static void FN(rms_dbl_elem)(const segops_cpu_job *J, int64_t i0, int64_t i1) {
  const void *ggx = IN(0), *x = IN(2);
  for (int64_t i = i0; i < i1; i++) {
    int64_t s = SEG_OF(i);
    double a = J->sa[s], b = J->sb[s];
    for (int c = 0; c < 3; c++) ST(OUT(1), 3 * i + c, a * LDZ(ggx, 3 * i + c) - b * LD(x, 3 * i + c));
  }
}

/* ---- segmented_matvec (width 3; m is (S,3,3) row-major) ---- */

/* Loads m[s] (9 values); zeros when m is NULL (an omitted gg_m). */
static inline void FN(ld_mat)(const void *m, int64_t s, double a[9]) {
  for (int k = 0; k < 9; k++) a[k] = m ? FN(ld)(m, 9 * s + k) : 0.0;
}
static inline void FN(ld_vec)(const void *v, int64_t i, double a[3]) {
  for (int k = 0; k < 3; k++) a[k] = v ? FN(ld)(v, 3 * i + k) : 0.0;
}
/* dst[s] = sum_i outer(a[i], b[i]); a NULL reads as zeros. grad_m of both backward passes. */
static void FN(seg_outer)(const segops_cpu_job *J, int64_t s0, int64_t s1, const void *a, const void *b, void *dst) {
  if (!dst) return;
  for (int64_t s = s0; s < s1; s++) {
    double acc[9] = {0};
    if (a)
      for (int64_t p = J->off[s]; p < J->off[s + 1]; p++) {
        int64_t i = ELEM(p);
        double va[3], vb[3];
        FN(ld_vec)(a, i, va);
        FN(ld_vec)(b, i, vb);
        for (int j = 0; j < 3; j++)
          for (int k = 0; k < 3; k++) acc[3 * j + k] += va[j] * vb[k];
      }
    for (int k = 0; k < 9; k++) ST(dst, 9 * s + k, acc[k]);
  }
}

/* out[i] = m[s]^T v[i]. */
static void FN(matvec_fwd_elem)(const segops_cpu_job *J, int64_t i0, int64_t i1) {
  const void *v = IN(0), *m = IN(1);
  for (int64_t i = i0; i < i1; i++) {
    double a[9], vi[3], r[3];
    FN(ld_mat)(m, SEG_OF(i), a);
    FN(ld_vec)(v, i, vi);
    segops_mtv(a, vi, r);
    for (int k = 0; k < 3; k++) ST(OUT(0), 3 * i + k, r[k]);
  }
}

/* backward, in: g_out, v, m. grad_v[i] = m[s] g_out[i]; grad_m[s] = sum outer(v, g_out). */
static void FN(matvec_bwd_elem)(const segops_cpu_job *J, int64_t i0, int64_t i1) {
  const void *g = IN(0), *m = IN(2);
  for (int64_t i = i0; i < i1; i++) {
    double a[9], gi[3], r[3];
    FN(ld_mat)(m, SEG_OF(i), a);
    FN(ld_vec)(g, i, gi);
    segops_mv(a, gi, r);
    for (int k = 0; k < 3; k++) ST(OUT(0), 3 * i + k, r[k]);
  }
}
static void FN(matvec_bwd_seg)(const segops_cpu_job *J, int64_t s0, int64_t s1) {
  FN(seg_outer)(J, s0, s1, IN(1), IN(0), OUT(1));
}

/* double backward, in: gg_v, gg_m, g_out, v, m.
 * grad_g_out[i] = m[s]^T gg_v[i] + gg_m[s]^T v[i]; grad_v[i] = gg_m[s] g_out[i];
 * grad_m[s] = sum outer(gg_v, g_out). */
static void FN(matvec_dbl_elem)(const segops_cpu_job *J, int64_t i0, int64_t i1) {
  const void *ggv = IN(0), *ggm = IN(1), *g = IN(2), *v = IN(3), *m = IN(4);
  void *ggo = OUT(0), *gv = OUT(1);
  for (int64_t i = i0; i < i1; i++) {
    int64_t s = SEG_OF(i);
    double a[9], b[9], r1[3], r2[3];
    FN(ld_mat)(ggm, s, b);
    if (ggo) {
      double ggvi[3], vi[3];
      FN(ld_mat)(m, s, a);
      FN(ld_vec)(ggv, i, ggvi);
      FN(ld_vec)(v, i, vi);
      segops_mtv(a, ggvi, r1);
      segops_mtv(b, vi, r2);
      for (int k = 0; k < 3; k++) ST(ggo, 3 * i + k, r1[k] + r2[k]);
    }
    if (gv) {
      double gi[3];
      FN(ld_vec)(g, i, gi);
      segops_mv(b, gi, r1);
      for (int k = 0; k < 3; k++) ST(gv, 3 * i + k, r1[k]);
    }
  }
}
static void FN(matvec_dbl_seg)(const segops_cpu_job *J, int64_t s0, int64_t s1) {
  FN(seg_outer)(J, s0, s1, IN(0), IN(2), OUT(2));
}

/* ---- The table: [op][pass] = {segment phase, element phase, seg_outs, elem_outs, needs} ---- */
#define K(seg, elem, so, eo, needs) \
  { seg, elem }
const segops_cpu_kernel CAT(segops_cpu_kernels, SFX)[SEGOPS_OP_COUNT][SEGOPS_PASS_COUNT] = {
    [SEGOPS_OP_SUM] = {K(FN(sum_seg), NULL, 1, 0, 0), K(NULL, FN(sum_bwd_elem), 0, 1, 0),
                       K(FN(sum_seg), NULL, 1, 0, 0)},
    [SEGOPS_OP_DOT] = {K(FN(dot_fwd_seg), NULL, 1, 0, 0), K(NULL, FN(dot_bwd_elem), 0, 3, 0),
                       K(FN(dot_dbl_seg), FN(dot_dbl_elem), 1, 6, 0)},
    [SEGOPS_OP_MUL] = {K(NULL, FN(mul_fwd_elem), 0, 1, 0), K(FN(mul_bwd_seg), FN(mul_bwd_elem), 2, 1, 0),
                       K(FN(mul_dbl_seg), FN(mul_dbl_elem), 4, 3, 0)},
    [SEGOPS_OP_MEAN] = {K(FN(mean_seg), NULL, 1, 0, 0), K(NULL, FN(mean_bwd_elem), 0, 1, SEGOPS_CPU_NEED_COUNTS),
                        K(FN(mean_seg), NULL, 1, 0, 0)},
    [SEGOPS_OP_RMS_NORM] = {K(FN(rms_fwd_seg), NULL, 1, 0, 0),
                            K(FN(rms_bwd_seg), FN(rms_bwd_elem), 0, 1, SEGOPS_CPU_NEED_SCRATCH),
                            K(FN(rms_dbl_seg), FN(rms_dbl_elem), 1, 2, SEGOPS_CPU_NEED_SCRATCH)},
    [SEGOPS_OP_MATVEC] = {K(NULL, FN(matvec_fwd_elem), 0, 1, 0), K(FN(matvec_bwd_seg), FN(matvec_bwd_elem), 2, 1, 0),
                          K(FN(matvec_dbl_seg), FN(matvec_dbl_elem), 4, 3, 0)},
};
#undef K

#undef LD
#undef LDZ
#undef ST
#undef IN
#undef OUT
#undef SEG_OF
#undef ELEM
#undef COUNT
#undef INLINE
#undef WIDTH_KERNEL
#undef FN
#undef CAT
#undef CAT_

/* cpu_ops_impl.h: the 24 functions of proto/API.md (Formulas) as CPU hooks (cpu_phases.h), written once for a
 * float type T. Included by cpu_ops.c with T (float or double) and SFX (f32 or f64) defined.
 * Every value is loaded into double and every accumulation is in double (float32 too); a result
 * is rounded to T once, when stored. Inputs may be unaligned: loads go through memcpy. A NULL
 * input is an omitted cotangent and reads as zeros; a NULL output is not requested.
 * The math of a row is segops_rowmath.h's, shared with the CUDA kernels. */
#if !defined(T) || !defined(SFX)
#error "define T and SFX before including cpu_ops_impl.h"
#endif

#define CAT_(a, b) a##_##b
#define CAT(a, b) CAT_(a, b)
#define FN(name) CAT(name, SFX)
#define HOOK SEGOPS_CPU_INLINE void

/* Element k of p as double. */
SEGOPS_CPU_INLINE double FN(ld)(const void *p, int64_t k) {
  T v;
  memcpy(&v, (const char *)p + k * (int64_t)sizeof(T), sizeof v);
  return (double)v;
}
SEGOPS_CPU_INLINE void FN(st)(void *p, int64_t k, double v) {
  T t = (T)v;
  memcpy((char *)p + k * (int64_t)sizeof(T), &t, sizeof t);
}
/* Row r (cnt values from r*cnt) of p into a; zeros when p is NULL (an omitted cotangent). */
SEGOPS_CPU_INLINE void FN(ldrow)(const void *p, int64_t r, int64_t cnt, double *a) {
  for (int64_t c = 0; c < cnt; c++) a[c] = p ? FN(ld)(p, r * cnt + c) : 0.0;
}
SEGOPS_CPU_INLINE void FN(strow)(void *p, int64_t r, int64_t cnt, const double *a) {
  if (p)
    for (int64_t c = 0; c < cnt; c++) FN(st)(p, r * cnt + c, a[c]);
}

/* Four T side by side, as loaded from and stored to memory. */
typedef T FN(v4) __attribute__((vector_size(4 * sizeof(T))));
/* Values k .. k+3 of p as double (exact: float to double is). One vector load and convert; a
 * copy through an array instead makes the CPU stall forwarding the stores to the load. With AVX,
 * float32 goes through the intrinsic: GCC 12 splits __builtin_convertvector (float to double) into
 * two halves and an insert, and a vector built lane by lane lets it move later shuffles into
 * scalar loads; the intrinsic is one vcvtps2pd either way. */
SEGOPS_CPU_INLINE void FN(ldv)(const void *p, int64_t k, segops_v4d *v) {
#ifdef __AVX__
  if (sizeof(T) == 4) {
    __m128 f;
    memcpy(&f, (const char *)p + k * (int64_t)sizeof(T), sizeof f);
    *v = (segops_v4d)_mm256_cvtps_pd(f);
    return;
  }
#endif
  FN(v4) t;
  memcpy(&t, (const char *)p + k * (int64_t)sizeof(T), sizeof t);
  *v = __builtin_convertvector(t, segops_v4d);
}
/* v to values k .. k+3 of p, each rounded to T once (as FN(st)). */
SEGOPS_CPU_INLINE void FN(stv)(void *p, int64_t k, const segops_v4d *v) {
  const FN(v4) t = __builtin_convertvector(*v, FN(v4));
  memcpy((char *)p + k * (int64_t)sizeof(T), &t, sizeof t);
}
/* Rows i .. i+3 of p (4w values) as loaded, F[k] = values 4k .. 4k+3, as double; zeros when p
 * is NULL. */
SEGOPS_CPU_INLINE void FN(ld4flat)(const void *p, int64_t i, int64_t w, segops_v4d *F) {
  for (int k = 0; k < 3; k++) F[k] = (segops_v4d){0, 0, 0, 0};
  if (!p) return;
  FN(ldv)(p, i * w, &F[0]);
  if (w == 3) {
    FN(ldv)(p, i * w + 4, &F[1]);
    FN(ldv)(p, i * w + 8, &F[2]);
  }
}
/* Rows i .. i+3 of p by component: C[c][q] = component c of row i+q. */
SEGOPS_CPU_INLINE void FN(ld4)(const void *p, int64_t i, int64_t w, segops_v4d *C) {
  segops_v4d F[3];
  FN(ld4flat)(p, i, w, F);
  if (w == 3)
    segops_cpu_rows_to_cols(F, C);
  else
    C[0] = F[0];
}
/* Component vectors C (as ld4's) to rows i .. i+3 of p, each value rounded to T once. */
SEGOPS_CPU_INLINE void FN(st4)(void *p, int64_t i, int64_t w, const segops_v4d *C) {
  segops_v4d F[3];
  if (w == 3)
    segops_cpu_cols_to_rows(C, F);
  else
    F[0] = C[0];
  FN(stv)(p, i * w, &F[0]);
  if (w == 3) {
    FN(stv)(p, i * w + 4, &F[1]);
    FN(stv)(p, i * w + 8, &F[2]);
  }
}

/* *d = dot(a, b) of four rows at once, lane q = row q: segops_dot_w's order in each lane.
 * (Out through a pointer: a vector return value would change the ABI without AVX.) */
SEGOPS_CPU_INLINE void FN(dot4)(segops_v4d *d, const segops_v4d *a, const segops_v4d *b, int64_t w) {
  *d = a[0] * b[0];
  for (int c = 1; c < w; c++) *d += a[c] * b[c];
}

#ifdef __AVX2__
/* Values k .. k+m-1 of p as ldv, the lanes from m on +0.0 and their memory not touched (m <= 0:
 * none, m >= 4: all four); and the same lanes of v to p as stv. One masked load or store, whatever
 * m (no branch on how many values a segment's last group has). */
SEGOPS_CPU_INLINE void FN(ldv_m)(const void *p, int64_t k, int m, segops_v4d *v) {
  const char *a = (const char *)p + k * (int64_t)sizeof(T);
  if (sizeof(T) == 4) {
    const __m128i mk = _mm_cmpgt_epi32(_mm_set1_epi32(m), _mm_setr_epi32(0, 1, 2, 3));
    *v = (segops_v4d)_mm256_cvtps_pd(_mm_maskload_ps((const float *)(const void *)a, mk));
  } else {
    const __m256i mk = _mm256_cmpgt_epi64(_mm256_set1_epi64x(m), _mm256_setr_epi64x(0, 1, 2, 3));
    *v = (segops_v4d)_mm256_maskload_pd((const double *)(const void *)a, mk);
  }
}
SEGOPS_CPU_INLINE void FN(stv_m)(void *p, int64_t k, int m, const segops_v4d *v) {
  char *a = (char *)p + k * (int64_t)sizeof(T);
  if (sizeof(T) == 4) {
    const __m128i mk = _mm_cmpgt_epi32(_mm_set1_epi32(m), _mm_setr_epi32(0, 1, 2, 3));
    _mm_maskstore_ps((float *)(void *)a, mk, _mm256_cvtpd_ps((__m256d)*v));
  } else {
    const __m256i mk = _mm256_cmpgt_epi64(_mm256_set1_epi64x(m), _mm256_setr_epi64x(0, 1, 2, 3));
    _mm256_maskstore_pd((double *)(void *)a, mk, (__m256d)*v);
  }
}
#endif

/* Components [q0, q1) of rows, flat: out[q] = a*x[q] (+ b*y[q]); a NULL x or y reads as zeros,
 * a NULL out is not requested. Four values at a time in vectors (each lane the scalar's
 * operations), the last 0-3 through one masked group with AVX2, else one by one: a segment's
 * gather is short (tens of values), and a loop the compiler vectorises pays a prologue and an
 * epilogue whose exits the branch predictor misses per segment. */
SEGOPS_CPU_INLINE void FN(scale)(void *out, const void *x, double a, int64_t q0, int64_t q1) {
  if (!out) return;
  const segops_v4d va = {a, a, a, a}, zero = {0, 0, 0, 0};
  int64_t q = q0;
  for (; q + 4 <= q1; q += 4) {
    segops_v4d v = zero;
    if (x) {
      FN(ldv)(x, q, &v);
      v = va * v;
    }
    FN(stv)(out, q, &v);
  }
#ifdef __AVX2__
  segops_v4d v = zero;
  if (x) {
    FN(ldv_m)(x, q, (int)(q1 - q), &v);
    v = va * v;
  }
  FN(stv_m)(out, q, (int)(q1 - q), &v);
#else
  for (; q < q1; q++) FN(st)(out, q, x ? a * FN(ld)(x, q) : 0.0);
#endif
}
SEGOPS_CPU_INLINE void FN(axpby)(void *out, const void *x, double a, const void *y, double b, int64_t q0, int64_t q1) {
  if (!out) return;
  if (!x || !y) {
    FN(scale)(out, x ? x : y, x ? a : b, q0, q1);
    return;
  }
  const segops_v4d va = {a, a, a, a}, vb = {b, b, b, b};
  int64_t q = q0;
  for (; q + 4 <= q1; q += 4) {
    segops_v4d u, v;
    FN(ldv)(x, q, &u);
    FN(ldv)(y, q, &v);
    u = va * u + vb * v;
    FN(stv)(out, q, &u);
  }
#ifdef __AVX2__
  segops_v4d u, v;
  FN(ldv_m)(x, q, (int)(q1 - q), &u);
  FN(ldv_m)(y, q, (int)(q1 - q), &v);
  u = va * u + vb * v;
  FN(stv_m)(out, q, (int)(q1 - q), &u);
#else
  for (; q < q1; q++) FN(st)(out, q, a * FN(ld)(x, q) + b * FN(ld)(y, q));
#endif
}

/* ---- Rows of a general width w (neither 1 nor 3: see segops_cpu_gen), in vectors of four ---- */
/* Whether w is a constant-width instantiation's (1 or 3), and that width bounded for the arrays of
 * those instantiations' code (which the general one also compiles, but never runs). */
#define FAST(w) ((w) == 1 || (w) == 3)
#define W13(w) ((w) == 3 ? 3 : 1)

/* dot(p[kp .. kp+w), q[kq .. kq+w)): four partial sums over columns c % 4 (a vector), combined
 * (d0 + d1) + (d2 + d3), then the last w % 4 columns in order; 0 when p or q is NULL. One order
 * for a row wherever it lies, so a segment's sums depend only on its elements. */
SEGOPS_CPU_INLINE double FN(dotn)(const void *p, int64_t kp, const void *q, int64_t kq, int64_t w) {
  if (!p || !q) return 0.0;
  segops_v4d acc = {0, 0, 0, 0};
  int64_t c = 0;
  for (; c + 4 <= w; c += 4) {
    segops_v4d a, b;
    FN(ldv)(p, kp + c, &a);
    FN(ldv)(q, kq + c, &b);
    acc += a * b;
  }
  double d = (acc[0] + acc[1]) + (acc[2] + acc[3]);
  for (; c < w; c++) d += FN(ld)(p, kp + c) * FN(ld)(q, kq + c);
  return d;
}
/* acc[c] += p[k + c] (q NULL) or p[k + c] * q[k + c], for c < w; nothing when p is NULL. */
SEGOPS_CPU_INLINE void FN(addrow)(double *acc, const void *p, const void *q, int64_t k, int64_t w) {
  if (!p) return;
  int64_t c = 0;
  for (; c + 4 <= w; c += 4) {
    segops_v4d a, v, u;
    memcpy(&a, acc + c, sizeof a);
    FN(ldv)(p, k + c, &v);
    if (q) {
      FN(ldv)(q, k + c, &u);
      v = v * u;
    }
    a += v;
    memcpy(acc + c, &a, sizeof a);
  }
  for (; c < w; c++) acc[c] += q ? FN(ld)(p, k + c) * FN(ld)(q, k + c) : FN(ld)(p, k + c);
}
/* Rows [i, j) of out: a[p] ⊙ r (+ b[p] ⊙ r2), r and r2 one row of w values each; a NULL a or b
 * contributes nothing, a NULL out is not requested. */
SEGOPS_CPU_INLINE void FN(rowmul)(void *out, const void *a, const double *r, const void *b, const double *r2, int64_t i,
                                  int64_t j, int64_t w) {
  if (!out) return;
  for (int64_t p = i; p < j; p++) {
    const int64_t k = p * w;
    int64_t c = 0;
    for (; c + 4 <= w; c += 4) {
      segops_v4d v = {0, 0, 0, 0}, x, y;
      if (a) {
        FN(ldv)(a, k + c, &x);
        memcpy(&y, r + c, sizeof y);
        v = x * y;
      }
      if (b) {
        FN(ldv)(b, k + c, &x);
        memcpy(&y, r2 + c, sizeof y);
        v += x * y;
      }
      FN(stv)(out, k + c, &v);
    }
    for (; c < w; c++) {
      double v = a ? FN(ld)(a, k + c) * r[c] : 0.0;
      if (b) v += FN(ld)(b, k + c) * r2[c];
      FN(st)(out, k + c, v);
    }
  }
}

#define IN(k) (J->in[k])
#define OUT(k) (J->out[k])
#define LDROW FN(ldrow)
#define STROW FN(strow)

/* ---- segmented_sum and segmented_mean: acc = Σ in[0] (x or gg_x) ---- */
HOOK FN(sum_visit)(const segops_cpu_job *J, int64_t i, double *acc, const int64_t w) {
  if (!FAST(w)) {
    FN(addrow)(acc, IN(0), NULL, i * w, w);
    return;
  }
  double a[3];
  LDROW(IN(0), i, W13(w), a);
  segops_add_w(acc, a, W13(w));
}
/* Sums need no products: the accumulators lie as the rows load (SEGOPS_CPU_ACC_FLAT). */
HOOK FN(sum_visit4)(const segops_cpu_job *J, int64_t i, segops_v4d *A, const int m, const int64_t w) {
  segops_v4d F[3];
  FN(ld4flat)(IN(0), i, w, F);
  for (int k = 0; k < w; k++) {
    segops_cpu_keep(&F[k], m * w - 4 * k); /* value 4k + e is row (4k + e) / w */
    A[k] += F[k];
  }
}
HOOK FN(sum_finish)(const segops_cpu_job *J, int64_t s, int64_t cnt, const double *acc, double *sv, const int64_t w) {
  (void)cnt, (void)sv;
  STROW(OUT(0), s, w, acc);
}
HOOK FN(mean_finish)(const segops_cpu_job *J, int64_t s, int64_t cnt, const double *acc, double *sv, const int64_t w) {
  (void)sv;
  if (OUT(0))
    for (int64_t c = 0; c < w; c++) FN(st)(OUT(0), s * w + c, segops_mean_of(acc[c], cnt));
}
/* backward: grad_x[i] = r: g_out[s] (sum) or g_out[s] / c_s (mean). */
HOOK FN(g_row)(const segops_cpu_job *J, int64_t s, int64_t cnt, double *r, const int64_t w) {
  (void)cnt;
  LDROW(IN(0), s, w, r);
}
/* mean backward: r = g_out[s] / c_s, once per segment (cnt >= 1: the segment has elements). */
HOOK FN(mean_backward_row)(const segops_cpu_job *J, int64_t s, int64_t cnt, double *r, const int64_t w) {
  LDROW(IN(0), s, w, r);
  for (int64_t c = 0; c < w; c++) r[c] /= (double)cnt;
}
/* Every row of the segment is r: four rows (4w values, each rounded to T once as FN(st) does) are
 * made once and stored as whole vectors; the last 0-3 rows one by one. */
HOOK FN(copy_gather)(const segops_cpu_job *J, int64_t i, int64_t j, const double *r, const int64_t w) {
  if (!OUT(0)) return;
  if (!FAST(w)) { /* each row: r in vectors, each value rounded to T once */
    for (int64_t p = i; p < j; p++) {
      int64_t c = 0;
      for (; c + 4 <= w; c += 4) {
        segops_v4d v;
        memcpy(&v, r + c, sizeof v);
        FN(stv)(OUT(0), p * w + c, &v);
      }
      for (; c < w; c++) FN(st)(OUT(0), p * w + c, r[c]);
    }
    return;
  }
  T t[12];
  for (int k = 0; k < 4 * w; k++) t[k] = (T)r[k % w];
  int64_t p = i;
  for (; p + 4 <= j; p += 4) memcpy((char *)OUT(0) + p * w * (int64_t)sizeof(T), t, (size_t)(4 * w) * sizeof(T));
#ifdef __AVX2__
  /* The last 0-3 rows: their m*w values through masked stores of the same pattern, no branch. */
  const int m = (int)(j - p) * w;
  for (int k = 0; k < w; k++) {
    segops_v4d v;
    FN(ldv)(t, 4 * k, &v);
    FN(stv_m)(OUT(0), p * w + 4 * k, m - 4 * k, &v);
  }
#else
  for (; p < j; p++) STROW(OUT(0), p, w, r);
#endif
}

/* acc += dot(in[ka][i], in[kb][i]), one row or four: dot's forward (x, y) and mul's backward
 * (g_out, x) and double backward (gg_x, g_out). A NULL in[ka] is an omitted cotangent: no term. */
SEGOPS_CPU_INLINE void FN(dot_in_visit)(const segops_cpu_job *J, int64_t i, double *acc, int64_t w, int ka, int kb) {
  double a[3], b[3];
  if (!IN(ka)) return;
  if (!FAST(w)) {
    acc[0] += FN(dotn)(IN(ka), i * w, IN(kb), i * w, w);
    return;
  }
  LDROW(IN(ka), i, W13(w), a);
  LDROW(IN(kb), i, W13(w), b);
  acc[0] += segops_dot_w(a, b, W13(w));
}
SEGOPS_CPU_INLINE void FN(dot_in_visit4)(const segops_cpu_job *J, int64_t i, segops_v4d *A, int m, int64_t w, int ka,
                                         int kb) {
  segops_v4d a[3], b[3], d;
  if (!IN(ka)) return;
  FN(ld4)(IN(ka), i, w, a);
  FN(ld4)(IN(kb), i, w, b);
  FN(dot4)(&d, a, b, w);
  segops_cpu_keep(&d, m);
  A[0] += d;
}

/* ---- segmented_dot ---- */
/* forward: acc += dot(x, y); out[s] = acc. */
HOOK FN(dot_forward_visit)(const segops_cpu_job *J, int64_t i, double *acc, const int64_t w) {
  FN(dot_in_visit)(J, i, acc, w, 0, 1);
}
HOOK FN(dot_forward_visit4)(const segops_cpu_job *J, int64_t i, segops_v4d *A, const int m, const int64_t w) {
  FN(dot_in_visit4)(J, i, A, m, w, 0, 1);
}
/* Segment output 0 is acc[0] (dot forward and double backward). */
HOOK FN(dot_finish)(const segops_cpu_job *J, int64_t s, int64_t cnt, const double *acc, double *sv, const int64_t w) {
  (void)cnt, (void)sv, (void)w;
  STROW(OUT(0), s, 1, acc);
}
HOOK FN(seg1_row)(const segops_cpu_job *J, int64_t s, int64_t cnt, double *r, const int64_t w) {
  (void)cnt, (void)w;
  LDROW(IN(0), s, 1, r);
}
/* backward, in: g_out, x, y. grad_x[i] = g_out[s]*y[i]; grad_y[i] = g_out[s]*x[i]. */
HOOK FN(dot_backward_gather)(const segops_cpu_job *J, int64_t i, int64_t j, const double *r, const int64_t w) {
  FN(scale)(OUT(0), IN(2), r[0], i * w, j * w);
  FN(scale)(OUT(1), IN(1), r[0], i * w, j * w);
}
/* double backward, in: gg_x, gg_y, g_out, x, y. acc += dot(gg_x, y) + dot(gg_y, x);
 * grad_x[i] = g_out[s]*gg_y[i]; grad_y[i] = g_out[s]*gg_x[i]. */
HOOK FN(dot_double_backward_visit)(const segops_cpu_job *J, int64_t i, double *acc, const int64_t w) {
  double ggx[3], ggy[3], x[3], y[3];
  if (!FAST(w)) {
    acc[0] += FN(dotn)(IN(0), i * w, IN(4), i * w, w) + FN(dotn)(IN(1), i * w, IN(3), i * w, w);
    return;
  }
  LDROW(IN(0), i, W13(w), ggx);
  LDROW(IN(1), i, W13(w), ggy);
  LDROW(IN(3), i, W13(w), x);
  LDROW(IN(4), i, W13(w), y);
  acc[0] += segops_dot_w(ggx, y, W13(w)) + segops_dot_w(ggy, x, W13(w));
}
HOOK FN(dot_double_backward_visit4)(const segops_cpu_job *J, int64_t i, segops_v4d *A, const int m, const int64_t w) {
  segops_v4d ggx[3], ggy[3], x[3], y[3];
  FN(ld4)(IN(0), i, w, ggx);
  FN(ld4)(IN(1), i, w, ggy);
  FN(ld4)(IN(3), i, w, x);
  FN(ld4)(IN(4), i, w, y);
  segops_v4d d1, d2; /* acc += dot(gg_x, y) + dot(gg_y, x) */
  FN(dot4)(&d1, ggx, y, w);
  FN(dot4)(&d2, ggy, x, w);
  d1 += d2;
  segops_cpu_keep(&d1, m);
  A[0] += d1;
}
HOOK FN(dot_double_backward_row)(const segops_cpu_job *J, int64_t s, int64_t cnt, double *r, const int64_t w) {
  (void)cnt, (void)w;
  LDROW(IN(2), s, 1, r);
}
HOOK FN(dot_double_backward_gather)(const segops_cpu_job *J, int64_t i, int64_t j, const double *r, const int64_t w) {
  FN(scale)(OUT(1), IN(1), r[0], i * w, j * w);
  FN(scale)(OUT(2), IN(0), r[0], i * w, j * w);
}

/* ---- segmented_mul ---- */
/* forward, in: x, y. out[i] = x[i]*y[s]. */
HOOK FN(mul_forward_row)(const segops_cpu_job *J, int64_t s, int64_t cnt, double *r, const int64_t w) {
  (void)cnt, (void)w;
  LDROW(IN(1), s, 1, r);
}
HOOK FN(mul_forward_gather)(const segops_cpu_job *J, int64_t i, int64_t j, const double *r, const int64_t w) {
  FN(scale)(OUT(0), IN(0), r[0], i * w, j * w);
}
/* backward, in: g_out, x, y. acc += dot(g_out, x): grad_y (output 1); grad_x[i] = g_out[i]*y[s]. */
HOOK FN(mul_backward_visit)(const segops_cpu_job *J, int64_t i, double *acc, const int64_t w) {
  FN(dot_in_visit)(J, i, acc, w, 0, 1);
}
HOOK FN(mul_backward_visit4)(const segops_cpu_job *J, int64_t i, segops_v4d *A, const int m, const int64_t w) {
  FN(dot_in_visit4)(J, i, A, m, w, 0, 1);
}
HOOK FN(mul_backward_finish)(const segops_cpu_job *J, int64_t s, int64_t cnt, const double *acc, double *sv,
                             const int64_t w) {
  (void)cnt, (void)sv, (void)w;
  STROW(OUT(1), s, 1, acc);
}
HOOK FN(mul_backward_row)(const segops_cpu_job *J, int64_t s, int64_t cnt, double *r, const int64_t w) {
  (void)cnt, (void)w;
  LDROW(IN(2), s, 1, r);
}
HOOK FN(mul_backward_gather)(const segops_cpu_job *J, int64_t i, int64_t j, const double *r, const int64_t w) {
  FN(scale)(OUT(0), IN(0), r[0], i * w, j * w);
}
/* double backward, in: gg_x, gg_y, g_out, x, y. acc += dot(gg_x, g_out): grad_y (output 2);
 * grad_g_out[i] = gg_x[i]*y[s] + gg_y[s]*x[i]; grad_x[i] = gg_y[s]*g_out[i]. r = {y[s], gg_y[s]}. */
HOOK FN(mul_double_backward_visit)(const segops_cpu_job *J, int64_t i, double *acc, const int64_t w) {
  FN(dot_in_visit)(J, i, acc, w, 0, 2);
}
HOOK FN(mul_double_backward_visit4)(const segops_cpu_job *J, int64_t i, segops_v4d *A, const int m, const int64_t w) {
  FN(dot_in_visit4)(J, i, A, m, w, 0, 2);
}
HOOK FN(mul_double_backward_finish)(const segops_cpu_job *J, int64_t s, int64_t cnt, const double *acc, double *sv,
                                    const int64_t w) {
  (void)cnt, (void)sv, (void)w;
  STROW(OUT(2), s, 1, acc);
}
HOOK FN(mul_double_backward_row)(const segops_cpu_job *J, int64_t s, int64_t cnt, double *r, const int64_t w) {
  (void)cnt, (void)w;
  LDROW(IN(4), s, 1, r);
  LDROW(IN(1), s, 1, r + 1);
}
HOOK FN(mul_double_backward_gather)(const segops_cpu_job *J, int64_t i, int64_t j, const double *r, const int64_t w) {
  FN(axpby)(OUT(0), IN(0), r[0], IN(3), r[1], i * w, j * w);
  FN(scale)(OUT(1), IN(2), r[1], i * w, j * w);
}

/* ---- segmented_mul with y (S,*F) (J->y_wide): element-wise per column, w accumulators ---- */
/* forward, in: x, y. out[i] = x[i] ⊙ y[s]; r = y[s]. */
HOOK FN(mulw_forward_row)(const segops_cpu_job *J, int64_t s, int64_t cnt, double *r, const int64_t w) {
  (void)cnt;
  LDROW(IN(1), s, w, r);
}
HOOK FN(mulw_forward_gather)(const segops_cpu_job *J, int64_t i, int64_t j, const double *r, const int64_t w) {
  FN(rowmul)(OUT(0), IN(0), r, NULL, NULL, i, j, w);
}
/* backward, in: g_out, x, y. acc[c] += g_out[c] x[c]: grad_y[s] (output 1); grad_x[i] = g_out[i] ⊙ y[s]. */
HOOK FN(mulw_backward_visit)(const segops_cpu_job *J, int64_t i, double *acc, const int64_t w) {
  FN(addrow)(acc, IN(0), IN(1), i * w, w);
}
HOOK FN(mulw_backward_finish)(const segops_cpu_job *J, int64_t s, int64_t cnt, const double *acc, double *sv,
                              const int64_t w) {
  (void)cnt, (void)sv;
  STROW(OUT(1), s, w, acc);
}
HOOK FN(mulw_backward_row)(const segops_cpu_job *J, int64_t s, int64_t cnt, double *r, const int64_t w) {
  (void)cnt;
  LDROW(IN(2), s, w, r);
}
HOOK FN(mulw_backward_gather)(const segops_cpu_job *J, int64_t i, int64_t j, const double *r, const int64_t w) {
  FN(rowmul)(OUT(0), IN(0), r, NULL, NULL, i, j, w);
}
/* double backward, in: gg_x, gg_y, g_out, x, y. acc[c] += gg_x[c] g_out[c]: grad_y[s] (output 2);
 * grad_g_out[i] = gg_x[i] ⊙ y[s] + x[i] ⊙ gg_y[s]; grad_x[i] = g_out[i] ⊙ gg_y[s]. r = {y[s], gg_y[s]}. */
HOOK FN(mulw_double_backward_visit)(const segops_cpu_job *J, int64_t i, double *acc, const int64_t w) {
  FN(addrow)(acc, IN(0), IN(2), i * w, w);
}
HOOK FN(mulw_double_backward_finish)(const segops_cpu_job *J, int64_t s, int64_t cnt, const double *acc, double *sv,
                                     const int64_t w) {
  (void)cnt, (void)sv;
  STROW(OUT(2), s, w, acc);
}
HOOK FN(mulw_double_backward_row)(const segops_cpu_job *J, int64_t s, int64_t cnt, double *r, const int64_t w) {
  (void)cnt;
  LDROW(IN(4), s, w, r);
  LDROW(IN(1), s, w, r + w);
}
HOOK FN(mulw_double_backward_gather)(const segops_cpu_job *J, int64_t i, int64_t j, const double *r, const int64_t w) {
  FN(rowmul)(OUT(0), IN(0), r, IN(3), r + w, i, j, w);
  FN(rowmul)(OUT(1), IN(2), r + w, NULL, NULL, i, j, w);
}

/* ---- segmented_rms_norm (rows of any width): acc[0] = Σ |x|^2, acc[1] = Σ dot(gg_x, x) ---- */
/* x is input xk of the pass (0, 1, 2); gg_x, when the pass has it, input 0. */
SEGOPS_CPU_INLINE void FN(rms_visit)(const segops_cpu_job *J, int64_t i, double *acc, int xk, bool gg, int64_t w) {
  if (!FAST(w)) {
    acc[0] += FN(dotn)(IN(xk), i * w, IN(xk), i * w, w);
    if (gg && IN(0)) acc[1] += FN(dotn)(IN(0), i * w, IN(xk), i * w, w);
    return;
  }
  if (w == 1) {
    const double x = FN(ld)(IN(xk), i);
    acc[0] += x * x;
    if (gg && IN(0)) acc[1] += FN(ld)(IN(0), i) * x;
    return;
  }
  double x[3], g[3];
  LDROW(IN(xk), i, 3, x);
  if (gg && IN(0)) LDROW(IN(0), i, 3, g);
  segops_rms_visit(acc, x, gg && IN(0) ? g : NULL);
}
/* FN(rms_visit) for four rows (width 1 or 3): the same sums, in the same order, per lane. */
SEGOPS_CPU_INLINE void FN(rms_visit4)(const segops_cpu_job *J, int64_t i, segops_v4d *A, int m, int xk, bool gg,
                                      int64_t w) {
  segops_v4d x[3], g[3], t;
  FN(ld4)(IN(xk), i, W13(w), x);
  FN(dot4)(&t, x, x, W13(w));
  segops_cpu_keep(&t, m);
  A[0] += t;
  if (gg && IN(0)) {
    FN(ld4)(IN(0), i, W13(w), g);
    FN(dot4)(&t, g, x, W13(w));
    segops_cpu_keep(&t, m);
    A[1] += t;
  }
}
HOOK FN(rms_norm_forward_visit4)(const segops_cpu_job *J, int64_t i, segops_v4d *A, const int m, const int64_t w) {
  FN(rms_visit4)(J, i, A, m, 0, false, w);
}
HOOK FN(rms_norm_backward_visit4)(const segops_cpu_job *J, int64_t i, segops_v4d *A, const int m, const int64_t w) {
  FN(rms_visit4)(J, i, A, m, 1, false, w);
}
HOOK FN(rms_norm_double_backward_visit4)(const segops_cpu_job *J, int64_t i, segops_v4d *A, const int m,
                                         const int64_t w) {
  FN(rms_visit4)(J, i, A, m, 2, true, w);
}
HOOK FN(rms_norm_forward_visit)(const segops_cpu_job *J, int64_t i, double *acc, const int64_t w) {
  FN(rms_visit)(J, i, acc, 0, false, w);
}
HOOK FN(rms_norm_forward_finish)(const segops_cpu_job *J, int64_t s, int64_t cnt, const double *acc, double *sv,
                                 const int64_t w) {
  (void)sv, (void)w;
  FN(st)(OUT(0), s, segops_rms_value(acc[0], cnt));
}
/* backward, in: g_out, x. sv[0] = g_out[s]*inv_s; grad_x[i] = sv[0]*x[i]. */
HOOK FN(rms_norm_backward_visit)(const segops_cpu_job *J, int64_t i, double *acc, const int64_t w) {
  FN(rms_visit)(J, i, acc, 1, false, w);
}
HOOK FN(rms_norm_backward_finish)(const segops_cpu_job *J, int64_t s, int64_t cnt, const double *acc, double *sv,
                                  const int64_t w) {
  (void)w;
  segops_rms_bwd_finish(FN(ld)(IN(0), s), acc[0], cnt, sv);
}
HOOK FN(rms_norm_backward_post)(const segops_cpu_job *J, int64_t i, int64_t j, const double *sv, const int64_t w) {
  FN(scale)(OUT(0), IN(1), sv[0], i * w, j * w);
}
/* double backward, in: gg_x, g_out, x. grad_g_out[s] = q_s*inv_s (output 0);
 * grad_x[i] = sv[0]*gg_x[i] - sv[1]*x[i] (output 1). */
HOOK FN(rms_norm_double_backward_visit)(const segops_cpu_job *J, int64_t i, double *acc, const int64_t w) {
  FN(rms_visit)(J, i, acc, 2, true, w);
}
HOOK FN(rms_norm_double_backward_finish)(const segops_cpu_job *J, int64_t s, int64_t cnt, const double *acc, double *sv,
                                         const int64_t w) {
  double ggo;
  (void)w;
  segops_rms_dbl_finish(FN(ld)(IN(1), s), acc[0], acc[1], cnt, &ggo, sv);
  if (OUT(0)) FN(st)(OUT(0), s, ggo);
}
HOOK FN(rms_norm_double_backward_post)(const segops_cpu_job *J, int64_t i, int64_t j, const double *sv,
                                       const int64_t w) {
  /* grad_x = sv[0]*gg_x - sv[1]*x (segops_rms_dbl_post's formula, flat) */
  FN(axpby)(OUT(1), IN(0), sv[0], IN(2), -sv[1], i * w, j * w);
}

/* ---- segmented_matvec (width 3; m is (S,3,3) row-major) ---- */
/* forward, in: v, m. out[i] = m[s]ᵀ v[i]. */
HOOK FN(matvec_forward_row)(const segops_cpu_job *J, int64_t s, int64_t cnt, double *r, const int64_t w) {
  (void)cnt, (void)w;
  LDROW(IN(1), s, 9, r);
}
/* Four rows at once, lane q = row p+q, by component (ld4's layout): O = mᵀ V (segops_mtv) and
 * O = m V (segops_mv), each lane the scalar function's operations in its order. */
SEGOPS_CPU_INLINE void FN(mtv4)(const double *m, const segops_v4d *V, segops_v4d *O) {
  for (int k = 0; k < 3; k++) O[k] = m[k] * V[0] + m[3 + k] * V[1] + m[6 + k] * V[2];
}
SEGOPS_CPU_INLINE void FN(mv4)(const double *m, const segops_v4d *V, segops_v4d *O) {
  for (int j = 0; j < 3; j++) O[j] = m[3 * j] * V[0] + m[3 * j + 1] * V[1] + m[3 * j + 2] * V[2];
}
HOOK FN(matvec_forward_gather)(const segops_cpu_job *J, int64_t i, int64_t j, const double *r, const int64_t w) {
  (void)w;
  if (!OUT(0)) return;
  int64_t p = i;
  for (; p + 4 <= j; p += 4) { /* four rows in vectors, then the last 0-3 one by one */
    segops_v4d v[3], o[3];
    FN(ld4)(IN(0), p, 3, v);
    FN(mtv4)(r, v, o);
    FN(st4)(OUT(0), p, 3, o);
  }
  for (; p < j; p++) {
    double v[3], o[3];
    LDROW(IN(0), p, 3, v);
    segops_mtv(r, v, o);
    STROW(OUT(0), p, 3, o);
  }
}
/* acc += outer(a[i], b[i]) for inputs ak, bk (a NULL reads as zeros); grad_m = acc. */
SEGOPS_CPU_INLINE void FN(outer_visit)(const segops_cpu_job *J, int64_t i, double *acc, int ak, int bk) {
  double a[3], b[3];
  if (!IN(ak)) return;
  LDROW(IN(ak), i, 3, a);
  LDROW(IN(bk), i, 3, b);
  segops_outer_add(acc, a, b);
}
/* Four elements into the accumulators of the 3x3 outer product, acc[3j+k] += a[j]*b[k] per
 * element as segops_outer_add, in one of two layouts (SEGOPS_CPU_ACC_OUTER), each the faster for
 * its dtype on one thread in cache (bench/cpu/bench_cpu, both layouts built):
 * - float32, SEGOPS_CPU_ACC_LANES: element i+q into lane q, accumulator 3j+k in A[3j+k], a and b
 *   by component as ld4 loads them: nine chains of one add per four elements, no broadcasts. Lanes
 *   from m on: a and b kept at +0.0 first (a row past the segment may hold an inf, and 0*inf is a
 *   NaN), so their products add +0.0.
 * - float64, SEGOPS_CPU_ACC_ROWS3: every element into the one lane, in order, row j of the
 *   accumulator in A[j], b as a vector; each a[j] broadcast from memory (a load, not a lane
 *   broadcast on the shuffle port), which costs less than float64's transpositions. */
SEGOPS_CPU_INLINE void FN(outer_visit4)(const segops_cpu_job *J, int64_t i, segops_v4d *A, int m, int ak, int bk) {
  if (!IN(ak)) return;
  if (sizeof(T) == 8) {
    segops_v4d b[3];
    FN(ld4flat)(IN(bk), i, 3, b);
    /* row q of b as {b0 b1 b2 _}: its values sit at 3q .. 3q+2 of the flat F */
    const segops_v4d br[4] = {b[0], SEGOPS_CPU_SHUF(b[0], b[1], 3, 4, 5, 5), SEGOPS_CPU_SHUF(b[1], b[2], 2, 3, 4, 4),
                              SEGOPS_CPU_SHUF(b[2], b[2], 1, 2, 3, 3)};
    for (int q = 0; q < m; q++)
      for (int j = 0; j < 3; j++) A[j] += FN(ld)(IN(ak), 3 * (i + q) + j) * br[q];
  } else {
    segops_v4d a[3], b[3];
    FN(ld4)(IN(ak), i, 3, a);
    FN(ld4)(IN(bk), i, 3, b);
    if (m < SEGOPS_CPU_LANES)
      for (int j = 0; j < 3; j++) segops_cpu_keep(&a[j], m), segops_cpu_keep(&b[j], m);
    for (int j = 0; j < 3; j++)
      for (int k = 0; k < 3; k++) A[3 * j + k] += a[j] * b[k];
  }
}
HOOK FN(matvec_backward_visit4)(const segops_cpu_job *J, int64_t i, segops_v4d *A, const int m, const int64_t w) {
  (void)w;
  FN(outer_visit4)(J, i, A, m, 1, 0);
}
HOOK FN(matvec_double_backward_visit4)(const segops_cpu_job *J, int64_t i, segops_v4d *A, const int m,
                                       const int64_t w) {
  (void)w;
  FN(outer_visit4)(J, i, A, m, 0, 2);
}
/* backward, in: g_out, v, m. grad_m[s] = Σ outer(v, g_out) (output 1); grad_v[i] = m[s] g_out[i]. */
HOOK FN(matvec_backward_visit)(const segops_cpu_job *J, int64_t i, double *acc, const int64_t w) {
  (void)w;
  FN(outer_visit)(J, i, acc, 1, 0);
}
HOOK FN(matvec_backward_finish)(const segops_cpu_job *J, int64_t s, int64_t cnt, const double *acc, double *sv,
                                const int64_t w) {
  (void)cnt, (void)sv, (void)w;
  STROW(OUT(1), s, 9, acc);
}
HOOK FN(matvec_backward_row)(const segops_cpu_job *J, int64_t s, int64_t cnt, double *r, const int64_t w) {
  (void)cnt, (void)w;
  LDROW(IN(2), s, 9, r);
}
HOOK FN(matvec_backward_gather)(const segops_cpu_job *J, int64_t i, int64_t j, const double *r, const int64_t w) {
  (void)w;
  if (!OUT(0)) return;
  int64_t p = i;
  for (; p + 4 <= j; p += 4) {
    segops_v4d g[3], o[3];
    FN(ld4)(IN(0), p, 3, g);
    FN(mv4)(r, g, o);
    FN(st4)(OUT(0), p, 3, o);
  }
  for (; p < j; p++) {
    double g[3], o[3];
    LDROW(IN(0), p, 3, g);
    segops_mv(r, g, o);
    STROW(OUT(0), p, 3, o);
  }
}
/* double backward, in: gg_v, gg_m, g_out, v, m. grad_m[s] = Σ outer(gg_v, g_out) (output 2);
 * grad_g_out[i] = m[s]ᵀ gg_v[i] + gg_m[s]ᵀ v[i]; grad_v[i] = gg_m[s] g_out[i]. r = {m[s], gg_m[s]}. */
HOOK FN(matvec_double_backward_visit)(const segops_cpu_job *J, int64_t i, double *acc, const int64_t w) {
  (void)w;
  FN(outer_visit)(J, i, acc, 0, 2);
}
HOOK FN(matvec_double_backward_finish)(const segops_cpu_job *J, int64_t s, int64_t cnt, const double *acc, double *sv,
                                       const int64_t w) {
  (void)cnt, (void)sv, (void)w;
  STROW(OUT(2), s, 9, acc);
}
HOOK FN(matvec_double_backward_row)(const segops_cpu_job *J, int64_t s, int64_t cnt, double *r, const int64_t w) {
  (void)cnt, (void)w;
  LDROW(IN(4), s, 9, r);
  LDROW(IN(1), s, 9, r + 9);
}
HOOK FN(matvec_double_backward_gather)(const segops_cpu_job *J, int64_t i, int64_t j, const double *r,
                                       const int64_t w) {
  (void)w;
  if (OUT(0)) {
    int64_t p = i;
    for (; p + 4 <= j; p += 4) { /* segops_matvec_dbl_ggo per lane: mᵀ gg_v + gg_mᵀ v */
      segops_v4d a[3], b[3], o[3], o2[3];
      FN(ld4)(IN(0), p, 3, a);
      FN(ld4)(IN(3), p, 3, b);
      FN(mtv4)(r, a, o);
      FN(mtv4)(r + 9, b, o2);
      for (int k = 0; k < 3; k++) o[k] += o2[k];
      FN(st4)(OUT(0), p, 3, o);
    }
    for (; p < j; p++) {
      double a[3], b[3], o[3];
      LDROW(IN(0), p, 3, a);
      LDROW(IN(3), p, 3, b);
      segops_matvec_dbl_ggo(r, a, r + 9, b, o);
      STROW(OUT(0), p, 3, o);
    }
  }
  if (OUT(1)) {
    int64_t p = i;
    for (; p + 4 <= j; p += 4) {
      segops_v4d a[3], o[3];
      FN(ld4)(IN(2), p, 3, a);
      FN(mv4)(r + 9, a, o);
      FN(st4)(OUT(1), p, 3, o);
    }
    for (; p < j; p++) {
      double a[3], o[3];
      LDROW(IN(2), p, 3, a);
      segops_mv(r + 9, a, o);
      STROW(OUT(1), p, 3, o);
    }
  }
}

#include "cpu_ops_arg.h"

/* ---- Each function's hooks, and its tasks (walk, reduce, elems) for width 1 and 3 ----
 * DEF(name, row, visit, visit4, layout, finish, post, gather): 0 for a hook it lacks; layout is
 * how its visit4 keeps the accumulators (segops_cpu_acc_layout, without the prefix). Every
 * function reduces by sum (SEGOPS_CPU_SUM) but max and min (DEF_ARG: their arg reducers). How many accumulators and
 * segment values it keeps is its row's n_acc and n_segval (ops.c), carried by the job. */
/* matvec's outer products: one layout per dtype (FN(outer_visit4)). */
#define SEGOPS_CPU_ACC_OUTER (sizeof(T) == 8 ? SEGOPS_CPU_ACC_ROWS3 : SEGOPS_CPU_ACC_LANES)
#define HOOKS_RED(red, fast, row, visit, visit4, layout, finish, post, gather) \
  ((segops_cpu_hooks){row, visit, visit4, SEGOPS_CPU_ACC_##layout, finish, post, gather, red, fast})
/* A task runs the constant-width instantiation for w = 1 or 3, the general one (storage of its own,
 * cpu_phases.h) for any other width. */
#define TASK(name, driver, H)                             \
  static void FN(name##_##driver)(void *arg, int64_t c) { \
    const segops_cpu_job *J = arg;                        \
    if (J->w == 3) {                                      \
      segops_cpu_##driver(J, H, c, 3, NULL);              \
    } else if (J->w == 1) {                               \
      segops_cpu_##driver(J, H, c, 1, NULL);              \
    } else {                                              \
      double *heap = segops_cpu_heap(J);                  \
      if (heap) segops_cpu_##driver(J, H, c, J->w, heap); \
      free(heap);                                         \
    }                                                     \
  }
#define DEF_RED(red, fast, name, row, visit, visit4, layout, finish, post, gather)           \
  TASK(name, walk, HOOKS_RED(red, fast, row, visit, visit4, layout, finish, post, gather))   \
  TASK(name, reduce, HOOKS_RED(red, fast, row, visit, visit4, layout, finish, post, gather)) \
  TASK(name, elems, HOOKS_RED(red, fast, row, visit, visit4, layout, finish, post, gather))
#define DEF(...) DEF_RED(SEGOPS_CPU_SUM, 0, __VA_ARGS__)
/* max and min: their arg reducers, and their fast route (cpu_ops_arg.h) in the walk. */
#define DEF_ARG(red, name, ...) DEF_RED(red, FN(name##_fast), name, __VA_ARGS__)

// clang-format off
DEF(sum_forward, 0, FN(sum_visit), FN(sum_visit4), FLAT, FN(sum_finish), 0, 0)
DEF(sum_backward, FN(g_row), 0, 0, LANES, 0, 0, FN(copy_gather))
DEF(sum_double_backward, 0, FN(sum_visit), FN(sum_visit4), FLAT, FN(sum_finish), 0, 0)
DEF(dot_forward, 0, FN(dot_forward_visit), FN(dot_forward_visit4), LANES, FN(dot_finish), 0, 0)
DEF(dot_backward, FN(seg1_row), 0, 0, LANES, 0, 0, FN(dot_backward_gather))
DEF(dot_double_backward, FN(dot_double_backward_row), FN(dot_double_backward_visit),
    FN(dot_double_backward_visit4), LANES, FN(dot_finish), 0, FN(dot_double_backward_gather))
DEF(mul1_forward, FN(mul_forward_row), 0, 0, LANES, 0, 0, FN(mul_forward_gather))
DEF(mul1_backward, FN(mul_backward_row), FN(mul_backward_visit), FN(mul_backward_visit4), LANES,
    FN(mul_backward_finish), 0, FN(mul_backward_gather))
DEF(mul1_double_backward, FN(mul_double_backward_row), FN(mul_double_backward_visit),
    FN(mul_double_backward_visit4), LANES, FN(mul_double_backward_finish), 0, FN(mul_double_backward_gather))
DEF(mulw_forward, FN(mulw_forward_row), 0, 0, LANES, 0, 0, FN(mulw_forward_gather))
DEF(mulw_backward, FN(mulw_backward_row), FN(mulw_backward_visit), 0, LANES, FN(mulw_backward_finish), 0,
    FN(mulw_backward_gather))
DEF(mulw_double_backward, FN(mulw_double_backward_row), FN(mulw_double_backward_visit), 0, LANES,
    FN(mulw_double_backward_finish), 0, FN(mulw_double_backward_gather))
DEF(mean_forward, 0, FN(sum_visit), FN(sum_visit4), FLAT, FN(mean_finish), 0, 0)
DEF(mean_backward, FN(mean_backward_row), 0, 0, LANES, 0, 0, FN(copy_gather))
DEF(mean_double_backward, 0, FN(sum_visit), FN(sum_visit4), FLAT, FN(mean_finish), 0, 0)
DEF(rms_norm_forward, 0, FN(rms_norm_forward_visit), FN(rms_norm_forward_visit4), LANES,
    FN(rms_norm_forward_finish), 0, 0)
DEF(rms_norm_backward, 0, FN(rms_norm_backward_visit), FN(rms_norm_backward_visit4), LANES,
    FN(rms_norm_backward_finish), FN(rms_norm_backward_post), 0)
DEF(rms_norm_double_backward, 0, FN(rms_norm_double_backward_visit), FN(rms_norm_double_backward_visit4), LANES,
    FN(rms_norm_double_backward_finish), FN(rms_norm_double_backward_post), 0)
DEF(matvec_forward, FN(matvec_forward_row), 0, 0, LANES, 0, 0, FN(matvec_forward_gather))
DEF(matvec_backward, FN(matvec_backward_row), FN(matvec_backward_visit), FN(matvec_backward_visit4), OUTER,
    FN(matvec_backward_finish), 0, FN(matvec_backward_gather))
DEF(matvec_double_backward, FN(matvec_double_backward_row), FN(matvec_double_backward_visit),
    FN(matvec_double_backward_visit4), OUTER, FN(matvec_double_backward_finish), 0, FN(matvec_double_backward_gather))
DEF_ARG(SEGOPS_CPU_ARGMAX, max_forward, 0, FN(max_forward_visit), FN(max_forward_visit4), LANES,
        FN(arg_forward_finish), 0, 0)
DEF_ARG(SEGOPS_CPU_ARGMAX, max_backward, 0, FN(max_backward_visit), FN(max_backward_visit4), LANES,
        FN(arg_backward_finish), FN(arg_backward_post), 0)
DEF_ARG(SEGOPS_CPU_ARGMAX, max_double_backward, 0, FN(max_double_backward_visit), FN(max_double_backward_visit4),
        LANES, FN(arg_double_backward_finish), 0, FN(zero_gather))
DEF_ARG(SEGOPS_CPU_ARGMIN, min_forward, 0, FN(min_forward_visit), FN(min_forward_visit4), LANES,
        FN(arg_forward_finish), 0, 0)
DEF_ARG(SEGOPS_CPU_ARGMIN, min_backward, 0, FN(min_backward_visit), FN(min_backward_visit4), LANES,
        FN(arg_backward_finish), FN(arg_backward_post), 0)
DEF_ARG(SEGOPS_CPU_ARGMIN, min_double_backward, 0, FN(min_double_backward_visit), FN(min_double_backward_visit4),
        LANES, FN(arg_double_backward_finish), 0, FN(zero_gather))
// clang-format on

/* mul's tasks: y (S,) scales rows (mul1_), y (S,*F) multiplies element-wise (mulw_). */
#define MUL_TASK(pass, driver)                                  \
  static void FN(mul_##pass##_##driver)(void *arg, int64_t c) { \
    const segops_cpu_job *J = arg;                              \
    if (J->y_wide)                                              \
      FN(mulw_##pass##_##driver)(arg, c);                       \
    else                                                        \
      FN(mul1_##pass##_##driver)(arg, c);                       \
  }
#define MUL_TASKS(pass) MUL_TASK(pass, walk) MUL_TASK(pass, reduce) MUL_TASK(pass, elems)
MUL_TASKS(forward)
MUL_TASKS(backward)
MUL_TASKS(double_backward)
#undef MUL_TASKS
#undef MUL_TASK

#undef DEF
#undef DEF_RED
#undef DEF_ARG
#undef TASK
#undef HOOKS_RED
#undef LDROW
#undef STROW
#undef IN
#undef OUT
#undef HOOK
#undef FAST
#undef W13
#undef FN
#undef CAT
#undef CAT_

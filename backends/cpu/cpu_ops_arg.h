/* cpu_ops_arg.h: segmented_max and segmented_min as CPU hooks, part of cpu_ops_impl.h (which includes
 * it where the arg reducers' hooks belong, with T, SFX, FN, HOOK and its loaders defined).
 * Two routes to the same bits. The pairs (value, index) per column and lane, in the arg order of
 * segops_arg_beats (segops_cpu_pair_best4), are the exact route: unsorted idx, and every segment the
 * fast route declines. The fast route (sorted idx, the hooks' fast) keeps values only, one max (min)
 * per lane like sum's add, plus the index for the backward passes, and reads the arg order's ties
 * from that: it declines a segment holding a NaN, which then runs through the pairs. */
#ifndef FN
#error "cpu_ops_arg.h is part of cpu_ops_impl.h; include that"
#endif

/* ---- segmented_max and segmented_min (rows of any width) ----
 * Per column c, acc[2c], acc[2c+1] is the pair (value, index) of the column's arg element so far
 * (segops_arg_beats; the reducers SEGOPS_CPU_ARGMAX, SEGOPS_CPU_ARGMIN). x is input xk of the pass. */
SEGOPS_CPU_INLINE void FN(arg_visit)(const segops_cpu_job *J, int64_t i, double *acc, int xk, int is_max,
                                     const int64_t w) {
  for (int64_t c = 0; c < w; c++) {
    const double v = FN(ld)(IN(xk), i * w + c);
    if (segops_arg_beats(acc[2 * c], acc[2 * c + 1], v, (double)i, is_max)) acc[2 * c] = v, acc[2 * c + 1] = (double)i;
  }
}
/* FN(arg_visit) for four rows (width 1 or 3), lane q = row i+q, with A[2c] the values of column c's
 * pairs and A[2c+1] their indices (SEGOPS_CPU_ACC_LANES): a row replaces its lane's pair where it
 * beats it (segops_cpu_pair_best4); lanes from m on keep their pairs. */
SEGOPS_CPU_INLINE void FN(arg_visit4)(const segops_cpu_job *J, int64_t i, segops_v4d *A, int m, int xk, int is_max,
                                      int64_t w) {
  segops_v4d x[3];
  FN(ld4)(IN(xk), i, W13(w), x);
  const segops_v4d iv = {(double)i, (double)(i + 1), (double)(i + 2), (double)(i + 3)};
  const segops_v4l lane = {0, 1, 2, 3}, live = lane < (segops_v4l){m, m, m, m};
  for (int c = 0; c < W13(w); c++) segops_cpu_pair_best4(&A[2 * c], &A[2 * c + 1], x[c], iv, live, is_max);
}

/* ---- The fast route of max and min (sorted idx; the hooks' fast, cpu_phases.h) ----
 * The segment in one pass per column with segops_cpu_best4: the best value and, for the backward
 * passes, the lowest index holding it. Without NaN that is the arg order's answer: for a best value
 * other than a zero every element equal to it has its bits, and the lowest index wins; the forward,
 * which keeps no index, reads a zero's sign at the first zero of its column. A segment holding a
 * NaN, and a column that never beat the identity (all -inf for max, +inf for min), go to the pairs
 * above (the fast route declines the segment). */

/* Columns [c0, w) of rows [p, j) one at a time into v and a (need_arg): a NaN sets *nan. */
SEGOPS_CPU_INLINE void FN(best_tail)(const void *x, int64_t p, int64_t j, const int64_t w, const int64_t c0,
                                     const int is_max, const bool need_arg, double *v, double *a, bool *nan) {
  for (; p < j; p++)
    for (int64_t c = c0; c < w; c++) {
      const double b = FN(ld)(x, p * w + c);
      *nan |= b != b;
      if (segops_cpu_further(v[c], b, is_max)) v[c] = b, a[c] = need_arg ? (double)p : a[c];
    }
}
#ifndef SEGOPS_CPU_ARG_PF
#define SEGOPS_CPU_ARG_PF 1024
#endif
/* Width 1 or 3: segment s from row i, finding its end j (returned) as segops_cpu_reduce4 does.
 * Groups of four rows as they load (flat: position 4k + e of a group in lane e of V[k], column
 * (4k + e) % w, row offset off[k][e]), so the vectors need no shuffles; the lanes of a column fold
 * into v[c] (and a[c]) with segops_arg_beats, the rows past the last group one at a time. */
SEGOPS_CPU_INLINE int64_t FN(best13)(const segops_cpu_job *J, const void *x, const int32_t s, const int64_t i,
                                     const int w, const int is_max, const bool need_arg, const void *pf, double *v,
                                     double *a, bool *nan) {
  const double id = segops_arg_identity(is_max);
  const segops_v4d idv = {id, id, id, id}, none = {INFINITY, INFINITY, INFINITY, INFINITY};
  const segops_v4d off[2][3] = {{{0, 1, 2, 3}}, {{0, 0, 0, 1}, {1, 1, 2, 2}, {2, 3, 3, 3}}};
  const segops_v4l lane = {0, 1, 2, 3};
  segops_v4d V[3] = {idv, idv, idv}, I[3] = {none, none, none};
  segops_v4l N = {0, 0, 0, 0};
  int64_t p = i, j;
  for (;;) {
    if (p + SEGOPS_CPU_LANES > J->n) { /* the end of idx: the last 0-3 rows one at a time, below */
      j = segops_cpu_seg_end(J->idx, J->n, p, s);
      break;
    }
    const unsigned diff = segops_cpu_diff4(J->idx, p, s);
    const int m = diff ? __builtin_ctz(diff) : SEGOPS_CPU_LANES;
    segops_v4d F[3];
    const double pd = (double)p;
    FN(ld4flat)(x, p, w, F);
    if (pf) __builtin_prefetch((const char *)pf + (p * w) * (int64_t)sizeof(T) + SEGOPS_CPU_ARG_PF);
    for (int k = 0; k < w; k++) {
      if (diff) { /* positions of rows past the end: the identity, which never beats */
        const segops_v4l live = lane + 4 * k < (segops_v4l){m * w, m * w, m * w, m * w};
        F[k] = (segops_v4d)(((segops_v4l)F[k] & live) | ((segops_v4l)idv & ~live));
      }
      segops_cpu_best4(&V[k], &I[k], &N, F[k], (segops_v4d){pd, pd, pd, pd} + off[w == 3][k], is_max, need_arg);
    }
    p += m;
    if (diff) {
      j = p;
      break;
    }
  }
  *nan = (N[0] | N[1] | N[2] | N[3]) != 0;
  segops_v4d CV[3], CI[3]; /* by column: CV[c] = column c's four lanes (segops_cpu_rows_to_cols) */
  if (w == 3) {
    segops_cpu_rows_to_cols(V, CV);
    if (need_arg) segops_cpu_rows_to_cols(I, CI);
  } else {
    CV[0] = V[0], CI[0] = I[0];
  }
  const segops_v4l all = {-1, -1, -1, -1};
  for (int c = 0; c < w; c++) { /* lanes (0 . 1) and (2 . 3), then the two, in the registers */
    segops_v4d cv = CV[c], ci = need_arg ? CI[c] : none;
    segops_cpu_pair_best4(&cv, &ci, SEGOPS_CPU_SHUF(cv, cv, 1, 0, 3, 2), SEGOPS_CPU_SHUF(ci, ci, 1, 0, 3, 2), all,
                          is_max);
    segops_cpu_pair_best4(&cv, &ci, SEGOPS_CPU_SHUF(cv, cv, 2, 3, 0, 1), SEGOPS_CPU_SHUF(ci, ci, 2, 3, 0, 1), all,
                          is_max);
    v[c] = cv[0], a[c] = ci[0];
  }
  if (p < j) FN(best_tail)(x, p, j, w, 0, is_max, need_arg, v, a, nan);
  return j;
}
/* Any width: rows [i, j) one after another, each row's columns four at a time against v (and a)
 * in memory. */
SEGOPS_CPU_INLINE void FN(best_rows)(const void *x, const int64_t i, const int64_t j, const int64_t w, const int is_max,
                                     const bool need_arg, const void *pf, double *v, double *a, bool *nan) {
  const double id = segops_arg_identity(is_max);
  for (int64_t c = 0; c < w; c++) v[c] = id, a[c] = INFINITY;
  segops_v4l N = {0, 0, 0, 0};
  const int64_t w4 = w & ~(int64_t)3;
  for (int64_t p = i; p < j; p++) {
    const double pd = (double)p;
    for (int64_t b = 0; pf && b < w * (int64_t)sizeof(T); b += 64)
      __builtin_prefetch((const char *)pf + p * w * (int64_t)sizeof(T) + b + SEGOPS_CPU_ARG_PF);
    for (int64_t c = 0; c < w4; c += 4) {
      segops_v4d bv, av, ai = {0, 0, 0, 0};
      FN(ldv)(x, p * w + c, &bv);
      memcpy(&av, v + c, sizeof av);
      if (need_arg) memcpy(&ai, a + c, sizeof ai);
      segops_cpu_best4(&av, &ai, &N, bv, (segops_v4d){pd, pd, pd, pd}, is_max, need_arg);
      memcpy(v + c, &av, sizeof av);
      if (need_arg) memcpy(a + c, &ai, sizeof ai);
    }
  }
  *nan = (N[0] | N[1] | N[2] | N[3]) != 0;
  FN(best_tail)(x, i, j, w, w4, is_max, need_arg, v, a, nan); /* the last w % 4 columns */
}
/* The first of rows [i, j) whose column c equals b (there is one). */
SEGOPS_CPU_INLINE int64_t FN(first_eq)(const void *x, int64_t i, const int64_t w, const int64_t c, const double b) {
  while (FN(ld)(x, i * w + c) != b) i++;
  return i;
}
/* The fast route of pass xk (the input x is; 0 forward, 1 backward, 2 double backward). */
SEGOPS_CPU_INLINE int64_t FN(arg_fast)(const segops_cpu_job *J, const int64_t s, const int64_t i, const int64_t w,
                                       double *heap, const int xk, const int is_max) {
  const bool gen = segops_cpu_gen(heap), need_arg = xk != 0;
  const void *x = IN(xk);
  double v_s[3], a_s[3];
  double *v = gen ? heap : v_s, *a = gen ? heap + w : a_s; /* heap: J->n_acc = 2w accumulators */
  bool nan = false;
  int64_t j;
  if (!J->plan.reduce) return -1; /* double backward's grad_x alone: zeros */
  if (gen) {
    j = segops_cpu_seg_end(J->idx, J->n, i + 1, (int32_t)s);
    FN(best_rows)(x, i, j, w, is_max, need_arg, xk == 2 ? IN(0) : NULL, v, a, &nan);
  } else {
    j = FN(best13)(J, x, (int32_t)s, i, W13(w), is_max, need_arg, xk == 2 ? IN(0) : NULL, v, a, &nan);
  }
  if (nan) return -1;
  for (int64_t c = 0; need_arg && c < w; c++)
    if (a[c] == INFINITY) return -1;
  if (xk == 0) {
    for (int64_t c = 0; c < w; c++) /* a zero: the first zero's, with its sign */
      FN(st)(OUT(0), s * w + c, v[c] != 0.0 ? v[c] : FN(ld)(x, FN(first_eq)(x, i, w, c, 0.0) * w + c));
  } else if (xk == 1) {
    FN(scale)(OUT(0), NULL, 0.0, i * w, j * w);
    for (int64_t c = 0; c < w; c++) FN(st)(OUT(0), (int64_t)a[c] * w + c, FN(ld)(IN(0), s * w + c));
  } else {
    for (int64_t c = 0; c < w; c++) FN(st)(OUT(0), s * w + c, IN(0) ? FN(ld)(IN(0), (int64_t)a[c] * w + c) : 0.0);
    if (J->plan.gather) FN(scale)(OUT(1), NULL, 0.0, i * w, j * w);
  }
  return j;
}
/* The hooks of max and min for each pass, on input xk of the pass: the arg visits (the pairs: unsorted
 * idx, and a segment holding a NaN) and the fast route (sorted idx). */
#define ARG_HOOKS(name, xk, is_max)                                                                          \
  HOOK FN(name##_visit4)(const segops_cpu_job *J, int64_t i, segops_v4d *A, const int m, const int64_t w) {  \
    FN(arg_visit4)(J, i, A, m, xk, is_max, w);                                                               \
  }                                                                                                          \
  HOOK FN(name##_visit)(const segops_cpu_job *J, int64_t i, double *acc, const int64_t w) {                  \
    FN(arg_visit)(J, i, acc, xk, is_max, w);                                                                 \
  }                                                                                                          \
  SEGOPS_CPU_INLINE int64_t FN(name##_fast)(const segops_cpu_job *J, int64_t s, int64_t i, const int64_t w,  \
                                            double *heap) {                                                  \
    return FN(arg_fast)(J, s, i, w, heap, xk, is_max);                                                       \
  }
ARG_HOOKS(max_forward, 0, 1)
ARG_HOOKS(min_forward, 0, 0)
ARG_HOOKS(max_backward, 1, 1)
ARG_HOOKS(min_backward, 1, 0)
ARG_HOOKS(max_double_backward, 2, 1)
ARG_HOOKS(min_double_backward, 2, 0)
#undef ARG_HOOKS

/* forward: out[s] = the arg element's value per column, 0 for an empty segment. */
HOOK FN(arg_forward_finish)(const segops_cpu_job *J, int64_t s, int64_t cnt, const double *acc, double *sv,
                            const int64_t w) {
  (void)sv;
  if (OUT(0))
    for (int64_t c = 0; c < w; c++) FN(st)(OUT(0), s * w + c, cnt > 0 ? acc[2 * c] : 0.0);
}
/* backward, in: g_out, x. sv[c] = the arg element of column c; grad_x[i] = g_out[s] there, else 0. */
HOOK FN(arg_backward_finish)(const segops_cpu_job *J, int64_t s, int64_t cnt, const double *acc, double *sv,
                             const int64_t w) {
  (void)J, (void)s, (void)cnt;
  for (int64_t c = 0; c < w; c++) sv[c] = acc[2 * c + 1];
}
HOOK FN(arg_backward_post)(const segops_cpu_job *J, int64_t i, int64_t j, const double *sv, const int64_t w) {
  if (!OUT(0)) return;
  const int64_t s = J->idx[i];
  for (int64_t p = i; p < j; p++)
    for (int64_t c = 0; c < w; c++) FN(st)(OUT(0), p * w + c, (double)p == sv[c] ? FN(ld)(IN(0), s * w + c) : 0.0);
}
/* double backward, in: gg_x, g_out, x. grad_g_out[s] = gg_x at the arg element per column (0 for an
 * empty segment or an omitted gg_x); grad_x = 0 (a gather of zeros). */
HOOK FN(arg_double_backward_finish)(const segops_cpu_job *J, int64_t s, int64_t cnt, const double *acc, double *sv,
                                    const int64_t w) {
  (void)sv;
  if (!OUT(0)) return;
  for (int64_t c = 0; c < w; c++)
    FN(st)(OUT(0), s * w + c, cnt > 0 && IN(0) ? FN(ld)(IN(0), (int64_t)acc[2 * c + 1] * w + c) : 0.0);
}
HOOK FN(zero_gather)(const segops_cpu_job *J, int64_t i, int64_t j, const double *r, const int64_t w) {
  (void)r;
  FN(scale)(OUT(1), NULL, 0.0, i * w, j * w);
}

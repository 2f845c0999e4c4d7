/* cpu_ops_arg.h: segmented_max and segmented_min as CPU hooks, part of cpu_ops_impl.h (which includes
 * it where the arg reducers' hooks belong, with T, SFX, FN, HOOK and its loaders defined). */
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
/* The visit and visit4 hooks of max and min for each pass: the arg visits on input xk of the pass. */
#define ARG_VISITS(name, xk, is_max)                                                                               \
  HOOK FN(name##_visit4)(const segops_cpu_job *J, int64_t i, segops_v4d *A, const int m, const int64_t w) {    \
    FN(arg_visit4)(J, i, A, m, xk, is_max, w);                                                                     \
  }                                                                                                                \
  HOOK FN(name##_visit)(const segops_cpu_job *J, int64_t i, double *acc, const int64_t w) {                      \
    FN(arg_visit)(J, i, acc, xk, is_max, w);                                                                       \
  }
ARG_VISITS(max_forward, 0, 1)
ARG_VISITS(min_forward, 0, 0)
ARG_VISITS(max_backward, 1, 1)
ARG_VISITS(min_backward, 1, 0)
ARG_VISITS(max_double_backward, 2, 1)
ARG_VISITS(min_double_backward, 2, 0)
#undef ARG_VISITS
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

/* cuda_rms_norm.cu: segmented_rms_norm on the GPU (rows of any width, c_s counting rows; every
 * pass reduces ||x||^2). Rows of a run-time width: whole rows (cuda_wide.cuh). */
#include "cuda_registry.cuh"

/* forward: in x; out[s] = sqrt(sum ||x||^2 / c_s), 0 when empty. */
struct rms_forward : segops_cuda_sum {
  enum { K = 1, NSV = 1, POST = 0, WIDE = SEGOPS_WIDE_ROWS };
  template <typename T, int W>
  __device__ static void visit(const segops_kargs *a, int64_t i, int64_t, double *acc) {
#pragma unroll
    for (int c = 0; c < W; c++) {
      double v = ld<T>(a->in[0], i * W + c);
      acc[0] += v * v;
    }
  }
  template <typename T>
  __device__ static void term(const segops_kargs *a, int64_t k, double *t) {
    const double v = ld<T>(a->in[0], k);
    t[0] += v * v;
  }
  template <typename T, int W>
  __device__ static void finish(const segops_kargs *a, int64_t s, int64_t cnt, const double *acc, double *,
                                bool writer) {
    if (writer) st<T>(a->out[0], s, segops_rms_value(acc[0], cnt));
  }
};

/* backward: in g_out (S), x; grad_x[i] = g_out[s]*inv_s*x[i]. */
struct rms_backward : segops_cuda_sum {
  enum { K = 1, NSV = 1, POST = 1, WIDE = SEGOPS_WIDE_ROWS };
  template <typename T, int W>
  __device__ static void visit(const segops_kargs *a, int64_t i, int64_t, double *acc) {
#pragma unroll
    for (int c = 0; c < W; c++) {
      double v = ld<T>(a->in[1], i * W + c); /* x is input 1 of the backward */
      acc[0] += v * v;
    }
  }
  template <typename T>
  __device__ static void term(const segops_kargs *a, int64_t k, double *t) {
    const double v = ld<T>(a->in[1], k);
    t[0] += v * v;
  }
  template <typename T, int W>
  __device__ static void finish(const segops_kargs *a, int64_t s, int64_t cnt, const double *acc, double *sv, bool) {
    segops_rms_bwd_finish(ld<T>(a->in[0], s), acc[0], cnt, sv);
  }
  template <typename T, int W>
  __device__ static void post(const segops_kargs *a, int64_t i, int64_t, const double *sv) {
#pragma unroll
    for (int c = 0; c < W; c++) st<T>(a->out[0], i * W + c, segops_rms_bwd_post_c(sv, ld<T>(a->in[1], i * W + c)));
  }
  template <typename T>
  __device__ static void post_v(const segops_kargs *a, int64_t k, const double *sv) {
    st<T>(a->out[0], k, segops_rms_bwd_post_c(sv, ld<T>(a->in[1], k)));
  }
};

/* double backward: in gg_x, g_out (S), x; out grad_g_out (S), grad_x.
 * q_s = sum dot(gg_x, x); grad_g_out = q_s*inv_s;
 * grad_x[i] = g*inv*gg_x[i] - g*inv^3*c_s*q_s*x[i]. */
struct rms_double_backward : segops_cuda_sum {
  enum { K = 2, NSV = 2, POST = 1, WIDE = SEGOPS_WIDE_ROWS };
  template <typename T, int W>
  __device__ static void visit(const segops_kargs *a, int64_t i, int64_t, double *acc) {
#pragma unroll
    for (int c = 0; c < W; c++) {
      double v = ld<T>(a->in[2], i * W + c);
      acc[0] += v * v;
      acc[1] += ld<T>(a->in[0], i * W + c) * v;
    }
  }
  template <typename T>
  __device__ static void term(const segops_kargs *a, int64_t k, double *t) {
    const double v = ld<T>(a->in[2], k);
    t[0] += v * v;
    t[1] += ld<T>(a->in[0], k) * v;
  }
  template <typename T, int W>
  __device__ static void finish(const segops_kargs *a, int64_t s, int64_t cnt, const double *acc, double *sv,
                                bool writer) {
    /* segops_rms_dbl_finish's steps, grad_g_out stored before g_out[s] is loaded */
    const double inv = segops_rms_inv(acc[0], cnt), q = acc[1];
    if (writer) st<T>(a->out[0], s, segops_rms_dbl_ggo(inv, q));
    segops_rms_dbl_segvals(ld<T>(a->in[1], s), inv, q, cnt, sv);
  }
  template <typename T, int W>
  __device__ static void post(const segops_kargs *a, int64_t i, int64_t, const double *sv) {
    if (!a->out[1]) return;
      /* segops_rms_dbl_post_c's formula written out: called with the two loads as its arguments,
       * the post gather compiles the loads' NULL checks in another order (other SASS, same bits) */
#pragma unroll
    for (int c = 0; c < W; c++)
      st<T>(a->out[1], i * W + c, sv[0] * ld<T>(a->in[0], i * W + c) - sv[1] * ld<T>(a->in[2], i * W + c));
  }
  template <typename T>
  __device__ static void post_v(const segops_kargs *a, int64_t k, const double *sv) {
    if (a->out[1]) st<T>(a->out[1], k, sv[0] * ld<T>(a->in[0], k) - sv[1] * ld<T>(a->in[2], k));
  }
};

SEGOPS_CUDA_FN(rms_norm_forward, rms_forward, void)
SEGOPS_CUDA_FN(rms_norm_backward, rms_backward, void)
SEGOPS_CUDA_FN(rms_norm_double_backward, rms_double_backward, void)

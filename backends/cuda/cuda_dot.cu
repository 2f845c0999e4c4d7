/* cuda_dot.cu: segmented_dot on the GPU (forward and double backward reduce, backward gathers). */
#include "cuda_registry.cuh"

/* forward: in x, y; out[s] = sum dot(x[i], y[i]). */
typedef dot_reduce<0, 1, 0> dot_forward;

/* backward: in g_out, x, y; grad_x[i] = g_out[s]*y[i], grad_y[i] = g_out[s]*x[i]. */
struct dot_backward {
  enum { WIDE = 1 };
  template <typename T>
  __device__ static void elem_v(const segops_kargs *a, int64_t, int64_t, int64_t k, int64_t s) {
    const double g = ld<T>(a->in[0], s), x = ld<T>(a->in[1], k), y = ld<T>(a->in[2], k);
    st<T>(a->out[0], k, g * y);
    st<T>(a->out[1], k, g * x);
  }
  /* staged gather (cuda_kernels.cuh): reads x and y rows */
  static unsigned rows_in(const segops_kargs *) { return 2u | 4u; }
  static unsigned rows_out(const segops_kargs *) { return 1u | 2u; }
  template <typename T, int W>
  __device__ static void elem(const segops_kargs *a, int64_t i, int64_t s) {
    /* every load before the first store: the compiler cannot tell outputs from inputs */
    double g = ld<T>(a->in[0], s), x[W], y[W];
#pragma unroll
    for (int c = 0; c < W; c++) {
      x[c] = ld<T>(a->in[1], i * W + c);
      y[c] = ld<T>(a->in[2], i * W + c);
    }
#pragma unroll
    for (int c = 0; c < W; c++) {
      st<T>(a->out[0], i * W + c, g * y[c]);
      st<T>(a->out[1], i * W + c, g * x[c]);
    }
  }
};

/* double backward: in gg_x, gg_y, g_out, x, y; out grad_g_out (S), grad_x, grad_y.
 * grad_g_out[s] = sum dot(gg_x,y) + dot(gg_y,x); grad_x = g*gg_y, grad_y = g*gg_x (a gather). */
struct dot_double_backward_red : segops_cuda_sum {
  enum { K = 1, NSV = 1, POST = 0, WIDE = SEGOPS_WIDE_ROWS };
  template <typename T>
  __device__ static void term(const segops_kargs *a, int64_t k, double *t) {
    t[0] += ld<T>(a->in[0], k) * ld<T>(a->in[4], k) + ld<T>(a->in[1], k) * ld<T>(a->in[3], k);
  }
  static bool wanted(const segops_kargs *a) { return a->out[0] != NULL; }
  template <typename T, int W>
  __device__ static void visit(const segops_kargs *a, int64_t i, int64_t, double *acc) {
    double d = 0.0, e = 0.0;
#pragma unroll
    for (int c = 0; c < W; c++) {
      d += ld<T>(a->in[0], i * W + c) * ld<T>(a->in[4], i * W + c);
      e += ld<T>(a->in[1], i * W + c) * ld<T>(a->in[3], i * W + c);
    }
    acc[0] += d + e;
  }
  template <typename T, int W>
  __device__ static void finish(const segops_kargs *a, int64_t s, int64_t, const double *acc, double *, bool writer) {
    if (writer) st<T>(a->out[0], s, acc[0]);
  }
};
struct dot_double_backward_elem {
  enum { WIDE = 1 };
  template <typename T>
  __device__ static void elem_v(const segops_kargs *a, int64_t, int64_t, int64_t k, int64_t s) {
    const double g = ld<T>(a->in[2], s);
    if (a->out[1]) st<T>(a->out[1], k, g * ld<T>(a->in[1], k));
    if (a->out[2]) st<T>(a->out[2], k, g * ld<T>(a->in[0], k));
  }
  /* staged gather: reads gg_x rows for grad_y, gg_y rows for grad_x */
  static unsigned rows_in(const segops_kargs *a) { return (a->out[2] ? 1u : 0u) | (a->out[1] ? 2u : 0u); }
  static unsigned rows_out(const segops_kargs *) { return 2u | 4u; }
  static bool wanted(const segops_kargs *a) { return a->out[1] || a->out[2]; }
  template <typename T, int W>
  __device__ static void elem(const segops_kargs *a, int64_t i, int64_t s) {
    double g = ld<T>(a->in[2], s), ggx[W], ggy[W];
#pragma unroll
    for (int c = 0; c < W; c++) {
      ggx[c] = a->out[2] ? ld<T>(a->in[0], i * W + c) : 0.0;
      ggy[c] = a->out[1] ? ld<T>(a->in[1], i * W + c) : 0.0;
    }
#pragma unroll
    for (int c = 0; c < W; c++) {
      st<T>(a->out[1], i * W + c, g * ggy[c]);
      st<T>(a->out[2], i * W + c, g * ggx[c]);
    }
  }
};

SEGOPS_CUDA_FN(dot_forward, dot_forward, void)
SEGOPS_CUDA_FN(dot_backward, void, dot_backward)
SEGOPS_CUDA_FN(dot_double_backward, dot_double_backward_red, dot_double_backward_elem)

/* cuda_mul.cu: segmented_mul on the GPU (x rows times a per-segment scalar y[s]). */
#include "cuda_registry.cuh"

/* Rows of a run-time width (cuda_wide.cuh): the index of y's (and gg_y's) value for column c of
 * segment s, y (S,*F) (element-wise) or y (S,) (it scales the row). */
__device__ __forceinline__ int64_t mul_yk(const segops_kargs *a, int64_t s, int64_t c) {
  return a->y_wide ? s * a->w + c : s;
}

/* forward: in x, y (S); out[i] = x[i]*y[s] (y (S,*F): x[i] ⊙ y[s]). */
struct mul_forward {
  enum { WIDE = 1 };
  template <typename T>
  __device__ static void elem_v(const segops_kargs *a, int64_t, int64_t c, int64_t k, int64_t s) {
    st<T>(a->out[0], k, ld<T>(a->in[0], k) * ld<T>(a->in[1], mul_yk(a, s, c)));
  }
  template <typename T, int W>
  __device__ static void elem(const segops_kargs *a, int64_t i, int64_t s) {
    double y = ld<T>(a->in[1], s);
#pragma unroll
    for (int c = 0; c < W; c++) st<T>(a->out[0], i * W + c, ld<T>(a->in[0], i * W + c) * y);
  }
};

/* backward: in g_out, x, y; grad_x[i] = g_out[i]*y[s] (a gather); grad_y[s] = sum dot(g_out[i], x[i]). */
typedef dot_reduce<0, 1, 1> mul_backward_red;
struct mul_backward_elem {
  enum { WIDE = 1 };
  static bool wanted(const segops_kargs *a) { return a->out[0] != NULL; }
  template <typename T>
  __device__ static void elem_v(const segops_kargs *a, int64_t, int64_t c, int64_t k, int64_t s) {
    st<T>(a->out[0], k, ld<T>(a->in[0], k) * ld<T>(a->in[2], mul_yk(a, s, c)));
  }
  /* IE past SEGOPS_CUDA_IE_N (cuda_kernels.cuh); not for float64 chunks of 4096 rows (segments
   * past 2^22), whose second walk reads the rows again from memory: S=1 at 2^25 881 -> 1041 µs */
  static bool walk_inline(const segops_cuda_job *job) {
    return job->dtype == SEGOPS_F32 || chunk_shift(job->longest) < 12;
  }
  template <typename T, int W>
  __device__ static void elem(const segops_kargs *a, int64_t i, int64_t s) {
    double y = ld<T>(a->in[2], s), g[W];
#pragma unroll
    for (int c = 0; c < W; c++) g[c] = ld<T>(a->in[0], i * W + c);
#pragma unroll
    for (int c = 0; c < W; c++) st<T>(a->out[0], i * W + c, g[c] * y);
  }
};

/* double backward: in gg_x, gg_y (S), g_out, x, y (S); out grad_g_out, grad_x, grad_y (S).
 * grad_g_out[i] = gg_x[i]*y[s] + gg_y[s]*x[i]; grad_x[i] = gg_y[s]*g_out[i] (a gather);
 * grad_y[s] = sum dot(gg_x[i], g_out[i]). */
typedef dot_reduce<0, 2, 2> mul_double_backward_red;
struct mul_double_backward_elem {
  enum { WIDE = 1 };
  template <typename T>
  __device__ static void elem_v(const segops_kargs *a, int64_t, int64_t c, int64_t k, int64_t s) {
    const int64_t yk = mul_yk(a, s, c);
    const double ggy = ld<T>(a->in[1], yk);
    if (a->out[0]) st<T>(a->out[0], k, ld<T>(a->in[0], k) * ld<T>(a->in[4], yk) + ggy * ld<T>(a->in[3], k));
    if (a->out[1]) st<T>(a->out[1], k, ggy * ld<T>(a->in[2], k));
  }
  /* staged gather: reads gg_x and x rows for grad_g_out, g_out rows for grad_x */
  static unsigned rows_in(const segops_kargs *a) { return (a->out[0] ? 1u | 8u : 0u) | (a->out[1] ? 4u : 0u); }
  static unsigned rows_out(const segops_kargs *) { return 1u | 2u; }
  static bool wanted(const segops_kargs *a) { return a->out[0] || a->out[1]; }
  template <typename T, int W>
  __device__ static void elem(const segops_kargs *a, int64_t i, int64_t s) {
    /* every load before the first store: the compiler cannot tell outputs from inputs */
    double ggy = ld<T>(a->in[1], s), y = ld<T>(a->in[4], s), ggx[W], g[W], x[W];
#pragma unroll
    for (int c = 0; c < W; c++) {
      ggx[c] = a->out[0] ? ld<T>(a->in[0], i * W + c) : 0.0;
      x[c] = a->out[0] ? ld<T>(a->in[3], i * W + c) : 0.0;
      g[c] = a->out[1] ? ld<T>(a->in[2], i * W + c) : 0.0;
    }
#pragma unroll
    for (int c = 0; c < W; c++) {
      st<T>(a->out[0], i * W + c, ggx[c] * y + ggy * x[c]);
      st<T>(a->out[1], i * W + c, ggy * g[c]);
    }
  }
};

SEGOPS_CUDA_FN(mul_forward, void, mul_forward)
SEGOPS_CUDA_FN(mul_backward, mul_backward_red, mul_backward_elem)
SEGOPS_CUDA_FN(mul_double_backward, mul_double_backward_red, mul_double_backward_elem)

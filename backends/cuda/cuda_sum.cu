/* cuda_sum.cu: segmented_sum on the GPU (forward and double backward reduce, backward gathers). */
#include "cuda_registry.cuh"

/* forward: out[s] = sum x[i]; double backward: grad_g_out[s] = sum gg_x[i] (in[0] both times).
 * Rows of a run-time width: per column (cuda_wide.cuh). */
struct sum_reduce : segops_cuda_sum {
  enum { K = 3, NSV = 1, POST = 0, WIDE = SEGOPS_WIDE_COLS };
  template <typename T>
  __device__ static void term(const segops_kargs *a, int64_t k, double *t) {
    t[0] += ld<T>(a->in[0], k);
  }
  template <typename T>
  __device__ static void col_finish(const segops_kargs *a, int64_t j, int64_t, double acc) {
    st<T>(a->out[0], j, acc);
  }
  template <typename T, int W>
  __device__ static void visit(const segops_kargs *a, int64_t i, int64_t, double *acc) {
#pragma unroll
    for (int c = 0; c < W; c++) acc[c] += ld<T>(a->in[0], i * W + c);
  }
  template <typename T, int W>
  __device__ static void finish(const segops_kargs *a, int64_t s, int64_t, const double *acc, double *, bool writer) {
    if (!writer) return;
#pragma unroll
    for (int c = 0; c < W; c++) st<T>(a->out[0], s * W + c, acc[c]);
  }
};

/* backward: grad_x[i] = g_out[s]. */
struct sum_backward {
  enum { WIDE = 1 };
  template <typename T>
  __device__ static void elem_v(const segops_kargs *a, int64_t, int64_t c, int64_t k, int64_t s) {
    st<T>(a->out[0], k, ld<T>(a->in[0], s * a->w + c));
  }
  /* staged gather (cuda_kernels.cuh): writes grad_x rows; g_out is a segment row */
  static unsigned rows_in(const segops_kargs *) { return 0u; }
  static unsigned rows_out(const segops_kargs *) { return 1u; }
  /* copy gather over an unsorted idx (cuda_kernels.cuh): the rows copied are g_out's */
  template <typename T>
  static const T *copy_src(const segops_kargs *a) {
    return (const T *)a->in[0];
  }
  template <typename T, int W>
  __device__ static void elem(const segops_kargs *a, int64_t i, int64_t s) {
#pragma unroll
    for (int c = 0; c < W; c++) st<T>(a->out[0], i * W + c, ld<T>(a->in[0], s * W + c));
  }
};

SEGOPS_CUDA_FN(sum_forward, sum_reduce, void)
SEGOPS_CUDA_FN(sum_backward, void, sum_backward)
SEGOPS_CUDA_FN(sum_double_backward, sum_reduce, void)

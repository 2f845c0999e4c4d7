/* cuda_mean.cu: segmented_mean on the GPU (sums divided by the segment's count; 0 when empty). */
#include "cuda_registry.cuh"

/* forward: out[s] = sum x[i] / c_s; double backward: grad_g_out[s] = sum gg_x[i] / c_s. Rows
 * of a run-time width: per column (cuda_wide.cuh). */
struct mean_reduce : segops_cuda_sum {
  enum { K = 3, NSV = 1, POST = 0, WIDE = SEGOPS_WIDE_COLS };
  template <typename T>
  __device__ static void term(const segops_kargs *a, int64_t k, double *t) {
    t[0] += ld<T>(a->in[0], k);
  }
  template <typename T>
  __device__ static void col_finish(const segops_kargs *a, int64_t j, int64_t cnt, double acc) {
    st<T>(a->out[0], j, cnt > 0 ? acc / (double)cnt : 0.0);
  }
  template <typename T, int W>
  __device__ static void visit(const segops_kargs *a, int64_t i, int64_t, double *acc) {
#pragma unroll
    for (int c = 0; c < W; c++) acc[c] += ld<T>(a->in[0], i * W + c);
  }
  template <typename T, int W>
  __device__ static void finish(const segops_kargs *a, int64_t s, int64_t cnt, const double *acc, double *,
                                bool writer) {
    if (!writer) return;
#pragma unroll
    for (int c = 0; c < W; c++) st<T>(a->out[0], s * W + c, cnt > 0 ? acc[c] / (double)cnt : 0.0);
  }
};

/* backward: grad_x[i] = g_out[s] / c_s (c_s >= 1: element i is in s). Small N: the division
 * per element. Large N: mean_quotient_kernel divides once per segment into L.segval, and the
 * gather copies the quotient (the same double, so the same bits). */
struct mean_backward {
  /* rows of a run-time width: each value divided (the same IEEE quotient as the quotients') */
  template <typename T>
  __device__ static void elem_v(const segops_kargs *a, int64_t, int64_t c, int64_t k, int64_t s) {
    const double cnt = (double)(__ldg(a->L.off + s + 1) - __ldg(a->L.off + s));
    st<T>(a->out[0], k, ld<T>(a->in[0], s * a->w + c) / cnt);
  }
  template <typename T, int W>
  __device__ static void elem(const segops_kargs *a, int64_t i, int64_t s) {
    double cnt = (double)(__ldg(a->L.off + s + 1) - __ldg(a->L.off + s));
#pragma unroll
    for (int c = 0; c < W; c++) st<T>(a->out[0], i * W + c, ld<T>(a->in[0], s * W + c) / cnt);
  }
};
struct mean_backward_q {
  /* staged gather: writes grad_x rows; the quotients are segment rows */
  static unsigned rows_in(const segops_kargs *) { return 0u; }
  static unsigned rows_out(const segops_kargs *) { return 1u; }
  /* copy gather over an unsorted idx (cuda_kernels.cuh): the rows copied are the quotients */
  template <typename T>
  static const double *copy_src(const segops_kargs *a) {
    return a->L.segval;
  }
  template <typename T, int W>
  __device__ static void elem(const segops_kargs *a, int64_t i, int64_t s) {
    double q[W];
#pragma unroll
    for (int c = 0; c < W; c++) q[c] = __ldg(a->L.segval + s * W + c);
#pragma unroll
    for (int c = 0; c < W; c++) st<T>(a->out[0], i * W + c, q[c]);
  }
};

template <typename T, int W>
__global__ void __launch_bounds__(256) mean_quotient_kernel(segops_kargs ka) {
  const segops_kargs *a = &ka;
  const int64_t stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t s = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; s < a->s; s += stride) {
    const double cnt = (double)(__ldg(a->L.off + s + 1) - __ldg(a->L.off + s));
#pragma unroll
    for (int c = 0; c < W; c++) a->L.segval[s * W + c] = cnt > 0 ? ld<T>(a->in[0], s * W + c) / cnt : 0.0;
  }
}

extern "C" int segops_cuda_mean_quotients(const segops_cuda_job *job) {
  return job->fn->elem_reads == SEGOPS_READS_COUNTS && job->n >= (1 << 16) && job->s > 0 && !segops_cuda_job_wide(job);
}

/* The backward's runner: a gather that reads the segment counts (the row's elem_reads COUNTS). */
struct mean_backward_runner {
  static constexpr int K = 0, POST = 0, NSV = 0;
  static constexpr bool COUNTS = true;
  static constexpr bool WIDE = true; /* run<T, 0>: rows of a run-time width */
  template <bool VEC3_ONLY>
  static constexpr bool width_fits() {
    return !VEC3_ONLY;
  }
  template <typename T, int W>
  static cudaError_t run(const segops_cuda_job *job, const segops_kargs *a, cudaStream_t st) {
    if constexpr (W == 0) {
      return segops_run_wide_gather<T, mean_backward>(job, a, st);
    } else {
      if (job->n == 0) return cudaSuccess;
      if (!segops_cuda_mean_quotients(job)) return segops_run_gather<T, W, mean_backward>(job, a, st);
      const int64_t b = (job->s + 255) / 256;
      const unsigned blocks = (unsigned)(b < (int64_t)job->sm_count * 16 ? b : (int64_t)job->sm_count * 16);
      mean_quotient_kernel<T, W><<<blocks, 256, 0, st>>>(*a);
      return segops_run_gather<T, W, mean_backward_q>(job, a, st);
    }
  }
};

SEGOPS_CUDA_FN(mean_forward, mean_reduce, void)
SEGOPS_CUDA_FN_RUN(mean_backward, mean_backward_runner)
SEGOPS_CUDA_FN(mean_double_backward, mean_reduce, void)

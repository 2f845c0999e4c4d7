/* cuda_mean.cu: segmented_mean on the GPU (sums divided by the segment's count; 0 when empty). */
#include "cuda_kernels.cuh"

/* forward: out[s] = sum x[i] / c_s; double backward: grad_g_out[s] = sum gg_x[i] / c_s. */
struct mean_reduce {
  enum { K = 3, NSV = 1, POST = 0 };
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

/* backward: grad_x[i] = g_out[s] / c_s (c_s >= 1: element i is in s). */
struct mean_backward {
  template <typename T, int W>
  __device__ static void elem(const segops_kargs *a, int64_t i, int64_t s) {
    double cnt = (double)(__ldg(a->L.off + s + 1) - __ldg(a->L.off + s));
#pragma unroll
    for (int c = 0; c < W; c++) st<T>(a->out[0], i * W + c, ld<T>(a->in[0], s * W + c) / cnt);
  }
};

cudaError_t segops_cuda_mean(const segops_cuda_job *job, const segops_kargs *a, cudaStream_t st) {
  if (job->fn->pass == SEGOPS_PASS_BACKWARD) return SEGOPS_DISPATCH_GATHER(job, a, st, mean_backward);
  return SEGOPS_DISPATCH_SEG(job, a, st, mean_reduce);
}

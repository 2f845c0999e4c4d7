/* cuda_mul.cu: segmented_mul on the GPU (x rows times a per-segment scalar y[s]). */
#include "cuda_kernels.cuh"

/* forward: in x, y (S); out[i] = x[i]*y[s]. */
struct mul_forward {
  template <typename T, int W>
  __device__ static void elem(const segops_kargs *a, int64_t i, int64_t s) {
    double y = ld<T>(a->in[1], s);
#pragma unroll
    for (int c = 0; c < W; c++) st<T>(a->out[0], i * W + c, ld<T>(a->in[0], i * W + c) * y);
  }
};

/* backward: in g_out, x, y; grad_x[i] = g_out[i]*y[s]; grad_y[s] = sum dot(g_out[i], x[i]). */
struct mul_backward {
  enum { K = 1, NSV = 1, POST = 0 };
  template <typename T, int W>
  __device__ static void visit(const segops_kargs *a, int64_t i, int64_t s, double *acc) {
    double y = a->out[0] ? ld<T>(a->in[2], s) : 0.0, g[W], x[W];
#pragma unroll
    for (int c = 0; c < W; c++) {
      g[c] = ld<T>(a->in[0], i * W + c);
      x[c] = a->out[1] ? ld<T>(a->in[1], i * W + c) : 0.0;
    }
    double d = 0.0;
#pragma unroll
    for (int c = 0; c < W; c++) {
      st<T>(a->out[0], i * W + c, g[c] * y);
      d += g[c] * x[c];
    }
    acc[0] += d;
  }
  template <typename T, int W>
  __device__ static void finish(const segops_kargs *a, int64_t s, int64_t, const double *acc, double *, bool writer) {
    if (writer) st<T>(a->out[1], s, acc[0]);
  }
  template <typename T, int W>
  __device__ static void post(const segops_kargs *, int64_t, int64_t, const double *) {}
};

/* double backward: in gg_x, gg_y (S), g_out, x, y (S); out grad_g_out, grad_x, grad_y (S).
 * grad_g_out[i] = gg_x[i]*y[s] + gg_y[s]*x[i]; grad_x[i] = gg_y[s]*g_out[i];
 * grad_y[s] = sum dot(gg_x[i], g_out[i]). */
struct mul_double_backward {
  enum { K = 1, NSV = 1, POST = 0 };
  template <typename T, int W>
  __device__ static void visit(const segops_kargs *a, int64_t i, int64_t s, double *acc) {
    double ggy = ld<T>(a->in[1], s), y = ld<T>(a->in[4], s), ggx[W], g[W], x[W];
#pragma unroll
    for (int c = 0; c < W; c++) {
      ggx[c] = ld<T>(a->in[0], i * W + c);
      g[c] = ld<T>(a->in[2], i * W + c);
      x[c] = a->out[0] ? ld<T>(a->in[3], i * W + c) : 0.0;
    }
    double d = 0.0;
#pragma unroll
    for (int c = 0; c < W; c++) {
      st<T>(a->out[0], i * W + c, ggx[c] * y + ggy * x[c]);
      st<T>(a->out[1], i * W + c, ggy * g[c]);
      d += ggx[c] * g[c];
    }
    acc[0] += d;
  }
  template <typename T, int W>
  __device__ static void finish(const segops_kargs *a, int64_t s, int64_t, const double *acc, double *, bool writer) {
    if (writer) st<T>(a->out[2], s, acc[0]);
  }
  template <typename T, int W>
  __device__ static void post(const segops_kargs *, int64_t, int64_t, const double *) {}
};

cudaError_t segops_cuda_mul(const segops_cuda_job *job, const segops_kargs *a, cudaStream_t st) {
  switch (job->fn->pass) {
    case SEGOPS_PASS_FORWARD:
      return SEGOPS_DISPATCH_GATHER(job, a, st, mul_forward);
    case SEGOPS_PASS_BACKWARD:
      return SEGOPS_DISPATCH_SEG(job, a, st, mul_backward);
    default:
      return SEGOPS_DISPATCH_SEG(job, a, st, mul_double_backward);
  }
}

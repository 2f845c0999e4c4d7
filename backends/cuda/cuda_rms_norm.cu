/* cuda_rms_norm.cu: segmented_rms_norm on the GPU (vec3 only; every pass reduces ||x||^2). */
#include "cuda_kernels.cuh"

static __device__ __forceinline__ double rms_inv(double sq, int64_t cnt) {
  /* inv_s = 1/(c_s*r_s), r_s = sqrt(sq/c_s); 0 where c_s*r_s = 0 (proto/API.md, Formulas). */
  if (cnt == 0) return 0.0;
  double cr = (double)cnt * sqrt(sq / (double)cnt);
  return cr == 0.0 ? 0.0 : 1.0 / cr;
}

/* forward: in x; out[s] = sqrt(sum ||x||^2 / c_s), 0 when empty. */
struct rms_forward {
  enum { K = 1, NSV = 1, POST = 0 };
  template <typename T, int W>
  __device__ static void visit(const segops_kargs *a, int64_t i, int64_t, double *acc) {
#pragma unroll
    for (int c = 0; c < 3; c++) {
      double v = ld<T>(a->in[0], i * 3 + c);
      acc[0] += v * v;
    }
  }
  template <typename T, int W>
  __device__ static void finish(const segops_kargs *a, int64_t s, int64_t cnt, const double *acc, double *,
                                bool writer) {
    if (writer) st<T>(a->out[0], s, cnt > 0 ? sqrt(acc[0] / (double)cnt) : 0.0);
  }
};

/* backward: in g_out (S), x; grad_x[i] = g_out[s]*inv_s*x[i]. */
struct rms_backward {
  enum { K = 1, NSV = 1, POST = 1 };
  template <typename T, int W>
  __device__ static void visit(const segops_kargs *a, int64_t i, int64_t, double *acc) {
#pragma unroll
    for (int c = 0; c < 3; c++) {
      double v = ld<T>(a->in[1], i * 3 + c); /* x is input 1 of the backward */
      acc[0] += v * v;
    }
  }
  template <typename T, int W>
  __device__ static void finish(const segops_kargs *a, int64_t s, int64_t cnt, const double *acc, double *sv, bool) {
    sv[0] = ld<T>(a->in[0], s) * rms_inv(acc[0], cnt);
  }
  template <typename T, int W>
  __device__ static void post(const segops_kargs *a, int64_t i, int64_t, const double *sv) {
#pragma unroll
    for (int c = 0; c < 3; c++) st<T>(a->out[0], i * 3 + c, sv[0] * ld<T>(a->in[1], i * 3 + c));
  }
};

/* double backward: in gg_x, g_out (S), x; out grad_g_out (S), grad_x.
 * q_s = sum dot(gg_x, x); grad_g_out = q_s*inv_s;
 * grad_x[i] = g*inv*gg_x[i] - g*inv^3*c_s*q_s*x[i]. */
struct rms_double_backward {
  enum { K = 2, NSV = 2, POST = 1 };
  template <typename T, int W>
  __device__ static void visit(const segops_kargs *a, int64_t i, int64_t, double *acc) {
#pragma unroll
    for (int c = 0; c < 3; c++) {
      double v = ld<T>(a->in[2], i * 3 + c);
      acc[0] += v * v;
      acc[1] += ld<T>(a->in[0], i * 3 + c) * v;
    }
  }
  template <typename T, int W>
  __device__ static void finish(const segops_kargs *a, int64_t s, int64_t cnt, const double *acc, double *sv,
                                bool writer) {
    double inv = rms_inv(acc[0], cnt), q = acc[1];
    if (writer) st<T>(a->out[0], s, q * inv);
    double g = ld<T>(a->in[1], s);
    sv[0] = g * inv;
    sv[1] = g * inv * inv * inv * (double)cnt * q;
  }
  template <typename T, int W>
  __device__ static void post(const segops_kargs *a, int64_t i, int64_t, const double *sv) {
    if (!a->out[1]) return;
#pragma unroll
    for (int c = 0; c < 3; c++)
      st<T>(a->out[1], i * 3 + c, sv[0] * ld<T>(a->in[0], i * 3 + c) - sv[1] * ld<T>(a->in[2], i * 3 + c));
  }
};

cudaError_t segops_cuda_rms_norm(const segops_cuda_job *job, const segops_kargs *a, cudaStream_t st) {
  switch (job->fn->pass) {
    case SEGOPS_PASS_FORWARD:
      return SEGOPS_DISPATCH_SEG3(job, a, st, rms_forward);
    case SEGOPS_PASS_BACKWARD:
      return SEGOPS_DISPATCH_SEG3(job, a, st, rms_backward);
    default:
      return SEGOPS_DISPATCH_SEG3(job, a, st, rms_double_backward);
  }
}

/* cuda_matvec.cu: segmented_matvec on the GPU (vec3 rows times a per-segment 3x3 matrix). */
#include "cuda_registry.cuh"

/* out[k] = sum_j M[j][k]*v[j] (M^T v), reading M = m[s] row-major and v = row i of vec, and
 * out[j] = sum_k M[j][k]*g[k] (M g): segops_rowmath.h's segops_mtv and segops_mv in the order of
 * a sum from 0.0 (the same bits but for the sign of a zero result), each element of M loaded
 * where its term is added. Calling the shared functions on loaded rows compiles to other SASS
 * (the loads' NULL checks in another order), so the kernels keep this form. */
template <typename T>
__device__ __forceinline__ void mt_v(const void *m, int64_t s, const void *vec, int64_t i, double *o) {
  double v[3];
#pragma unroll
  for (int j = 0; j < 3; j++) v[j] = ld<T>(vec, i * 3 + j);
#pragma unroll
  for (int k = 0; k < 3; k++) {
    o[k] = 0.0;
#pragma unroll
    for (int j = 0; j < 3; j++) o[k] += ld<T>(m, s * 9 + j * 3 + k) * v[j];
  }
}
template <typename T>
__device__ __forceinline__ void m_v(const void *m, int64_t s, const void *vec, int64_t i, double *o) {
  double g[3];
#pragma unroll
  for (int k = 0; k < 3; k++) g[k] = ld<T>(vec, i * 3 + k);
#pragma unroll
  for (int j = 0; j < 3; j++) {
    o[j] = 0.0;
#pragma unroll
    for (int k = 0; k < 3; k++) o[j] += ld<T>(m, s * 9 + j * 3 + k) * g[k];
  }
}

/* forward: in v, m; out[i] = m[s]^T v[i]. */
struct matvec_forward {
  enum { VEC3 = 1 };
  template <typename T, int W>
  __device__ static void elem(const segops_kargs *a, int64_t i, int64_t s) {
    double o[3];
    mt_v<T>(a->in[1], s, a->in[0], i, o);
#pragma unroll
    for (int k = 0; k < 3; k++) st<T>(a->out[0], i * 3 + k, o[k]);
  }
};

/* Accumulates outer(u[i], g[i]) into acc[j*3+k] (segops_outer_add). */
template <typename T>
__device__ __forceinline__ void add_outer(const void *u, const void *g, int64_t i, double *acc) {
  double uu[3], gg[3];
#pragma unroll
  for (int c = 0; c < 3; c++) {
    uu[c] = ld<T>(u, i * 3 + c);
    gg[c] = ld<T>(g, i * 3 + c);
  }
  segops_outer_add(acc, uu, gg);
}

/* backward: in g_out, v, m; grad_v[i] = m[s] g_out[i] (a gather); grad_m[s] = sum outer(v[i], g_out[i]). */
struct matvec_backward_red : segops_cuda_sum {
  enum { K = 9, NSV = 1, POST = 0, VEC3 = 1 };
  static bool wanted(const segops_kargs *a) { return a->out[1] != NULL; }
  template <typename T, int W>
  __device__ static void visit(const segops_kargs *a, int64_t i, int64_t, double *acc) {
    add_outer<T>(a->in[1], a->in[0], i, acc);
  }
  template <typename T, int W>
  __device__ static void finish(const segops_kargs *a, int64_t s, int64_t, const double *acc, double *, bool writer) {
    if (!writer) return;
#pragma unroll
    for (int k = 0; k < 9; k++) st<T>(a->out[1], s * 9 + k, acc[k]);
  }
};
struct matvec_backward_elem {
  enum { VEC3 = 1 };
  static bool wanted(const segops_kargs *a) { return a->out[0] != NULL; }
  static bool walk_inline(const segops_cuda_job *) { return true; } /* IE (short segments: segops_ie_ok) */
  template <typename T, int W>
  __device__ static void elem(const segops_kargs *a, int64_t i, int64_t s) {
    double o[3];
    m_v<T>(a->in[2], s, a->in[0], i, o);
#pragma unroll
    for (int j = 0; j < 3; j++) st<T>(a->out[0], i * 3 + j, o[j]);
  }
};

/* double backward: in gg_v, gg_m, g_out, v, m; out grad_g_out, grad_v, grad_m.
 * grad_g_out[i] = m^T gg_v + gg_m^T v; grad_v[i] = gg_m g_out (a gather);
 * grad_m[s] = sum outer(gg_v, g_out). */
struct matvec_double_backward_red : segops_cuda_sum {
  enum { K = 9, NSV = 1, POST = 0, VEC3 = 1 };
  static bool wanted(const segops_kargs *a) { return a->out[2] != NULL; }
  template <typename T, int W>
  __device__ static void visit(const segops_kargs *a, int64_t i, int64_t, double *acc) {
    add_outer<T>(a->in[0], a->in[2], i, acc);
  }
  template <typename T, int W>
  __device__ static void finish(const segops_kargs *a, int64_t s, int64_t, const double *acc, double *, bool writer) {
    if (!writer) return;
#pragma unroll
    for (int k = 0; k < 9; k++) st<T>(a->out[2], s * 9 + k, acc[k]);
  }
};
struct matvec_double_backward_elem {
  enum { VEC3 = 1 };
  static bool wanted(const segops_kargs *a) { return a->out[0] || a->out[1]; }
  template <typename T, int W>
  __device__ static void elem(const segops_kargs *a, int64_t i, int64_t s) {
    /* all loads first, then the stores */
    double o1[3], o2[3], o[3];
    if (a->out[0]) {
      mt_v<T>(a->in[4], s, a->in[0], i, o1);
      mt_v<T>(a->in[1], s, a->in[3], i, o2);
    }
    if (a->out[1]) m_v<T>(a->in[1], s, a->in[2], i, o);
    if (a->out[0])
#pragma unroll
      for (int k = 0; k < 3; k++) st<T>(a->out[0], i * 3 + k, o1[k] + o2[k]);
    if (a->out[1])
#pragma unroll
      for (int j = 0; j < 3; j++) st<T>(a->out[1], i * 3 + j, o[j]);
  }
};

SEGOPS_CUDA_FN(matvec_forward, void, matvec_forward)
SEGOPS_CUDA_FN(matvec_backward, matvec_backward_red, matvec_backward_elem)
SEGOPS_CUDA_FN(matvec_double_backward, matvec_double_backward_red, matvec_double_backward_elem)

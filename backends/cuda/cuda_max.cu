/* cuda_max.cu: segmented_max and segmented_min on the GPU, every pass, rows of any width.
 * One warp per segment (grid-stride over segments): its lanes walk the segment's sorted positions
 * (through the sort permutation when idx is unsorted; a segment longer than a chunk of positions
 * is walked chunk by chunk by other warps first, arg_chunk_kernel) keeping, per column, the pair (value, index)
 * of the best element seen (segops_arg_beats: further in the reduction's direction, a NaN beyond
 * every number, a tie to the lower index), then keep the better of two lanes' pairs in a butterfly.
 * That order is total, so any grouping gives the same pair: the lowest index among the extrema,
 * the CPU backend's bits whatever the grid. Then per column:
 *   forward          out[s] = the pair's value (0 for an empty segment)
 *   backward         grad_x = 0, then grad_x[arg] = g_out[s] (a scatter to one element per column)
 *   double backward  grad_g_out[s] = gg_x[arg] (0 for an empty segment or an omitted gg_x);
 *                    grad_x = 0
 * The table's reducer drivers (cuda_kernels.cuh) combine one number per accumulator, so these
 * functions have a runner of their own (SEGOPS_CUDA_FN_RUN); the scratch sized for their rows'
 * accumulators (cuda_launch.cu: 2 rows of 2w per tile of positions) holds the chunks' pairs. */
#include "cuda_registry.cuh"

/* Columns one walk keeps pairs for at a run-time width (W = 0): the row is walked once per group. */
constexpr int SEGOPS_ARG_COLS = 4;
/* Segments longer than a chunk of 2^10 sorted positions are cut by position: arg_chunk_kernel
 * gives each chunk [t*2^10, (t+1)*2^10) a warp, which keeps the best pair per column of the (at
 * most two) long segments' elements there in a partial row; arg_kernel's warp of a long segment
 * then takes the best of its chunks' partials instead of walking the segment alone. One 2^20
 * segment took 10 ms with one warp walking it (one sm_90 GPU, bench_cuda), sum 0.013 ms. */
constexpr int SEGOPS_ARG_CHUNK_SHIFT = 10;
constexpr int64_t SEGOPS_ARG_CHUNK = (int64_t)1 << SEGOPS_ARG_CHUNK_SHIFT;

template <int IS_MAX>
__device__ __forceinline__ void arg_keep(double &v, int64_t &i, double bv, int64_t bi) {
  if (segops_arg_beats(v, (double)i, bv, (double)bi, IS_MAX)) v = bv, i = bi;
}

/* The warp's best pairs of columns [c0, c0 + CW) over sorted positions [p0, p1): lanes take
 * positions p0 + lane, + 32, ..., then a butterfly leaves the same pairs in every lane. */
template <typename T, int W, int IS_MAX, int PK, int XK, int CW>
__device__ __forceinline__ void arg_walk(const segops_kargs &a, int64_t p0, int64_t p1, int64_t w, int64_t c0,
                                         double (&v)[CW], int64_t (&at)[CW]) {
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int q = 0; q < CW; q++) v[q] = segops_arg_identity(IS_MAX), at[q] = INT64_MAX;
  for (int64_t p = p0 + lane; p < p1; p += 32) {
    const int64_t i = elem_at<PK>(&a.L, p);
#pragma unroll
    for (int q = 0; q < CW; q++)
      if (W || c0 + q < w) arg_keep<IS_MAX>(v[q], at[q], ld<T>(a.in[XK], i * w + c0 + q), i);
  }
}

/* The same over the partials of a long segment's chunks t0..t1 (the first in slot 1 when the
 * segment starts inside it, arg_chunk_kernel). */
template <int W, int IS_MAX, int CW>
__device__ __forceinline__ void arg_walk_partials(const segops_kargs &a, int64_t b, int64_t e, int64_t w, int64_t c0,
                                                  double (&v)[CW], int64_t (&at)[CW]) {
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int q = 0; q < CW; q++) v[q] = segops_arg_identity(IS_MAX), at[q] = INT64_MAX;
  const int64_t t0 = b >> SEGOPS_ARG_CHUNK_SHIFT, t1 = (e - 1) >> SEGOPS_ARG_CHUNK_SHIFT;
  for (int64_t t = t0 + lane; t <= t1; t += 32) {
    const double *row = a.L.partial + (2 * t + (b > (t << SEGOPS_ARG_CHUNK_SHIFT))) * 2 * w;
#pragma unroll
    for (int q = 0; q < CW; q++)
      if (W || c0 + q < w)
        arg_keep<IS_MAX>(v[q], at[q], __ldcg(row + 2 * (c0 + q)), (int64_t)__ldcg(row + 2 * (c0 + q) + 1));
  }
}

template <int IS_MAX, int CW>
__device__ __forceinline__ void arg_butterfly(double (&v)[CW], int64_t (&at)[CW]) {
#pragma unroll
  for (int q = 0; q < CW; q++) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
      const double ov = __shfl_xor_sync(SEGOPS_FULL_MASK, v[q], o);
      const int64_t oi = __shfl_xor_sync(SEGOPS_FULL_MASK, (long long)at[q], o);
      arg_keep<IS_MAX>(v[q], at[q], ov, oi);
    }
  }
}

/* XK: the input holding x (forward 0, backward 1, double backward 2). */
template <int PASS>
constexpr int arg_xk() {
  return PASS == SEGOPS_PASS_FORWARD ? 0 : PASS == SEGOPS_PASS_BACKWARD ? 1 : 2;
}

/* One warp per chunk of positions (grid-stride): slot 0 for the long segment holding the chunk's
 * first position, slot 1 for a long segment starting inside the chunk (it holds the chunk's last
 * position: it is longer than a chunk). Shorter segments are arg_kernel's alone. The partial row
 * 2t + slot holds (value, index) per column; L.partial has 2 rows of at least 2w values per tile
 * of SEGOPS_CUDA_TILE positions (cuda_launch.cu), so more than these. */
template <typename T, int W, int IS_MAX, int PASS, int PK>
__global__ void __launch_bounds__(256) arg_chunk_kernel(const segops_kargs a) {
  constexpr int CW = W ? W : SEGOPS_ARG_COLS;
  const int lane = threadIdx.x & 31;
  const int64_t w = W ? W : a.w;
  const int64_t warps = ((int64_t)gridDim.x * blockDim.x) >> 5;
  const int64_t chunks = (a.n + SEGOPS_ARG_CHUNK - 1) >> SEGOPS_ARG_CHUNK_SHIFT;
  for (int64_t t = (((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5); t < chunks; t += warps) {
    const int64_t q0 = t << SEGOPS_ARG_CHUNK_SHIFT, q1 = q0 + SEGOPS_ARG_CHUNK < a.n ? q0 + SEGOPS_ARG_CHUNK : a.n;
    const int64_t sa = __ldg(a.L.keys + q0), sb = __ldg(a.L.keys + q1 - 1);
    for (int slot = 0; slot < 2; slot++) {
      const int64_t s = slot ? sb : sa;
      if (slot && sb == sa) break;
      const int64_t b = __ldg(a.L.off + s), e = __ldg(a.L.off + s + 1);
      if (e - b <= SEGOPS_ARG_CHUNK) continue;
      double *row = a.L.partial + (2 * t + slot) * 2 * w;
      for (int64_t c0 = 0; c0 < w; c0 += CW) {
        double v[CW];
        int64_t at[CW];
        arg_walk<T, W, IS_MAX, PK, arg_xk<PASS>(), CW>(a, b > q0 ? b : q0, e < q1 ? e : q1, w, c0, v, at);
        arg_butterfly<IS_MAX, CW>(v, at);
#pragma unroll
        for (int q = 0; q < CW; q++)
          if (lane == q && (W || c0 + q < w)) row[2 * (c0 + q)] = v[q], row[2 * (c0 + q) + 1] = (double)at[q];
      }
    }
  }
}

/* One warp per segment (grid-stride): its best pairs, from its elements or, for a segment longer
 * than a chunk when CHUNKED, from arg_chunk_kernel's partials; then its outputs per column. */
template <typename T, int W, int IS_MAX, int PASS, int PK>
__global__ void __launch_bounds__(256) arg_kernel(const segops_kargs a, const int chunked) {
  constexpr int CW = W ? W : SEGOPS_ARG_COLS;
  const int lane = threadIdx.x & 31;
  const int64_t w = W ? W : a.w;
  const int64_t warps = ((int64_t)gridDim.x * blockDim.x) >> 5;
  for (int64_t s = (((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5); s < a.s; s += warps) {
    const int64_t p0 = a.L.off[s], p1 = a.L.off[s + 1];
    const bool from_chunks = chunked && p1 - p0 > SEGOPS_ARG_CHUNK;
    for (int64_t c0 = 0; c0 < w; c0 += CW) {
      double v[CW];
      int64_t at[CW];
      if (from_chunks)
        arg_walk_partials<W, IS_MAX, CW>(a, p0, p1, w, c0, v, at);
      else
        arg_walk<T, W, IS_MAX, PK, arg_xk<PASS>(), CW>(a, p0, p1, w, c0, v, at);
      arg_butterfly<IS_MAX, CW>(v, at);
      /* every lane holds the same pairs: lane q writes column c0 + q */
#pragma unroll
      for (int q = 0; q < CW; q++) {
        const int64_t c = c0 + q;
        if (lane != q || (!W && c >= w)) continue;
        const bool any = p1 > p0;
        if (PASS == SEGOPS_PASS_FORWARD)
          st<T>(a.out[0], s * w + c, any ? v[q] : 0.0);
        else if (PASS == SEGOPS_PASS_BACKWARD) {
          if (any) st<T>(a.out[0], at[q] * w + c, ld<T>(a.in[0], s * w + c));
        } else
          st<T>(a.out[0], s * w + c, any && a.in[0] ? ld<T>(a.in[0], at[q] * w + c) : 0.0);
      }
    }
  }
}

/* The runner of one function (IS_MAX, PASS): its row's facts for the registry's check, every width. */
template <int IS_MAX, int PASS>
struct segops_cuda_arg {
  static constexpr int K = 6; /* the rows' n_acc (2 per column, (N,3): 6); the kernel keeps them in registers */
  static constexpr int POST = PASS == SEGOPS_PASS_BACKWARD, NSV = POST;
  static constexpr bool COUNTS = false, WIDE = true;
  template <bool VEC3_ONLY>
  static constexpr bool width_fits() {
    return !VEC3_ONLY;
  }
  template <typename T, int W>
  static cudaError_t run(const segops_cuda_job *job, const segops_kargs *a, cudaStream_t st) {
    const size_t elem_bytes = (size_t)job->n * (size_t)job->width * sizeof(T);
    /* grad_x: zeros (backward: but at the arg elements, written below; double backward: all) */
    const int zero_out = PASS == SEGOPS_PASS_BACKWARD ? 0 : PASS == SEGOPS_PASS_DOUBLE_BACKWARD ? 1 : -1;
    if (zero_out >= 0 && a->out[zero_out] && elem_bytes) {
      const cudaError_t e = cudaMemsetAsync(a->out[zero_out], 0, elem_bytes, st);
      if (e != cudaSuccess) return e;
    }
    if (!a->out[0] || job->s == 0 || job->width == 0) return cudaSuccess;
    const int64_t cap = (int64_t)(job->sm_count > 0 ? job->sm_count : 1) * 64;
    /* chunks of long segments first (any segment may be long: their warps find out), then segments */
    const int chunked = job->n > SEGOPS_ARG_CHUNK && a->L.partial != NULL;
    const bool perm = segops_seg_perm(a);
    if (chunked) {
      const int64_t want = (((job->n + SEGOPS_ARG_CHUNK - 1) >> SEGOPS_ARG_CHUNK_SHIFT) * 32 + 255) / 256;
      const unsigned grid = (unsigned)(want < cap ? want : cap);
      if (perm)
        arg_chunk_kernel<T, W, IS_MAX, PASS, 1><<<grid, 256, 0, st>>>(*a);
      else
        arg_chunk_kernel<T, W, IS_MAX, PASS, 0><<<grid, 256, 0, st>>>(*a);
    }
    const int64_t want = (job->s * 32 + 255) / 256;
    const unsigned grid = (unsigned)(want < cap ? want : cap);
    if (perm)
      arg_kernel<T, W, IS_MAX, PASS, 1><<<grid, 256, 0, st>>>(*a, chunked);
    else
      arg_kernel<T, W, IS_MAX, PASS, 0><<<grid, 256, 0, st>>>(*a, chunked);
    return cudaGetLastError();
  }
};

typedef segops_cuda_arg<1, SEGOPS_PASS_FORWARD> segops_cuda_max_forward;
typedef segops_cuda_arg<1, SEGOPS_PASS_BACKWARD> segops_cuda_max_backward;
typedef segops_cuda_arg<1, SEGOPS_PASS_DOUBLE_BACKWARD> segops_cuda_max_double_backward;
typedef segops_cuda_arg<0, SEGOPS_PASS_FORWARD> segops_cuda_min_forward;
typedef segops_cuda_arg<0, SEGOPS_PASS_BACKWARD> segops_cuda_min_backward;
typedef segops_cuda_arg<0, SEGOPS_PASS_DOUBLE_BACKWARD> segops_cuda_min_double_backward;
SEGOPS_CUDA_FN_RUN(max_forward, segops_cuda_max_forward)
SEGOPS_CUDA_FN_RUN(max_backward, segops_cuda_max_backward)
SEGOPS_CUDA_FN_RUN(max_double_backward, segops_cuda_max_double_backward)
SEGOPS_CUDA_FN_RUN(min_forward, segops_cuda_min_forward)
SEGOPS_CUDA_FN_RUN(min_backward, segops_cuda_min_backward)
SEGOPS_CUDA_FN_RUN(min_double_backward, segops_cuda_min_double_backward)

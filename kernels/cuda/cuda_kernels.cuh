/* cuda_kernels.cuh: the two kernel shapes every op is built from, shared by the per-op .cu files.
 *  - gather: one thread per element, original order; per-element outputs that read segment rows.
 *  - segment: one warp per chunk of a segment (elements in segment order, through the sort
 *    permutation when idx is unsorted); a fixed-shape reduction, then segment outputs and the
 *    per-element outputs that need the reduced values. Long segments are split in chunks whose
 *    partials a second kernel combines in chunk order: the bits depend only on the segment.
 * An op is a struct of __device__ functions (see cuda_sum.cu for the smallest). */
#ifndef SEGOPS_CUDA_KERNELS_CUH
#define SEGOPS_CUDA_KERNELS_CUH

#include <cuda_runtime.h>
#include <stdint.h>

#include "cuda_internal.h"

#define SEGOPS_SEG_THREADS 256
#define SEGOPS_SEG_GROUP 16 /* consecutive segments one warp takes per step */
#define SEGOPS_FULL_MASK 0xffffffffu

/* Device view of the segment layout built by cuda_layout.cu (all device pointers). */
typedef struct {
  const int64_t *off;   /* S+1: segment s is sorted positions [off[s], off[s+1]) */
  const int64_t *perm;  /* sorted position -> element index; NULL when idx was sorted */
  const int64_t *pbase; /* S+1: exclusive prefix of the chunk counts of multi-chunk segments */
  const int32_t *multi; /* segments with more than one chunk (any order) */
  const int32_t *nmulti;
  double *partial; /* partial accumulators, one row per chunk of a multi-chunk segment */
  double *segval;  /* per segment values that multi-chunk post passes read */
} segops_seg_layout;

/* Everything a kernel reads, passed by value. */
typedef struct {
  const void *in[SEGOPS_MAX_INPUTS];
  void *out[SEGOPS_MAX_OUTPUTS];
  int64_t in_row_bytes[SEGOPS_MAX_INPUTS]; /* bytes per element row of per-element inputs, else 0 */
  const int32_t *idx;
  int64_t n, s;
  segops_seg_layout L;
} segops_kargs;

/* Loads element k of input p as double; an omitted input (NULL) reads as zero. */
template <typename T>
__device__ __forceinline__ double ld(const void *p, int64_t k) {
  return p ? (double)__ldg((const T *)p + k) : 0.0;
}
/* Stores v (rounded to T) at element k of output p unless the output was not requested. */
template <typename T>
__device__ __forceinline__ void st(void *p, int64_t k, double v) {
  if (p) ((T *)p)[k] = (T)v;
}

__device__ __forceinline__ void prefetch_l2(const void *p) { asm volatile("prefetch.global.L2 [%0];" ::"l"(p)); }

/* Asks L2 for the rows of sorted positions [p0, p1) of every per-element input (or for the
 * permutation entries when unsorted), all lines at once, so the reductions that follow wait on
 * L2 rather than on DRAM once per segment. */
__device__ __forceinline__ void prefetch_rows(const segops_kargs &a, int64_t p0, int64_t p1) {
  const int lane = threadIdx.x & 31;
  if (p1 <= p0) return;
  if (a.L.perm) {
    const char *b = (const char *)(a.L.perm + p0);
    for (int64_t o = (int64_t)lane * 128; o < (p1 - p0) * 8; o += 32 * 128) prefetch_l2(b + o);
    return;
  }
#pragma unroll
  for (int k = 0; k < SEGOPS_MAX_INPUTS; k++) {
    const int64_t rb = a.in_row_bytes[k];
    if (!rb || !a.in[k]) continue;
    const char *b = (const char *)a.in[k] + p0 * rb;
    for (int64_t o = (int64_t)lane * 128; o < (p1 - p0) * rb; o += 32 * 128) prefetch_l2(b + o);
  }
}

/* Multi-chunk segment owning chunk p: the smallest s with pbase[s+1] > p, by a 32-way search
 * of the warp (each lane probes one position). Every lane returns the same s. */
__device__ __forceinline__ int64_t find_chunk_segment(const int64_t *pbase, int64_t nseg, int64_t p) {
  const int lane = threadIdx.x & 31;
  int64_t lo = 0, hi = nseg; /* pbase[lo] <= p < pbase[hi] */
  while (hi - lo > 1) {
    int64_t step = (hi - lo + 31) / 32;
    int64_t probe = lo + (int64_t)lane * step;
    bool gt = probe >= hi || (lane > 0 && pbase[probe] > p);
    unsigned m = __ballot_sync(SEGOPS_FULL_MASK, gt);
    if (m == 0) {
      lo += 31 * step;
    } else {
      int first = __ffs(m) - 1; /* >= 1: lane 0 never sets gt */
      int64_t nhi = lo + (int64_t)first * step;
      lo += (int64_t)(first - 1) * step;
      hi = nhi < hi ? nhi : hi;
    }
  }
  return lo;
}

template <int K>
__device__ __forceinline__ void warp_sum(double (&acc)[K]) {
  /* Butterfly: every lane ends with the same bits (each step adds the same two values). */
#pragma unroll
  for (int k = 0; k < K; k++)
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) acc[k] += __shfl_xor_sync(SEGOPS_FULL_MASK, acc[k], o);
}

template <int K>
__device__ __forceinline__ void sub8_sum(double (&acc)[K]) {
  /* Butterfly inside each group of 8 lanes (same bits on the 8 lanes). */
#pragma unroll
  for (int k = 0; k < K; k++)
#pragma unroll
    for (int o = 4; o > 0; o >>= 1) acc[k] += __shfl_xor_sync(SEGOPS_FULL_MASK, acc[k], o, 8);
}

/* Segment kernel: every segment of at most SEGOPS_CUDA_CHUNK elements. A warp takes
 * SEGOPS_SEG_GROUP consecutive segments per step and works on four at a time, one per group of
 * 8 lanes: lane l of the group sums positions l, l+8, ... of its segment in order, then a
 * butterfly over the 8 lanes. That order depends only on the segment (not on where it sits in
 * the request), and four segments share each shuffle. OP provides:
 *   enum { K (accumulators), NSV (segment values for post, >= 1), POST (0/1) };
 *   visit<T,W>(a, i, s, acc): add element i's terms; may write element outputs that need no sums
 *   finish<T,W>(a, s, count, acc, sv, writer): segment outputs (writer lane only), fill sv
 *   post<T,W>(a, i, s, sv): element outputs that need the segment's sums */
template <typename T, int W, typename OP>
__global__ void __launch_bounds__(SEGOPS_SEG_THREADS, OP::K > 3 ? 3 : 5) seg_kernel(segops_kargs a) {
  const int lane = threadIdx.x & 31, sub = lane >> 3, sl = lane & 7;
  const int64_t nwarps = ((int64_t)gridDim.x * blockDim.x) >> 5;
  for (int64_t s0 = ((((int64_t)blockIdx.x * blockDim.x) + threadIdx.x) >> 5) * SEGOPS_SEG_GROUP; s0 < a.s;
       s0 += nwarps * SEGOPS_SEG_GROUP) {
    const int ng = a.s - s0 < SEGOPS_SEG_GROUP ? (int)(a.s - s0) : SEGOPS_SEG_GROUP;
    const int64_t o = lane <= ng ? a.L.off[s0 + lane] : 0;
    {
      int64_t gb = __shfl_sync(SEGOPS_FULL_MASK, o, 0), ge = __shfl_sync(SEGOPS_FULL_MASK, o, ng);
      int64_t cap = gb + (int64_t)SEGOPS_SEG_GROUP * 128; /* long segments stream on their own */
      prefetch_rows(a, gb, ge < cap ? ge : cap);
    }
    for (int r = 0; r < ng; r += 4) {
      const int g = r + sub;
      const bool valid = g < ng;
      int64_t beg = __shfl_sync(SEGOPS_FULL_MASK, o, valid ? g : 0);
      int64_t end = __shfl_sync(SEGOPS_FULL_MASK, o, valid ? g + 1 : 0);
      const bool mine = valid && end - beg <= SEGOPS_CUDA_CHUNK; /* longer: seg_chunk_kernel */
      if (!mine) beg = end = 0;
      const int64_t s = s0 + g;
      double acc[OP::K];
#pragma unroll
      for (int k = 0; k < OP::K; k++) acc[k] = 0.0;
#pragma unroll 2
      for (int64_t p = beg + sl; p < end; p += 8) {
        int64_t i = a.L.perm ? a.L.perm[p] : p;
        OP::template visit<T, W>(a, i, s, acc);
      }
      sub8_sum<OP::K>(acc);
      if (mine) {
        double sv[OP::NSV];
        OP::template finish<T, W>(a, s, end - beg, acc, sv, sl == 0);
        if (OP::POST) {
          for (int64_t p = beg + sl; p < end; p += 8) {
            int64_t i = a.L.perm ? a.L.perm[p] : p;
            OP::template post<T, W>(a, i, s, sv);
          }
        }
      }
    }
  }
}

/* Chunks of long segments: one warp per chunk of SEGOPS_CUDA_CHUNK positions counted from the
 * segment's start; the partial sums go to the chunk's row of L.partial. */
template <typename T, int W, typename OP>
__global__ void __launch_bounds__(SEGOPS_SEG_THREADS) seg_chunk_kernel(segops_kargs a) {
  const int lane = threadIdx.x & 31;
  const int64_t nwarps = ((int64_t)gridDim.x * blockDim.x) >> 5;
  const int64_t total = a.L.pbase[a.s];
  for (int64_t p = (((int64_t)blockIdx.x * blockDim.x) + threadIdx.x) >> 5; p < total; p += nwarps) {
    const int64_t s = find_chunk_segment(a.L.pbase, a.s, p);
    const int64_t j = p - a.L.pbase[s];
    const int64_t end = a.L.off[s + 1];
    const int64_t cb = a.L.off[s] + j * SEGOPS_CUDA_CHUNK;
    const int64_t ce = end < cb + SEGOPS_CUDA_CHUNK ? end : cb + SEGOPS_CUDA_CHUNK;
    prefetch_rows(a, cb, ce);
    double acc[OP::K];
#pragma unroll
    for (int k = 0; k < OP::K; k++) acc[k] = 0.0;
#pragma unroll 4
    for (int64_t q = cb + lane; q < ce; q += 32) {
      int64_t i = a.L.perm ? a.L.perm[q] : q;
      OP::template visit<T, W>(a, i, s, acc);
    }
    warp_sum<OP::K>(acc);
    if (lane == 0) {
      double *dst = a.L.partial + p * OP::K;
#pragma unroll
      for (int k = 0; k < OP::K; k++) dst[k] = acc[k];
    }
  }
}

/* Combines the partials of each multi-chunk segment, one block per segment, in a fixed order:
 * thread t sums chunks t, t+256, ...; then warps (butterfly) and the 8 warp sums in order. */
template <typename T, int W, typename OP>
__global__ void __launch_bounds__(SEGOPS_SEG_THREADS) seg_multi_kernel(segops_kargs a) {
  __shared__ double red[SEGOPS_SEG_THREADS / 32][OP::K];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int nm = *a.L.nmulti;
  for (int m = blockIdx.x; m < nm; m += gridDim.x) {
    const int64_t s = a.L.multi[m];
    const int64_t p0 = a.L.pbase[s], nch = a.L.pbase[s + 1] - p0;
    const double *src = a.L.partial + p0 * OP::K;
    double acc[OP::K];
#pragma unroll
    for (int k = 0; k < OP::K; k++) acc[k] = 0.0;
    for (int64_t j = threadIdx.x; j < nch; j += blockDim.x)
#pragma unroll
      for (int k = 0; k < OP::K; k++) acc[k] += src[j * OP::K + k];
    warp_sum<OP::K>(acc);
    if (lane == 0)
#pragma unroll
      for (int k = 0; k < OP::K; k++) red[warp][k] = acc[k];
    __syncthreads();
    if (threadIdx.x == 0) {
      double tot[OP::K];
#pragma unroll
      for (int k = 0; k < OP::K; k++) {
        tot[k] = red[0][k];
        for (int q = 1; q < SEGOPS_SEG_THREADS / 32; q++) tot[k] += red[q][k];
      }
      double sv[OP::NSV];
      OP::template finish<T, W>(a, s, a.L.off[s + 1] - a.L.off[s], tot, sv, true);
      if (OP::POST)
        for (int k = 0; k < OP::NSV; k++) a.L.segval[s * OP::NSV + k] = sv[k];
    }
    __syncthreads(); /* red is reused by the next segment */
  }
}

/* Post pass of multi-chunk segments (ops with POST): one warp per chunk, as seg_chunk_kernel. */
template <typename T, int W, typename OP>
__global__ void __launch_bounds__(SEGOPS_SEG_THREADS) seg_post_kernel(segops_kargs a) {
  const int lane = threadIdx.x & 31;
  const int64_t nwarps = ((int64_t)gridDim.x * blockDim.x) >> 5;
  const int64_t total = a.L.pbase[a.s];
  for (int64_t p = (((int64_t)blockIdx.x * blockDim.x) + threadIdx.x) >> 5; p < total; p += nwarps) {
    const int64_t s = find_chunk_segment(a.L.pbase, a.s, p);
    const int64_t j = p - a.L.pbase[s];
    double sv[OP::NSV];
    for (int k = 0; k < OP::NSV; k++) sv[k] = a.L.segval[s * OP::NSV + k];
    const int64_t end = a.L.off[s + 1];
    const int64_t cb = a.L.off[s] + j * SEGOPS_CUDA_CHUNK;
    const int64_t ce = end < cb + SEGOPS_CUDA_CHUNK ? end : cb + SEGOPS_CUDA_CHUNK;
    prefetch_rows(a, cb, ce);
    for (int64_t q = cb + lane; q < ce; q += 32) {
      int64_t i = a.L.perm ? a.L.perm[q] : q;
      OP::template post<T, W>(a, i, s, sv);
    }
  }
}

/* Gather kernel: OP provides elem<T,W>(a, i, s). One thread per element, grid-stride. */
template <typename T, int W, typename OP>
__global__ void __launch_bounds__(256) gather_kernel(segops_kargs a) {
  const int64_t stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < a.n; i += stride)
    OP::template elem<T, W>(a, i, (int64_t)__ldg(a.idx + i));
}

/* Launch helpers (cuda_layout.cu): grid sizes from the job. */
int segops_cuda_seg_grid(const segops_cuda_job *job);
int segops_cuda_chunk_grid(const segops_cuda_job *job);
int segops_cuda_gather_grid(const segops_cuda_job *job);
/* Builds the layout for the job on stream (offsets, sort, chunks); fills *L. */
cudaError_t segops_cuda_build_layout(const segops_cuda_job *job, segops_seg_layout *L, cudaStream_t st);

/* Runs a segment op: the segment kernel, then for segments longer than a chunk the chunk,
 * combine and post kernels (launched only when N allows such a segment). */
template <typename T, int W, typename OP>
cudaError_t segops_run_seg(const segops_cuda_job *job, const segops_kargs &a, cudaStream_t st) {
  seg_kernel<T, W, OP><<<segops_cuda_seg_grid(job), SEGOPS_SEG_THREADS, 0, st>>>(a);
  if (job->n > SEGOPS_CUDA_CHUNK) {
    int gc = segops_cuda_chunk_grid(job);
    seg_chunk_kernel<T, W, OP><<<gc, SEGOPS_SEG_THREADS, 0, st>>>(a);
    seg_multi_kernel<T, W, OP><<<2 * job->sm_count, SEGOPS_SEG_THREADS, 0, st>>>(a);
    if (OP::POST) seg_post_kernel<T, W, OP><<<gc, SEGOPS_SEG_THREADS, 0, st>>>(a);
  }
  return cudaGetLastError();
}

template <typename T, int W, typename OP>
cudaError_t segops_run_gather(const segops_cuda_job *job, const segops_kargs &a, cudaStream_t st) {
  if (job->n == 0) return cudaSuccess;
  gather_kernel<T, W, OP><<<segops_cuda_gather_grid(job), 256, 0, st>>>(a);
  return cudaGetLastError();
}

/* Dispatch by dtype and width for one op struct of each kind. */
#define SEGOPS_DISPATCH_SEG(job, a, st, OPT)                                         \
  ((job)->dtype == SEGOPS_F64                                                        \
       ? ((job)->width == 3 ? segops_run_seg<double, 3, OPT>(job, a, st)             \
                            : segops_run_seg<double, 1, OPT>(job, a, st))            \
       : ((job)->width == 3 ? segops_run_seg<float, 3, OPT>(job, a, st)              \
                            : segops_run_seg<float, 1, OPT>(job, a, st)))
#define SEGOPS_DISPATCH_GATHER(job, a, st, OPT)                                      \
  ((job)->dtype == SEGOPS_F64                                                        \
       ? ((job)->width == 3 ? segops_run_gather<double, 3, OPT>(job, a, st)          \
                            : segops_run_gather<double, 1, OPT>(job, a, st))         \
       : ((job)->width == 3 ? segops_run_gather<float, 3, OPT>(job, a, st)           \
                            : segops_run_gather<float, 1, OPT>(job, a, st)))

/* Dispatch by dtype for the vec3-only ops (rms_norm, matvec). */
#define SEGOPS_DISPATCH_SEG3(job, a, st, OPT)                                                 \
  ((job)->dtype == SEGOPS_F64 ? segops_run_seg<double, 3, OPT>(job, a, st)                    \
                              : segops_run_seg<float, 3, OPT>(job, a, st))
#define SEGOPS_DISPATCH_GATHER3(job, a, st, OPT)                                              \
  ((job)->dtype == SEGOPS_F64 ? segops_run_gather<double, 3, OPT>(job, a, st)                 \
                              : segops_run_gather<float, 3, OPT>(job, a, st))

/* Per-op entry points (one .cu each): run the job's pass of that op. */
cudaError_t segops_cuda_sum(const segops_cuda_job *job, const segops_kargs &a, cudaStream_t st);
cudaError_t segops_cuda_dot(const segops_cuda_job *job, const segops_kargs &a, cudaStream_t st);
cudaError_t segops_cuda_mul(const segops_cuda_job *job, const segops_kargs &a, cudaStream_t st);
cudaError_t segops_cuda_mean(const segops_cuda_job *job, const segops_kargs &a, cudaStream_t st);
cudaError_t segops_cuda_rms_norm(const segops_cuda_job *job, const segops_kargs &a, cudaStream_t st);
cudaError_t segops_cuda_matvec(const segops_cuda_job *job, const segops_kargs &a, cudaStream_t st);

#endif

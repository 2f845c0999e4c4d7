/* cuda_kernels.cuh: the device side every function is built from, shared by the per-op .cu
 * files: the kernel arguments, loads and stores, the reducer, and the kernel shapes.
 *  - gather: one thread per element, original order; per-element outputs (reading segment rows,
 *    and for ops with a post pass the values the segment kernel left per segment).
 *  - segment: 8 lanes per short segment (elements in segment order, through the sort permutation
 *    when idx is unsorted); a fixed-shape reduction, then the segment's outputs. Long segments are
 *    split in chunks whose partials the warp finishing the last chunk combines in chunk order: the
 *    bits depend only on the segment. The segment kernel's walks only reduce: per-element outputs
 *    of a function that also reduces are written by a gather in element order (coalesced), which
 *    the profile showed to be faster than storing them from inside the reduction loop; for the
 *    functions where it measured faster, from a second loop of the walk over a sorted idx (IE).
 * Which shape runs when is the host side's (cuda_runners.cuh). An op's reduction is a struct of
 * __device__ functions deriving from its reducer (see cuda_sum.cu for the smallest); its
 * per-element outputs are another (elem); cuda_registry.cuh ties them to the op table's rows. */
#ifndef SEGOPS_CUDA_KERNELS_CUH
#define SEGOPS_CUDA_KERNELS_CUH

#include <cuda_runtime.h>
#include <stdint.h>

#include <type_traits>

#include "cuda_internal.h"
#include "segops_rowmath.h"

constexpr int SEGOPS_SEG_THREADS = 256;
constexpr int SEGOPS_SEG_PER_WARP = 4; /* short segments per warp: one per group of 8 lanes */
/* Minimum resident blocks of seg_kernel per multiprocessor (launch bounds: the register budget),
 * for ops with at most 3 accumulators and for the others; with the tile role and without it
 * (sorted idx whose longest segment is known to be short). Measured on one sm_90 GPU (bench_cuda):
 * with the tile role, more registers keep long chunks fast; without it, more warps. */
constexpr int SEGOPS_SEG_MINB = 4;
constexpr int SEGOPS_SEG_MINB_WIDE = 3;
constexpr int SEGOPS_SEG_MINB_SHORT = 8;
constexpr int SEGOPS_SEG_MINB_SHORT_WIDE = 4;
/* The same for the kernel without the tile role that writes a mixed function's element outputs
 * from its walks (IE 2): compiled for 4 blocks (up to 64 registers) instead of 8 (32), mul
 * backward seg32 ran 1.32x (2^20) and 1.36x (2^25) faster in float64, 1.04x in float32
 * (one sm_90 GPU, bench_cuda --log2n 20|25, two builds). The split's segment launch (IE 1, past 2^22)
 * keeps SEGOPS_SEG_MINB_SHORT: there 4 lost (powerlaw 0.92-0.95x). */
constexpr int SEGOPS_SEG_MINB_IE = 4;
constexpr unsigned SEGOPS_FULL_MASK = 0xffffffffu;
/* Long chunks (seg_long_chunk): rows each lane keeps in flight while walking a chunk, and partial
 * rows each lane keeps in flight while combining (ops with at most 3 accumulators; the wider ops
 * keep 2 and the compiler's unrolling). Neither changes an addition's order, so neither changes a
 * bit. Combining 16 rows at a time was level at 2^25 and slower at 2^12 and 2^17 (single rows up
 * to 17 %); 8 rows in flight in the walk, 3-7 % slower at 2^12 and 2^17; an L2 prefetch of each
 * long chunk lost by up to 27 % (one sm_90 GPU, bench_cuda). */
constexpr int SEGOPS_CHUNK_ROWS = 4;
constexpr int SEGOPS_COMBINE_ROWS = 4;

/* Device view of the segment layout (all device pointers). The persistent part (off, ticket,
 * keys and perm of an unsorted idx) depends only on (idx, S) and may be cached across calls;
 * partial and segval are per-call scratch. */
typedef struct {
  const int64_t *off;    /* S+1: segment s is sorted positions [off[s], off[s+1]) */
  const int32_t *keys;   /* n: the segment of each sorted position (idx itself when sorted) */
  const int32_t *perm32; /* sorted position -> element index (n < 2^31); NULL when sorted */
  const int64_t *perm64; /* the same for n >= 2^31 */
  int32_t *ticket;       /* S: chunks of a long segment finished in this call; 0 between calls */
  double *partial;       /* 2 rows per tile of SEGOPS_CUDA_TILE positions (see tile_chunks) */
  double *segval;        /* per segment values: for the post gather (ops with POST), or mean's quotients */
} segops_seg_layout;

/* Everything a kernel reads, passed by value. */
typedef struct {
  const void *in[SEGOPS_MAX_INPUTS];
  void *out[SEGOPS_MAX_OUTPUTS];
  const int32_t *idx;
  int64_t n, s;
  int64_t seg_warps;     /* warps of the segment role in seg_kernel; the tile role follows */
  int tiles_per_warp;    /* tiles each warp of the tile role checks (1..32, one per lane) */
  int64_t gather_blocks; /* seg_kernel with an ELEM: its last blocks run the gather (small N) */
  segops_seg_layout L;
  int64_t w;  /* the job's row width (read by the run-time-width kernels, cuda_wide.cuh) */
  int y_wide; /* mul: y, gg_y and grad_y are (S,*F) */
} segops_kargs;

/* Element index at sorted position p. PK: 0 when idx is sorted (no permutation: the kernel is
 * compiled without the branch), 1 when it goes through L->perm32 or L->perm64. */
template <int PK>
__device__ __forceinline__ int64_t elem_at(const segops_seg_layout *L, int64_t p) {
  if (PK == 0) return p;
  if (L->perm32) return (int64_t)__ldg(L->perm32 + p);
  return __ldg(L->perm64 + p);
}

/* Element values: T = float or double through global addresses, loads on the read-only path
 * (__ldg); gen<T> (the staged gather, which runs the same elem code on rows it copied into shared
 * memory) through generic addresses, global (segment rows) or shared (the staged element rows).
 * Segment rows through __ldg there (a test of __isGlobal per load) measured slower on one sm_90 GPU
 * (bench_cuda). val<T>::type is the stored type, val<T>::ro the load path. */
template <typename T>
struct gen {};
template <typename T>
struct val {
  typedef T type;
  static constexpr bool ro = true;
};
template <typename T>
struct val<gen<T>> {
  typedef T type;
  static constexpr bool ro = false;
};
/* Loads element k of input p as double; an omitted input (NULL) reads as zero. */
template <typename T>
__device__ __forceinline__ double ld(const void *p, int64_t k) {
  typedef typename val<T>::type V;
  if (!p) return 0.0;
  if constexpr (val<T>::ro) return (double)__ldg((const V *)p + k);
  return (double)((const V *)p)[k];
}
/* Stores v (rounded to T) at element k of output p unless the output was not requested. */
template <typename T>
__device__ __forceinline__ void st(void *p, int64_t k, double v) {
  typedef typename val<T>::type V;
  if (p) ((V *)p)[k] = (V)v;
}

/* dot(x[i], y[i]) of two per-element inputs of width W, summed in component order. */
template <typename T, int W>
__device__ __forceinline__ double dot_row(const void *x, const void *y, int64_t i) {
  double d = 0.0;
#pragma unroll
  for (int c = 0; c < W; c++) d += ld<T>(x, i * W + c) * ld<T>(y, i * W + c);
  return d;
}

/* The reducer of a reduction struct (segops_rowmath.h's vocabulary): identity() starts its
 * accumulators, combine(x, acc) is acc with the partial accumulation x of the same segment merged
 * in (lanes, warps, chunks; the operand order of acc += x, so the sum's code is the same as
 * before the reducer had a name). The drivers below do no other arithmetic of their own, so a reduction that is not a
 * sum (tests/cuda/test_cuda_reducer_max.cu) runs through them unchanged. Every op reduces by sum:
 * its reduction struct derives from segops_cuda_sum. */
struct segops_cuda_sum {
  __device__ __forceinline__ static double identity() { return segops_sum_identity(); }
  __device__ __forceinline__ static double combine(double a, double b) { return segops_sum_combine(a, b); }
};

/* How a reduction runs rows of a run-time width (its WIDE; cuda_wide.cuh): whole rows, per
 * column, or per column only for mul with y (S,*F). */
constexpr int SEGOPS_WIDE_ROWS = 1, SEGOPS_WIDE_COLS = 2, SEGOPS_WIDE_MUL = 3;

/* The reduction out[OUT][s] = sum dot(in[XA][i], in[XB][i]) (dot's forward, mul's backward and
 * double backward). Rows of a run-time width (cuda_wide.cuh): whole rows, or per column
 * (out[OUT][s] = sum in[XA][i] ⊙ in[XB][i]) for mul with y (S,*F) (SEGOPS_WIDE_MUL). */
template <int XA, int XB, int OUT>
struct dot_reduce : segops_cuda_sum {
  enum { K = 1, NSV = 1, POST = 0, WIDE = SEGOPS_WIDE_MUL };
  template <typename T>
  __device__ static void term(const segops_kargs *a, int64_t k, double *t) {
    t[0] += ld<T>(a->in[XA], k) * ld<T>(a->in[XB], k);
  }
  template <typename T>
  __device__ static void col_finish(const segops_kargs *a, int64_t j, int64_t, double acc) {
    st<T>(a->out[OUT], j, acc);
  }
  static bool wanted(const segops_kargs *a) { return a->out[OUT] != NULL; }
  template <typename T, int W>
  __device__ static void visit(const segops_kargs *a, int64_t i, int64_t, double *acc) {
    acc[0] += dot_row<T, W>(a->in[XA], a->in[XB], i);
  }
  template <typename T, int W>
  __device__ static void finish(const segops_kargs *a, int64_t s, int64_t, const double *acc, double *, bool writer) {
    if (writer) st<T>(a->out[OUT], s, acc[0]);
  }
};

/* The OP::K accumulators of a segment before any visit: the reducer's identity. */
template <typename OP>
__device__ __forceinline__ void acc_init(double *acc) {
#pragma unroll
  for (int k = 0; k < OP::K; k++) acc[k] = OP::identity();
}

template <typename OP>
__device__ __forceinline__ void warp_combine(double *acc) {
  /* Butterfly: every lane ends with the same bits (each step combines the same two values). */
#pragma unroll
  for (int k = 0; k < OP::K; k++)
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) acc[k] = OP::combine(__shfl_xor_sync(SEGOPS_FULL_MASK, acc[k], o), acc[k]);
}

template <typename OP>
__device__ __forceinline__ void sub8_combine(double *acc) {
  /* Butterfly inside each group of 8 lanes (same bits on the 8 lanes). */
#pragma unroll
  for (int k = 0; k < OP::K; k++)
#pragma unroll
    for (int o = 4; o > 0; o >>= 1) acc[k] = OP::combine(__shfl_xor_sync(SEGOPS_FULL_MASK, acc[k], o, 8), acc[k]);
}

/* Inline element outputs (IE, sorted idx only: sorted position = element index): after a walk
 * has reduced sorted positions p0, p0 + step, ... < end of segment s, the same lanes write those
 * elements' outputs of a mixed function's gather struct IEL (void: none), re-reading the rows
 * the walk just loaded. A second loop, not stores inside the walk: the walk's loads stay ahead of
 * any store (the compiler cannot tell outputs from inputs). Same elem code, so the same bits as
 * the separate gather. */
template <typename IEL, typename T, int W>
__device__ __forceinline__ void elem_inline(const segops_kargs *a, int64_t p0, int64_t end, int step, int64_t s) {
  if constexpr (!std::is_void<IEL>::value)
    for (int64_t p = p0; p < end; p += step) IEL::template elem<T, W>(a, p, s);
}

/* log2 of the chunk length of a long segment of c elements (a multiple of the tile, depending
 * only on c): 256 up to 2^16 elements, then about sqrt(c), 512 up to 2^18, 1024 up to 2^20, 2048
 * up to 2^22, 4096 beyond; one warp walks a chunk and one warp walks the chunks' partials, so the
 * two serial walks stay about as long. Shifts, not divisions: a 64-bit division by a variable
 * costs registers that the wide ops do not have. */
__host__ __device__ __forceinline__ int chunk_shift(int64_t c) {
  return c <= ((int64_t)1 << 16)   ? 8
         : c <= ((int64_t)1 << 18) ? 9
         : c <= ((int64_t)1 << 20) ? 10
         : c <= ((int64_t)1 << 22) ? 11
                                   : 12;
}

/* Long segments (more than SEGOPS_CUDA_TILE elements) are cut into chunks counted from the
 * segment's start, so the cut depends only on the segment. Chunk work is found by position
 * without a chunk map: since chunks are at least a tile long, the tile of positions
 * [t*TILE, (t+1)*TILE) holds the start of at most two chunks, slot 0 for the segment that
 * contains the tile's first position and slot 1 for a long segment that starts strictly inside
 * the tile (any other segment starting inside the tile ends inside it, so is short). Sets seg[c]
 * (-1: no chunk in slot c) and chunk[c]. */
__device__ __forceinline__ void tile_chunks(const segops_kargs *a, int64_t t, int64_t seg[2], int64_t chunk[2]) {
  seg[0] = seg[1] = -1;
  chunk[0] = chunk[1] = 0;
  const int64_t p0 = t * SEGOPS_CUDA_TILE;
  if (p0 >= a->n) return;
  const int64_t pl = (p0 + SEGOPS_CUDA_TILE < a->n ? p0 + SEGOPS_CUDA_TILE : a->n) - 1;
  const int64_t sa = __ldg(a->L.keys + p0), sb = __ldg(a->L.keys + pl);
  int64_t b = __ldg(a->L.off + sa), e = __ldg(a->L.off + sa + 1);
  if (e - b > SEGOPS_CUDA_TILE) {
    const int sh = chunk_shift(e - b);
    const int64_t j = (p0 - b + ((int64_t)1 << sh) - 1) >> sh;
    const int64_t q = b + (j << sh);
    if (q < e && q < p0 + SEGOPS_CUDA_TILE) {
      seg[0] = sa;
      chunk[0] = j;
    }
  }
  if (sb != sa) {
    b = __ldg(a->L.off + sb);
    e = __ldg(a->L.off + sb + 1);
    if (e - b > SEGOPS_CUDA_TILE) seg[1] = sb;
  }
}

/* Row of L.partial that chunk j (of length 2^sh) of a segment starting at sorted position b writes. */
__device__ __forceinline__ int64_t chunk_row(int64_t b, int64_t j, int sh) {
  const int64_t q = b + (j << sh), t = q / SEGOPS_CUDA_TILE;
  return 2 * t + (j == 0 && b != t * SEGOPS_CUDA_TILE ? 1 : 0);
}

/* Combines the partial of chunk c of a segment starting at sorted position b (chunks of 2^sh)
 * into tot. */
template <typename OP>
__device__ __forceinline__ void add_partial(const segops_kargs *a, int64_t b, int64_t c, int sh, double *tot) {
  const double *src = a->L.partial + chunk_row(b, c, sh) * OP::K;
#pragma unroll
  for (int k = 0; k < OP::K; k++) tot[k] = OP::combine(__ldcg(src + k), tot[k]);
}

/* A long segment's outputs from its combined accumulators (one lane); ops with a post pass leave
 * the segment's values in L.segval. */
template <typename T, int W, typename OP>
__device__ __forceinline__ void finish_long(const segops_kargs *a, int64_t s, int64_t count, const double *tot) {
  double sv[OP::NSV];
  OP::template finish<T, W>(a, s, count, tot, sv, true);
  if (OP::POST)
    for (int k = 0; k < OP::NSV; k++) a->L.segval[s * OP::NSV + k] = sv[k];
}

/* One chunk of a long segment, by one warp: lanes take positions q, q+32, ... in order, then a
 * butterfly; the partial goes to its row. The warp that finishes a segment's last chunk (integer
 * ticket, no float atomics) combines the partials in chunk order (lane l: chunks l, l+32, ...,
 * then a butterfly), whichever warp that is: the bits depend only on the segment. Ops with a post
 * pass get the segment's values in L.segval. */
template <typename T, int W, typename OP, int PK, typename IEL>
__device__ __forceinline__ void seg_long_chunk(const segops_kargs *a, int64_t s, int64_t j, int64_t row) {
  const int lane = threadIdx.x & 31;
  const int64_t b = __ldg(a->L.off + s), e = __ldg(a->L.off + s + 1);
  const int sh = chunk_shift(e - b);
  const int64_t cl = (int64_t)1 << sh, cb = b + (j << sh);
  const int64_t ce = e < cb + cl ? e : cb + cl;
  double acc[OP::K];
  acc_init<OP>(acc);
  constexpr int UV = OP::K > 3 ? 2 : SEGOPS_CHUNK_ROWS; /* rows in flight; wide accumulators would spill */
#pragma unroll UV
  for (int64_t q = cb + lane; q < ce; q += 32) OP::template visit<T, W>(a, elem_at<PK>(&a->L, q), s, acc);
  warp_combine<OP>(acc);
  /* IE: the chunk's element outputs in a second walk. Each group of UV rows' outputs right after
   * its visits instead (rows still in L1) measured slower for float32 at 2^20 (mul backward S=1
   * 22.7 -> 31.2 µs), as the stores hold back the next group's loads (one sm_90 GPU, bench_cuda). */
  elem_inline<IEL, T, W>(a, cb + lane, ce, 32, s);
  if (e - b <= cl) {
    /* The segment is this one chunk (65-256 elements): it finishes in the warp that walked it, with
     * no partial row, fence or ticket. The combine below would
     * leave lane 0 with the identity combined with acc, then with the other lanes' identities, so
     * combine(acc, identity) gives the same bits (for the sum, acc + 0.0: it differs from acc only
     * for -0.0). */
    if (lane == 0) {
      double tot[OP::K];
#pragma unroll
      for (int k = 0; k < OP::K; k++) tot[k] = OP::combine(acc[k], OP::identity());
      finish_long<T, W, OP>(a, s, e - b, tot);
    }
    return;
  }
  int last = 0;
  if (lane == 0) {
    double *dst = a->L.partial + row * OP::K;
#pragma unroll
    for (int k = 0; k < OP::K; k++) dst[k] = acc[k];
    __threadfence();
    const int nch = (int)((e - b + cl - 1) >> sh);
    last = atomicAdd(a->L.ticket + s, 1) == nch - 1;
  }
  last = __shfl_sync(SEGOPS_FULL_MASK, last, 0);
  if (!last) return;
  __threadfence();
  const int64_t nch = (e - b + cl - 1) >> sh; /* computed again here: kept live across the walk, it spilled */
  double tot[OP::K];
  acc_init<OP>(tot);
  if constexpr (OP::K <= 3) {
    /* SEGOPS_COMBINE_ROWS rows of partials in flight (the same additions in the same order) */
    constexpr int CU = SEGOPS_COMBINE_ROWS;
#pragma unroll CU
    for (int64_t c = lane; c < nch; c += 32) add_partial<OP>(a, b, c, sh, tot);
  } else {
    /* wide accumulators: the compiler's own unrolling (forcing four would spill) */
    for (int64_t c = lane; c < nch; c += 32) add_partial<OP>(a, b, c, sh, tot);
  }
  warp_combine<OP>(tot);
  if (lane == 0) {
    finish_long<T, W, OP>(a, s, e - b, tot);
    a->L.ticket[s] = 0; /* ready for the next call on this layout */
  }
}

/* Programmatic dependent launch (sm_90): the post gather that follows a segment kernel is
 * launched with the stream's programmatic serialization, so the GPU schedules its blocks while
 * the segment kernel still runs (every segment-kernel block lets it, at its start) and the gather
 * waits in griddepcontrol.wait for the segment kernel to finish and its stores to be visible.
 * Without the launch attribute both instructions do nothing. */
__device__ __forceinline__ void pdl_allow_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}
__device__ __forceinline__ void pdl_wait_primary() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

/* Per-element outputs of a gather struct OP (elem<T,W>(a, i, s)), threads t, t + stride, ...
 * in element order: the body of gather_kernel and of seg_kernel's gather role. */
template <typename T, int W, typename OP>
__device__ __forceinline__ void gather_rows(const segops_kargs *a, int64_t t, int64_t stride) {
  for (int64_t i = t; i < a->n; i += stride) OP::template elem<T, W>(a, i, (int64_t)__ldg(a->idx + i));
}

/* Segment kernel, up to three roles by block and warp.
 *  - ELEM (not void; small N): a.gather_blocks blocks, the last ones of the grid, run the gather
 *    of a function that also reduces (its per-element outputs do not depend on the reduction), so
 *    the function is one launch. Last, so that the reduction's chain of dependent loads (offsets,
 *    chunk walk, ticket, combine) starts in the first wave instead of after the gather's blocks
 *    were dispatched: with the gather first, at 2^17 the 144 rows took 1.210 ms instead of 1.147,
 *    dot double backward float32 powerlaw 14.8 µs instead of 11.2 (one sm_90 GPU, bench_cuda
 *    --log2n 17|12, both orders).
 *  - Warps below a.seg_warps: SEGOPS_SEG_PER_WARP consecutive segments of at most
 *    SEGOPS_CUDA_TILE elements, one per group of 8 lanes, each group on its own (no rounds across
 *    the warp): lane l of the group sums positions l, l+8, ... of its segment in order, then a
 *    butterfly over the 8 lanes. That order depends only on the segment (not on where it sits in
 *    the request). IP (LONG = 0 only): the group then writes the post pass of its segment's
 *    elements itself (same values, same formula as the post gather), so a function with a post
 *    pass is one launch.
 *  - The other warps (LONG = 1 only): a.tiles_per_warp tiles of positions each, one per lane to
 *    find the chunks of long segments that start there, then the whole warp reduces each chunk
 *    found (seg_long_chunk).
 * LONG = 0: no tile role, so the kernel needs fewer registers: either the caller knows that no
 * segment is longer than SEGOPS_CUDA_TILE (sorted idx, longest segment measured on the host), or
 * (past SEGOPS_CUDA_SPLIT_N) a second launch of LONG = 1 with no segment-role warps takes the
 * longer ones.
 * OP provides:
 *   enum { K (accumulators), NSV (segment values for the post gather, >= 1), POST (0/1) };
 *   visit<T,W>(a, i, s, acc): add element i's terms (reads only: no stores in a reduction)
 *   finish<T,W>(a, s, count, acc, sv, writer): segment outputs (writer lane only), fill sv
 *   and, with POST, post<T,W>(a, i, s, sv): element outputs from the segment's values, run by
 *   the post gather (post_elem) after this kernel left them in L.segval, or inline with IP. */
template <typename T, int W, typename OP, typename ELEM, int PK, int LONG, int IP, int IE>
__global__ void __launch_bounds__(SEGOPS_SEG_THREADS,
                                  LONG ? (OP::K > 3 ? SEGOPS_SEG_MINB_WIDE : SEGOPS_SEG_MINB)
                                       : (OP::K > 3 || IP ? SEGOPS_SEG_MINB_SHORT_WIDE
                                                          : (IE == 2 ? SEGOPS_SEG_MINB_IE : SEGOPS_SEG_MINB_SHORT)))
    seg_kernel(segops_kargs ka) {
  static_assert(!IP || (OP::POST && !LONG), "inline post: ops with a post pass, short segments only");
  static_assert(!IE || (PK == 0 && !std::is_void<ELEM>::value), "inline element outputs: sorted idx, a gather struct");
  typedef std::conditional_t<IE != 0, ELEM, void> IEL; /* the walks' inline element outputs */
  const segops_kargs *a = &ka;
  if constexpr (OP::POST) pdl_allow_dependents(); /* the post gather may be scheduled now */
  int64_t blk = blockIdx.x;
  if constexpr (!std::is_void<ELEM>::value && !IE) {
    /* the gather role's blocks: [g0, g0 + gather_blocks), the grid's last ones */
    const int64_t g0 = (int64_t)gridDim.x - a->gather_blocks;
    if (blk >= g0 && blk - g0 < a->gather_blocks) {
      gather_rows<T, W, ELEM>(a, (blk - g0) * blockDim.x + threadIdx.x, a->gather_blocks * blockDim.x);
      return;
    }
  }
  const int lane = threadIdx.x & 31, sub = lane >> 3, sl = lane & 7;
  const int64_t w = ((blk * blockDim.x) + threadIdx.x) >> 5;
  if (LONG && w >= a->seg_warps) {
    const int64_t t0 = (w - a->seg_warps) * a->tiles_per_warp;
    int64_t seg[2] = {-1, -1}, chunk[2] = {0, 0};
    if (lane < a->tiles_per_warp) tile_chunks(a, t0 + lane, seg, chunk);
#pragma unroll
    for (int c = 0; c < 2; c++) {
      unsigned m = __ballot_sync(SEGOPS_FULL_MASK, seg[c] >= 0);
      while (m) {
        const int l = __ffs(m) - 1;
        m &= m - 1;
        const int64_t s = __shfl_sync(SEGOPS_FULL_MASK, seg[c], l), j = __shfl_sync(SEGOPS_FULL_MASK, chunk[c], l);
        seg_long_chunk<T, W, OP, PK, IEL>(a, s, j, 2 * (t0 + l) + c);
      }
    }
    return;
  }
  if (w >= a->seg_warps) return; /* the whole warp: past the segments (seg_warps: S / 4 rounded up) */
  const int64_t s = w * SEGOPS_SEG_PER_WARP + sub;
  const bool valid = s < a->s;
  int64_t beg = valid ? __ldg(a->L.off + s) : 0, end = valid ? __ldg(a->L.off + s + 1) : 0;
  const bool mine = valid && end - beg <= SEGOPS_CUDA_TILE; /* longer: the tile role's */
  if (!mine) beg = end = 0;
  double acc[OP::K];
  acc_init<OP>(acc);
#pragma unroll 2
  for (int64_t p = beg + sl; p < end; p += 8) OP::template visit<T, W>(a, elem_at<PK>(&a->L, p), s, acc);
  sub8_combine<OP>(acc);
  if (mine) {
    double sv[OP::NSV];
    OP::template finish<T, W>(a, s, end - beg, acc, sv, sl == 0);
    if constexpr (IP) {
      /* every lane of the group holds the same sv (same accumulators, same arithmetic) */
      for (int64_t p = beg + sl; p < end; p += 8) OP::template post<T, W>(a, elem_at<PK>(&a->L, p), s, sv);
    } else if constexpr (OP::POST) {
      if (sl == 0)
        for (int k = 0; k < OP::NSV; k++) a->L.segval[s * OP::NSV + k] = sv[k];
    }
  }
  elem_inline<IEL, T, W>(a, beg + sl, end, 8, s); /* IE (beg = end unless mine) */
}

/* Gather kernel: OP provides elem<T,W>(a, i, s). One thread per element, grid-stride. */
template <typename T, int W, typename OP>
__global__ void __launch_bounds__(256) gather_kernel(segops_kargs ka) {
  pdl_wait_primary(); /* launched as a dependent (the post gather): the segment kernel's values */
  gather_rows<T, W, OP>(&ka, (int64_t)blockIdx.x * blockDim.x + threadIdx.x, (int64_t)gridDim.x * blockDim.x);
}

/* The post pass of an op with POST as a gather (gather_kernel<T, W, post_elem<OP>>), after
 * seg_kernel left each segment's values in L.segval. */
template <typename OP>
struct post_elem {
  template <typename T, int W>
  __device__ static void elem(const segops_kargs *a, int64_t i, int64_t s) {
    double sv[OP::NSV];
#pragma unroll
    for (int k = 0; k < OP::NSV; k++) sv[k] = __ldcg(a->L.segval + s * OP::NSV + k);
    OP::template post<T, W>(a, i, s, sv);
  }
};

/* Staged gather: a block takes SEGOPS_STAGE_ROWS consecutive elements at a time; it copies the
 * rows of every per-element input its elem reads into shared memory with 16-byte loads, runs elem
 * on them (element i of the tile is row i there), and copies the per-element outputs out with
 * 16-byte stores: whole sectors in both directions, where elem's own accesses are W scalars at a
 * stride of W values. The arithmetic is elem's own, so the bits are the same. An elem struct that
 * defines rows_in and rows_out (bit k: in[k] read, out[k] written at element rows; host functions
 * of the call's kargs) runs staged in float64 from SEGOPS_STAGE_MIN_N elements. Measured on one
 * sm_90 GPU (bench_cuda, two builds), every gather staged against none, 2 rounds: float64 dot
 * backward 1.6x at 2^25 and 1.45x at 2^20 and 2^17, dot and mul double backward 1.3x (2^25),
 * mean and sum backward up to 1.4x (2^20); float32, and the gathers that read a matrix or one input
 * row (mul forward and backward, matvec, rms_norm's post), 0.6-0.95x; every gather at 2^12 0.85-0.93x.
 * Those are the ones that stay unstaged. */
constexpr int64_t SEGOPS_STAGE_MIN_N = (int64_t)1 << 17;
constexpr int SEGOPS_STAGE_ROWS = 256;
/* Copies bytes (a multiple of 4, both addresses 16-byte aligned) with the whole block: 16 bytes
 * per thread at a time, then the 4-byte tail; RO: loads on the read-only path (from global). */
template <bool RO>
__device__ __forceinline__ void stage_copy(char *dst, const char *src, int bytes) {
  const int nv = bytes >> 4;
  for (int j = threadIdx.x; j < nv; j += blockDim.x) {
    const uint4 *q = (const uint4 *)src + j;
    ((uint4 *)dst)[j] = RO ? __ldg(q) : *q;
  }
  for (int j = (nv << 4) + threadIdx.x * 4; j < bytes; j += blockDim.x * 4) {
    const uint32_t *q = (const uint32_t *)(src + j);
    *(uint32_t *)(dst + j) = RO ? __ldg(q) : *q;
  }
}
template <typename T, int W, typename OP>
__global__ void __launch_bounds__(SEGOPS_STAGE_ROWS)
    gather_staged_kernel(segops_kargs ka, unsigned in_rows, unsigned out_rows) {
  extern __shared__ uint4 segops_stage_sm[];
  const int rb = W * (int)sizeof(T), E = SEGOPS_STAGE_ROWS;
  segops_kargs b = ka;
  char *slot = (char *)segops_stage_sm;
#pragma unroll
  for (int k = 0; k < SEGOPS_MAX_INPUTS; k++)
    if (in_rows >> k & 1) {
      b.in[k] = slot;
      slot += E * rb;
    }
#pragma unroll
  for (int k = 0; k < SEGOPS_MAX_OUTPUTS; k++)
    if (out_rows >> k & 1) {
      b.out[k] = slot;
      slot += E * rb;
    }
  for (int64_t i0 = (int64_t)blockIdx.x * E; i0 < ka.n; i0 += (int64_t)gridDim.x * E) {
    const int cnt = ka.n - i0 < E ? (int)(ka.n - i0) : E;
#pragma unroll
    for (int k = 0; k < SEGOPS_MAX_INPUTS; k++)
      if (in_rows >> k & 1) stage_copy<true>((char *)b.in[k], (const char *)ka.in[k] + i0 * rb, cnt * rb);
    __syncthreads();
    if ((int)threadIdx.x < cnt)
      OP::template elem<gen<T>, W>(&b, (int64_t)threadIdx.x, (int64_t)__ldg(ka.idx + i0 + threadIdx.x));
    __syncthreads();
#pragma unroll
    for (int k = 0; k < SEGOPS_MAX_OUTPUTS; k++)
      if (out_rows >> k & 1) stage_copy<false>((char *)ka.out[k] + i0 * rb, (const char *)b.out[k], cnt * rb);
  }
}

/* Copy gather: out[0][i][c] = src[idx[i]][c], a segment row copied to each of its elements, one
 * thread per value (i, c) instead of one per row. Through an unsorted idx a thread per row issues W
 * loads of one random segment row at a stride of W values, each its own sector request; here a
 * warp's loads and stores cover 32 consecutive values. The value stored is (T)src, as a row
 * gather's st<T>(ld<T>(...)), so the bits are the same. A gather struct that is such a copy defines
 * copy_src<T>(a), the segment rows' array (its element type: T, or double for mean's quotients);
 * segops_run_gather (cuda_runners.cuh) runs it this way over an unsorted idx. On one sm_90 GPU
 * (bench_cuda --layouts 3, two builds): sum backward float64 1.77x at 2^20 and 1.46x at 2^25, the other
 * unsorted rows 1.10-1.23x (mean backward float64 at 2^25 0.96x), 1.01-1.07x at 2^12; over a sorted
 * idx, where a row gather's segment loads hit L1, it lost (float32 0.55-0.67x at 2^25). */
template <typename T, typename S, int W>
__global__ void __launch_bounds__(256) copy_gather_kernel(const S *src, const int32_t *idx, T *out, int64_t n) {
  const int64_t m = n * W, stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t j = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; j < m; j += stride) {
    const int64_t i = j / W;
    out[j] = (T)__ldg(src + (int64_t)__ldg(idx + i) * W + (j - i * W));
  }
}

#endif

/* cuda_kernels.cuh: the kernel shapes every op is built from, shared by the per-op .cu files.
 *  - gather: one thread per element, original order; per-element outputs (reading segment rows,
 *    and for ops with a post pass the values the segment kernel left per segment).
 *  - segment: 8 lanes per short segment (elements in segment order, through the sort permutation
 *    when idx is unsorted); a fixed-shape reduction, then the segment's outputs. Long segments are
 *    split in chunks whose partials the warp finishing the last chunk combines in chunk order: the
 *    bits depend only on the segment. The segment kernel's walks only reduce: per-element outputs
 *    of a function that also reduces are written by a gather in element order (coalesced), which
 *    the profile showed to be faster than storing them from inside the reduction loop; for the
 *    functions where it measured faster, from a second loop of the walk over a sorted idx (IE).
 * Up to SEGOPS_CUDA_FUSE_N elements a function is one launch where it can (gather role and
 * inline post pass in the segment kernel); the inline post pass of short sorted segments at
 * any size.
 * An op's reduction is a struct of __device__ functions (see cuda_sum.cu for the smallest); its
 * per-element outputs are another (elem). */
#ifndef SEGOPS_CUDA_KERNELS_CUH
#define SEGOPS_CUDA_KERNELS_CUH

#include <cuda_runtime.h>
#include <stdint.h>

#include <type_traits>

#include "cuda_internal.h"

#define SEGOPS_SEG_THREADS 256
#define SEGOPS_SEG_PER_WARP 4 /* short segments per warp: one per group of 8 lanes */
/* Minimum resident blocks of seg_kernel per multiprocessor (launch bounds: the register budget),
 * for ops with at most 3 accumulators and for the others; with the tile role and without it
 * (sorted idx whose longest segment is known to be short). Measured on one H200 (bench_cuda):
 * with the tile role, more registers keep long chunks fast; without it, more warps. */
#ifndef SEGOPS_SEG_MINB
#define SEGOPS_SEG_MINB 4
#endif
#ifndef SEGOPS_SEG_MINB_WIDE
#define SEGOPS_SEG_MINB_WIDE 3
#endif
#ifndef SEGOPS_SEG_MINB_SHORT
#define SEGOPS_SEG_MINB_SHORT 8
#endif
#ifndef SEGOPS_SEG_MINB_SHORT_WIDE
#define SEGOPS_SEG_MINB_SHORT_WIDE 4
#endif
/* The same for the kernel without the tile role that writes a mixed function's element outputs
 * from its walks (IE 2): compiled for 4 blocks (up to 64 registers) instead of 8 (32), mul
 * backward seg32 ran 1.32x (2^20) and 1.36x (2^25) faster in float64, 1.04x in float32
 * (one H200, bench_cuda --log2n 20|25, two builds).
 * The split's segment launch (IE 1, past 2^22) keeps SEGOPS_SEG_MINB_SHORT: there 4 lost
 * (powerlaw 0.92-0.95x). */
#ifndef SEGOPS_SEG_MINB_IE
#define SEGOPS_SEG_MINB_IE 4
#endif
#define SEGOPS_FULL_MASK 0xffffffffu
/* Long chunks (seg_long_chunk): rows each lane keeps in flight while walking a chunk, and partial
 * rows each lane keeps in flight while combining (ops with at most 3 accumulators; the wider ops
 * keep 2 and the compiler's unrolling). Neither changes an addition's order, so neither changes a
 * bit; bench/cuda/gpu_variants.sh times them. Combining 16 rows at a time was level at 2^25 and
 * slower at 2^12 and 2^17 (single rows up to 17 %); 8 rows in flight in the walk, 3-7 % slower at
 * 2^12 and 2^17 (one H200, bench_cuda). An L2 prefetch of each long chunk lost too, by up to
 * 27 %, and is gone. */
#ifndef SEGOPS_CHUNK_ROWS
#define SEGOPS_CHUNK_ROWS 4
#endif
#ifndef SEGOPS_COMBINE_ROWS
#define SEGOPS_COMBINE_ROWS 4
#endif
/* Block order of a fused mixed function (seg_kernel with an ELEM): 1, the gather role's blocks
 * after the reduction's, so the reduction's chain of dependent loads (offsets, chunk walk, ticket,
 * combine) starts in the first wave instead of after the gather's blocks were dispatched; 0, the
 * gather first. Measured on one H200 (bench_cuda --log2n 17|12, both orders), 2
 * rounds, every layout, both dtypes: at 2^17 the 144 rows 1.210 -> 1.147 ms, dot double backward
 * float32 powerlaw 14.8 -> 11.2 µs, unsorted 17.4 -> 13.6 µs; at 2^12 dot double backward float32
 * powerlaw 11.2 -> 8.7 µs; no row slower beyond the rounds' spread; bits identical. */
#ifndef SEGOPS_GATHER_LAST
#define SEGOPS_GATHER_LAST 1
#endif
/* A long segment that is a single chunk (65-256 elements) finishes in the warp that walked it. */
#ifndef SEGOPS_CHUNK_SOLO
#define SEGOPS_CHUNK_SOLO 1
#endif

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
 * Segment rows through __ldg there (a test of __isGlobal per load) measured slower on one H200
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

/* The reduction out[OUT][s] = sum dot(in[XA][i], in[XB][i]) (dot's forward, mul's backward and
 * double backward). */
template <int XA, int XB, int OUT>
struct dot_reduce {
  enum { K = 1, NSV = 1, POST = 0 };
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

template <int K>
__device__ __forceinline__ void warp_sum(double *acc) {
  /* Butterfly: every lane ends with the same bits (each step adds the same two values). */
#pragma unroll
  for (int k = 0; k < K; k++)
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) acc[k] += __shfl_xor_sync(SEGOPS_FULL_MASK, acc[k], o);
}

template <int K>
__device__ __forceinline__ void sub8_sum(double *acc) {
  /* Butterfly inside each group of 8 lanes (same bits on the 8 lanes). */
#pragma unroll
  for (int k = 0; k < K; k++)
#pragma unroll
    for (int o = 4; o > 0; o >>= 1) acc[k] += __shfl_xor_sync(SEGOPS_FULL_MASK, acc[k], o, 8);
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

/* Adds the partial of chunk c of a segment starting at sorted position b (chunks of 2^sh) to tot. */
template <int K>
__device__ __forceinline__ void add_partial(const segops_kargs *a, int64_t b, int64_t c, int sh, double *tot) {
  const double *src = a->L.partial + chunk_row(b, c, sh) * K;
#pragma unroll
  for (int k = 0; k < K; k++) tot[k] += __ldcg(src + k);
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
#pragma unroll
  for (int k = 0; k < OP::K; k++) acc[k] = 0.0;
  constexpr int UV = OP::K > 3 ? 2 : SEGOPS_CHUNK_ROWS; /* rows in flight; wide accumulators would spill */
#pragma unroll UV
  for (int64_t q = cb + lane; q < ce; q += 32) OP::template visit<T, W>(a, elem_at<PK>(&a->L, q), s, acc);
  warp_sum<OP::K>(acc);
  /* IE: the chunk's element outputs in a second walk. Each group of UV rows' outputs right after
   * its visits instead (rows still in L1) measured slower for float32 at 2^20 (mul backward S=1
   * 22.7 -> 31.2 µs), as the stores hold back the next group's loads (one H200, bench_cuda). */
  elem_inline<IEL, T, W>(a, cb + lane, ce, 32, s);
  if (SEGOPS_CHUNK_SOLO && e - b <= cl) {
    /* The segment is this one chunk: no partial row, fence or ticket. The combine below would
     * leave lane 0 with 0.0 + acc plus zeros from the other lanes, so acc + 0.0 gives the same bits
     * (it differs from acc only for -0.0). */
    if (lane == 0) {
      double tot[OP::K];
#pragma unroll
      for (int k = 0; k < OP::K; k++) tot[k] = acc[k] + 0.0;
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
#pragma unroll
  for (int k = 0; k < OP::K; k++) tot[k] = 0.0;
  if constexpr (OP::K <= 3) {
    /* SEGOPS_COMBINE_ROWS rows of partials in flight (the same additions in the same order) */
    constexpr int CU = SEGOPS_COMBINE_ROWS;
#pragma unroll CU
    for (int64_t c = lane; c < nch; c += 32) add_partial<OP::K>(a, b, c, sh, tot);
  } else {
    /* wide accumulators: the compiler's own unrolling (forcing four would spill) */
    for (int64_t c = lane; c < nch; c += 32) add_partial<OP::K>(a, b, c, sh, tot);
  }
  warp_sum<OP::K>(tot);
  if (lane == 0) {
    finish_long<T, W, OP>(a, s, e - b, tot);
    a->L.ticket[s] = 0; /* ready for the next call on this layout */
  }
}

/* Programmatic dependent launch (sm_90): the post gather that follows a segment kernel is
 * launched with the stream's programmatic serialization, so the GPU schedules its blocks while
 * the segment kernel still runs (every segment-kernel block lets it, at its start) and the gather
 * waits in griddepcontrol.wait for the segment kernel to finish and its stores to be visible.
 * Without the launch attribute both instructions do nothing. SEGOPS_PDL 0: plain launches. */
#ifndef SEGOPS_PDL
#define SEGOPS_PDL 1
#endif
__device__ __forceinline__ void pdl_allow_dependents() {
#if SEGOPS_PDL && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}
__device__ __forceinline__ void pdl_wait_primary() {
#if SEGOPS_PDL && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
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
 *  - ELEM (not void; small N): a.gather_blocks blocks (the last ones of the grid, or the first
 *    with SEGOPS_GATHER_LAST 0) run the gather of a function that also reduces (its per-element outputs do not depend on the reduction), so the function is
 *    one launch.
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
    /* the gather role's blocks: [g0, g0 + gather_blocks), the grid's last ones (SEGOPS_GATHER_LAST) */
    const int64_t g0 = SEGOPS_GATHER_LAST ? (int64_t)gridDim.x - a->gather_blocks : 0;
    if (blk >= g0 && blk - g0 < a->gather_blocks) {
      gather_rows<T, W, ELEM>(a, (blk - g0) * blockDim.x + threadIdx.x, a->gather_blocks * blockDim.x);
      return;
    }
    if (!SEGOPS_GATHER_LAST) blk -= a->gather_blocks;
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
#pragma unroll
  for (int k = 0; k < OP::K; k++) acc[k] = 0.0;
#pragma unroll 2
  for (int64_t p = beg + sl; p < end; p += 8) OP::template visit<T, W>(a, elem_at<PK>(&a->L, p), s, acc);
  sub8_sum<OP::K>(acc);
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
 * H200 (bench_cuda, SEGOPS_GATHER_STAGE=1 against 0), every gather staged against none, 2 rounds: float64 dot
 * backward 1.6x at 2^25 and 1.45x at 2^20 and 2^17, dot and mul double backward 1.3x (2^25),
 * mean and sum backward up to 1.4x (2^20); float32, and the gathers that read a matrix or one input
 * row (mul forward and backward, matvec, rms_norm's post), 0.6-0.95x; every gather at 2^12 0.85-0.93x.
 * Those are the ones that stay unstaged. SEGOPS_GATHER_STAGE=0 turns it off (a timing knob). */
#ifndef SEGOPS_GATHER_STAGE
#define SEGOPS_GATHER_STAGE 1
#endif
#ifndef SEGOPS_STAGE_MIN_N
#define SEGOPS_STAGE_MIN_N ((int64_t)1 << 17)
#endif
#define SEGOPS_STAGE_ROWS 256
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

/* Grid sizes (cuda_launch.cu): a gather's (one thread per element, or per value of W per element). */
int segops_cuda_gather_grid(const segops_cuda_job *job, int w = 1);
/* Blocks of seg_kernel: the segment role, and with long_role the tile role; fills the warps of
 * the segment role and the tiles per warp of the tile role. */
int64_t segops_cuda_seg_blocks(int64_t n, int64_t s, int sm_count, int long_role, int64_t *seg_warps,
                               int *tiles_per_warp, int64_t *tile_warps);

/* Past this many elements, a reduction over a sorted idx that needs the tile role runs as two
 * launches: the segment role in a kernel compiled without the tile role (LONG = 0: fewer
 * registers, twice the resident warps, which its short, latency-bound walks need), leaving
 * segments longer than a tile alone, then the tile role in a grid of its own (LONG = 1 with no
 * segment-role warps). The same warps' code, so the same bits. On one H200 (bench_cuda
 * --log2n 25|20) at 2^25 powerlaw float32 the reductions ran up to 1.44x faster (median 1.12x; seg32
 * and S=1 level); at 2^20 the second launch cost more than it gained (powerlaw 0.94x, S=1 0.95x);
 * between the two it is not measured. Unsorted idx (through the permutation) stays one launch:
 * split, it was slower at both sizes (the LONG = 0 kernel with the permutation spills). */
#ifndef SEGOPS_CUDA_SPLIT_N
#define SEGOPS_CUDA_SPLIT_N ((int64_t)1 << 22)
#endif

/* Functions of at most this many elements run as one launch where they can: the gather of a
 * function that also reduces runs in the segment kernel's last blocks, and the post pass of short
 * sorted segments inside it (IP). Past it, separate kernels in element order, which the profile
 * at N = 2^25 showed to be faster (ncu, bench_cuda --log2n 25). Unsorted idx as two launches from 2^16
 * measured level to slower (matvec double backward 0.90x at 2^17; one H200, bench_cuda). */
#ifndef SEGOPS_CUDA_FUSE_N
#define SEGOPS_CUDA_FUSE_N ((int64_t)1 << 18)
#endif
static inline bool segops_one_launch(const segops_cuda_job *job) { return job->n <= SEGOPS_CUDA_FUSE_N; }
/* Past SEGOPS_CUDA_FUSE_N, from SEGOPS_CUDA_IE_N elements, a mixed function over a sorted idx whose
 * gather struct says so (walk_inline) writes its per-element outputs from the segment walks
 * (elem_inline, IE) instead of a separate gather that reads the inputs both share a second time.
 * Up to SEGOPS_CUDA_IP_N elements (default: any), an op with a post pass over short sorted
 * segments runs it inside the segment kernel (IP) instead of a post gather. Measured on the H200
 * (bench_cuda --log2n 20|25), sorted layouts, 2 rounds, bits identical:
 * IE 1.07-1.35x for mul backward (float64 S=1 excepted: 0.85x at 2^25, hence its walk_inline)
 * and 1.13-1.27x for matvec backward over short segments, but 0.4-0.97x for most rows of the
 * double backwards (two or three outputs; at 32 or 64 registers alike) and for matvec backward
 * with the tile role (segops_ie_ok); IP 1.21-1.52x for rms_norm's backward and double backward
 * at 2^25 and 1.07-1.29x for its double backward at 2^20 (backward float32 at 2^20: 0.88x, 13.0
 * -> 14.8 µs). */
#ifndef SEGOPS_CUDA_IE_N
#define SEGOPS_CUDA_IE_N ((int64_t)1 << 19)
#endif
#ifndef SEGOPS_CUDA_IP_N
#define SEGOPS_CUDA_IP_N INT64_MAX
#endif

/* Whether idx goes through the sort permutation, and whether seg_kernel needs its tile role (an
 * unsorted idx, or a sorted one whose longest segment is unknown or longer than a tile). */
static inline bool segops_seg_perm(const segops_kargs *a) { return a->L.perm32 || a->L.perm64; }
static inline bool segops_seg_tile_role(const segops_cuda_job *job, const segops_kargs *a) {
  return segops_seg_perm(a) || !(job->longest > 0 && job->longest <= SEGOPS_CUDA_TILE);
}

/* Whether a gather struct may run inside the segment walks (it defines walk_inline(job)). */
template <typename OP, typename = void>
struct segops_walk_inline : std::false_type {};
template <typename OP>
struct segops_walk_inline<OP, std::void_t<decltype(&OP::walk_inline)>> : std::true_type {};

/* Whether a mixed function whose reduction has k accumulators may run IE on this job: a sorted
 * idx of at least SEGOPS_CUDA_IE_N elements and, where the tile role (or the split) walks long
 * segments, at most SEGOPS_IE_TILE_MAX_K accumulators: with matvec's 9 those kernels have no
 * registers left for the second loop (ptxas: 40-44 bytes spilled; matvec backward 0.87-0.93x). */
#define SEGOPS_IE_TILE_MAX_K 3
static inline bool segops_ie_ok(const segops_cuda_job *job, const segops_kargs *a, int k) {
  return !segops_seg_perm(a) && job->n >= SEGOPS_CUDA_IE_N && (k <= SEGOPS_IE_TILE_MAX_K || !segops_seg_tile_role(job, a));
}

/* Whether a gather struct runs staged (it defines rows_in and rows_out). */
template <typename OP, typename = void>
struct segops_staged : std::false_type {};
template <typename OP>
struct segops_staged<OP, std::void_t<decltype(&OP::rows_in)>> : std::true_type {};

template <typename T, int W, typename OP>
cudaError_t segops_run_gather(const segops_cuda_job *job, const segops_kargs *a, cudaStream_t st,
                              bool dependent = false);

/* Runs a reduction: the segment kernel (compiled without the permutation when idx is sorted, and
 * without the tile role when the job says its longest segment is short), then, for ops with a
 * post pass, the post gather unless the segment kernel wrote it (IP). ELEM, when not void: the
 * gather of a mixed function, run by the same launch (n > 0: the caller checks), as the grid's
 * gather role (IE 0, small N) or from the segment walks themselves (IE 1, sorted idx; the
 * kernel without the tile role then runs as IE 2, see SEGOPS_SEG_MINB_IE). */
template <typename T, int W, typename OP, typename ELEM, int IE>
cudaError_t segops_run_red(const segops_cuda_job *job, const segops_kargs *a, cudaStream_t st) {
  static_assert(!(OP::POST && IE), "IE: mixed functions, whose reductions have no post pass");
  segops_kargs k = *a;
  const bool perm = segops_seg_perm(a), short_only = !segops_seg_tile_role(job, a);
  const bool ip = OP::POST && short_only && job->n <= SEGOPS_CUDA_IP_N;
  int64_t tile_warps = 0; /* host only: the split's second grid */
  const int64_t blocks =
      segops_cuda_seg_blocks(job->n, job->s, job->sm_count, !short_only, &k.seg_warps, &k.tiles_per_warp, &tile_warps);
  k.gather_blocks = std::is_void<ELEM>::value || IE ? 0 : segops_cuda_gather_grid(job);
  /* Split (SEGOPS_CUDA_SPLIT_N): the segment role's blocks alone in the first launch, compiled
   * without the tile role; the tile role follows as a grid of its own. */
  const bool split = !short_only && !perm && job->n > SEGOPS_CUDA_SPLIT_N;
  const int64_t wpb = SEGOPS_SEG_THREADS / 32, sb = (k.seg_warps + wpb - 1) / wpb;
  const unsigned grid = (unsigned)((split ? (sb > 0 ? sb : 1) : blocks) + k.gather_blocks);
  /* IE in the kernels that walk long segments (the tile role, the split) only for narrow
   * reductions: segops_ie_ok never asks for the others, which are so not compiled */
  constexpr int IEW = OP::K <= SEGOPS_IE_TILE_MAX_K ? IE : 0;
  if (perm) {
    /* IE: the caller never asks for it with a permutation (element outputs would scatter) */
    if constexpr (!IE) seg_kernel<T, W, OP, ELEM, 1, 1, 0, 0><<<grid, SEGOPS_SEG_THREADS, 0, st>>>(k);
  } else if (!short_only && !split)
    seg_kernel<T, W, OP, ELEM, 0, 1, 0, IEW><<<grid, SEGOPS_SEG_THREADS, 0, st>>>(k);
  else if constexpr (OP::POST) {
    if (ip)
      seg_kernel<T, W, OP, ELEM, 0, 0, 1, 0><<<grid, SEGOPS_SEG_THREADS, 0, st>>>(k);
    else
      seg_kernel<T, W, OP, ELEM, 0, 0, 0, 0><<<grid, SEGOPS_SEG_THREADS, 0, st>>>(k);
  } else if constexpr (IE != 0) {
    if (short_only) /* IE 2: the register budget of SEGOPS_SEG_MINB_IE */
      seg_kernel<T, W, OP, ELEM, 0, 0, 0, 2><<<grid, SEGOPS_SEG_THREADS, 0, st>>>(k);
    else /* the split's first launch */
      seg_kernel<T, W, OP, ELEM, 0, 0, 0, IEW><<<grid, SEGOPS_SEG_THREADS, 0, st>>>(k);
  } else /* short segments, or the split's first launch */
    seg_kernel<T, W, OP, ELEM, 0, 0, 0, 0><<<grid, SEGOPS_SEG_THREADS, 0, st>>>(k);
  if (split && tile_warps > 0) {
    segops_kargs t = k;
    t.seg_warps = 0; /* every warp of this grid is the tile role's */
    t.gather_blocks = 0;
    seg_kernel<T, W, OP, ELEM, 0, 1, 0, IEW><<<(unsigned)((tile_warps + wpb - 1) / wpb), SEGOPS_SEG_THREADS, 0, st>>>(t);
  }
  /* The post gather, a dependent of the segment kernel (not after the split's second launch, past
   * SEGOPS_CUDA_SPLIT_N: the launch gap is negligible there, and that chain was not compared bit
   * for bit on the GPU). */
  if constexpr (OP::POST)
    if (!ip && job->n > 0) return segops_run_gather<T, W, post_elem<OP>>(job, &k, st, !split);
  return cudaGetLastError();
}

template <typename T, int W, typename OP>
cudaError_t segops_run_seg(const segops_cuda_job *job, const segops_kargs *a, cudaStream_t st) {
  return segops_run_red<T, W, OP, void, 0>(job, a, st);
}

/* Copy gather: out[0][i][c] = src[idx[i]][c], a segment row copied to each of its elements, one
 * thread per value (i, c) instead of one per row. Through an unsorted idx a thread per row issues W
 * loads of one random segment row at a stride of W values, each its own sector request; here a
 * warp's loads and stores cover 32 consecutive values. The value stored is (T)src, as a row
 * gather's st<T>(ld<T>(...)), so the bits are the same. A gather struct that is such a copy defines
 * copy_src<T>(a), the segment rows' array (its element type: T, or double for mean's quotients);
 * segops_run_gather runs it this way over an unsorted idx. On one H200 (bench_cuda --layouts 3,
 * SEGOPS_COPY_GATHER=1 against 0): sum backward float64 1.77x at 2^20 and 1.46x at 2^25, the other unsorted rows 1.10-1.23x
 * (mean backward float64 at 2^25 0.96x), 1.01-1.07x at 2^12; over a sorted idx, where a row
 * gather's segment loads hit L1, it lost (float32 0.55-0.67x at 2^25). SEGOPS_COPY_GATHER 0: never
 * (a timing knob). */
#ifndef SEGOPS_COPY_GATHER
#define SEGOPS_COPY_GATHER 1
#endif
template <typename OP, typename = void>
struct segops_copies : std::false_type {};
template <typename OP>
struct segops_copies<OP, std::void_t<decltype(&OP::template copy_src<float>)>> : std::true_type {};
template <typename T, typename S, int W>
__global__ void __launch_bounds__(256) copy_gather_kernel(const S *src, const int32_t *idx, T *out, int64_t n) {
  const int64_t m = n * W, stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t j = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; j < m; j += stride) {
    const int64_t i = j / W;
    out[j] = (T)__ldg(src + (int64_t)__ldg(idx + i) * W + (j - i * W));
  }
}

/* Runs a gather; dependent: it reads what the kernel before it on st wrote, and on sm_90 is
 * launched as that kernel's programmatic dependent (SEGOPS_PDL). */
template <typename T, int W, typename OP>
cudaError_t segops_run_gather(const segops_cuda_job *job, const segops_kargs *a, cudaStream_t st, bool dependent) {
  if (job->n == 0) return cudaSuccess;
  if constexpr (SEGOPS_COPY_GATHER && segops_copies<OP>::value) {
    if (!job->idx_sorted) {
      if (a->out[0])
        copy_gather_kernel<T, std::remove_cv_t<std::remove_pointer_t<decltype(OP::template copy_src<T>(a))>>, W>
            <<<segops_cuda_gather_grid(job, W), 256, 0, st>>>(OP::template copy_src<T>(a), a->idx, (T *)a->out[0], job->n);
      return cudaGetLastError();
    }
  }
  if constexpr (SEGOPS_GATHER_STAGE && segops_staged<OP>::value && sizeof(T) == 8) {
    if (job->n >= SEGOPS_STAGE_MIN_N) {
      /* the rows it reads and writes, less the omitted inputs and the outputs not asked for */
      const unsigned want_in = OP::rows_in(a), want_out = OP::rows_out(a);
      unsigned in_rows = 0, out_rows = 0;
      uintptr_t align = 0;
      for (int k = 0; k < SEGOPS_MAX_INPUTS; k++)
        if ((want_in >> k & 1) && a->in[k]) in_rows |= 1u << k, align |= (uintptr_t)a->in[k];
      for (int k = 0; k < SEGOPS_MAX_OUTPUTS; k++)
        if ((want_out >> k & 1) && a->out[k]) out_rows |= 1u << k, align |= (uintptr_t)a->out[k];
      const int arrays = __builtin_popcount(in_rows) + __builtin_popcount(out_rows);
      if (arrays > 0 && (align & 15) == 0) {
        const size_t sm = (size_t)arrays * SEGOPS_STAGE_ROWS * W * sizeof(T);
        gather_staged_kernel<T, W, OP>
            <<<segops_cuda_gather_grid(job), SEGOPS_STAGE_ROWS, sm, st>>>(*a, in_rows, out_rows);
        return cudaGetLastError();
      }
    }
  }
  if (SEGOPS_PDL && dependent && job->sm_major >= 9) {
    cudaLaunchAttribute at = {};
    at.id = cudaLaunchAttributeProgrammaticStreamSerialization;
    at.val.programmaticStreamSerializationAllowed = 1;
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3((unsigned)segops_cuda_gather_grid(job));
    cfg.blockDim = dim3(256);
    cfg.stream = st;
    cfg.attrs = &at;
    cfg.numAttrs = 1;
    return cudaLaunchKernelEx(&cfg, gather_kernel<T, W, OP>, *a);
  }
  gather_kernel<T, W, OP><<<segops_cuda_gather_grid(job), 256, 0, st>>>(*a);
  return cudaGetLastError();
}

/* A function with per-element outputs (ELEM, a gather) and segment outputs (RED, a reduction):
 * each runs only when one of its outputs was requested (ELEM::wanted, RED::wanted); both in one
 * launch up to SEGOPS_CUDA_FUSE_N elements (they read the same inputs and write different
 * outputs); past it, over a sorted idx, in one launch where the gather struct says so
 * (walk_inline: IE), else one after the other. The wide reductions (matvec's 9 accumulators)
 * over long segments are fused too: against two launches that measured 1.29-1.47x faster on
 * matvec backward and double backward at 2^12 (powerlaw, S=1) and 1.11-1.24x at 2^17, bits
 * unchanged (one H200, bench_cuda --log2n 12|17). */
template <typename T, int W, typename RED, typename ELEM>
cudaError_t segops_run_mixed(const segops_cuda_job *job, const segops_kargs *a, cudaStream_t st) {
  const bool ew = ELEM::wanted(a), rw = RED::wanted(a);
  if (ew && rw && job->n > 0) {
    if (segops_one_launch(job)) return segops_run_red<T, W, RED, ELEM, 0>(job, a, st);
    if constexpr (segops_walk_inline<ELEM>::value)
      if (segops_ie_ok(job, a, RED::K) && ELEM::walk_inline(job))
        return segops_run_red<T, W, RED, ELEM, 1>(job, a, st);
  }
  cudaError_t e = cudaSuccess;
  if (ew) e = segops_run_gather<T, W, ELEM>(job, a, st);
  if (e == cudaSuccess && rw) e = segops_run_seg<T, W, RED>(job, a, st);
  return e;
}

/* Dispatch by dtype and width for one op struct of each kind. */
#define SEGOPS_DISPATCH_SEG(job, a, st, OPT)                                                                           \
  ((job)->dtype == SEGOPS_F64                                                                                          \
       ? ((job)->width == 3 ? segops_run_seg<double, 3, OPT>(job, a, st) : segops_run_seg<double, 1, OPT>(job, a, st)) \
       : ((job)->width == 3 ? segops_run_seg<float, 3, OPT>(job, a, st) : segops_run_seg<float, 1, OPT>(job, a, st)))
#define SEGOPS_DISPATCH_GATHER(job, a, st, OPT)                                                     \
  ((job)->dtype == SEGOPS_F64 ? ((job)->width == 3 ? segops_run_gather<double, 3, OPT>(job, a, st)  \
                                                   : segops_run_gather<double, 1, OPT>(job, a, st)) \
                              : ((job)->width == 3 ? segops_run_gather<float, 3, OPT>(job, a, st)   \
                                                   : segops_run_gather<float, 1, OPT>(job, a, st)))

#define SEGOPS_DISPATCH_MIXED(job, a, st, RED, ELEM)                                                     \
  ((job)->dtype == SEGOPS_F64 ? ((job)->width == 3 ? segops_run_mixed<double, 3, RED, ELEM>(job, a, st)  \
                                                   : segops_run_mixed<double, 1, RED, ELEM>(job, a, st)) \
                              : ((job)->width == 3 ? segops_run_mixed<float, 3, RED, ELEM>(job, a, st)   \
                                                   : segops_run_mixed<float, 1, RED, ELEM>(job, a, st)))

/* Dispatch by dtype for the vec3-only ops (rms_norm, matvec). */
#define SEGOPS_DISPATCH_SEG3(job, a, st, OPT) \
  ((job)->dtype == SEGOPS_F64 ? segops_run_seg<double, 3, OPT>(job, a, st) : segops_run_seg<float, 3, OPT>(job, a, st))
#define SEGOPS_DISPATCH_GATHER3(job, a, st, OPT)                              \
  ((job)->dtype == SEGOPS_F64 ? segops_run_gather<double, 3, OPT>(job, a, st) \
                              : segops_run_gather<float, 3, OPT>(job, a, st))
#define SEGOPS_DISPATCH_MIXED3(job, a, st, RED, ELEM)                              \
  ((job)->dtype == SEGOPS_F64 ? segops_run_mixed<double, 3, RED, ELEM>(job, a, st) \
                              : segops_run_mixed<float, 3, RED, ELEM>(job, a, st))

/* Per-op entry points (one .cu each): run the job's pass of that op. */
cudaError_t segops_cuda_sum(const segops_cuda_job *job, const segops_kargs *a, cudaStream_t st);
cudaError_t segops_cuda_dot(const segops_cuda_job *job, const segops_kargs *a, cudaStream_t st);
cudaError_t segops_cuda_mul(const segops_cuda_job *job, const segops_kargs *a, cudaStream_t st);
cudaError_t segops_cuda_mean(const segops_cuda_job *job, const segops_kargs *a, cudaStream_t st);
cudaError_t segops_cuda_rms_norm(const segops_cuda_job *job, const segops_kargs *a, cudaStream_t st);
cudaError_t segops_cuda_matvec(const segops_cuda_job *job, const segops_kargs *a, cudaStream_t st);

#endif

/* cuda_wide.cuh: rows of a run-time width w = prod(F) (segops_kargs.w): the W = 0 instantiation
 * of a function's runner (segops_cuda_dispatch), for every width the constant-width kernels
 * (W = 1, 3; cuda_kernels.cuh) are not compiled for, w = 0 included, and for mul with y (S,*F).
 * The same kernel structs, the same reducer and the same registry rows: a struct that runs wide
 * rows says how with WIDE and a few __device__ functions of one value k = i*w + c of a row:
 *  - a reduction (RED): WIDE = SEGOPS_WIDE_ROWS (a segment output or segment value reduces whole
 *    rows: dot, rms_norm, mul's grad_y with y (S,)), SEGOPS_WIDE_COLS (per column: sum, mean, mul's
 *    grad_y with y (S,*F)) or SEGOPS_WIDE_MUL (columns when y is (S,*F), else rows);
 *    term<T>(a, k, t) adds value k's terms to t[0 .. K) (per column: to t[0] only);
 *    col_finish<T>(a, j, cnt, acc) stores the segment output of column j = s*w + c;
 *    the rows' segment outputs are the struct's finish<T, 0>, as at any width, and with POST the
 *    element outputs are post_v<T>(a, k, sv) of each value.
 *  - element outputs (ELEM): WIDE = 1 and elem_v<T>(a, i, c, k, s), the outputs of value k.
 * Kernel shapes, all without atomics, each bit a function of the segment's own rows (so of
 * neither the batch around it, the grid nor the threads):
 *  - columns: one thread per (segment, column), consecutive threads consecutive columns of one
 *    segment (coalesced row loads); it walks the segment's sorted positions in increasing order
 *    (through the sort permutation when idx is unsorted) and accumulates in double: each column
 *    in increasing i, the order of the CPU backend's general-width code, for segments of at most
 *    SEGOPS_CUDA_TILE rows; longer ones in chunks (below).
 *  - rows: one warp per segment; the segment's values as one sequence (row after row in sorted
 *    position), lane l adding values l, l + 32, ... (every lane busy at any w), then a fixed
 *    butterfly (every lane the same bits); lane 0 finishes the segment (and leaves its post
 *    values in L.segval, n_segval per segment: the table's row sizes them, cuda_launch.cu).
 *  - long segments (more than SEGOPS_CUDA_TILE rows), both: chunks cut as seg_kernel cuts them,
 *    reduced in the same way (a thread per column, a warp per chunk) into partial rows in
 *    L.partial (2 per tile of segops_fn_acc(fn, w, y_wide) values: w per column, K per row),
 *    then combined in chunk order by the segment's thread or warp.
 *  - values: one thread per value of N*w (gathers, post passes), coalesced, grid-stride.
 * No array is sized by w at compile time: the scratch (partials, segment values) is the job's
 * (cuda_launch.cu, from the table and the width). */
#ifndef SEGOPS_CUDA_WIDE_CUH
#define SEGOPS_CUDA_WIDE_CUH

#include "cuda_runners.cuh"

constexpr int SEGOPS_WIDE_THREADS = 256;

/* Values j = t, t + stride, ... < m of rows of w values (m a multiple of w, w > 0 when m > 0) as
 * (row r, column c, j): one division per thread, not per value. */
template <typename F>
__device__ __forceinline__ void wide_values(int64_t t, int64_t stride, int64_t m, int64_t w, F body) {
  if (t >= m) return;
  int64_t r = t / w, c = t - r * w;
  const int64_t dr = stride / w, dc = stride - dr * w;
  for (int64_t j = t; j < m; j += stride) {
    body(r, c, j);
    r += dr;
    c += dc;
    if (c >= w) {
      c -= w;
      r++;
    }
  }
}

/* Element outputs: elem_v of every value (i, c) of the N rows. */
template <typename T, typename OP>
__global__ void __launch_bounds__(SEGOPS_WIDE_THREADS) wide_gather_kernel(segops_kargs ka) {
  const segops_kargs *a = &ka;
  wide_values((int64_t)blockIdx.x * blockDim.x + threadIdx.x, (int64_t)gridDim.x * blockDim.x, a->n * a->w, a->w,
              [&](int64_t i, int64_t c, int64_t k) { OP::template elem_v<T>(a, i, c, k, (int64_t)__ldg(a->idx + i)); });
}

/* The post pass: post_v of every value, from its segment's values in L.segval (wide_row_kernel's). */
template <typename T, typename OP>
__global__ void __launch_bounds__(SEGOPS_WIDE_THREADS) wide_post_kernel(segops_kargs ka) {
  const segops_kargs *a = &ka;
  wide_values((int64_t)blockIdx.x * blockDim.x + threadIdx.x, (int64_t)gridDim.x * blockDim.x, a->n * a->w, a->w,
              [&](int64_t i, int64_t, int64_t k) {
                const int64_t s = __ldg(a->idx + i);
                double sv[OP::NSV];
#pragma unroll
                for (int q = 0; q < OP::NSV; q++) sv[q] = __ldcg(a->L.segval + s * OP::NSV + q);
                OP::template post_v<T>(a, k, sv);
              });
}

/* Segments longer than SEGOPS_CUDA_TILE rows are cut into chunks as seg_kernel cuts them
 * (chunk_shift: counted from the segment's start, a function of its length), found by tile
 * (tile_chunks); each chunk's reduction goes to its partial row (chunk_row: 2 rows per tile, of
 * segops_fn_acc values each: OP::K, or w per column), and the segment's thread or warp combines
 * its chunks' partials in chunk order. The cut, the walk and the combine depend only on the
 * segment's rows. */
__device__ __forceinline__ void wide_chunk(const segops_kargs *a, int64_t s, int64_t j, int64_t *b, int *sh,
                                           int64_t *cb, int64_t *ce) {
  *b = __ldg(a->L.off + s);
  const int64_t e = __ldg(a->L.off + s + 1);
  *sh = chunk_shift(e - *b);
  *cb = *b + (j << *sh);
  *ce = e < *cb + ((int64_t)1 << *sh) ? e : *cb + ((int64_t)1 << *sh);
}

/* Per-column reduction: thread (s, c) sums column c of segment s's rows in increasing sorted
 * position (PK: through the permutation), or of a long segment its chunks' partials in chunk
 * order (wide_col_chunk_kernel's), then col_finish. The walks keep SEGOPS_CHUNK_ROWS rows (and
 * SEGOPS_COMBINE_ROWS partials) in flight, as seg_kernel's: the same additions in the same order. */
template <typename T, typename OP, int PK>
__global__ void __launch_bounds__(SEGOPS_WIDE_THREADS) wide_col_kernel(segops_kargs ka) {
  const segops_kargs *a = &ka;
  const int64_t w = a->w;
  wide_values((int64_t)blockIdx.x * blockDim.x + threadIdx.x, (int64_t)gridDim.x * blockDim.x, a->s * w, w,
              [&](int64_t s, int64_t c, int64_t j) {
                const int64_t b = __ldg(a->L.off + s), e = __ldg(a->L.off + s + 1);
                double acc = OP::identity();
                if (e - b <= SEGOPS_CUDA_TILE) {
#pragma unroll SEGOPS_CHUNK_ROWS
                  for (int64_t p = b; p < e; p++) OP::template term<T>(a, elem_at<PK>(&a->L, p) * w + c, &acc);
                } else {
                  const int sh = chunk_shift(e - b);
                  const int64_t nch = (e - b + ((int64_t)1 << sh) - 1) >> sh;
#pragma unroll SEGOPS_COMBINE_ROWS
                  for (int64_t q = 0; q < nch; q++)
                    acc = OP::combine(__ldcg(a->L.partial + chunk_row(b, q, sh) * w + c), acc);
                }
                OP::template col_finish<T>(a, j, e - b, acc);
              });
}

/* The chunks of long segments per column: thread (tile t, column c) sums column c of the rows of
 * each chunk that starts in tile t, in order, into the chunk's partial row. */
template <typename T, typename OP, int PK>
__global__ void __launch_bounds__(SEGOPS_WIDE_THREADS) wide_col_chunk_kernel(segops_kargs ka) {
  const segops_kargs *a = &ka;
  const int64_t w = a->w, nt = (a->n + SEGOPS_CUDA_TILE - 1) / SEGOPS_CUDA_TILE;
  wide_values((int64_t)blockIdx.x * blockDim.x + threadIdx.x, (int64_t)gridDim.x * blockDim.x, nt * w, w,
              [&](int64_t t, int64_t c, int64_t) {
                int64_t seg[2], chunk[2];
                tile_chunks(a, t, seg, chunk);
                for (int q = 0; q < 2; q++) {
                  if (seg[q] < 0) continue;
                  int64_t b, cb, ce;
                  int sh;
                  wide_chunk(a, seg[q], chunk[q], &b, &sh, &cb, &ce);
                  double acc = OP::identity();
#pragma unroll SEGOPS_CHUNK_ROWS
                  for (int64_t p = cb; p < ce; p++) OP::template term<T>(a, elem_at<PK>(&a->L, p) * w + c, &acc);
                  a->L.partial[chunk_row(b, chunk[q], sh) * w + c] = acc;
                }
              });
}

/* The values of sorted positions [pb, pe) as one sequence, value f = (p - pb)*w + c; lane l adds
 * the terms of values l, l + 32, ... in order to acc (a warp's walk: every lane busy at any w,
 * consecutive lanes at consecutive values of a row). */
template <typename T, typename OP, int PK>
__device__ __forceinline__ void wide_row_walk(const segops_kargs *a, int64_t pb, int64_t pe, double *acc) {
  const int64_t w = a->w;
  if (w == 0) return; /* every row's terms are the empty sum */
  const int lane = threadIdx.x & 31;
  const int64_t dp = 32 / w, dc = 32 - dp * w;
  int64_t p = pb + lane / w, c = lane - (lane / w) * w, at = -1, row = 0;
  while (p < pe) {
    if (p != at) {
      at = p;
      row = elem_at<PK>(&a->L, p) * w;
    }
    OP::template term<T>(a, row + c, acc);
    p += dp;
    c += dc;
    if (c >= w) {
      c -= w;
      p++;
    }
  }
}

/* Whole-row reduction: warp g takes segments g, g + warps, ...: the warp's walk of its rows (or
 * of a long segment, lane l its chunks' partials l, l + 32, ... in chunk order), a butterfly, then
 * finish<T, 0> (writer: lane 0), and with POST lane 0 leaves the segment values. */
template <typename T, typename OP, int PK>
__global__ void __launch_bounds__(SEGOPS_WIDE_THREADS) wide_row_kernel(segops_kargs ka) {
  const segops_kargs *a = &ka;
  const int lane = threadIdx.x & 31;
  const int64_t warps = ((int64_t)gridDim.x * blockDim.x) >> 5;
  for (int64_t s = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5; s < a->s; s += warps) {
    const int64_t b = __ldg(a->L.off + s), e = __ldg(a->L.off + s + 1);
    double acc[OP::K];
    acc_init<OP>(acc);
    if (e - b <= SEGOPS_CUDA_TILE || a->w == 0) {
      wide_row_walk<T, OP, PK>(a, b, e, acc);
    } else {
      const int sh = chunk_shift(e - b);
      const int64_t nch = (e - b + ((int64_t)1 << sh) - 1) >> sh;
      for (int64_t q = lane; q < nch; q += 32) add_partial<OP>(a, b, q, sh, acc);
    }
    warp_combine<OP>(acc);
    double sv[OP::NSV];
    OP::template finish<T, 0>(a, s, e - b, acc, sv, lane == 0);
    if constexpr (OP::POST)
      if (lane == 0)
        for (int q = 0; q < OP::NSV; q++) a->L.segval[s * OP::NSV + q] = sv[q];
  }
}

/* The chunks of long segments by whole rows: warp g takes tiles g, g + warps, ...; each chunk
 * that starts in the tile is the warp's walk of its rows and a butterfly, lane 0 stores the
 * partial (OP::K values). */
template <typename T, typename OP, int PK>
__global__ void __launch_bounds__(SEGOPS_WIDE_THREADS) wide_row_chunk_kernel(segops_kargs ka) {
  const segops_kargs *a = &ka;
  const int lane = threadIdx.x & 31;
  const int64_t warps = ((int64_t)gridDim.x * blockDim.x) >> 5, nt = (a->n + SEGOPS_CUDA_TILE - 1) / SEGOPS_CUDA_TILE;
  for (int64_t t = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5; t < nt; t += warps) {
    int64_t seg[2], chunk[2];
    tile_chunks(a, t, seg, chunk); /* the same on every lane */
    for (int q = 0; q < 2; q++) {
      if (seg[q] < 0) continue;
      int64_t b, cb, ce;
      int sh;
      wide_chunk(a, seg[q], chunk[q], &b, &sh, &cb, &ce);
      double acc[OP::K];
      acc_init<OP>(acc);
      wide_row_walk<T, OP, PK>(a, cb, ce, acc);
      warp_combine<OP>(acc);
      if (lane == 0)
        for (int k = 0; k < OP::K; k++) a->L.partial[chunk_row(b, chunk[q], sh) * OP::K + k] = acc[k];
    }
  }
}

/* Blocks of SEGOPS_WIDE_THREADS for items threads (items > 0), at most 64 per multiprocessor
 * (the kernels are grid-stride: any grid gives the same bits). */
static inline unsigned segops_wide_grid(const segops_cuda_job *job, int64_t items) {
  const int64_t b = (items + SEGOPS_WIDE_THREADS - 1) / SEGOPS_WIDE_THREADS, cap = (int64_t)job->sm_count * 64;
  return (unsigned)(b < 1 ? 1 : b > cap ? cap : b);
}

/* Element outputs of the N rows (none to write when N*w = 0). */
template <typename T, typename OP>
cudaError_t segops_run_wide_gather(const segops_cuda_job *job, const segops_kargs *a, cudaStream_t st) {
  if (a->n == 0 || a->w == 0) return cudaSuccess;
  wide_gather_kernel<T, OP><<<segops_wide_grid(job, a->n * a->w), SEGOPS_WIDE_THREADS, 0, st>>>(*a);
  return cudaGetLastError();
}

/* A reduction over rows of width w: per column or per row (OP::WIDE, and for mul whether y is
 * (S,*F)), then the post pass of an op with one. */
template <typename T, typename OP>
cudaError_t segops_run_wide_red(const segops_cuda_job *job, const segops_kargs *a, cudaStream_t st) {
  static_assert(OP::WIDE == SEGOPS_WIDE_ROWS || OP::WIDE == SEGOPS_WIDE_COLS || OP::WIDE == SEGOPS_WIDE_MUL,
                "a reduction's WIDE: SEGOPS_WIDE_ROWS, _COLS or _MUL");
  if (a->s == 0) return cudaSuccess;
  const bool perm = segops_seg_perm(a);
  const bool cols = OP::WIDE == SEGOPS_WIDE_COLS || (OP::WIDE == SEGOPS_WIDE_MUL && a->y_wide);
  /* chunks of long segments (none when idx is sorted and its longest segment is known short) */
  const bool chunks = a->n > SEGOPS_CUDA_TILE && a->w > 0 && segops_seg_tile_role(job, a);
  const int64_t nt = (a->n + SEGOPS_CUDA_TILE - 1) / SEGOPS_CUDA_TILE;
  if (cols) {
    if constexpr (OP::WIDE != SEGOPS_WIDE_ROWS) {
      static_assert(!OP::POST, "per-column reductions have no post pass");
      if (a->w == 0) return cudaSuccess; /* (S, *F) outputs of no values */
      if (chunks) {
        const unsigned gc = segops_wide_grid(job, nt * a->w);
        if (perm)
          wide_col_chunk_kernel<T, OP, 1><<<gc, SEGOPS_WIDE_THREADS, 0, st>>>(*a);
        else
          wide_col_chunk_kernel<T, OP, 0><<<gc, SEGOPS_WIDE_THREADS, 0, st>>>(*a);
      }
      const unsigned g = segops_wide_grid(job, a->s * a->w);
      if (perm)
        wide_col_kernel<T, OP, 1><<<g, SEGOPS_WIDE_THREADS, 0, st>>>(*a);
      else
        wide_col_kernel<T, OP, 0><<<g, SEGOPS_WIDE_THREADS, 0, st>>>(*a);
    }
  } else if constexpr (OP::WIDE != SEGOPS_WIDE_COLS) {
    if (chunks) {
      const unsigned gc = segops_wide_grid(job, nt * 32);
      if (perm)
        wide_row_chunk_kernel<T, OP, 1><<<gc, SEGOPS_WIDE_THREADS, 0, st>>>(*a);
      else
        wide_row_chunk_kernel<T, OP, 0><<<gc, SEGOPS_WIDE_THREADS, 0, st>>>(*a);
    }
    const unsigned g = segops_wide_grid(job, a->s * 32);
    if (perm)
      wide_row_kernel<T, OP, 1><<<g, SEGOPS_WIDE_THREADS, 0, st>>>(*a);
    else
      wide_row_kernel<T, OP, 0><<<g, SEGOPS_WIDE_THREADS, 0, st>>>(*a);
    if constexpr (OP::POST)
      if (a->n > 0 && a->w > 0) {
        cudaError_t e = cudaGetLastError();
        if (e != cudaSuccess) return e;
        wide_post_kernel<T, OP><<<segops_wide_grid(job, a->n * a->w), SEGOPS_WIDE_THREADS, 0, st>>>(*a);
      }
  }
  return cudaGetLastError();
}

/* A function at a run-time width: its element outputs, then its reduction; of a mixed function
 * each only when one of its outputs was requested (wanted, as segops_run_mixed). */
template <typename T, typename RED, typename ELEM>
cudaError_t segops_run_wide(const segops_cuda_job *job, const segops_kargs *a, cudaStream_t st) {
  constexpr bool mixed = !std::is_void<RED>::value && !std::is_void<ELEM>::value;
  cudaError_t e = cudaSuccess;
  if constexpr (!std::is_void<ELEM>::value) {
    bool want = true;
    if constexpr (mixed) want = ELEM::wanted(a);
    if (want) e = segops_run_wide_gather<T, ELEM>(job, a, st);
  }
  if constexpr (!std::is_void<RED>::value) {
    bool want = true;
    if constexpr (mixed) want = RED::wanted(a);
    if (e == cudaSuccess && want) e = segops_run_wide_red<T, RED>(job, a, st);
  }
  return e;
}

#endif

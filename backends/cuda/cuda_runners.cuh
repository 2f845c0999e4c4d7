/* cuda_runners.cuh: the host side of the kernel shapes (cuda_kernels.cuh): which kernel runs a
 * function's reduction, gather and post pass for a job (one launch or several, the tile role, the
 * split, the inline element outputs and post pass), with which grid. The thresholds are constants
 * measured on one sm_90 GPU with bench_cuda; none changes a bit of any output. */
#ifndef SEGOPS_CUDA_RUNNERS_CUH
#define SEGOPS_CUDA_RUNNERS_CUH

#include "cuda_kernels.cuh"

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
 * segment-role warps). The same warps' code, so the same bits. On one sm_90 GPU (bench_cuda
 * --log2n 25|20) at 2^25 powerlaw float32 the reductions ran up to 1.44x faster (median 1.12x;
 * seg32 and S=1 level); at 2^20 the second launch cost more than it gained (powerlaw 0.94x, S=1
 * 0.95x); between the two it is not measured. Unsorted idx (through the permutation) stays one
 * launch: split, it was slower at both sizes (the LONG = 0 kernel with the permutation spills). */
constexpr int64_t SEGOPS_CUDA_SPLIT_N = (int64_t)1 << 22;

/* Functions of at most this many elements run as one launch where they can: the gather of a
 * function that also reduces runs in the segment kernel's last blocks, and the post pass of short
 * sorted segments inside it (IP). Past it, separate kernels in element order, which the profile
 * at N = 2^25 showed to be faster (ncu, bench_cuda --log2n 25). Unsorted idx as two launches from
 * 2^16 measured level to slower (matvec double backward 0.90x at 2^17; one sm_90 GPU, bench_cuda). */
constexpr int64_t SEGOPS_CUDA_FUSE_N = (int64_t)1 << 18;
static inline bool segops_one_launch(const segops_cuda_job *job) { return job->n <= SEGOPS_CUDA_FUSE_N; }
/* Past SEGOPS_CUDA_FUSE_N, from SEGOPS_CUDA_IE_N elements, a mixed function over a sorted idx whose
 * gather struct says so (walk_inline) writes its per-element outputs from the segment walks
 * (elem_inline, IE) instead of a separate gather that reads the inputs both share a second time.
 * At any N, an op with a post pass over short sorted segments runs it inside the segment kernel
 * (IP) instead of a post gather. Measured on one sm_90 GPU (bench_cuda --log2n 20|25), sorted layouts,
 * 2 rounds, bits identical:
 * IE 1.07-1.35x for mul backward (float64 S=1 excepted: 0.85x at 2^25, hence its walk_inline)
 * and 1.13-1.27x for matvec backward over short segments, but 0.4-0.97x for most rows of the
 * double backwards (two or three outputs; at 32 or 64 registers alike) and for matvec backward
 * with the tile role (segops_ie_ok); IP 1.21-1.52x for rms_norm's backward and double backward
 * at 2^25 and 1.07-1.29x for its double backward at 2^20 (backward float32 at 2^20: 0.88x, 13.0
 * -> 14.8 µs). */
constexpr int64_t SEGOPS_CUDA_IE_N = (int64_t)1 << 19;

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
constexpr int SEGOPS_IE_TILE_MAX_K = 3;
static inline bool segops_ie_ok(const segops_cuda_job *job, const segops_kargs *a, int k) {
  return !segops_seg_perm(a) && job->n >= SEGOPS_CUDA_IE_N &&
         (k <= SEGOPS_IE_TILE_MAX_K || !segops_seg_tile_role(job, a));
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
  const bool ip = OP::POST && short_only;
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
    seg_kernel<T, W, OP, ELEM, 0, 1, 0, IEW>
        <<<(unsigned)((tile_warps + wpb - 1) / wpb), SEGOPS_SEG_THREADS, 0, st>>>(t);
  }
  /* The post gather, a dependent of the segment kernel (not after the split's second launch, past
   * SEGOPS_CUDA_SPLIT_N: the launch gap is negligible there, and that chain was never compared
   * bit for bit). */
  if constexpr (OP::POST)
    if (!ip && job->n > 0) return segops_run_gather<T, W, post_elem<OP>>(job, &k, st, !split);
  return cudaGetLastError();
}

template <typename T, int W, typename OP>
cudaError_t segops_run_seg(const segops_cuda_job *job, const segops_kargs *a, cudaStream_t st) {
  return segops_run_red<T, W, OP, void, 0>(job, a, st);
}

/* Whether a gather struct is a copy of segment rows (it defines copy_src<T>: copy_gather_kernel). */
template <typename OP, typename = void>
struct segops_copies : std::false_type {};
template <typename OP>
struct segops_copies<OP, std::void_t<decltype(&OP::template copy_src<float>)>> : std::true_type {};

/* Runs a gather; dependent: it reads what the kernel before it on st wrote, and on sm_90 is
 * launched as that kernel's programmatic dependent (pdl_wait_primary). */
template <typename T, int W, typename OP>
cudaError_t segops_run_gather(const segops_cuda_job *job, const segops_kargs *a, cudaStream_t st, bool dependent) {
  if (job->n == 0) return cudaSuccess;
  if constexpr (segops_copies<OP>::value) {
    if (!job->idx_sorted) {
      if (a->out[0])
        copy_gather_kernel<T, std::remove_cv_t<std::remove_pointer_t<decltype(OP::template copy_src<T>(a))>>, W>
            <<<segops_cuda_gather_grid(job, W), 256, 0, st>>>(OP::template copy_src<T>(a), a->idx, (T *)a->out[0],
                                                              job->n);
      return cudaGetLastError();
    }
  }
  if constexpr (segops_staged<OP>::value && sizeof(T) == 8) {
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
  if (dependent && job->sm_major >= 9) {
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
 * over long segments are fused too: 1.29-1.47x faster on matvec backward and double backward at
 * 2^12 (powerlaw, S=1) and 1.11-1.24x at 2^17 than as two launches, bits unchanged (one sm_90 GPU,
 * bench_cuda --log2n 12|17). */
template <typename T, int W, typename RED, typename ELEM>
cudaError_t segops_run_mixed(const segops_cuda_job *job, const segops_kargs *a, cudaStream_t st) {
  const bool ew = ELEM::wanted(a), rw = RED::wanted(a);
  if (ew && rw && job->n > 0) {
    if (segops_one_launch(job)) return segops_run_red<T, W, RED, ELEM, 0>(job, a, st);
    if constexpr (segops_walk_inline<ELEM>::value)
      if (segops_ie_ok(job, a, RED::K) && ELEM::walk_inline(job)) return segops_run_red<T, W, RED, ELEM, 1>(job, a, st);
  }
  cudaError_t e = cudaSuccess;
  if (ew) e = segops_run_gather<T, W, ELEM>(job, a, st);
  if (e == cudaSuccess && rw) e = segops_run_seg<T, W, RED>(job, a, st);
  return e;
}

#endif

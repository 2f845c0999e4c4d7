/* cuda_internal.h: what the CUDA backend's host side, its kernels and the CUDA bench share:
 * a job on device-resident data (device pointers only) and the calls that size and launch it.
 * Not a public header: only backends/cuda, tests/cuda and bench/cuda include it. */
#ifndef SEGOPS_CUDA_INTERNAL_H
#define SEGOPS_CUDA_INTERNAL_H

#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>

#include "cuda_cheaders.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Segments of at most SEGOPS_CUDA_TILE elements are reduced by 8 lanes in one pass; longer ones
 * are cut into chunks of 256 elements (up to 2^16, then 512 ... 4096, growing like the square root
 * of the length: chunk_shift, a function of the segment's own length), one warp each, whose
 * partials are combined in chunk order, so the reduction order depends only on the segment.
 * Chunk work is found by tiles of SEGOPS_CUDA_TILE positions. */
#define SEGOPS_CUDA_TILE 64 /* a power of two, at most the shortest chunk (256) */

/* One function call on device memory. Every pointer is a DEVICE pointer (borrowed), aligned to
 * at least 16 bytes. in[k] NULL: an omitted cotangent (zeros) or an input the formula does not
 * read; out[k] NULL: output not requested. scratch: scratch_bytes of device memory (borrowed),
 * at least segops_cuda_scratch_bytes(job). */
typedef struct {
  const segops_fn_desc *fn;
  segops_dtype dtype; /* SEGOPS_F32 or SEGOPS_F64 */
  int64_t width;      /* w = prod(F), the values of one row (0 allowed); 3 for matvec */
  int y_wide;         /* mul: y, gg_y and grad_y are (S,*F), not (S,) */
  int64_t n, s;
  const int32_t *idx; /* n values in [0, s) */
  int idx_sorted;     /* non-zero: idx non-decreasing (no sort needed) */
  int64_t longest;    /* sorted idx: its longest segment when known (segops_cuda_sorted_longest of the
                       * host copy), which must then be exact; 0: unknown (every kernel shape) */
  const void *in[SEGOPS_MAX_INPUTS];
  void *out[SEGOPS_MAX_OUTPUTS];
  const void *layout; /* a layout built for this (idx, S) by segops_cuda_layout_build, or NULL */
  void *scratch;
  size_t scratch_bytes;
  int sm_count; /* multiprocessors of the device, to size persistent grids */
  int sm_major; /* compute capability's major number (9: programmatic dependent launch) */
} segops_cuda_job;

/* Bytes of scratch the job needs (partials, and the layout and its build when job->layout is
 * NULL); host only, launches nothing. Returns 0 on success and the size in *bytes, or a
 * cudaError_t from CUB's size query. */
int segops_cuda_scratch_bytes(const segops_cuda_job *job, size_t *bytes);

/* Enqueues the whole computation of the job on stream: no host synchronisation, no allocation.
 * Returns cudaSuccess or the first launch error (as an int, a cudaError_t value). */
int segops_cuda_launch(const segops_cuda_job *job, cudaStream_t stream);

/* The segment layout of a job's (idx, S): CSR offsets, and for an unsorted idx the sorted keys
 * and permutation. It depends on nothing else (not on the function, dtype or inputs), so a
 * layout built once serves every later job with the same idx bytes, S and idx_sorted, on the
 * same stream (it holds per-segment tickets that each call leaves at zero).
 * Whether the job reads a layout at all (0: reductions-free gathers, S = 0). */
int segops_cuda_needs_layout(const segops_cuda_job *job);
/* Bytes the layout keeps (*keep) and the temporary bytes its build needs (*temp). */
int segops_cuda_layout_bytes(const segops_cuda_job *job, size_t *keep, size_t *temp);
/* Builds the layout of job->idx into keep, using temp, on stream (no synchronisation). */
int segops_cuda_layout_build(const segops_cuda_job *job, void *keep, void *temp, cudaStream_t stream);

/* Longest run of equal values of a sorted idx (host memory): its longest segment; 0 when n = 0. */
int64_t segops_cuda_sorted_longest(const int32_t *idx, int64_t n);

/* Whether segmented_mean's backward divides once per segment into scratch before its gather
 * (large N: one more launch, then the gather reads one row per element like sum's backward)
 * rather than once per element (the same IEEE quotient either way: no bit changes). */
int segops_cuda_mean_quotients(const segops_cuda_job *job);

/* Whether a function's outputs are all per-element gathers (no segment reduction). */
int segops_cuda_is_gather(const segops_fn_desc *fn);

/* Whether a job runs its function's run-time-width kernels (cuda_wide.cuh): rows of a width other
 * than the constant widths 1 and 3 (w = 0 included), or mul with y (S,*F) at width 3. */
static inline int segops_cuda_job_wide(const segops_cuda_job *job) {
  return job->width != 1 && (job->width != 3 || job->y_wide);
}
/* Whether a function has run-time-width kernels (every row of ops.def but matvec's, whose rows
 * are (N,3)): the backend refuses wide rows of the others. */
int segops_cuda_fn_wide(const segops_fn_desc *fn);

#ifdef __cplusplus
}
#endif

#endif

/* cpu_internal.h: what the files of the CPU backend share (thread pool, CSR plan, kernel table).
 * Not installed, not used outside kernels/cpu/. */
#ifndef SEGOPS_CPU_INTERNAL_H
#define SEGOPS_CPU_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "ops.h"

/* ---- Thread pool (cpu_pool.c) ----
 * A fixed set of worker threads that run one parallel-for at a time. The calling thread works
 * too, so a pool of T threads has T-1 workers. Results never depend on how chunks are spread:
 * every chunk is a fixed piece of work, whoever runs it. */
typedef struct segops_cpu_pool segops_cpu_pool;
typedef void (*segops_cpu_task_fn)(void *arg, int64_t chunk);

/* Returns a pool of `threads` threads (>= 1; 1 means no worker), or NULL on failure. Owned by
 * the caller: free with segops_cpu_pool_free. */
segops_cpu_pool *segops_cpu_pool_new(int threads);
/* Stops and joins the workers. Accepts NULL. */
void segops_cpu_pool_free(segops_cpu_pool *pool);
int segops_cpu_pool_threads(const segops_cpu_pool *pool);
/* Runs fn(arg, c) for every c in [0, nchunks) and returns when all are done. When the pool is
 * NULL, has no workers, nchunks is 1, or another caller is using the pool right now, the
 * chunks run on the calling thread in order (same results, less parallelism). Thread-safe. */
void segops_cpu_parallel_for(segops_cpu_pool *pool, int64_t nchunks, segops_cpu_task_fn fn, void *arg);

/* ---- Segment plan (cpu_csr.c) ----
 * off[s] .. off[s+1] are the positions in "segment order" of segment s's elements; perm maps a
 * position to the element index (NULL: the identity, when idx is sorted). perm is a stable
 * counting sort, so every segment's elements come in increasing i: a fixed reduction order. */

/* Builds off[0..s] for a non-decreasing idx (parallel over elements). */
void segops_cpu_offsets_sorted(segops_cpu_pool *pool, const int32_t *idx, int64_t n, int64_t s, int64_t *off);
/* Builds off[0..s] for any idx; when perm is not NULL also the stable permutation perm[0..n).
 * pos is scratch of s entries (only needed when perm is not NULL). Serial. */
void segops_cpu_offsets_any(const int32_t *idx, int64_t n, int64_t s, int64_t *off, int64_t *perm, int64_t *pos);
/* Splits segments [0, s) into k ranges bounds[c]..bounds[c+1] of about equal work (elements plus
 * segments), for c in [0, k). bounds has k+1 entries. */
void segops_cpu_segment_bounds(const int64_t *off, int64_t s, int64_t k, int64_t *bounds);

/* ---- Kernels (cpu_ops_impl.h, instantiated in cpu_ops.c) ---- */
typedef struct {
  const segops_call *c;
  int w;               /* row width: 1 or 3 */
  const int64_t *off;  /* s+1 entries, or NULL when the function does not need it */
  const int64_t *perm; /* n entries, or NULL: identity */
  double *sa, *sb;     /* per-segment scratch (s entries each) for functions that need it */
} segops_cpu_job;

/* A kernel handles segments [begin, end) (segment phase) or elements [begin, end) (element phase). */
typedef void (*segops_cpu_range_fn)(const segops_cpu_job *j, int64_t begin, int64_t end);

/* One function: a segment phase (reductions, one writer per segment) and an element phase
 * (gathers, one writer per element), either may be NULL. Which of them a call runs, and what
 * they need (offsets, scratch), comes from the op table's row (segops_plan_of). */
typedef struct {
  segops_cpu_range_fn seg, elem;
} segops_cpu_kernel;

extern const segops_cpu_kernel segops_cpu_kernels_f32[SEGOPS_OP_COUNT][SEGOPS_PASS_COUNT];
extern const segops_cpu_kernel segops_cpu_kernels_f64[SEGOPS_OP_COUNT][SEGOPS_PASS_COUNT];

#endif

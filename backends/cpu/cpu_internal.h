/* cpu_internal.h: what the files of the CPU backend share (thread pool, the job a call becomes,
 * the per-function tasks). Not installed, not used outside backends/cpu/. */
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

/* ---- A call as the kernels see it ----
 * Phases (names of segops_rowmath.h): visit + finish reduce a segment, post and gather write
 * element outputs. Which run comes from plan (segops_plan_of, the op table's row).
 *
 * Sorted idx: one pass, "walk". Chunk c is the elements from the first segment start at or after
 * c*n/nchunks to the next chunk's start; for each segment in it: visit its elements in order,
 * finish, then post or gather the same elements (still in L1). A chunk also finishes the empty
 * segments just before each of its segments (and the last chunk the trailing ones).
 * Unsorted idx: "reduce" (chunk c = segments bounds[c] .. bounds[c+1]: scans all of idx in
 * increasing i and accumulates only its own segments into acc, counts into cnt, then finishes
 * them, segment values into segval), then "elems" (chunk c = elements c*n/nchunks ..: post and
 * gather in element order). With many segments reduce runs over buckets of the elements
 * partitioned by segment (cpu_unsorted.c), each bucket holding its elements in increasing i.
 * Either way a segment is reduced by one thread over its elements in increasing i, so the bits
 * do not depend on the chunking, the thread count or whether idx was known to be sorted. */
/* Accumulator sets per segment: element p of a segment adds into set p % LANES (cpu_phases.h). */
#define SEGOPS_CPU_LANES 4

typedef struct {
  const void *in[SEGOPS_MAX_INPUTS]; /* NULL: omitted cotangent (zeros) or unread input */
  void *out[SEGOPS_MAX_OUTPUTS];     /* NULL: not requested */
  const int32_t *idx;
  int64_t n, s;
  int64_t w;        /* the row width prod(F): 1 and 3 run constant-width code, any other the general one */
  bool y_wide;      /* mul: y is (S,*F) (element-wise), not (S,) */
  int64_t n_acc;    /* accumulators per segment (segops_fn_acc, at least the row's n_acc[1]): acc's stride */
  int64_t n_segval; /* segment values per segment (segops_fn_segval): segval's stride */
  int64_t n_row;    /* general width: values a row hook loads (heap storage, cpu_phases.h) */
  int *failed;      /* general width: set when a task could not allocate its storage */
  segops_plan plan;
  int64_t nchunks;       /* walk and elems: element chunks */
  const int64_t *bounds; /* reduce: segment chunks (nchunks + 1 entries) */
  double *acc;           /* reduce: LANES * n_acc accumulators per segment (n_acc at a general width) */
  int64_t acc_s0;        /* reduce: the segment of acc's first set (0; a bucket's first in cpu_unsorted.c) */
  double *segval;        /* reduce -> elems: s * n_segval segment values for post */
  const int32_t *orig;   /* reduce over a bucket: each element's index in the call (segops_cpu_keep_sv) */
  int64_t *cnt;          /* reduce -> elems: s counts */
} segops_cpu_job;

/* Accumulators per segment of the reduce task: SEGOPS_CPU_LANES sets of n_acc at width 1 and 3,
 * one set at a general width (cpu_phases.h). */
static inline int64_t segops_cpu_acc_stride(const segops_cpu_job *J) {
  return (J->w == 1 || J->w == 3 ? SEGOPS_CPU_LANES : 1) * J->n_acc;
}

/* Unsorted idx, a function that reduces, with more segments than the reduce task keeps in cache:
 * the elements partitioned by bucket of segments (stably, into a copy of idx and the element
 * inputs), then reduce over each bucket (cpu_unsorted.c). J as for reduce (acc aside, J->cnt and
 * J->segval, when not NULL, of S entries) is filled the same. Returns false, having done nothing,
 * where reduce over all of idx is as fast (few segments or long rows: cpu_unsorted.c), or when
 * out of memory (*oom set). */
bool segops_cpu_unsorted_reduce(segops_cpu_pool *pool, int threads, const segops_fn_desc *fn, segops_cpu_job *J,
                                segops_cpu_task_fn reduce, size_t tsize, bool *oom);

/* Tests: true sends every such call through the partition when its segments make two buckets or
 * more, whatever their accumulators' size and the rows' (else only where it was measured faster).
 * Set before any call runs. */
extern bool segops_cpu_partition_always;

/* The three tasks of one function (any may be NULL when the function has no such phase);
 * arg is a segops_cpu_job. */
typedef struct {
  segops_cpu_task_fn walk, reduce, elems;
} segops_cpu_fn;

/* Indexed [dtype == SEGOPS_F64][op][pass]; filled from ops.def's SEGOPS_FN list
 * (cpu_ops_table.h). One table per instruction set the functions are compiled for: the same
 * source and the same bits, only faster where the CPU has more. */
typedef segops_cpu_fn segops_cpu_fn_table[2][SEGOPS_OP_COUNT][SEGOPS_PASS_COUNT];
extern const segops_cpu_fn_table segops_cpu_fns_base; /* cpu_ops.c: any CPU of the build's target */
#ifdef SEGOPS_CPU_HAVE_V3
extern const segops_cpu_fn_table segops_cpu_fns_v3; /* cpu_ops_avx2.c: x86-64-v3 (AVX2) CPUs only */
#endif
/* The table for this CPU: the x86-64-v3 one where the CPU (and the OS) support it, else the
 * baseline. --cpu-isa baseline (segops_cpu_conf) forces the baseline (tests compare the two;
 * also how to run as on a CPU without AVX2). Read when a backend is created. */
const segops_cpu_fn_table *segops_cpu_pick_fns(void);

/* First element at or after i that starts a segment (i == 0 or idx[i] != idx[i-1]); n if none. */
static inline int64_t segops_cpu_seg_start(const int32_t *idx, int64_t n, int64_t i) {
  if (i <= 0) return 0;
  while (i < n && idx[i] == idx[i - 1]) i++;
  return i < n ? i : n;
}

/* c * total / k without overflow, for chunk boundaries. */
static inline int64_t segops_cpu_split(int64_t total, int64_t k, int64_t c) {
  return c * (total / k) + (c < total % k ? c : total % k);
}

#endif

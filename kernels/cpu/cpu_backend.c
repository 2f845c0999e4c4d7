/* cpu_backend.c: the CPU backend behind backend.h: plans a call (CSR of the segments), then runs
 * its segment phase and element phase on a thread pool. The reference for every other backend.
 *
 * Determinism: a segment's reduction is done by one thread, over its elements in increasing i,
 * in double; an element's output depends only on that element and its segment. How work is cut
 * into chunks, and how many threads run them, therefore never changes a bit of the result.
 *
 * Concurrency: n_devices = threads. The scheduler may run that many calls at once (the CPU has
 * no per-device state, so `device` is ignored). A call large enough to profit takes the whole
 * pool when it is free; when another call has it, it runs on its caller's thread alone rather
 * than queueing. Small calls always run on the caller's thread. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend.h"
#include "cpu_internal.h"
#include "errors.h"

/* Below this many elements plus segments a call runs on one thread: waking workers costs more. */
#define PARALLEL_MIN_WORK ((int64_t)1 << 15)
/* Smallest element-phase chunk, so a chunk amortises its dispatch. */
#define MIN_ELEM_CHUNK ((int64_t)1 << 12)
/* Fused phases (sorted idx): segments per block, so a block's rows are still in cache when the
 * element phase reads them again (about 64 KiB to 300 KiB of rows at 32 elements a segment). */
#define FUSED_BLOCK_SEGMENTS 128

typedef struct {
  segops_cpu_pool *pool;
  int threads;
} cpu_ctx;

typedef struct {
  const segops_cpu_kernel *k;
  segops_cpu_job job;
  const int64_t *bounds; /* segment phase: chunk c is segments bounds[c] .. bounds[c+1] */
  int64_t n, elem_chunk; /* element phase: chunk c is elements c*elem_chunk .. */
  bool fused;            /* sorted idx: each segment block runs both phases, see seg_chunk */
} phase_task;

static void seg_chunk(void *vp, int64_t c) {
  const phase_task *t = vp;
  if (!t->fused) {
    t->k->seg(&t->job, t->bounds[c], t->bounds[c + 1]);
    return;
  }
  /* With sorted idx the elements of segments [a, b) are exactly off[a] .. off[b], and their
   * element outputs need only those segments' scratch: running the element phase right after
   * each block's segment phase reads the rows while they are in cache. Same bits either way. */
  for (int64_t a = t->bounds[c]; a < t->bounds[c + 1]; a += FUSED_BLOCK_SEGMENTS) {
    int64_t b = a + FUSED_BLOCK_SEGMENTS < t->bounds[c + 1] ? a + FUSED_BLOCK_SEGMENTS : t->bounds[c + 1];
    t->k->seg(&t->job, a, b);
    if (t->job.off[b] > t->job.off[a]) t->k->elem(&t->job, t->job.off[a], t->job.off[b]);
  }
}

static void elem_chunk(void *vp, int64_t c) {
  const phase_task *t = vp;
  int64_t i0 = c * t->elem_chunk, i1 = i0 + t->elem_chunk < t->n ? i0 + t->elem_chunk : t->n;
  t->k->elem(&t->job, i0, i1);
}

static void *alloc_i64(int64_t count, bool want, bool *failed) {
  if (!want) return NULL;
  void *p = malloc((size_t)(count > 0 ? count : 1) * sizeof(int64_t));
  if (!p) *failed = true;
  return p;
}

static int cpu_run(void *vctx, int device, const segops_call *call, char *err, size_t errlen) {
  cpu_ctx *ctx = vctx;
  (void)device;
  if (!call || !call->fn || (call->dtype != SEGOPS_F32 && call->dtype != SEGOPS_F64) ||
      (call->width != 1 && call->width != 3) || call->n < 0 || call->s < 0 || (call->n > 0 && !call->idx))
    return segops_errf(SEGOPS_E_INTERNAL, err, errlen, "cpu backend: call was not prepared");
  const segops_cpu_kernel *k = call->dtype == SEGOPS_F32 ? &segops_cpu_kernels_f32[call->fn->op][call->fn->pass]
                                                         : &segops_cpu_kernels_f64[call->fn->op][call->fn->pass];
  const int64_t n = call->n, s = call->s;

  unsigned requested = 0;
  for (int o = 0; o < call->fn->n_out; o++)
    if (call->out[o]) requested |= 1u << o;
  const segops_plan plan = segops_plan_of(call->fn, requested);
  bool run_elem = (plan.post || plan.gather) && n > 0;
  bool run_seg = plan.reduce && s > 0;
  bool need_off = run_seg || (run_elem && plan.counts);
  bool need_perm = run_seg && !call->idx_sorted && n > 0;
  bool need_scratch = run_seg && call->fn->n_segval > 0;

  bool parallel = ctx->threads > 1 && n + s >= PARALLEL_MIN_WORK;
  int64_t seg_chunks = parallel ? 4 * (int64_t)ctx->threads : 1;
  if (seg_chunks > s) seg_chunks = s > 0 ? s : 1;

  bool failed = false;
  int64_t *off = alloc_i64(s + 1, need_off, &failed);
  int64_t *perm = alloc_i64(n, need_perm, &failed);
  int64_t *pos = alloc_i64(s, need_perm, &failed);
  int64_t *bounds = alloc_i64(seg_chunks + 1, run_seg, &failed);
  double *scratch = need_scratch ? malloc((size_t)(2 * s) * sizeof(double)) : NULL;
  if (failed || (need_scratch && !scratch)) {
    free(off);
    free(perm);
    free(pos);
    free(bounds);
    free(scratch);
    return segops_errf(SEGOPS_E_NOMEM, err, errlen, "%s: cpu backend out of memory for %lld elements",
                       segops_op_name(call->fn->op), (long long)n);
  }

  if (need_off) {
    if (call->idx_sorted)
      segops_cpu_offsets_sorted(parallel ? ctx->pool : NULL, call->idx, n, s, off);
    else
      segops_cpu_offsets_any(call->idx, n, s, off, perm, pos);
  }

  phase_task t = {.k = k, .n = n, .bounds = bounds};
  t.job.c = call;
  t.job.w = call->width;
  t.job.off = off;
  t.job.perm = perm;
  t.job.sa = scratch;
  t.job.sb = scratch ? scratch + s : NULL;

  /* The segment phase first: it fills the scratch that an element phase may read. */
  t.fused = run_seg && run_elem && call->idx_sorted;
  if (run_seg) {
    segops_cpu_segment_bounds(off, s, seg_chunks, bounds);
    segops_cpu_parallel_for(ctx->pool, seg_chunks, seg_chunk, &t);
  }
  if (run_elem && !t.fused) {
    int64_t chunk = n;
    if (parallel) {
      chunk = (n + 8 * (int64_t)ctx->threads - 1) / (8 * (int64_t)ctx->threads);
      if (chunk < MIN_ELEM_CHUNK) chunk = MIN_ELEM_CHUNK;
    }
    t.elem_chunk = chunk;
    segops_cpu_parallel_for(ctx->pool, (n + chunk - 1) / chunk, elem_chunk, &t);
  }

  free(off);
  free(perm);
  free(pos);
  free(bounds);
  free(scratch);
  return SEGOPS_OK;
}

static int cpu_device_info(void *vctx, int device, segops_device_info *info) {
  cpu_ctx *ctx = vctx;
  (void)device;
  memset(info, 0, sizeof *info);
  snprintf(info->name, sizeof info->name, "cpu (%d threads)", ctx->threads);
  long pages = sysconf(_SC_PHYS_PAGES), avail = sysconf(_SC_AVPHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
  if (pages > 0 && psz > 0) {
    info->memory_total = (size_t)pages * (size_t)psz;
    if (avail >= 0 && avail <= pages) info->memory_used = (size_t)(pages - avail) * (size_t)psz;
  }
  return SEGOPS_OK;
}

static int cpu_ready(void *vctx) {
  (void)vctx;
  return 1;
}

static void cpu_destroy(void *vctx) {
  cpu_ctx *ctx = vctx;
  if (!ctx) return;
  segops_cpu_pool_free(ctx->pool);
  free(ctx);
}

segops_backend *segops_cpu_backend_new(int threads) {
  if (threads <= 0) {
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    threads = online > 0 ? (int)online : 1;
  }
  if (threads > 1024) threads = 1024;
  segops_backend *b = calloc(1, sizeof *b);
  cpu_ctx *ctx = calloc(1, sizeof *ctx);
  if (!b || !ctx) {
    free(b);
    free(ctx);
    return NULL;
  }
  ctx->threads = threads;
  ctx->pool = segops_cpu_pool_new(threads);
  if (!ctx->pool) {
    free(b);
    free(ctx);
    return NULL;
  }
  b->name = "cpu";
  b->ctx = ctx;
  b->n_devices = threads;
  b->run = cpu_run;
  b->device_info = cpu_device_info;
  b->ready = cpu_ready;
  b->destroy = cpu_destroy;
  return b;
}

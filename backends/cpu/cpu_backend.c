/* cpu_backend.c: the CPU backend behind backend.h: plans a call from its op table row
 * (segops_plan_of), then runs the function's tasks on a thread pool: one walk for sorted idx,
 * reduce then elems for unsorted (cpu_internal.h). The reference for every other backend.
 * Unsorted with many segments (their accumulators past a few MiB), reduce runs over buckets of
 * the elements partitioned by segment (cpu_unsorted.c: a copy of idx and of the element inputs,
 * malloc'd per call) instead of over all of idx, where every element missed the cache.
 *
 * Determinism: a segment's reduction is done by one thread, over its elements in increasing i,
 * in double; an element's output depends only on that element and its segment. How work is cut
 * into chunks or buckets, and how many threads run them, therefore never changes a bit of the
 * result.
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
/* Elements per chunk at least, so a chunk amortises its dispatch; chunks per thread at most. */
#define MIN_CHUNK ((int64_t)1 << 14)
#define CHUNKS_PER_THREAD 4

typedef struct {
  segops_cpu_pool *pool;
  int threads;
  const segops_cpu_fn_table *fns; /* segops_cpu_pick_fns at creation */
} cpu_ctx;

const segops_cpu_fn_table *segops_cpu_pick_fns(void) {
  if (segops_cpu_conf.isa == SEGOPS_CPU_ISA_BASELINE) return &segops_cpu_fns_base;
#ifdef SEGOPS_CPU_HAVE_V3
  /* What cpu_ops_avx2.c is compiled for (-march=x86-64-v3); libgcc's check includes the OS saving
   * the AVX registers. */
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("bmi2") &&
      __builtin_cpu_supports("f16c") && __builtin_cpu_supports("movbe") && __builtin_cpu_supports("lzcnt"))
    return &segops_cpu_fns_v3;
#endif
  return &segops_cpu_fns_base;
}

static int64_t elem_chunks(int64_t n, int threads, bool parallel) {
  if (!parallel || n < 2 * MIN_CHUNK) return 1;
  int64_t k = CHUNKS_PER_THREAD * (int64_t)threads, most = n / MIN_CHUNK;
  return k < most ? k : most;
}

/* Unsorted idx: scratch of the reduce task, and its segment ranges (even split of the ids:
 * each range's task scans all of idx, so one range per thread). */
typedef struct {
  double *acc, *segval;
  int64_t *cnt, *bounds;
} unsorted_scratch;

static void unsorted_free(unsorted_scratch *u) {
  free(u->acc);
  free(u->segval);
  free(u->cnt);
  free(u->bounds);
}

/* Counts, segment values and ranges (acc false), or the accumulators of reduce over all of idx
 * (acc true: S sets of SEGOPS_CPU_LANES, one at a general width, cpu_phases.h). */
static bool unsorted_alloc(segops_cpu_job *J, unsorted_scratch *u, int64_t ranges, bool acc) {
  const int64_t s = J->s > 0 ? J->s : 1;
  if (acc) {
    u->acc = J->n_acc ? malloc((size_t)(s * segops_cpu_acc_stride(J)) * sizeof *u->acc) : NULL;
    J->acc = u->acc;
    return !J->n_acc || u->acc;
  }
  u->cnt = malloc((size_t)s * sizeof *u->cnt);
  u->bounds = malloc((size_t)(ranges + 1) * sizeof *u->bounds);
  u->segval = J->n_segval ? malloc((size_t)(s * J->n_segval) * sizeof *u->segval) : NULL;
  if (!u->cnt || !u->bounds || (J->n_segval && !u->segval)) return false;
  for (int64_t c = 0; c <= ranges; c++) u->bounds[c] = segops_cpu_split(J->s, ranges, c);
  J->segval = u->segval;
  J->cnt = u->cnt;
  J->bounds = u->bounds;
  return true;
}

/* A task of a general width could not allocate its per-segment storage. */
static int oom(const segops_fn_desc *fn, const segops_cpu_job *J, char *err, size_t errlen) {
  return segops_errf(SEGOPS_E_NOMEM, err, errlen, "%s: cpu backend out of memory for rows of width %lld",
                     segops_op_name(fn->op), (long long)J->w);
}

static int cpu_run(void *vctx, int device, const segops_call *call, char *err, size_t errlen) {
  cpu_ctx *ctx = vctx;
  (void)device;
  if (!call || !call->fn || (call->dtype != SEGOPS_F32 && call->dtype != SEGOPS_F64) || call->width < 0 ||
      (call->fn && call->fn->vec3_only && call->width != 3) || call->n < 0 || call->s < 0 ||
      (call->n > 0 && !call->idx))
    return segops_errf(SEGOPS_E_INTERNAL, err, errlen, "cpu backend: call was not prepared");
  const segops_fn_desc *fn = call->fn;
  const segops_cpu_fn *f = &(*ctx->fns)[call->dtype == SEGOPS_F64][fn->op][fn->pass];
  int failed = 0;
  segops_cpu_job J = {.idx = call->idx,
                      .n = call->n,
                      .s = call->s,
                      .w = call->width,
                      .y_wide = call->y_wide && fn->op == SEGOPS_OP_MUL,
                      .failed = &failed};
  unsigned requested = 0;
  for (int k = 0; k < fn->n_in; k++) J.in[k] = call->in[k];
  for (int o = 0; o < fn->n_out; o++) {
    J.out[o] = call->out[o];
    if (call->out[o]) requested |= 1u << o;
  }
  J.plan = segops_plan_of(fn, requested);
  /* Accumulators and segment values per segment: the row's at this width (at least its n_acc[1],
   * the constant-width code's stride, and its n_segval); the values a row hook loads at a general
   * width (cpu_phases.h): two rows of w (mul's y[s] and gg_y[s]) or a fixed row. */
  J.n_acc = segops_fn_acc(fn, J.w, J.y_wide);
  if (J.n_acc < fn->n_acc[1]) J.n_acc = fn->n_acc[1];
  J.n_segval = segops_fn_segval(fn, J.w);
  if (J.n_segval < fn->n_segval) J.n_segval = fn->n_segval; /* w = 0: still one set's stride */
  J.n_row = 2 * J.w + SEGOPS_MAX_INPUTS * SEGOPS_SEG_ROW_MAX;
  const segops_plan *P = &J.plan;
  const bool parallel = ctx->threads > 1 && J.n + J.s >= PARALLEL_MIN_WORK;
  J.nchunks = elem_chunks(J.n, ctx->threads, parallel);

  /* Sorted idx: one walk over the elements does everything. */
  if (call->idx_sorted || J.n == 0) {
    if (P->reduce || P->gather || P->post) segops_cpu_parallel_for(ctx->pool, J.nchunks, f->walk, &J);
    return failed ? oom(fn, &J, err, errlen) : SEGOPS_OK;
  }
  /* Unsorted: a pure gather needs no segment state; anything else reduces (or counts) first. */
  if (!P->reduce && !P->counts) {
    if (P->gather) segops_cpu_parallel_for(ctx->pool, J.nchunks, f->elems, &J);
    return failed ? oom(fn, &J, err, errlen) : SEGOPS_OK;
  }
  const int64_t ranges = parallel ? (ctx->threads < J.s ? ctx->threads : (J.s > 0 ? J.s : 1)) : 1;
  unsorted_scratch u = {0};
  bool nomem = !unsorted_alloc(&J, &u, ranges, false), done = false;
  if (!nomem && P->reduce)
    done =
        segops_cpu_unsorted_reduce(ctx->pool, ctx->threads, fn, &J, f->reduce, segops_dtype_size(call->dtype), &nomem);
  if (!done && !nomem) nomem = !unsorted_alloc(&J, &u, ranges, true);
  if (!done && !nomem) segops_cpu_parallel_for(ctx->pool, ranges, f->reduce, &J);
  if (!nomem && (P->post || P->gather)) segops_cpu_parallel_for(ctx->pool, J.nchunks, f->elems, &J);
  unsorted_free(&u);
  if (nomem)
    return segops_errf(SEGOPS_E_NOMEM, err, errlen, "%s: cpu backend out of memory for %lld segments",
                       segops_op_name(fn->op), (long long)J.s);
  return failed ? oom(fn, &J, err, errlen) : SEGOPS_OK;
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
  ctx->fns = segops_cpu_pick_fns();
  ctx->pool = segops_cpu_pool_new(threads);
  if (!ctx->pool) {
    free(b);
    free(ctx);
    return NULL;
  }
  b->name = "cpu";
  b->feature_shapes = "every (N,*F)";
  b->ctx = ctx;
  b->n_devices = threads;
  b->run = cpu_run;
  b->device_info = cpu_device_info;
  b->ready = cpu_ready;
  b->destroy = cpu_destroy;
  return b;
}

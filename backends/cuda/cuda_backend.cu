/* cuda_backend.cu: the CUDA backend behind backend.h: per-device warm state (stream, pinned
 * staging, a device memory pool), host <-> device staging, and CUDA errors -> SEGOPS_E_*. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_internal.h"
#include "cuda_layout_cache.h"
#include "cuda_settings.h"

#define STAGE_BYTES ((size_t)32 << 20) /* each of the two pinned staging slots */
/* Copies at least this large go straight to or from pinned host memory; smaller ones go through
 * staging, where a memcpy costs less than the two pointer lookups. */
#define DIRECT_MIN ((size_t)64 << 10)
/* Workers ("lanes") per GPU, each with its own stream, staging and pool, so that one request's
 * copies overlap another's kernels and copies on the same GPU. Results do not depend on the lane.
 * --cuda-lanes (cuda_settings.c, where the default's measurement is) sets it at creation. */
#define LANES_DEFAULT 4
#define MAX_LANES_PER_GPU 16
static int lanes_per_gpu = LANES_DEFAULT;
#define POOL_ROUND ((size_t)64 << 20)
/* Layout cache per worker unless --layout-cache-bytes says otherwise (0: off): 1 GiB, or
 * less on a small GPU, so the GPU's lanes together cache at most 1/16 of its memory. */
#define LAYOUT_CACHE_DEFAULT ((size_t)1 << 30)
/* How a worker's thread waits for its stream (--cuda-wait, set at creation): CUDA's
 * scheduling flag for the primary context (auto: CUDA's own choice, which spins when the GPUs
 * are fewer than the CPUs; spin; yield; block: sleep until the GPU signals), and for block,
 * --cuda-wait-poll-us of polling the stream first (a short call ends before the sleep). */
static unsigned wait_flags = cudaDeviceScheduleAuto;
static int wait_poll_us = 0;
/* Only the first large_lanes lanes of each GPU take calls of more than large_rows rows (0: every
 * lane takes every call, which read_settings keeps: reserving lanes for large calls showed no gain). */
static int large_lanes = 0;
static int64_t large_rows = (int64_t)1 << 16;

static const char *wait_name(unsigned flags) {
  switch (flags & cudaDeviceScheduleMask) {
    case cudaDeviceScheduleSpin:
      return "spin";
    case cudaDeviceScheduleYield:
      return "yield";
    case cudaDeviceScheduleBlockingSync:
      return "block";
    default:
      return "auto";
  }
}

typedef struct {
  int ordinal;
  char name[128];
  size_t mem_total;
  int sm_count;
  int sm_major;
  size_t pool_cap; /* the pool never grows past this; bigger requests borrow a one-off buffer */
  cudaStream_t stream;
  void *stage[2]; /* pinned host memory, STAGE_BYTES each, used alternately */
  cudaEvent_t stage_ev[2];
  void *pool; /* device memory reused by every request */
  size_t pool_bytes;
  int faulted; /* sticky device error seen: read and written with __atomic builtins */
  segops_layout_cache cache;
} cuda_dev;

typedef struct {
  int n;
  cuda_dev *dev;
} cuda_ctx;

static size_t round_up(size_t v, size_t a) { return (v + a - 1) / a * a; }

/* Sticky errors poison the context: every later call fails the same way. */
static int is_sticky(cudaError_t e) {
  switch (e) {
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchFailure:
    case cudaErrorHardwareStackError:
    case cudaErrorIllegalInstruction:
    case cudaErrorMisalignedAddress:
    case cudaErrorInvalidAddressSpace:
    case cudaErrorInvalidPc:
    case cudaErrorLaunchTimeout:
    case cudaErrorECCUncorrectable:
    case cudaErrorAssert:
    case cudaErrorContextIsDestroyed:
    case cudaErrorDevicesUnavailable:
    case cudaErrorNoDevice:
      return 1;
    default:
      return 0;
  }
}

/* Turns a failed CUDA call into the request's error. Drains the stream first, so nothing still
 * writes into staging or host memory after the request returns. */
static int cuda_fail(cuda_dev *d, cudaError_t e, const char *what, char *err, size_t errlen) {
  cudaError_t drain = cudaStreamSynchronize(d->stream);
  (void)cudaGetLastError();                        /* clears a non-sticky error so the next request starts clean */
  segops_layout_cache_clear(&d->cache, d->stream); /* rebuilt on demand; frees memory on OOM */
  (void)cudaStreamSynchronize(d->stream);
  (void)cudaGetLastError();
  if (e == cudaErrorMemoryAllocation)
    return segops_errf(SEGOPS_E_RESOURCE_EXHAUSTED, err, errlen, "cuda device %d: out of device memory (%s)",
                       d->ordinal, what);
  if (is_sticky(e) || is_sticky(drain) || cudaDeviceSynchronize() != cudaSuccess) {
    __atomic_store_n(&d->faulted, 1, __ATOMIC_RELEASE);
    fprintf(stderr, "segops cuda: device %d faulted in %s: %s; the backend is no longer ready\n", d->ordinal, what,
            cudaGetErrorString(e));
    return segops_errf(SEGOPS_E_DEVICE, err, errlen, "cuda device %d fault in %s: %s", d->ordinal, what,
                       cudaGetErrorString(e));
  }
  return segops_errf(SEGOPS_E_INTERNAL, err, errlen, "cuda device %d: %s failed: %s", d->ordinal, what,
                     cudaGetErrorString(e));
}

#define CK(call, what)                          \
  do {                                          \
    cudaError_t e_ = (call);                    \
    if (e_ != cudaSuccess) {                    \
      rc = cuda_fail(d, e_, what, err, errlen); \
      goto done;                                \
    }                                           \
  } while (0)

/* Whether [p, p+bytes) is page-locked host memory (a shared-memory region pinned by
 * host_register): the DMA engine then reads or writes it directly, with no staging copy by the
 * CPU. Both ends are checked: a tensor lies inside one region (its bounds are checked against
 * it), and a region stays registered while a request uses it. */
static int direct_copies = 1; /* always on (read_settings) */

static int is_pinned(const void *p, size_t bytes) {
  struct cudaPointerAttributes a;
  if (!direct_copies) return 0;
  const char *ends[2] = {(const char *)p, (const char *)p + (bytes ? bytes - 1 : 0)};
  for (int i = 0; i < 2; i++) {
    if (cudaPointerGetAttributes(&a, ends[i]) != cudaSuccess) {
      (void)cudaGetLastError(); /* not memory CUDA knows: an ordinary pointer */
      return 0;
    }
    if (a.type != cudaMemoryTypeHost) return 0;
  }
  return 1;
}

/* Copies host -> device: straight from pinned memory, else through the two pinned slots (the
 * CPU fills one slot while the DMA engine drains the other). *slot carries the alternation
 * across calls of one request. */
static cudaError_t stage_in(cuda_dev *d, void *dst, const void *src, size_t bytes, int *slot) {
  if (bytes >= DIRECT_MIN && is_pinned(src, bytes))
    return cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, d->stream);
  for (size_t at = 0; at < bytes; at += STAGE_BYTES) {
    size_t len = bytes - at < STAGE_BYTES ? bytes - at : STAGE_BYTES;
    int k = *slot;
    *slot ^= 1;
    cudaError_t e = cudaEventSynchronize(d->stage_ev[k]);
    if (e != cudaSuccess) return e;
    memcpy(d->stage[k], (const char *)src + at, len); /* src may be unaligned */
    e = cudaMemcpyAsync((char *)dst + at, d->stage[k], len, cudaMemcpyHostToDevice, d->stream);
    if (e != cudaSuccess) return e;
    e = cudaEventRecord(d->stage_ev[k], d->stream);
    if (e != cudaSuccess) return e;
  }
  return cudaSuccess;
}

typedef struct {
  void *host;
  size_t len;
} pending_copy;

/* Device -> host for one buffer, double-buffered: chunk c+1's DMA runs while the CPU copies
 * chunk c out of its slot. */
static cudaError_t stage_out(cuda_dev *d, void *dst, const void *src, size_t bytes) {
  /* Into pinned memory: one DMA, completed by the request's final stream synchronisation. */
  if (bytes >= DIRECT_MIN && is_pinned(dst, bytes))
    return cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, d->stream);
  pending_copy pend[2] = {{NULL, 0}, {NULL, 0}};
  int k = 0;
  cudaError_t e = cudaSuccess;
  for (size_t at = 0; at < bytes; at += STAGE_BYTES, k ^= 1) {
    size_t len = bytes - at < STAGE_BYTES ? bytes - at : STAGE_BYTES;
    if (pend[k].host) {
      if ((e = cudaEventSynchronize(d->stage_ev[k])) != cudaSuccess) return e;
      memcpy(pend[k].host, d->stage[k], pend[k].len);
    }
    if ((e = cudaMemcpyAsync(d->stage[k], (const char *)src + at, len, cudaMemcpyDeviceToHost, d->stream)) !=
        cudaSuccess)
      return e;
    if ((e = cudaEventRecord(d->stage_ev[k], d->stream)) != cudaSuccess) return e;
    pend[k].host = (char *)dst + at;
    pend[k].len = len;
  }
  for (int i = 0; i < 2; i++, k ^= 1) {
    if (!pend[k].host) continue;
    if ((e = cudaEventSynchronize(d->stage_ev[k])) != cudaSuccess) return e;
    memcpy(pend[k].host, d->stage[k], pend[k].len);
  }
  return cudaSuccess;
}

/* Waits for everything queued on the worker's stream, polling it first for up to
 * wait_poll_us (only with the blocking policy, where the synchronisation would sleep). */
static cudaError_t stream_wait(cuda_dev *d) {
  if (wait_poll_us > 0) {
    const double until = segops_now() + wait_poll_us * 1e-6;
    do {
      cudaError_t q = cudaStreamQuery(d->stream);
      if (q != cudaErrorNotReady) return q; /* done, or the stream's error */
    } while (segops_now() < until);
  }
  return cudaStreamSynchronize(d->stream);
}

/* backend->accepts, when large_lanes > 0: lane l of a GPU (worker g * lanes + l)
 * takes a call of more than large_rows rows only when l < large_lanes. */
static int cuda_accepts(void *vctx, int device, const segops_call *call) {
  (void)vctx;
  return device % lanes_per_gpu < large_lanes || call->n <= large_rows;
}

/* Where a request's buffers lie in device memory: idx, the inputs the formula reads, the
 * requested outputs, then scratch, each 256-byte aligned from the base. */
typedef struct {
  size_t idx_bytes;
  size_t in_off[SEGOPS_MAX_INPUTS], in_bytes[SEGOPS_MAX_INPUTS];
  size_t out_off[SEGOPS_MAX_OUTPUTS], out_bytes[SEGOPS_MAX_OUTPUTS];
  size_t scratch_off, need; /* need: bytes in all, scratch included once sized */
} request_map;

static void map_request(const segops_call *call, request_map *m) {
  const segops_fn_desc *fn = call->fn;
  const size_t isz = segops_dtype_size(call->dtype);
  m->idx_bytes = (size_t)call->n * 4;
  m->need = round_up(m->idx_bytes, 256);
  for (int k = 0; k < fn->n_in; k++) {
    int used = call->in[k] && fn->in[k].use != SEGOPS_ARG_UNREAD;
    m->in_bytes[k] = used ? (size_t)segops_call_count(call, fn->in[k].shape) * isz : 0;
    m->in_off[k] = m->need;
    m->need += round_up(m->in_bytes[k], 256);
  }
  for (int k = 0; k < fn->n_out; k++) {
    m->out_bytes[k] = call->out[k] ? (size_t)segops_call_count(call, fn->out[k].shape) * isz : 0;
    m->out_off[k] = m->need;
    m->need += round_up(m->out_bytes[k], 256);
  }
  m->scratch_off = m->need;
}

/* A failed CUDA call inside a step: the request's error (cuda_fail), returned at once. */
#define CK_RETURN(call, what)                                          \
  do {                                                                 \
    cudaError_t e_ = (call);                                           \
    if (e_ != cudaSuccess) return cuda_fail(d, e_, what, err, errlen); \
  } while (0)

/* Reserve: need bytes of device memory at *base, from the worker's pool (grown up to its cap; no
 * request is in flight on this worker: calls are serialised), or past the cap a one-off buffer
 * in *temp that the caller frees. */
static int reserve(cuda_dev *d, size_t need, char **base, void **temp, char *err, size_t errlen) {
  if (need <= d->pool_bytes) {
    *base = (char *)d->pool;
    return SEGOPS_OK;
  }
  if (need > d->pool_cap) {
    CK_RETURN(cudaMalloc(temp, need), "cudaMalloc (request beyond the pool cap)");
    *base = (char *)*temp;
    return SEGOPS_OK;
  }
  size_t grow = round_up(need + need / 4, POOL_ROUND);
  if (grow > d->pool_cap) grow = need;
  if (d->pool) CK_RETURN(cudaFree(d->pool), "cudaFree");
  d->pool = NULL;
  d->pool_bytes = 0;
  cudaError_t e = cudaMalloc(&d->pool, grow);
  if (e == cudaErrorMemoryAllocation && grow > need) {
    (void)cudaGetLastError();
    grow = need;
    e = cudaMalloc(&d->pool, grow);
  }
  if (e != cudaSuccess) d->pool = NULL;
  CK_RETURN(e, "cudaMalloc (pool)");
  d->pool_bytes = grow;
  *base = (char *)d->pool;
  return SEGOPS_OK;
}

/* The segment layout, when the job reads one: built once per cache entry (in the tail of the
 * scratch, sized for a build there), or without an entry built in the call's scratch by the
 * launch; and the longest segment of a sorted idx, which the launch's kernel shapes read. */
static int stage_layout(cuda_dev *d, const segops_call *call, segops_cuda_job *job, segops_layout_entry *ent, char *err,
                        size_t errlen) {
  if (!segops_cuda_needs_layout(job)) return SEGOPS_OK;
  if (ent && !ent->layout_ready) {
    size_t keep = 0, tmp = 0;
    CK_RETURN((cudaError_t)segops_cuda_layout_bytes(job, &keep, &tmp), "layout sizing");
    void *work = (char *)job->scratch + job->scratch_bytes - tmp;
    ent->longest = job->idx_sorted ? segops_cuda_sorted_longest(call->idx, job->n) : 0;
    CK_RETURN((cudaError_t)segops_cuda_layout_build(job, (char *)ent->mem + ent->idx_bytes, work, d->stream),
              "layout build");
    ent->layout_ready = 1;
  }
  if (ent) {
    job->layout = (char *)ent->mem + ent->idx_bytes;
    job->longest = ent->longest;
  } else {
    job->longest = job->idx_sorted ? segops_cuda_sorted_longest(call->idx, job->n) : 0; /* built in scratch */
  }
  return SEGOPS_OK;
}

/* Stage in: idx on the device (the worker's cached copy when this idx was seen before on it: the
 * forward, backward and double backward of a step, a trajectory's steps; else copied in at the
 * base), the inputs, then the layout (stage_layout). */
static int stage_inputs(cuda_dev *d, const segops_call *call, const request_map *m, char *base, segops_cuda_job *job,
                        char *err, size_t errlen) {
  int slot = 0;
  segops_layout_entry *ent =
      segops_layout_cache_entry(&d->cache, job, call->idx, call->idx_hashed ? call->idx_hash : NULL, d->stream);
  if (ent) {
    job->idx = (const int32_t *)ent->mem;
    if (!ent->idx_ready) {
      CK_RETURN(stage_in(d, ent->mem, call->idx, m->idx_bytes, &slot), "copy in (idx)");
      ent->idx_ready = 1;
    }
  } else {
    CK_RETURN(stage_in(d, base, call->idx, m->idx_bytes, &slot), "copy in (idx)");
  }
  for (int k = 0; k < call->fn->n_in; k++)
    if (m->in_bytes[k]) CK_RETURN(stage_in(d, base + m->in_off[k], call->in[k], m->in_bytes[k], &slot), "copy in");
  return stage_layout(d, call, job, ent, err, errlen);
}

/* Stage out: the requested outputs to the caller's memory (complete once the stream is drained). */
static int stage_outputs(cuda_dev *d, const segops_call *call, const request_map *m, char *base, char *err,
                         size_t errlen) {
  for (int k = 0; k < call->fn->n_out; k++)
    if (m->out_bytes[k]) CK_RETURN(stage_out(d, call->out[k], base + m->out_off[k], m->out_bytes[k]), "copy out");
  return SEGOPS_OK;
}

/* The job of a call on worker d, before its device memory is known. */
static void job_of(const segops_call *call, const cuda_dev *d, segops_cuda_job *job) {
  memset(job, 0, sizeof *job);
  job->fn = call->fn;
  job->dtype = call->dtype;
  job->width = call->width;
  job->y_wide = call->y_wide;
  job->n = call->n;
  job->s = call->s;
  job->idx_sorted = call->idx_sorted;
  job->sm_count = d->sm_count;
  job->sm_major = d->sm_major;
}

/* The job's device pointers in the request's memory at base (request_map). */
static void job_at(segops_cuda_job *job, const request_map *m, char *base) {
  job->idx = (const int32_t *)base;
  for (int k = 0; k < job->fn->n_in; k++) job->in[k] = m->in_bytes[k] ? base + m->in_off[k] : NULL;
  for (int k = 0; k < job->fn->n_out; k++) job->out[k] = m->out_bytes[k] ? base + m->out_off[k] : NULL;
  job->scratch = job->scratch_bytes ? base + m->scratch_off : NULL;
}

/* The rows the kernels are written for: every (N,*F) (constant-width kernels for prod(F) 1 and 3,
 * run-time-width ones for any other, mul's y (S,) or (S,*F)), matvec's (N,3). A function without
 * run-time-width kernels (segops_cuda_fn_wide) takes rows of 1 and 3 values only. */

static int segops_cuda_shape_supported(const segops_call *call, char *err, size_t errlen) {
  const segops_fn_desc *fn = call->fn;
  const bool narrow = call->width == 1 || (call->width == 3 && !call->y_wide);
  if (fn->vec3_only ? call->width == 3 : narrow || segops_cuda_fn_wide(fn)) return SEGOPS_OK;
  return segops_errf(SEGOPS_E_NOT_IMPLEMENTED, err, errlen,
                     "%s: rows of %lld values%s are not on the CUDA backend for %s; run segopsd --backend cpu",
                     segops_op_name(fn->op), (long long)call->width, call->y_wide ? " with y (S,*F)" : "",
                     segops_pass_name(fn->pass));
}

/* backend->run: reserve device memory, stage in, launch, stage out, wait. */
static int cuda_run(void *vctx, int device, const segops_call *call, char *err, size_t errlen) {
  cuda_ctx *ctx = (cuda_ctx *)vctx;
  if (device < 0 || device >= ctx->n)
    return segops_errf(SEGOPS_E_INTERNAL, err, errlen, "cuda backend: no worker %d", device);
  cuda_dev *d = &ctx->dev[device];
  int rc0 = segops_cuda_shape_supported(call, err, errlen);
  if (rc0 != SEGOPS_OK) return rc0;
  if (__atomic_load_n(&d->faulted, __ATOMIC_ACQUIRE))
    return segops_errf(SEGOPS_E_DEVICE, err, errlen, "cuda device %d had a fault earlier; not used", d->ordinal);
  int rc = SEGOPS_OK;
  void *temp = NULL; /* one-off device buffer for a request beyond the pool's cap */
  char *base = NULL;
  size_t scratch = 0;
  segops_cuda_job job;
  request_map m;
  job_of(call, d, &job);
  map_request(call, &m);
  CK(cudaSetDevice(d->ordinal), "cudaSetDevice");
  CK((cudaError_t)segops_cuda_scratch_bytes(&job, &scratch), "scratch sizing");
  job.scratch_bytes = scratch;
  m.need += scratch;
  if (m.need == 0) goto done; /* S = 0: every output is empty */
  if ((rc = reserve(d, m.need, &base, &temp, err, errlen)) != SEGOPS_OK) goto done;
  job_at(&job, &m, base);
  if ((rc = stage_inputs(d, call, &m, base, &job, err, errlen)) != SEGOPS_OK) goto done;
  CK((cudaError_t)segops_cuda_launch(&job, d->stream), "kernel launch");
  if ((rc = stage_outputs(d, call, &m, base, err, errlen)) != SEGOPS_OK) goto done;
  CK(stream_wait(d), "cudaStreamSynchronize");
  CK(cudaGetLastError(), "kernel");
done:
  if (temp) {
    cudaError_t e = cudaFree(temp);
    if (e != cudaSuccess && rc == SEGOPS_OK) rc = cuda_fail(d, e, "cudaFree", err, errlen);
  }
  return rc;
}

static int cuda_device_info(void *vctx, int device, segops_device_info *info) {
  cuda_ctx *ctx = (cuda_ctx *)vctx;
  if (device < 0 || device >= ctx->n) return SEGOPS_E_INTERNAL;
  cuda_dev *d = &ctx->dev[device];
  memset(info, 0, sizeof *info);
  snprintf(info->name, sizeof info->name, "%s", d->name);
  info->physical = d->ordinal;
  info->memory_total = d->mem_total;
  size_t fr = 0, tot = 0;
  unsigned fl = 0;
  if (cudaSetDevice(d->ordinal) == cudaSuccess && cudaMemGetInfo(&fr, &tot) == cudaSuccess)
    info->memory_used = tot - fr;
  else
    (void)cudaGetLastError();
  if (cudaGetDeviceFlags(&fl) == cudaSuccess)
    snprintf(info->wait, sizeof info->wait, "%s", wait_name(fl));
  else
    (void)cudaGetLastError();
  return SEGOPS_OK;
}

static int cuda_cache_stats(void *vctx, int device, segops_cache_stats *st) {
  cuda_ctx *ctx = (cuda_ctx *)vctx;
  if (device < 0 || device >= ctx->n) return SEGOPS_E_INTERNAL;
  const segops_layout_cache *c = &ctx->dev[device].cache;
  memset(st, 0, sizeof *st);
  st->bytes = __atomic_load_n(&c->bytes, __ATOMIC_RELAXED);
  st->cap = c->cap;
  st->hits = __atomic_load_n(&c->hits, __ATOMIC_RELAXED);
  st->misses = __atomic_load_n(&c->misses, __ATOMIC_RELAXED);
  return SEGOPS_OK;
}

static int cuda_ready(void *vctx) {
  cuda_ctx *ctx = (cuda_ctx *)vctx;
  for (int i = 0; i < ctx->n; i++)
    if (__atomic_load_n(&ctx->dev[i].faulted, __ATOMIC_ACQUIRE)) return 0;
  return 1;
}

static void dev_release(cuda_dev *d) {
  if (cudaSetDevice(d->ordinal) != cudaSuccess) return;
  if (d->stream) {
    segops_layout_cache_clear(&d->cache, d->stream);
    (void)cudaStreamSynchronize(d->stream);
  }
  if (d->pool) (void)cudaFree(d->pool);
  for (int k = 0; k < 2; k++) {
    if (d->stage[k]) (void)cudaFreeHost(d->stage[k]);
    if (d->stage_ev[k]) (void)cudaEventDestroy(d->stage_ev[k]);
  }
  if (d->stream) (void)cudaStreamDestroy(d->stream);
  (void)cudaGetLastError();
}

/* Shared-memory regions: pinned (portable across the GPUs' contexts) so copies to and from them
 * are direct DMA. */
static int cuda_host_register(void *vctx, void *ptr, size_t len) {
  (void)vctx;
  cudaError_t e = cudaHostRegister(ptr, len, cudaHostRegisterPortable);
  if (e != cudaSuccess) (void)cudaGetLastError();
  return e == cudaSuccess ? 0 : -1;
}

static void cuda_host_unregister(void *vctx, void *ptr) {
  (void)vctx;
  if (cudaHostUnregister(ptr) != cudaSuccess) (void)cudaGetLastError();
}

static void cuda_destroy(void *vctx) {
  cuda_ctx *ctx = (cuda_ctx *)vctx;
  if (!ctx) return;
  for (int i = 0; i < ctx->n; i++) dev_release(&ctx->dev[i]);
  free(ctx->dev);
  free(ctx);
}

/* --layout-cache-bytes: bytes per worker; auto: the default for a GPU of mem bytes. */
static size_t layout_cache_cap(size_t mem) {
  size_t def = mem / 16 / (size_t)lanes_per_gpu;
  if (def > LAYOUT_CACHE_DEFAULT || def == 0) def = LAYOUT_CACHE_DEFAULT;
  return segops_cuda_conf.layout_cache_bytes >= 0 ? (size_t)segops_cuda_conf.layout_cache_bytes : def;
}

/* Creates one device's warm state; returns a cudaError_t. */
static cudaError_t dev_init(cuda_dev *d, int ordinal) {
  cudaDeviceProp prop;
  cudaError_t e;
  d->ordinal = ordinal;
  /* The wait flag belongs to the primary context: given before cudaSetDevice creates it (a no-op
   * for the device's later lanes), and set again if something made the context first. */
  unsigned fl = 0;
  if (wait_flags != cudaDeviceScheduleAuto &&
      (e = cudaInitDevice(ordinal, wait_flags, cudaInitDeviceFlagsAreValid)) != cudaSuccess)
    return e;
  if ((e = cudaSetDevice(ordinal)) != cudaSuccess) return e;
  if (wait_flags != cudaDeviceScheduleAuto &&
      ((e = cudaGetDeviceFlags(&fl)) != cudaSuccess ||
       ((fl & cudaDeviceScheduleMask) != wait_flags &&
        (e = cudaSetDeviceFlags((fl & ~cudaDeviceScheduleMask) | wait_flags)) != cudaSuccess)))
    return e;
  if ((e = cudaGetDeviceProperties(&prop, ordinal)) != cudaSuccess) return e;
  snprintf(d->name, sizeof d->name, "%.127s", prop.name);
  d->mem_total = prop.totalGlobalMem;
  d->sm_count = prop.multiProcessorCount;
  d->sm_major = prop.major;
  d->pool_cap = prop.totalGlobalMem / 2 / (size_t)lanes_per_gpu;
  segops_layout_cache_init(&d->cache, layout_cache_cap(prop.totalGlobalMem));
  if ((e = cudaFree(NULL)) != cudaSuccess) return e; /* creates the context now, not on the first request */
  {
    /* Cache entries come from the stream-ordered pool: keep freed memory there for reuse. */
    cudaMemPool_t mp;
    uint64_t keep = (uint64_t)d->cache.cap * (uint64_t)lanes_per_gpu;
    if (cudaDeviceGetDefaultMemPool(&mp, ordinal) == cudaSuccess)
      (void)cudaMemPoolSetAttribute(mp, cudaMemPoolAttrReleaseThreshold, &keep);
    (void)cudaGetLastError();
  }
  if ((e = cudaStreamCreateWithFlags(&d->stream, cudaStreamNonBlocking)) != cudaSuccess) return e;
  for (int k = 0; k < 2; k++) {
    if ((e = cudaHostAlloc(&d->stage[k], STAGE_BYTES, cudaHostAllocDefault)) != cudaSuccess) return e;
    if ((e = cudaEventCreateWithFlags(&d->stage_ev[k], cudaEventDisableTiming)) != cudaSuccess) return e;
  }
  return cudaSuccess;
}

/* The CUDA rows of the configuration table (cuda_settings.c: --cuda-wait, --cuda-wait-poll-us,
 * --cuda-lanes), taken at creation, before any worker runs. SEGOPS_OK or
 * SEGOPS_E_INVALID_ARGUMENT with the message in err. */
static int read_settings(char *err, size_t errlen) {
  static const unsigned policies[] = {cudaDeviceScheduleAuto, cudaDeviceScheduleSpin, cudaDeviceScheduleYield,
                                      cudaDeviceScheduleBlockingSync}; /* in SEGOPS_CUDA_WAIT_* order */
  const segops_cuda_conf_t *c = &segops_cuda_conf;
  wait_flags = policies[c->wait >= 0 && c->wait < 4 ? c->wait : 0];
  if (c->wait_poll_us > 0 && wait_flags != cudaDeviceScheduleBlockingSync)
    return segops_errf(SEGOPS_E_INVALID_ARGUMENT, err, errlen,
                       "SEGOPS_CUDA_WAIT_POLL_US (--cuda-wait-poll-us) applies only with SEGOPS_CUDA_WAIT=block "
                       "(--cuda-wait block)");
  wait_poll_us = (int)c->wait_poll_us;
  lanes_per_gpu = (int)c->lanes;
  large_lanes = 0;   /* every lane takes large calls */
  direct_copies = 1; /* pinned regions are copied straight from and to */
  return SEGOPS_OK;
}

/* segops_cuda_backend_new's failure: NULL, with rc in *code. */
static segops_backend *new_failed(int *code, int rc) {
  if (code) *code = rc;
  return NULL;
}

extern "C" segops_backend *segops_cuda_backend_new(const int *devices, int n_devices, int *code, char *err,
                                                   size_t errlen) {
  int count = 0, rc;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess || count <= 0) {
    (void)cudaGetLastError();
    return new_failed(code,
                      segops_errf(SEGOPS_E_UNAVAILABLE, err, errlen, "no usable CUDA GPU: %s",
                                  e != cudaSuccess ? cudaGetErrorString(e) : "the CUDA runtime reports 0 devices"));
  }
  int n_gpus = (devices && n_devices > 0) ? n_devices : count;
  for (int i = 0; devices && i < n_devices; i++)
    if (devices[i] < 0 || devices[i] >= count)
      return new_failed(
          code, segops_errf(SEGOPS_E_INVALID_ARGUMENT, err, errlen, "CUDA device %d does not exist (%d device%s found)",
                            devices[i], count, count == 1 ? "" : "s"));
  if ((rc = read_settings(err, errlen)) != SEGOPS_OK) return new_failed(code, rc);
  cuda_ctx *ctx = (cuda_ctx *)calloc(1, sizeof *ctx);
  segops_backend *b = (segops_backend *)calloc(1, sizeof *b);
  int n = n_gpus * lanes_per_gpu; /* workers: lane l of GPU g is dev[g * lanes_per_gpu + l] */
  if (ctx) ctx->dev = (cuda_dev *)calloc((size_t)n, sizeof(cuda_dev));
  if (!ctx || !b || !ctx->dev) {
    if (ctx) free(ctx->dev);
    free(ctx);
    free(b);
    return new_failed(code, segops_errf(SEGOPS_E_NOMEM, err, errlen, "cuda backend: out of host memory"));
  }
  for (int i = 0; i < n; i++) {
    ctx->n = i + 1;
    int g = i / lanes_per_gpu;
    e = dev_init(&ctx->dev[i], devices && n_devices > 0 ? devices[g] : g);
    if (e != cudaSuccess) {
      rc = segops_errf(SEGOPS_E_UNAVAILABLE, err, errlen, "CUDA device %d unusable: %s", ctx->dev[i].ordinal,
                       cudaGetErrorString(e));
      (void)cudaGetLastError();
      cuda_destroy(ctx);
      free(b);
      return new_failed(code, rc);
    }
  }
  b->name = "cuda";
  b->feature_shapes = "every (N,*F)";
  b->ctx = ctx;
  b->n_devices = n;
  b->run = cuda_run;
  b->accepts = large_lanes > 0 ? cuda_accepts : NULL;
  b->device_info = cuda_device_info;
  b->ready = cuda_ready;
  b->cache_stats = cuda_cache_stats;
  b->destroy = cuda_destroy;
  b->host_register = cuda_host_register;
  b->host_unregister = cuda_host_unregister;
  return b;
}

/* cuda_layout_cache.h: a bounded cache of segment layouts on one device worker, keyed by a
 * 128-bit keyed hash of (idx bytes, N, S, sortedness), so that the forward, backward and double
 * backward of one step, and every step of a trajectory with the same idx, sort and scan idx once.
 * A layout is a pure function of its key: a hit gives the same bits as a rebuild. Used by one
 * worker (one stream) at a time: no locking; the counters are read by /metrics with atomics. */
#ifndef SEGOPS_CUDA_LAYOUT_CACHE_H
#define SEGOPS_CUDA_LAYOUT_CACHE_H

#include <stdint.h>

#include "cuda_internal.h"

#define SEGOPS_LAYOUT_CACHE_SLOTS 16

typedef struct {
  uint64_t h[2];
  int64_t n, s;
  int sorted;
  int64_t longest; /* sorted idx: its longest segment (segops_cuda_sorted_longest); else 0 */
  void *mem; /* device memory (cudaMallocAsync on the worker's stream); NULL: free slot */
  size_t bytes;
  uint64_t used; /* clock of the last use, for least-recently-used eviction */
} segops_layout_entry;

typedef struct {
  segops_layout_entry e[SEGOPS_LAYOUT_CACHE_SLOTS];
  size_t cap;       /* bytes; 0 disables the cache */
  uint64_t seed[2]; /* hash key, random per process */
  uint64_t clock;
  size_t bytes;          /* held now (atomic reads) */
  uint64_t hits, misses; /* (atomic reads) */
} segops_layout_cache;

/* An empty cache of at most cap bytes. */
void segops_layout_cache_init(segops_layout_cache *c, size_t cap);

/* The layout of job (job->idx on the device, host_idx its host copy, n int32 values), built on
 * stream into a cache entry on a miss with temp (at least the layout's temp bytes) as work space.
 * *layout: the entry's memory, or NULL when the layout is not cached (cache off, larger than the
 * cap, or no device memory for it): then the caller builds it in its scratch. *longest: for a
 * sorted idx its longest segment (kept with the entry, measured on the host on a miss or when
 * uncached), else 0. Returns a cudaError_t of the build (the entry is dropped then). */
int segops_layout_cache_get(segops_layout_cache *c, const segops_cuda_job *job, const int32_t *host_idx, void *temp,
                            cudaStream_t stream, const void **layout, int64_t *longest);

/* Frees every entry (stream-ordered on stream). */
void segops_layout_cache_clear(segops_layout_cache *c, cudaStream_t stream);

/* 128-bit keyed hash of bytes (host). */
void segops_hash128(const void *p, size_t len, const uint64_t seed[2], uint64_t out[2]);

#endif

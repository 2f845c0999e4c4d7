/* cuda_layout_cache.h: a bounded cache of idx on one device worker, keyed by a 128-bit keyed
 * hash of (idx bytes, N, S, sortedness): each entry holds the device copy of idx and, once a
 * function that reduces has needed it, its segment layout. So the forward, backward and double
 * backward of one step, and every step of a trajectory with the same idx, copy idx to the GPU
 * and sort and scan it once. Both are pure functions of the key: a hit gives the same bits as a
 * copy and a rebuild. Used by one worker (one stream) at a time: no locking; the counters are
 * read by /metrics with atomics. */
#ifndef SEGOPS_CUDA_LAYOUT_CACHE_H
#define SEGOPS_CUDA_LAYOUT_CACHE_H

#include <stdint.h>

#include "cuda_internal.h"
#include "hash.h"

#define SEGOPS_LAYOUT_CACHE_SLOTS 16

typedef struct {
  uint64_t h[2];
  int64_t n, s;
  int sorted;
  int64_t longest;  /* sorted idx with the layout built: its longest segment; else 0 */
  void *mem;        /* device memory (cudaMallocAsync on the worker's stream); NULL: free slot */
  size_t idx_bytes; /* mem: idx's n int32 values, then from idx_bytes (256-byte aligned) the layout */
  int idx_ready;    /* set by the backend once idx's copy into mem is enqueued */
  int layout_ready; /* set by the backend once the layout's build into mem + idx_bytes is enqueued */
  size_t bytes;
  uint64_t used; /* clock of the last use, for least-recently-used eviction */
} segops_layout_entry;

typedef struct {
  segops_layout_entry e[SEGOPS_LAYOUT_CACHE_SLOTS];
  size_t cap; /* bytes; 0 disables the cache */
  uint64_t clock;
  size_t bytes;          /* held now (atomic reads) */
  uint64_t hits, misses; /* (atomic reads) */
} segops_layout_cache;

/* An empty cache of at most cap bytes. */
void segops_layout_cache_init(segops_layout_cache *c, size_t cap);

/* The entry of job's (host_idx: its n int32 values on the host, job->s, job->idx_sorted), keyed
 * by known_hash when given (segops_hash_idx of those bytes, as prepare computed it), else by
 * hashing them here: found, or made (evicting the least recently used) with room for idx and its
 * layout but neither filled in. NULL when it cannot be cached (cache off, n = 0, larger than the cap, or no device
 * memory): the caller then copies idx and builds the layout in its own memory. A failed copy or build after this must
 * clear the cache (the backend's error path does). */
segops_layout_entry *segops_layout_cache_entry(segops_layout_cache *c, const segops_cuda_job *job,
                                               const int32_t *host_idx, const uint64_t *known_hash,
                                               cudaStream_t stream);

/* Frees every entry (stream-ordered on stream). */
void segops_layout_cache_clear(segops_layout_cache *c, cudaStream_t stream);

#endif

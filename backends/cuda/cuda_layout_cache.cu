/* cuda_layout_cache.cu: the per-worker layout cache (see cuda_layout_cache.h). */
#include <string.h>

#include "cuda_layout_cache.h"

void segops_layout_cache_init(segops_layout_cache *c, size_t cap) {
  memset(c, 0, sizeof *c);
  c->cap = cap;
}

static void drop(segops_layout_cache *c, segops_layout_entry *e, cudaStream_t st) {
  if (!e->mem) return;
  if (cudaFreeAsync(e->mem, st) != cudaSuccess) (void)cudaGetLastError();
  __atomic_store_n(&c->bytes, c->bytes - e->bytes, __ATOMIC_RELAXED);
  memset(e, 0, sizeof *e);
}

void segops_layout_cache_clear(segops_layout_cache *c, cudaStream_t st) {
  for (int k = 0; k < SEGOPS_LAYOUT_CACHE_SLOTS; k++) drop(c, &c->e[k], st);
}

segops_layout_entry *segops_layout_cache_entry(segops_layout_cache *c, const segops_cuda_job *job,
                                               const int32_t *host_idx, const uint64_t *known_hash, cudaStream_t st) {
  const size_t idx_bytes = ((size_t)job->n * 4 + 255) & ~(size_t)255;
  if (c->cap == 0 || job->n <= 0 || job->s <= 0 || idx_bytes > c->cap) return NULL;
  uint64_t h[2];
  if (known_hash) {
    h[0] = known_hash[0];
    h[1] = known_hash[1];
  } else {
    segops_hash_idx(host_idx, (size_t)job->n * 4, h);
  }
  const int sorted = job->idx_sorted ? 1 : 0;
  c->clock++;
  segops_layout_entry *free_slot = NULL;
  for (int k = 0; k < SEGOPS_LAYOUT_CACHE_SLOTS; k++) {
    segops_layout_entry *e = &c->e[k];
    if (!e->mem) {
      if (!free_slot) free_slot = e;
      continue;
    }
    if (e->h[0] == h[0] && e->h[1] == h[1] && e->n == job->n && e->s == job->s && e->sorted == sorted) {
      e->used = c->clock;
      __atomic_store_n(&c->hits, c->hits + 1, __ATOMIC_RELAXED);
      return e;
    }
  }
  /* A miss: room for idx and the layout whatever the function (a reducing function's layout of
   * (idx, S)), sized only now, so a hit asks nothing of CUB. */
  segops_cuda_job any = *job;
  any.fn = segops_fn(SEGOPS_OP_SUM, SEGOPS_PASS_FORWARD);
  size_t keep = 0, tmp = 0;
  if (segops_cuda_layout_bytes(&any, &keep, &tmp) != 0) {
    (void)cudaGetLastError();
    return NULL;
  }
  const size_t need = idx_bytes + keep;
  if (need > c->cap) return NULL;
  __atomic_store_n(&c->misses, c->misses + 1, __ATOMIC_RELAXED);
  /* Evict least recently used entries until the new one fits in a slot and under the cap. */
  while (!free_slot || c->bytes + need > c->cap) {
    segops_layout_entry *lru = NULL;
    for (int k = 0; k < SEGOPS_LAYOUT_CACHE_SLOTS; k++)
      if (c->e[k].mem && (!lru || c->e[k].used < lru->used)) lru = &c->e[k];
    if (!lru) break;
    drop(c, lru, st);
    if (!free_slot) free_slot = lru;
  }
  void *mem = NULL;
  if (!free_slot || cudaMallocAsync(&mem, need, st) != cudaSuccess) {
    (void)cudaGetLastError(); /* no room: the caller works in its own memory, uncached */
    return NULL;
  }
  memset(free_slot, 0, sizeof *free_slot);
  free_slot->h[0] = h[0];
  free_slot->h[1] = h[1];
  free_slot->n = job->n;
  free_slot->s = job->s;
  free_slot->sorted = sorted;
  free_slot->mem = mem;
  free_slot->idx_bytes = idx_bytes;
  free_slot->bytes = need;
  free_slot->used = c->clock;
  __atomic_store_n(&c->bytes, c->bytes + need, __ATOMIC_RELAXED);
  return free_slot;
}

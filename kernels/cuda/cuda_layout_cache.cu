/* cuda_layout_cache.cu: the per-worker layout cache (see cuda_layout_cache.h) and its hash. */
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cuda_layout_cache.h"

#define H_P1 0x9E3779B185EBCA87ull
#define H_P2 0xC2B2AE3D27D4EB4Full
#define H_P3 0x165667B19E3779F9ull

static uint64_t rotl64(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }
static uint64_t h_round(uint64_t acc, uint64_t in) { return rotl64(acc + in * H_P2, 31) * H_P1; }
static uint64_t h_fmix(uint64_t h) {
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdull;
  h ^= h >> 33;
  h *= 0xc4ceb9fe1a85ec53ull;
  return h ^ (h >> 33);
}

/* Four independent 64-bit lanes over 32-byte blocks (memory speed on one core), the tail word by
 * word, then two differently mixed 64-bit digests of the 256-bit state. */
void segops_hash128(const void *p, size_t len, const uint64_t seed[2], uint64_t out[2]) {
  const unsigned char *b = (const unsigned char *)p;
  uint64_t v0 = seed[0] + H_P1 + H_P2, v1 = seed[0] + H_P2, v2 = seed[1], v3 = seed[1] - H_P1;
  size_t i = 0;
  for (; i + 32 <= len; i += 32) {
    uint64_t w[4];
    memcpy(w, b + i, 32);
    v0 = h_round(v0, w[0]);
    v1 = h_round(v1, w[1]);
    v2 = h_round(v2, w[2]);
    v3 = h_round(v3, w[3]);
  }
  uint64_t tail = 0;
  for (int k = 0; i + 8 <= len; i += 8, k++) {
    uint64_t w;
    memcpy(&w, b + i, 8);
    tail = h_round(tail ^ (uint64_t)k, w);
  }
  uint64_t last = 0;
  if (i < len) memcpy(&last, b + i, len - i);
  tail = h_round(tail, last ^ ((uint64_t)len << 3));
  out[0] = h_fmix(rotl64(v0, 1) + rotl64(v1, 7) + rotl64(v2, 12) + rotl64(v3, 18) + tail + (uint64_t)len);
  out[1] = h_fmix((v0 ^ rotl64(v2, 29)) * H_P3 + (v1 ^ rotl64(v3, 37)) * H_P1 + rotl64(tail, 23) + seed[1]);
}

void segops_layout_cache_init(segops_layout_cache *c, size_t cap) {
  memset(c, 0, sizeof *c);
  c->cap = cap;
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  uint64_t x = ((uint64_t)ts.tv_sec << 30) ^ (uint64_t)ts.tv_nsec ^ ((uint64_t)getpid() << 48) ^ (uint64_t)(uintptr_t)c;
  c->seed[0] = h_fmix(x + H_P1);
  c->seed[1] = h_fmix(x + H_P3);
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
                                               const int32_t *host_idx, cudaStream_t st) {
  if (c->cap == 0 || job->n <= 0 || job->s <= 0) return NULL;
  /* Room for the layout whatever the function: a reducing function's layout of (idx, S). */
  segops_cuda_job any = *job;
  any.fn = segops_fn(SEGOPS_OP_SUM, SEGOPS_PASS_FORWARD);
  size_t keep = 0, tmp = 0;
  if (segops_cuda_layout_bytes(&any, &keep, &tmp) != 0) {
    (void)cudaGetLastError();
    return NULL;
  }
  const size_t idx_bytes = ((size_t)job->n * 4 + 255) & ~(size_t)255;
  const size_t need = idx_bytes + keep;
  if (need > c->cap) return NULL;
  uint64_t h[2];
  segops_hash128(host_idx, (size_t)job->n * 4, c->seed, h);
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

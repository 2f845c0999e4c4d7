/* cpu_csr.c: segment offsets and the stable segment-order permutation (CSR) of the CPU backend. */
#include "cpu_internal.h"

typedef struct {
  const int32_t *idx;
  int64_t n, chunk;
  int64_t *off;
} sorted_task;

/* For sorted idx, off[t] is the first i with idx[i] >= t: each element whose segment differs
 * from its predecessor's writes the offsets of the segments it crosses. Every off[t] with
 * t <= idx[n-1] has exactly one writer, so chunks can run in any order. */
static void sorted_chunk(void *vp, int64_t c) {
  const sorted_task *t = vp;
  int64_t i0 = c * t->chunk, i1 = i0 + t->chunk < t->n ? i0 + t->chunk : t->n;
  for (int64_t i = i0; i < i1; i++) {
    int64_t prev = i == 0 ? -1 : t->idx[i - 1], cur = t->idx[i];
    for (int64_t s = prev + 1; s <= cur; s++) t->off[s] = i;
  }
}

void segops_cpu_offsets_sorted(segops_cpu_pool *pool, const int32_t *idx, int64_t n, int64_t s, int64_t *off) {
  sorted_task t = {idx, n, 1 << 16, off};
  int64_t nchunks = (n + t.chunk - 1) / t.chunk;
  segops_cpu_parallel_for(pool, nchunks, sorted_chunk, &t);
  for (int64_t k = n ? (int64_t)idx[n - 1] + 1 : 0; k <= s; k++) off[k] = n;
}

void segops_cpu_offsets_any(const int32_t *idx, int64_t n, int64_t s, int64_t *off, int64_t *perm, int64_t *pos) {
  for (int64_t k = 0; k <= s; k++) off[k] = 0;
  for (int64_t i = 0; i < n; i++) off[idx[i] + 1]++;
  for (int64_t k = 0; k < s; k++) off[k + 1] += off[k];
  if (!perm) return;
  for (int64_t k = 0; k < s; k++) pos[k] = off[k];
  for (int64_t i = 0; i < n; i++) perm[pos[idx[i]]++] = i; /* increasing i: stable */
}

void segops_cpu_segment_bounds(const int64_t *off, int64_t s, int64_t k, int64_t *bounds) {
  /* work(t) = off[t] + t is strictly increasing; bounds[c] is the first segment whose work
   * reaches c/k of the total. */
  int64_t total = off[s] + s;
  bounds[0] = 0;
  for (int64_t c = 1; c < k; c++) {
    int64_t target = (int64_t)((double)total * (double)c / (double)k);
    int64_t lo = bounds[c - 1], hi = s;
    while (lo < hi) {
      int64_t mid = lo + (hi - lo) / 2;
      if (off[mid] + mid < target)
        lo = mid + 1;
      else
        hi = mid;
    }
    bounds[c] = lo;
  }
  bounds[k] = s;
}

/* idx_cache.h: validated copies of idx that the daemon owns, shared by requests that send the
 * same idx bytes for the same N and S (the calls of a training step, the steps of a trajectory).
 *
 * An idx read from a client's shared-memory region must be copied before it is checked, since its
 * owner may rewrite it at any time (prepare.c); an int64 one is narrowed to int32 as well. With this cache, prepare
 * hashes the region's bytes (one read) and, when a copy of the same bytes was already validated for the same N and S,
 * uses that copy: no copy, no check, and no later read of the region's idx. The copy is immutable and kept alive by
 * each request that uses it. The hash is keyed (hash.h), so a client cannot make two different idx collide on purpose.
 * Entries are per client uid: prepare mixes the request's owner into the hash, so one uid's lookup never
 * hits (and /metrics' hit counter never tells it of) another uid's idx.
 * Process-wide, thread-safe; bounded by bytes and slots (least recently used unused entries evicted).
 * --idx-cache-bytes (segops_idx_cache_settings) sets the cap (0 turns it off); default 256 MiB. */
#ifndef SEGOPS_IDX_CACHE_H
#define SEGOPS_IDX_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* idx of fewer than this many bytes at 4 per element is copied and checked as before (cheaper than a lookup). */
#define SEGOPS_IDX_CACHE_MIN_BYTES ((size_t)64 << 10)

typedef struct segops_idx_entry segops_idx_entry;

/* Whether the cache is on (its cap > 0). */
bool segops_idx_cache_enabled(void);

/* The entry of (h: hash of an idx of n values of elem_bytes each (4: int32, 8: int64), s), held for
 * the caller, or NULL. On a hit *data is the validated copy (int32) and *sorted whether it never
 * decreases. */
segops_idx_entry *segops_idx_cache_find(const uint64_t h[2], int elem_bytes, int64_t n, int64_t s, const int32_t **data,
                                        bool *sorted);

/* Hands a validated copy (n int32 values in [0, s), from segops_aligned_alloc; h: the hash of the
 * idx it was made from, of elem_bytes per value) to the cache: returns the new entry, held for the
 * caller, which then owns data no more; or NULL when it cannot be kept (off, too large, every slot
 * in use): the caller keeps data. */
segops_idx_entry *segops_idx_cache_put(int32_t *data, const uint64_t h[2], int elem_bytes, int64_t n, int64_t s,
                                       bool sorted);

/* Releases a hold (NULL: nothing). */
void segops_idx_cache_release(segops_idx_entry *e);

/* Counters for /metrics. */
typedef struct {
  size_t bytes, cap;
  uint64_t hits, misses;
} segops_idx_cache_stats_t;
void segops_idx_cache_stats(segops_idx_cache_stats_t *st);

/* Sets the cap (tests; the daemon reads SEGOPS_IDX_CACHE_BYTES on first use) and drops every
 * entry no request holds. */
void segops_idx_cache_set_cap(size_t cap);

#endif

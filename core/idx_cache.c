/* idx_cache.c: the validated-idx cache (see idx_cache.h). */
#include "idx_cache.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "settings.h"

#define SLOTS 64
#define DEFAULT_CAP ((size_t)256 << 20)

struct segops_idx_entry {
  uint64_t h[2];
  int elem_bytes;
  int64_t n, s;
  bool sorted;
  int32_t *data;
  size_t bytes;
  int holds; /* requests using it, plus one while it is in the table */
  uint64_t used;
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static segops_idx_entry *table[SLOTS];
static size_t cap, held;
static uint64_t clock_, hits, misses;
static bool configured;

/* The cache's row of the configuration table: read on first use. */
static struct { int64_t bytes; } conf = {DEFAULT_CAP};

static const segops_setting ROWS[] = {
    {.name = "idx-cache-bytes",
     .env = "SEGOPS_IDX_CACHE_BYTES",
     .type = SEGOPS_SET_BYTES,
     .offset = 0,
     .lo = 0,
     .def = "256M",
     .help = "cap on the validated copies of idx kept for requests that send the same idx again (64 KiB or "
             "larger, from shared memory): those skip the copy and the check (0 = off)"},
};

segops_settings_group segops_idx_cache_settings = {"idx cache", NULL, ROWS, sizeof ROWS / sizeof ROWS[0], &conf};

static void configure_locked(void) {
  if (!configured) {
    cap = (size_t)conf.bytes;
    configured = true;
  }
}

static void unhold_locked(segops_idx_entry *e, segops_idx_entry **to_free) {
  if (--e->holds == 0) *to_free = e;
}

/* Takes entry k out of the table (its memory goes when no request holds it). */
static void evict_locked(int k, segops_idx_entry **to_free) {
  segops_idx_entry *e = table[k];
  table[k] = NULL;
  held -= e->bytes;
  unhold_locked(e, to_free);
}

static void free_entry(segops_idx_entry *e) {
  if (!e) return;
  free(e->data);
  free(e);
}

bool segops_idx_cache_enabled(void) {
  pthread_mutex_lock(&mu);
  configure_locked();
  bool on = cap > 0;
  pthread_mutex_unlock(&mu);
  return on;
}

segops_idx_entry *segops_idx_cache_find(const uint64_t h[2], int elem_bytes, int64_t n, int64_t s, const int32_t **data,
                                        bool *sorted) {
  segops_idx_entry *got = NULL;
  pthread_mutex_lock(&mu);
  configure_locked();
  for (int k = 0; k < SLOTS && !got; k++) {
    segops_idx_entry *e = table[k];
    if (e && e->h[0] == h[0] && e->h[1] == h[1] && e->elem_bytes == elem_bytes && e->n == n && e->s == s) got = e;
  }
  if (got) {
    got->holds++;
    got->used = ++clock_;
    hits++;
    *data = got->data;
    *sorted = got->sorted;
  } else {
    misses++;
  }
  pthread_mutex_unlock(&mu);
  return got;
}

segops_idx_entry *segops_idx_cache_put(int32_t *data, const uint64_t h[2], int elem_bytes, int64_t n, int64_t s,
                                       bool sorted) {
  const size_t bytes = (size_t)n * sizeof(int32_t);
  segops_idx_entry *e = calloc(1, sizeof *e);
  if (!e) return NULL;
  segops_idx_entry *to_free[SLOTS + 1] = {0};
  int nf = 0;
  pthread_mutex_lock(&mu);
  configure_locked();
  if (bytes > cap) {
    pthread_mutex_unlock(&mu);
    free(e);
    return NULL;
  }
  /* Room: evict least recently used entries (requests holding them keep their memory). */
  int slot = -1;
  for (;;) {
    slot = -1;
    for (int k = 0; k < SLOTS && slot < 0; k++)
      if (!table[k]) slot = k;
    if (slot >= 0 && held + bytes <= cap) break;
    int lru = -1;
    for (int k = 0; k < SLOTS; k++)
      if (table[k] && (lru < 0 || table[k]->used < table[lru]->used)) lru = k;
    if (lru < 0) break;
    segops_idx_entry *gone = NULL;
    evict_locked(lru, &gone);
    if (gone) to_free[nf++] = gone;
  }
  if (slot < 0 || held + bytes > cap) {
    pthread_mutex_unlock(&mu);
    for (int i = 0; i < nf; i++) free_entry(to_free[i]);
    free(e);
    return NULL;
  }
  e->h[0] = h[0];
  e->h[1] = h[1];
  e->elem_bytes = elem_bytes;
  e->n = n;
  e->s = s;
  e->sorted = sorted;
  e->data = data;
  e->bytes = bytes;
  e->holds = 2; /* the table and the caller */
  e->used = ++clock_;
  table[slot] = e;
  held += bytes;
  pthread_mutex_unlock(&mu);
  for (int i = 0; i < nf; i++) free_entry(to_free[i]);
  return e;
}

void segops_idx_cache_release(segops_idx_entry *e) {
  if (!e) return;
  segops_idx_entry *gone = NULL;
  pthread_mutex_lock(&mu);
  unhold_locked(e, &gone);
  pthread_mutex_unlock(&mu);
  free_entry(gone);
}

void segops_idx_cache_stats(segops_idx_cache_stats_t *st) {
  pthread_mutex_lock(&mu);
  configure_locked();
  st->bytes = held;
  st->cap = cap;
  st->hits = hits;
  st->misses = misses;
  pthread_mutex_unlock(&mu);
}

void segops_idx_cache_set_cap(size_t c) {
  segops_idx_entry *to_free[SLOTS] = {0};
  int nf = 0;
  pthread_mutex_lock(&mu);
  configured = true;
  cap = c;
  for (int k = 0; k < SLOTS; k++)
    if (table[k]) {
      segops_idx_entry *gone = NULL;
      evict_locked(k, &gone);
      if (gone) to_free[nf++] = gone;
    }
  pthread_mutex_unlock(&mu);
  for (int i = 0; i < nf; i++) free_entry(to_free[i]);
}

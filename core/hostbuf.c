/* hostbuf.c: host buffers for request bodies and outputs, large ones pooled and pinned (hostbuf.h). */
#include "hostbuf.h"

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__)
#define HB_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define HB_ASAN 1
#endif
#endif
#ifdef HB_ASAN
#include <sanitizer/asan_interface.h>
#define POISON(p, n) ASAN_POISON_MEMORY_REGION((p), (n))
#define UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION((p), (n))
#else
#define POISON(p, n) ((void)(p), (void)(n))
#define UNPOISON(p, n) ((void)(p), (void)(n))
#endif

#define DEFAULT_CAP_MAX ((size_t)1 << 30) /* 1 GiB, or a sixteenth of the machine's memory if less */
#define DEFAULT_STALE_MS 1000
#define HDR 64 /* bytes before every buffer: the header, padded so the data stays 64-byte aligned */
#define MAGIC 0x5e90b0f1u

enum { KIND_HEAP = 1, KIND_POOL = 2 };

typedef struct hb_hdr {
  uint32_t magic, kind;
  size_t len;                   /* the mapping's length (pool) */
  const segops_backend *pinned; /* the backend that pinned the mapping, or NULL */
  struct hb_hdr *next;          /* idle list, most recently used first */
  uint64_t idle_since_ms;       /* when it went idle (monotonic) */
} hb_hdr;
_Static_assert(sizeof(hb_hdr) <= HDR, "hostbuf header must fit its padding");

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static bool configured;
static size_t cap, mapped, idle_bytes, pinned_bytes;
static uint64_t stale_ms = DEFAULT_STALE_MS;
static uint64_t n_reused, n_new, n_heap;
static hb_hdr *idle; /* most recently returned first */
static const segops_backend *pin_be;

static uint64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static size_t default_cap(void) {
  long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page <= 0) return DEFAULT_CAP_MAX;
  size_t sixteenth = (size_t)pages / 16 * (size_t)page;
  return sixteenth < DEFAULT_CAP_MAX ? sixteenth : DEFAULT_CAP_MAX;
}

/* The pool's row of the configuration table: read on first use. */
static struct { int64_t pool_bytes; /* -1: auto */ } conf = {-1};

static const segops_setting ROWS[] = {
    {.name = "host-pool-bytes",
     .env = "SEGOPS_HOST_POOL_BYTES",
     .type = SEGOPS_SET_BYTES,
     .offset = 0,
     .lo = 0,
     .def = "auto",
     .def_doc = "auto (1 GiB, or 1/16 of the machine's memory if less)",
     .flags = SEGOPS_SET_AUTO,
     .help = "cap on the pool of host buffers for request bodies and outputs of 1 MiB or more, reused from request "
             "to request and pinned for direct GPU copies (0 = off: ordinary heap blocks)"},
};

segops_settings_group segops_hostbuf_settings = {"Host memory", NULL, ROWS, sizeof ROWS / sizeof ROWS[0], &conf};

static void configure_locked(void) {
  if (!configured) {
    cap = conf.pool_bytes >= 0 ? (size_t)conf.pool_bytes : default_cap();
    configured = true;
  }
}

/* A pooled buffer's mapping length for nbytes: header included, rounded up to a quarter of its
 * power of two (>= 256 KiB, so whole pages). */
static size_t class_len(size_t nbytes) {
  size_t total = nbytes + HDR, p2 = (size_t)1 << 20;
  while (p2 <= total / 2) p2 <<= 1;
  size_t step = p2 / 4;
  return (total + step - 1) / step * step;
}

static void *heap_alloc(size_t nbytes) {
  if (nbytes > SIZE_MAX - HDR - 64) return NULL;
  size_t len = (nbytes + HDR + 63) & ~(size_t)63;
  hb_hdr *h = aligned_alloc(64, len);
  if (!h) return NULL;
  memset(h, 0, sizeof *h);
  h->magic = MAGIC;
  h->kind = KIND_HEAP;
  return (char *)h + HDR;
}

/* Unpins (when its backend is still attached) and unmaps a mapping taken out of the books. */
static void unmap(hb_hdr *h) {
  size_t len = h->len;
  const segops_backend *be = h->pinned;
  UNPOISON(h, len);
  if (be) {
    pthread_mutex_lock(&mu);
    bool attached = be == pin_be;
    pinned_bytes -= len;
    pthread_mutex_unlock(&mu);
    if (attached && be->host_unregister) be->host_unregister(be->ctx, h);
  }
  munmap(h, len);
}

static void unmap_list(hb_hdr *h) {
  while (h) {
    hb_hdr *next = h->next;
    unmap(h);
    h = next;
  }
}

/* Takes idle buffers that have been idle stale_ms or longer out, least recently used first, until
 * `need` more bytes fit under the cap or none of those is left; returns them as a list for the
 * caller to unmap outside the lock. Buffers idle for less are kept: under a steady mix of sizes
 * larger than the cap, unmapping one buffer to map (and pin) another costs more than a heap buffer
 * does, so the overflow goes to the heap and the pool's sizes follow the load only as it shifts. */
static hb_hdr *evict_locked(size_t need) {
  hb_hdr *victims = NULL;
  uint64_t now = now_ms();
  while (idle && mapped + need > cap) {
    hb_hdr **pp = &idle;
    while ((*pp)->next) pp = &(*pp)->next;
    hb_hdr *h = *pp;
    if (now - h->idle_since_ms < stale_ms) break; /* the oldest is recent: so are the others */
    *pp = NULL;
    idle_bytes -= h->len;
    mapped -= h->len;
    h->next = victims;
    victims = h;
  }
  return victims;
}

void *segops_hostbuf_alloc(size_t nbytes) {
  if (nbytes == 0) nbytes = 1;
  if (nbytes < SEGOPS_HOSTBUF_MIN) return heap_alloc(nbytes);
  if (nbytes > SEGOPS_HOSTBUF_MAX) {
    pthread_mutex_lock(&mu);
    n_heap++;
    pthread_mutex_unlock(&mu);
    return heap_alloc(nbytes);
  }
  size_t len = class_len(nbytes);
  pthread_mutex_lock(&mu);
  configure_locked();
  /* The smallest idle buffer of this class or up to half as large again. */
  hb_hdr **best = NULL;
  for (hb_hdr **pp = &idle; *pp; pp = &(*pp)->next) {
    size_t l = (*pp)->len;
    if (l >= len && l <= len + len / 2 && (!best || l < (*best)->len)) best = pp;
    if (best && (*best)->len == len) break;
  }
  if (best) {
    hb_hdr *h = *best;
    *best = h->next;
    h->next = NULL;
    idle_bytes -= h->len;
    n_reused++;
    pthread_mutex_unlock(&mu);
    UNPOISON((char *)h + HDR, nbytes);
    return (char *)h + HDR;
  }
  hb_hdr *victims = len <= cap ? evict_locked(len) : NULL;
  bool fits = mapped + len <= cap;
  if (fits) {
    mapped += len;
    n_new++;
  } else {
    n_heap++;
  }
  const segops_backend *be = pin_be;
  pthread_mutex_unlock(&mu);
  unmap_list(victims);
  if (!fits) return heap_alloc(nbytes);

  hb_hdr *h = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
  if (h == MAP_FAILED) {
    pthread_mutex_lock(&mu);
    mapped -= len;
    n_new--;
    n_heap++;
    pthread_mutex_unlock(&mu);
    return heap_alloc(nbytes);
  }
  memset(h, 0, sizeof *h);
  h->magic = MAGIC;
  h->kind = KIND_POOL;
  h->len = len;
  if (be && be->host_register && be->host_register(be->ctx, h, len) == 0) {
    h->pinned = be;
    pthread_mutex_lock(&mu);
    pinned_bytes += len;
    pthread_mutex_unlock(&mu);
  }
  POISON((char *)h + HDR + nbytes, len - HDR - nbytes);
  return (char *)h + HDR;
}

void segops_hostbuf_free(void *p) {
  if (!p) return;
  hb_hdr *h = (hb_hdr *)(void *)((char *)p - HDR);
  if (h->magic != MAGIC) {
    fprintf(stderr, "segops: segops_hostbuf_free of a pointer it did not allocate\n");
    abort();
  }
  if (h->kind == KIND_HEAP) {
    free(h);
    return;
  }
  POISON((char *)h + HDR, h->len - HDR); /* before another thread can take it from the idle list */
  pthread_mutex_lock(&mu);
  /* Kept for reuse unless the pool shrank under it or its pinning outlived its backend. */
  bool keep = mapped <= cap && (!h->pinned || h->pinned == pin_be);
  if (keep) {
    h->next = idle;
    h->idle_since_ms = now_ms();
    idle = h;
    idle_bytes += h->len;
  } else {
    mapped -= h->len;
  }
  pthread_mutex_unlock(&mu);
  if (!keep) unmap(h);
}

void segops_hostbuf_attach(const segops_backend *be) {
  pthread_mutex_lock(&mu);
  configure_locked();
  pin_be = be && be->host_register ? be : NULL;
  pthread_mutex_unlock(&mu);
}

/* Takes every idle buffer out of the books; the caller unmaps them. */
static hb_hdr *take_idle_locked(void) {
  hb_hdr *all = idle;
  for (hb_hdr *h = idle; h; h = h->next) mapped -= h->len;
  idle = NULL;
  idle_bytes = 0;
  return all;
}

void segops_hostbuf_detach(void) {
  pthread_mutex_lock(&mu);
  hb_hdr *all = take_idle_locked();
  pthread_mutex_unlock(&mu);
  unmap_list(all); /* unpinned while the backend is still attached */
  pthread_mutex_lock(&mu);
  pin_be = NULL;
  pthread_mutex_unlock(&mu);
}

void segops_hostbuf_stats(segops_hostbuf_stats_t *st) {
  pthread_mutex_lock(&mu);
  configure_locked();
  st->mapped = mapped;
  st->idle = idle_bytes;
  st->pinned = pinned_bytes;
  st->cap = cap;
  st->reused = n_reused;
  st->mapped_new = n_new;
  st->heap = n_heap;
  pthread_mutex_unlock(&mu);
}

void segops_hostbuf_set_stale_ms(uint64_t ms) {
  pthread_mutex_lock(&mu);
  stale_ms = ms;
  pthread_mutex_unlock(&mu);
}

void segops_hostbuf_set_cap(size_t c) {
  pthread_mutex_lock(&mu);
  configured = true;
  cap = c;
  hb_hdr *all = take_idle_locked();
  pthread_mutex_unlock(&mu);
  unmap_list(all);
}

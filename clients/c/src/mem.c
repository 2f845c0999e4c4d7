/* mem.c: the client's memory shared with daemons (mem.h): memfd pools, fully allocated and sealed
 * against shrinking, and a first-fit allocator over them whose bookkeeping stays in private
 * memory (the daemon, or a stray output, never sees or breaks it); blocks a daemon may still write
 * are held until it is known to be done with them. */
#include "mem.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#define MAX_POOLS 128
#define ALIGN 64u
#define FIRST_POOL ((size_t)4 << 20)
#define MAX_STEP ((size_t)1 << 30) /* pools grow by doubling up to this, then by this */
#define POOL_ROUND ((size_t)2 << 20)

typedef struct {
  size_t off, len;
  unsigned holds; /* used blocks: segops_mem_hold's count */
  bool released;  /* used blocks: segops_mem_release came while held */
} ext;

/* A growable array of extents sorted by offset. */
typedef struct {
  ext *v;
  int n, cap;
} ext_list;

typedef struct {
  unsigned char *base;
  size_t size;
  int fd;
  bool inherited; /* made before a fork by the parent: shared with it, so never allocated from here */
  ext_list free, used;
} pool;

/* Blocks held for a channel that went (segops_mem_unhold_on_hangup). */
typedef struct hangup {
  int fd;
  int n;
  struct hangup *next;
  void *blocks[];
} hangup;

struct segops_mem {
  pthread_mutex_t mu;
  pool pools[MAX_POOLS];
  atomic_int npools; /* entries below it are published: base, size and fd never change */
  unsigned epoch;    /* fork_epoch when the pools were last checked */
  size_t next_size;
  hangup *hangups; /* under mu */
};

static void unhold_locked(segops_mem *m, const void *p);

/* ---- forks ------------------------------------------------------------------------------------
 * A forked child shares its parent's pools (MAP_SHARED): allocating from them in both would hand
 * the same bytes out twice. The child keeps reading what lies there but allocates in pools of its
 * own. The owning client's fork handlers hold mu across the fork (segops_mem_fork_lock), so the
 * child finds it free and the lists it guards whole. */
static atomic_uint fork_epoch;
static pthread_once_t fork_once = PTHREAD_ONCE_INIT;
static void on_fork_child(void) { atomic_fetch_add(&fork_epoch, 1); }
static void register_fork(void) { pthread_atfork(NULL, NULL, on_fork_child); }

void segops_mem_fork_lock(segops_mem *m) {
  if (m) pthread_mutex_lock(&m->mu);
}

void segops_mem_fork_unlock(segops_mem *m) {
  if (m) pthread_mutex_unlock(&m->mu);
}

/* Under m->mu: after a fork every pool made so far is the parent's. */
static void check_fork(segops_mem *m) {
  unsigned e = atomic_load(&fork_epoch);
  if (e == m->epoch) return;
  m->epoch = e;
  int n = atomic_load(&m->npools);
  for (int k = 0; k < n; k++) {
    pool *p = &m->pools[k];
    p->inherited = true;
    free(p->free.v);
    free(p->used.v);
    memset(&p->free, 0, sizeof p->free);
    memset(&p->used, 0, sizeof p->used);
  }
  /* The parent's channels: the child's copies of their sockets go, the blocks are the parent's. */
  while (m->hangups) {
    hangup *h = m->hangups;
    m->hangups = h->next;
    close(h->fd);
    free(h);
  }
}

/* ---- extents ----------------------------------------------------------------------------------- */

static bool ext_insert_at(ext_list *l, int i, ext e) {
  if (l->n == l->cap) {
    int cap = l->cap ? l->cap * 2 : 16;
    ext *v = realloc(l->v, (size_t)cap * sizeof *v);
    if (!v) return false;
    l->v = v;
    l->cap = cap;
  }
  memmove(&l->v[i + 1], &l->v[i], (size_t)(l->n - i) * sizeof *l->v);
  l->v[i] = e;
  l->n++;
  return true;
}

static void ext_remove_at(ext_list *l, int i) {
  memmove(&l->v[i], &l->v[i + 1], (size_t)(l->n - i - 1) * sizeof *l->v);
  l->n--;
}

/* The first index whose offset is >= off. */
static int ext_lower(const ext_list *l, size_t off) {
  int lo = 0, hi = l->n;
  while (lo < hi) {
    int mid = (lo + hi) / 2;
    if (l->v[mid].off < off)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

/* Gives [off, off + len) back to the free list, merged with its neighbours. */
static bool free_insert(ext_list *l, size_t off, size_t len) {
  int i = ext_lower(l, off);
  bool left = i > 0 && l->v[i - 1].off + l->v[i - 1].len == off;
  bool right = i < l->n && off + len == l->v[i].off;
  if (left && right) {
    l->v[i - 1].len += len + l->v[i].len;
    ext_remove_at(l, i);
    return true;
  }
  if (left) {
    l->v[i - 1].len += len;
    return true;
  }
  if (right) {
    l->v[i].off = off;
    l->v[i].len += len;
    return true;
  }
  return ext_insert_at(l, i, (ext){off, len, 0, false});
}

/* ---- pools --------------------------------------------------------------------------------------- */

/* A new memfd of size bytes, every page allocated (the daemon then never writes into a hole, which
 * would charge the page to it), sealed against shrinking, growing and further seals, mapped. */
static bool pool_make(pool *p, size_t size) {
  struct rlimit fl; /* ftruncate past RLIMIT_FSIZE would kill the process with SIGXFSZ */
  if (getrlimit(RLIMIT_FSIZE, &fl) == 0 && fl.rlim_cur != RLIM_INFINITY && (rlim_t)size > fl.rlim_cur) return false;
  int fd = memfd_create("segops-pool", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) return false;
  if (ftruncate(fd, (off_t)size) != 0 || fallocate(fd, 0, 0, (off_t)size) != 0 ||
      fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
    close(fd);
    return false;
  }
  void *base = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (base == MAP_FAILED) {
    close(fd);
    return false;
  }
  memset(p, 0, sizeof *p);
  p->base = base;
  p->size = size;
  p->fd = fd;
  if (!free_insert(&p->free, 0, size)) {
    munmap(base, size);
    close(fd);
    return false;
  }
  return true;
}

segops_mem *segops_mem_new(void) {
  pthread_once(&fork_once, register_fork);
  int probe = memfd_create("segops-probe", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (probe < 0) return NULL;
  close(probe);
  segops_mem *m = calloc(1, sizeof *m);
  if (!m) return NULL;
  pthread_mutex_init(&m->mu, NULL);
  m->epoch = atomic_load(&fork_epoch);
  m->next_size = FIRST_POOL;
  return m;
}

void segops_mem_free_all(segops_mem *m) {
  if (!m) return;
  while (m->hangups) {
    hangup *h = m->hangups;
    m->hangups = h->next;
    close(h->fd);
    free(h);
  }
  int n = atomic_load(&m->npools);
  for (int k = 0; k < n; k++) {
    pool *p = &m->pools[k];
    munmap(p->base, p->size);
    close(p->fd);
    free(p->free.v);
    free(p->used.v);
  }
  pthread_mutex_destroy(&m->mu);
  free(m);
}

/* First fit in pool p: the offset, or (size_t)-1. */
static size_t pool_take(pool *p, size_t len) {
  for (int i = 0; i < p->free.n; i++) {
    ext *e = &p->free.v[i];
    if (e->len < len) continue;
    size_t off = e->off;
    int u = ext_lower(&p->used, off);
    if (!ext_insert_at(&p->used, u, (ext){off, len, 0, false})) return (size_t)-1;
    if (e->len == len) {
      ext_remove_at(&p->free, i);
    } else {
      e->off += len;
      e->len -= len;
    }
    return off;
  }
  return (size_t)-1;
}

/* Under m->mu: the blocks of channels whose daemon has closed its end are unheld. A socket the
 * daemon closed reports POLLHUP (both directions shut: the client shut its own sending side). */
static void sweep_hangups(segops_mem *m) {
  for (hangup **pp = &m->hangups; *pp;) {
    hangup *h = *pp;
    struct pollfd pf = {h->fd, 0, 0};
    if (poll(&pf, 1, 0) == 0 || !(pf.revents & (POLLHUP | POLLERR | POLLNVAL))) {
      pp = &h->next;
      continue;
    }
    *pp = h->next;
    for (int i = 0; i < h->n; i++) unhold_locked(m, h->blocks[i]);
    close(h->fd);
    free(h);
  }
}

void *segops_mem_alloc(segops_mem *m, size_t nbytes) {
  if (!m) return NULL;
  size_t len = nbytes ? nbytes : 1;
  if (len > SIZE_MAX / 2) return NULL;
  len = (len + ALIGN - 1) & ~(size_t)(ALIGN - 1);
  pthread_mutex_lock(&m->mu);
  check_fork(m);
  sweep_hangups(m);
  void *out = NULL;
  int n = atomic_load(&m->npools);
  for (int k = 0; k < n && !out; k++) {
    pool *p = &m->pools[k];
    if (p->inherited) continue;
    size_t off = pool_take(p, len);
    if (off != (size_t)-1) out = p->base + off;
  }
  if (!out && n < MAX_POOLS) {
    size_t size = m->next_size;
    if (size < len) size = (len + POOL_ROUND - 1) & ~(POOL_ROUND - 1);
    pool *p = &m->pools[n];
    if (pool_make(p, size)) {
      atomic_store(&m->npools, n + 1); /* published: locate sees it from here on */
      m->next_size = m->next_size < MAX_STEP ? m->next_size * 2 : m->next_size + MAX_STEP;
      size_t off = pool_take(p, len);
      if (off != (size_t)-1) out = p->base + off;
    }
  }
  pthread_mutex_unlock(&m->mu);
  return out;
}

/* The used extent of one of this process's own pools that holds q: its pool and index, or NULL. */
static pool *find_used(segops_mem *m, const unsigned char *q, int *at) {
  int n = atomic_load(&m->npools);
  for (int k = 0; k < n; k++) {
    pool *p = &m->pools[k];
    if (q < p->base || q >= p->base + p->size) continue;
    if (p->inherited) return NULL; /* the parent's: it frees it there */
    size_t off = (size_t)(q - p->base);
    int i = ext_lower(&p->used, off + 1) - 1; /* the last block starting at or before off */
    if (i < 0 || off >= p->used.v[i].off + p->used.v[i].len) return NULL;
    *at = i;
    return p;
  }
  return NULL;
}

/* Gives used extent i of p back to the free list. */
static void give_back(pool *p, int i) {
  ext e = p->used.v[i];
  ext_remove_at(&p->used, i);
  if (!free_insert(&p->free, e.off, e.len)) ext_insert_at(&p->used, i, e); /* no memory: keep it taken */
}

void segops_mem_release(segops_mem *m, void *ptr) {
  if (!m || !ptr) return;
  pthread_mutex_lock(&m->mu);
  check_fork(m);
  int i;
  pool *p = find_used(m, ptr, &i);
  if (p && p->used.v[i].off == (size_t)((unsigned char *)ptr - p->base)) {
    if (p->used.v[i].holds)
      p->used.v[i].released = true; /* a daemon may still write it: given back when unheld */
    else
      give_back(p, i);
  }
  pthread_mutex_unlock(&m->mu);
}

bool segops_mem_hold(segops_mem *m, const void *ptr) {
  if (!m || !ptr) return false;
  pthread_mutex_lock(&m->mu);
  check_fork(m);
  int i;
  pool *p = find_used(m, ptr, &i);
  if (p) p->used.v[i].holds++;
  pthread_mutex_unlock(&m->mu);
  return p != NULL;
}

static void unhold_locked(segops_mem *m, const void *ptr) {
  int i;
  pool *p = find_used(m, ptr, &i);
  if (!p || !p->used.v[i].holds) return;
  if (--p->used.v[i].holds == 0 && p->used.v[i].released) give_back(p, i);
}

void segops_mem_unhold(segops_mem *m, const void *ptr) {
  if (!m || !ptr) return;
  pthread_mutex_lock(&m->mu);
  check_fork(m);
  unhold_locked(m, ptr);
  pthread_mutex_unlock(&m->mu);
}

bool segops_mem_unhold_on_hangup(segops_mem *m, int fd, void *const *blocks, int n) {
  if (!m || n <= 0) return false;
  hangup *h = malloc(sizeof *h + (size_t)n * sizeof h->blocks[0]);
  if (!h) return false;
  h->fd = fd;
  h->n = n;
  memcpy(h->blocks, blocks, (size_t)n * sizeof h->blocks[0]);
  pthread_mutex_lock(&m->mu);
  check_fork(m);
  h->next = m->hangups;
  m->hangups = h;
  pthread_mutex_unlock(&m->mu);
  return true;
}

bool segops_mem_locate(segops_mem *m, const void *ptr, size_t nbytes, uint32_t *pool_id, uint64_t *offset) {
  if (!m || !ptr) return false;
  const unsigned char *q = ptr;
  int n = atomic_load_explicit(&m->npools, memory_order_acquire);
  for (int k = 0; k < n; k++) {
    const pool *p = &m->pools[k];
    if (q < p->base || q > p->base + p->size) continue;
    size_t off = (size_t)(q - p->base);
    if (nbytes > p->size - off) return false;
    *pool_id = (uint32_t)k;
    *offset = off;
    return true;
  }
  return false;
}

uint32_t segops_mem_generation(segops_mem *m) { return m ? (uint32_t)atomic_load(&m->npools) : 0; }

int segops_mem_pool_count(segops_mem *m) { return m ? atomic_load(&m->npools) : 0; }

int segops_mem_pool_fd(segops_mem *m, int k, size_t *size) {
  if (!m || k < 0 || k >= atomic_load(&m->npools)) return -1;
  if (size) *size = m->pools[k].size;
  return m->pools[k].fd;
}

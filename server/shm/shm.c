/* shm.c: the system shared-memory registry (see shm.h). */
#include "shm.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "errors.h"
#include "log.h"
#include "shm_guard.h"

typedef struct region {
  char name[SEGOPS_SHM_NAME_MAX + 1];
  char key[SEGOPS_SHM_KEY_MAX + 1];
  uint64_t offset, byte_size;
  int fd;
  char *map;            /* the mapping: the object's pages from offset rounded down to a page */
  size_t map_len;       /* page-rounded */
  size_t delta;         /* offset - the mapping's file offset */
  atomic_int refs;      /* the registry's own plus one per use */
  atomic_int truncated; /* set by the SIGBUS guard: part of the mapping is zero pages now */
  int slot;             /* in the guard table */
  bool pinned;
  const segops_backend *be;
  struct region *next;
} region;

struct segops_shm {
  pthread_mutex_t mu;
  region *head;
  uint64_t registered, max_bytes;
  const segops_backend *be;
};

/* ---- names --------------------------------------------------------------------------------- */

static bool printable_no_slash(const char *s, size_t len) {
  for (size_t i = 0; i < len; i++)
    if ((unsigned char)s[i] <= 0x20 || (unsigned char)s[i] >= 0x7f || s[i] == '/') return false;
  return true;
}

bool segops_shm_key_ok(const char *s, size_t len) {
  if (len < 2 || len > SEGOPS_SHM_KEY_MAX || s[0] != '/') return false;
  if ((len == 2 && s[1] == '.') || (len == 3 && s[1] == '.' && s[2] == '.')) return false;
  return printable_no_slash(s + 1, len - 1);
}

bool segops_shm_name_ok(const char *s, size_t len) {
  return len >= 1 && len <= SEGOPS_SHM_NAME_MAX && printable_no_slash(s, len);
}

/* ---- regions ------------------------------------------------------------------------------- */

static void region_destroy(region *g) {
  segops_guard_remove(g->slot);
  if (g->pinned && g->be && g->be->host_unregister) g->be->host_unregister(g->be->ctx, g->map);
  munmap(g->map, g->map_len);
  close(g->fd);
  free(g);
}

static void region_put(region *g) {
  if (atomic_fetch_sub(&g->refs, 1) == 1) region_destroy(g);
}

/* Under reg->mu. */
static region *find(segops_shm *reg, const char *name, size_t len) {
  for (region *g = reg->head; g; g = g->next)
    if (strlen(g->name) == len && memcmp(g->name, name, len) == 0) return g;
  return NULL;
}

segops_shm *segops_shm_new(uint64_t max_bytes, const segops_backend *backend) {
  if (!segops_guard_install()) return NULL;
  segops_shm *reg = calloc(1, sizeof *reg);
  if (!reg) return NULL;
  pthread_mutex_init(&reg->mu, NULL);
  reg->max_bytes = max_bytes;
  reg->be = backend;
  return reg;
}

void segops_shm_free(segops_shm *reg) {
  if (!reg) return;
  segops_shm_unregister_all(reg);
  pthread_mutex_destroy(&reg->mu);
  free(reg);
}

static const char *show(char *buf, size_t cap, const char *s, size_t len) {
  size_t o = 0;
  for (size_t i = 0; i < len && o + 4 < cap && i < 64; i++) {
    unsigned char c = (unsigned char)s[i];
    buf[o++] = c >= 0x20 && c < 0x7f && c != '"' && c != '\\' && c != '\'' ? (char)c : '?';
  }
  if (len > 64 && o + 4 < cap) buf[o++] = '.', buf[o++] = '.', buf[o++] = '.';
  buf[o] = 0;
  return buf;
}

int segops_shm_register(segops_shm *reg, const char *name, size_t name_len, const char *key, size_t key_len,
                        uint64_t offset, uint64_t byte_size, char *err, size_t errlen) {
  char nb[80], kb[80];
  show(nb, sizeof nb, name, name_len);
  show(kb, sizeof kb, key, key_len);
  if (!segops_shm_name_ok(name, name_len))
    return segops_errf(SEGOPS_E_INVALID_ARGUMENT, err, errlen,
                       "shared-memory region name '%s' is not usable (1 to %d printable characters, no '/')", nb,
                       SEGOPS_SHM_NAME_MAX);
  if (!segops_shm_key_ok(key, key_len))
    return segops_errf(SEGOPS_E_INVALID_ARGUMENT, err, errlen,
                       "region '%s': key '%s' is not a plain shm object name ('/name': a '/', then 1 to %d "
                       "printable characters with no further '/')",
                       nb, kb, SEGOPS_SHM_KEY_MAX - 1);
  if (byte_size == 0)
    return segops_errf(SEGOPS_E_INVALID_ARGUMENT, err, errlen, "region '%s': byte_size must be at least 1", nb);
  if (offset > UINT64_MAX - byte_size || offset + byte_size > (uint64_t)INT64_MAX)
    return segops_errf(SEGOPS_E_INVALID_ARGUMENT, err, errlen, "region '%s': offset + byte_size overflows", nb);
  char keyz[SEGOPS_SHM_KEY_MAX + 1];
  memcpy(keyz, key, key_len);
  keyz[key_len] = 0;

  pthread_mutex_lock(&reg->mu);
  int rc = SEGOPS_OK;
  if (find(reg, name, name_len)) {
    rc = segops_errf(SEGOPS_E_INVALID_ARGUMENT, err, errlen,
                     "shared-memory region '%s' is already registered (unregister it first)", nb);
  } else if (byte_size > reg->max_bytes - (reg->registered < reg->max_bytes ? reg->registered : reg->max_bytes) ||
             reg->registered > reg->max_bytes) {
    rc = segops_errf(SEGOPS_E_INVALID_ARGUMENT, err, errlen,
                     "region '%s': registering %" PRIu64 " bytes would exceed --max-shm-bytes (%" PRIu64
                     " bytes; %" PRIu64 " registered)",
                     nb, byte_size, reg->max_bytes, reg->registered);
  }
  if (rc) {
    pthread_mutex_unlock(&reg->mu);
    return rc;
  }
  /* Claimed now (so concurrent registrations cannot pass the cap together), undone on failure. */
  reg->registered += byte_size;
  pthread_mutex_unlock(&reg->mu);

  region *g = calloc(1, sizeof *g);
  int fd = -1;
  struct stat st;
  if (!g) {
    rc = segops_errf(SEGOPS_E_NOMEM, err, errlen, "out of memory registering region '%s'", nb);
    goto fail;
  }
  fd = shm_open(keyz, O_RDWR, 0);
  if (fd < 0) {
    rc = segops_errf(SEGOPS_E_INVALID_ARGUMENT, err, errlen, "region '%s': cannot open shm object '%s': %s", nb, kb,
                     strerror(errno));
    goto fail;
  }
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    rc = segops_errf(SEGOPS_E_INVALID_ARGUMENT, err, errlen, "region '%s': '%s' is not a shm object", nb, kb);
    goto fail;
  }
  if ((uint64_t)st.st_size < offset + byte_size) {
    rc = segops_errf(SEGOPS_E_INVALID_ARGUMENT, err, errlen,
                     "region '%s': offset %" PRIu64 " + byte_size %" PRIu64 " = %" PRIu64
                     " is larger than shm object '%s' (%lld bytes)",
                     nb, offset, byte_size, offset + byte_size, kb, (long long)st.st_size);
    goto fail;
  }
  uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
  uint64_t moff = offset & ~(uint64_t)(page - 1);
  g->delta = (size_t)(offset - moff);
  g->map_len = (g->delta + (size_t)byte_size + page - 1) & ~(size_t)(page - 1);
  void *m = mmap(NULL, g->map_len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, (off_t)moff);
  if (m == MAP_FAILED) {
    rc = segops_errf(SEGOPS_E_INVALID_ARGUMENT, err, errlen, "region '%s': cannot map shm object '%s': %s", nb, kb,
                     strerror(errno));
    goto fail;
  }
  g->map = m;
  g->fd = fd;
  memcpy(g->name, name, name_len);
  memcpy(g->key, key, key_len);
  g->offset = offset;
  g->byte_size = byte_size;
  atomic_init(&g->refs, 1);
  atomic_init(&g->truncated, 0);
  g->slot = segops_guard_add(g->map, g->map_len, &g->truncated);
  if (g->slot < 0) {
    munmap(m, g->map_len);
    rc = segops_errf(SEGOPS_E_INVALID_ARGUMENT, err, errlen, "region '%s': too many regions registered (at most %d)",
                     nb, SEGOPS_SHM_MAX_REGIONS);
    goto fail;
  }
  g->be = reg->be;
  if (g->be && g->be->host_register) g->pinned = g->be->host_register(g->be->ctx, g->map, g->map_len) == 0;

  pthread_mutex_lock(&reg->mu);
  if (find(reg, name, name_len)) { /* registered meanwhile by another request */
    reg->registered -= byte_size;
    pthread_mutex_unlock(&reg->mu);
    region_destroy(g);
    return segops_errf(SEGOPS_E_INVALID_ARGUMENT, err, errlen,
                       "shared-memory region '%s' is already registered (unregister it first)", nb);
  }
  g->next = reg->head;
  reg->head = g;
  pthread_mutex_unlock(&reg->mu);
  SEGOPS_LOGD("shm: registered region '%s' = %s [%" PRIu64 ", +%" PRIu64 ")%s", nb, kb, offset, byte_size,
              g->pinned ? ", pinned" : "");
  return SEGOPS_OK;

fail:
  if (fd >= 0) close(fd);
  free(g);
  pthread_mutex_lock(&reg->mu);
  reg->registered -= byte_size;
  pthread_mutex_unlock(&reg->mu);
  return rc;
}

int segops_shm_unregister(segops_shm *reg, const char *name, size_t name_len, char *err, size_t errlen) {
  pthread_mutex_lock(&reg->mu);
  region **pp = &reg->head;
  while (*pp && !(strlen((*pp)->name) == name_len && memcmp((*pp)->name, name, name_len) == 0)) pp = &(*pp)->next;
  region *g = *pp;
  if (g) {
    *pp = g->next;
    reg->registered -= g->byte_size;
  }
  pthread_mutex_unlock(&reg->mu);
  if (!g) {
    char nb[80];
    return segops_errf(SEGOPS_E_NOT_FOUND, err, errlen, "shared-memory region '%s' is not registered",
                       show(nb, sizeof nb, name, name_len));
  }
  region_put(g);
  return SEGOPS_OK;
}

void segops_shm_unregister_all(segops_shm *reg) {
  pthread_mutex_lock(&reg->mu);
  region *g = reg->head;
  reg->head = NULL;
  reg->registered = 0;
  pthread_mutex_unlock(&reg->mu);
  while (g) {
    region *next = g->next;
    region_put(g);
    g = next;
  }
}

int segops_shm_status(segops_shm *reg, const char *name, size_t name_len, segops_shm_info *out, int cap) {
  pthread_mutex_lock(&reg->mu);
  int n = 0;
  for (region *g = reg->head; g; g = g->next) {
    if (name && !(strlen(g->name) == name_len && memcmp(g->name, name, name_len) == 0)) continue;
    if (n < cap) {
      segops_shm_info *i = &out[n];
      memcpy(i->name, g->name, sizeof i->name);
      memcpy(i->key, g->key, sizeof i->key);
      i->offset = g->offset;
      i->byte_size = g->byte_size;
    }
    n++;
  }
  pthread_mutex_unlock(&reg->mu);
  return name && n == 0 ? SEGOPS_E_NOT_FOUND : n;
}

uint64_t segops_shm_registered_bytes(segops_shm *reg) {
  pthread_mutex_lock(&reg->mu);
  uint64_t v = reg->registered;
  pthread_mutex_unlock(&reg->mu);
  return v;
}

uint64_t segops_shm_max_bytes(const segops_shm *reg) { return reg->max_bytes; }

/* The object's size now, or -1. */
static long long object_size(const region *g) {
  struct stat st;
  return fstat(g->fd, &st) == 0 ? (long long)st.st_size : -1;
}

static int truncated_msg(const region *g, long long size, char *err, size_t errlen) {
  return segops_errf(SEGOPS_E_INVALID_ARGUMENT, err, errlen,
                     "shared-memory region '%s' was truncated by its owner (shm object '%s' is %lld bytes, the "
                     "region needs %" PRIu64 "); unregister and register it again",
                     g->name, g->key, size, g->offset + g->byte_size);
}

int segops_shm_acquire(segops_shm *reg, const char *name, size_t name_len, uint64_t offset, uint64_t byte_size,
                       segops_shm_ref *ref, char *err, size_t errlen) {
  memset(ref, 0, sizeof *ref);
  char nb[80];
  pthread_mutex_lock(&reg->mu);
  region *g = find(reg, name, name_len);
  if (g) atomic_fetch_add(&g->refs, 1);
  pthread_mutex_unlock(&reg->mu);
  if (!g)
    return segops_errf(SEGOPS_E_NOT_FOUND, err, errlen, "shared-memory region '%s' is not registered",
                       show(nb, sizeof nb, name, name_len));
  if (offset > g->byte_size || byte_size > g->byte_size - offset) {
    int rc =
        segops_errf(SEGOPS_E_INVALID_ARGUMENT, err, errlen,
                    "bytes [%" PRIu64 ", %" PRIu64 ") are outside shared-memory region '%s' (byte_size %" PRIu64 ")",
                    offset, offset > UINT64_MAX - byte_size ? UINT64_MAX : offset + byte_size, g->name, g->byte_size);
    region_put(g);
    return rc;
  }
  long long size = object_size(g);
  if (atomic_load(&g->truncated) || size < 0 || (uint64_t)size < g->offset + g->byte_size) {
    int rc = truncated_msg(g, size, err, errlen);
    region_put(g);
    return rc;
  }
  ref->ptr = g->map + g->delta + offset;
  ref->len = (size_t)byte_size;
  ref->region = g;
  return SEGOPS_OK;
}

bool segops_shm_ref_damaged(const segops_shm_ref *ref, char *err, size_t errlen) {
  const region *g = ref->region;
  if (!g) return false;
  long long size = object_size(g);
  if (!atomic_load(&g->truncated) && size >= 0 && (uint64_t)size >= g->offset + g->byte_size) return false;
  truncated_msg(g, size, err, errlen);
  return true;
}

const char *segops_shm_ref_name(const segops_shm_ref *ref) {
  return ref->region ? ((const region *)ref->region)->name : "";
}

void segops_shm_release(segops_shm_ref *ref) {
  if (ref->region) region_put(ref->region);
  memset(ref, 0, sizeof *ref);
}

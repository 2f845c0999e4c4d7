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
#include <sys/statvfs.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "errors.h"
#include "log.h"
#include "shares.h"
#include "shm_guard.h"

typedef struct region {
  char name[SEGOPS_SHM_NAME_MAX + 1];
  char key[SEGOPS_SHM_KEY_MAX + 1];
  uint64_t offset, byte_size;
  int64_t owner; /* the uid that registered it */
  dev_t dev;     /* the object's identity, for overlaps */
  ino_t ino;
  char *map;            /* the mapping: the object's pages from offset rounded down to a page */
  size_t map_len;       /* page-rounded */
  size_t delta;         /* offset - the mapping's file offset */
  atomic_int refs;      /* the registry's own plus one per use */
  atomic_int truncated; /* set by the SIGBUS guard: part of the mapping is zero pages now */
  atomic_int no_room;   /* and the fault was a write the full shm filesystem had no page for */
  int slot;             /* in the guard table */
  bool pinned;
  bool charged; /* map_len counts against the owner's share of mapped memory (shares.h) */
  const segops_backend *be;
  struct region *next;
} region;

struct segops_shm {
  pthread_mutex_t mu;
  region *head;
  uint64_t registered, max_bytes;
  uint64_t bytes_per_uid;           /* of max_bytes, one uid's */
  int max_regions, regions_per_uid; /* regions at once, and one uid's */
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
  if (g->pinned) segops_share_give(SEGOPS_SHARE_PINNED, g->owner, g->map_len);
  if (g->charged) segops_share_give(SEGOPS_SHARE_MAPPED, g->owner, g->map_len);
  munmap(g->map, g->map_len);
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
  segops_shm_set_shares(reg, max_bytes / 2, SEGOPS_SHM_MAX_REGIONS, SEGOPS_SHM_MAX_REGIONS / 2);
  reg->be = backend;
  return reg;
}

void segops_shm_set_shares(segops_shm *reg, uint64_t bytes_per_uid, int max_regions, int regions_per_uid) {
  reg->bytes_per_uid = bytes_per_uid < reg->max_bytes ? bytes_per_uid : reg->max_bytes;
  reg->max_regions = max_regions;
  reg->regions_per_uid = regions_per_uid < max_regions ? regions_per_uid : max_regions;
}

static void unregister_some(segops_shm *reg, int64_t uid, bool all);

void segops_shm_free(segops_shm *reg) {
  if (!reg) return;
  unregister_some(reg, -1, true);
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

/* The checks of a registration that need no object: the caller's uid, name, key and sizes. */
static int check_request(int64_t uid, const char *name, size_t name_len, const char *key, size_t key_len,
                         uint64_t offset, uint64_t byte_size, const char *nb, const char *kb, char *err,
                         size_t errlen) {
  if (uid < 0)
    return segops_errf(SEGOPS_E_INVALID_ARGUMENT, err, errlen,
                       "region '%s': shared memory is served only to clients on this host whose uid the kernel "
                       "reports (a unix socket, or TCP on a loopback address); this connection's peer has none",
                       nb);
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
  return SEGOPS_OK;
}

/* Under reg->mu: whether `name` is free for uid and byte_size fits the cap (then claimed, so that
 * concurrent registrations cannot pass the cap together; undone on failure). */
static int claim(segops_shm *reg, int64_t uid, const char *name, size_t name_len, uint64_t byte_size, const char *nb,
                 char *err, size_t errlen) {
  region *g = find(reg, name, name_len);
  if (g && g->owner == uid)
    return segops_errf(SEGOPS_E_INVALID_ARGUMENT, err, errlen,
                       "shared-memory region '%s' is already registered (unregister it first)", nb);
  if (g)
    return segops_errf(SEGOPS_E_INVALID_ARGUMENT, err, errlen,
                       "shared-memory region name '%s' is in use by another user; choose another name", nb);
  uint64_t mine = 0;
  int regions = 0, my_regions = 0;
  for (region *r = reg->head; r; r = r->next, regions++)
    if (r->owner == uid) mine += r->byte_size, my_regions++;
  if (regions >= reg->max_regions || my_regions >= reg->regions_per_uid)
    return segops_errf(SEGOPS_E_RESOURCE_EXHAUSTED, err, errlen,
                       "region '%s': %d regions are registered%s (at most %d, --max-shm-regions; %d per uid, "
                       "--max-shm-regions-per-uid); unregister some first",
                       nb, regions >= reg->max_regions ? regions : my_regions,
                       regions >= reg->max_regions ? "" : " by this uid", reg->max_regions, reg->regions_per_uid);
  /* One uid's share, so that another's registration always finds room. */
  uint64_t share = reg->bytes_per_uid;
  if (byte_size > share - (mine < share ? mine : share))
    return segops_errf(SEGOPS_E_INVALID_ARGUMENT, err, errlen,
                       "region '%s': registering %" PRIu64
                       " bytes would exceed this uid's share of --max-shm-bytes "
                       "(--max-shm-bytes-per-uid: %" PRIu64 " bytes; %" PRIu64 " registered by this uid)",
                       nb, byte_size, share, mine);
  if (byte_size > reg->max_bytes - (reg->registered < reg->max_bytes ? reg->registered : reg->max_bytes) ||
      reg->registered > reg->max_bytes)
    return segops_errf(SEGOPS_E_INVALID_ARGUMENT, err, errlen,
                       "region '%s': registering %" PRIu64 " bytes would exceed --max-shm-bytes (%" PRIu64
                       " bytes; %" PRIu64 " registered)",
                       nb, byte_size, reg->max_bytes, reg->registered);
  reg->registered += byte_size;
  return SEGOPS_OK;
}

#define SHM_HUGETLBFS_MAGIC 0x958458f6

/* Opens the object (never through a symlink, never blocking on a FIFO) and checks, on the opened
 * descriptor, that it is a regular object uid may read and write itself, and long enough.
 * Returns the descriptor with *st filled, or -1 with a message. */
static int open_object(const char *keyz, int64_t uid, uint64_t end, const char *nb, const char *kb, struct stat *st,
                       int *rc, char *err, size_t errlen) {
  int fd = shm_open(keyz, O_RDWR | O_NOFOLLOW | O_NONBLOCK, 0);
  if (fd < 0) {
    int e = errno;
    *rc = segops_errf(SEGOPS_E_INVALID_ARGUMENT, err, errlen, "region '%s': cannot open shm object '%s': %s%s", nb, kb,
                      strerror(e),
                      e == EACCES ? " (the daemon's uid cannot open it: make it readable and writable by others, or "
                                    "run the daemon as root or as the client's uid)"
                                  : "");
    return -1;
  }
  const char *why = NULL;
  struct statfs fs;
  if (fstat(fd, st) != 0 || !S_ISREG(st->st_mode))
    why = "is not a shm object";
  else if (fstatfs(fd, &fs) == 0 && (unsigned long)fs.f_type == (unsigned long)SHM_HUGETLBFS_MAGIC)
    why = "is a hugetlb object (its huge pages may be gone when the daemon touches them)";
  else if ((int64_t)st->st_uid != uid && (st->st_mode & (S_IROTH | S_IWOTH)) != (S_IROTH | S_IWOTH))
    why = "is not the requesting client's to share";
  if (why) {
    *rc = segops_errf(SEGOPS_E_INVALID_ARGUMENT, err, errlen,
                      "region '%s': shm object '%s' %s: the daemon maps only objects owned by the client's uid "
                      "(%lld here) or readable and writable by others (this one: uid %lld, mode %04o)",
                      nb, kb, why, (long long)uid, (long long)st->st_uid, (unsigned)(st->st_mode & 07777));
  } else if ((uint64_t)st->st_size < end) {
    *rc = segops_errf(SEGOPS_E_INVALID_ARGUMENT, err, errlen,
                      "region '%s': offset + byte_size = %" PRIu64 " is larger than shm object '%s' (%lld bytes)", nb,
                      end, kb, (long long)st->st_size);
  }
  if (why || (uint64_t)st->st_size < end) {
    close(fd);
    return -1;
  }
  return fd;
}

/* Maps [offset, offset+byte_size) of fd into g and takes a guard slot. */
static int map_region(region *g, int fd, uint64_t offset, uint64_t byte_size, int64_t uid, const char *nb,
                      const char *kb, char *err, size_t errlen) {
  uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
  uint64_t moff = offset & ~(uint64_t)(page - 1);
  g->delta = (size_t)(offset - moff);
  g->map_len = (g->delta + (size_t)byte_size + page - 1) & ~(size_t)(page - 1);
  void *m = mmap(NULL, g->map_len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, (off_t)moff);
  if (m == MAP_FAILED)
    return segops_errf(SEGOPS_E_INVALID_ARGUMENT, err, errlen, "region '%s': cannot map shm object '%s': %s", nb, kb,
                       strerror(errno));
  g->map = m;
  atomic_init(&g->refs, 1);
  atomic_init(&g->truncated, 0);
  atomic_init(&g->no_room, 0);
  char what[SEGOPS_SHM_NAME_MAX + 16];
  snprintf(what, sizeof what, "region '%s'", nb);
  int why = segops_share_take(SEGOPS_SHARE_MAPPED, uid, g->map_len);
  if (why) {
    munmap(m, g->map_len);
    return segops_share_refusal(why, SEGOPS_SHARE_MAPPED, uid, g->map_len, what, err, errlen);
  }
  g->owner = uid;
  g->charged = true;
  g->slot = segops_guard_add(g->map, g->map_len, &g->truncated, uid);
  if (g->slot < 0) {
    why = g->slot;
    segops_share_give(SEGOPS_SHARE_MAPPED, uid, g->map_len);
    g->charged = false;
    munmap(m, g->map_len);
    return segops_guard_refusal(why, what, uid, err, errlen);
  }
  return SEGOPS_OK;
}

/* Gives back bytes claimed for a registration that did not complete. */
static void unclaim(segops_shm *reg, uint64_t byte_size) {
  pthread_mutex_lock(&reg->mu);
  reg->registered -= byte_size;
  pthread_mutex_unlock(&reg->mu);
}

/* A new region over [offset, +byte_size) of object keyz, opened with uid's rights and mapped. */
static int new_region(segops_shm *reg, int64_t uid, const char *keyz, uint64_t offset, uint64_t byte_size,
                      const char *nb, const char *kb, region **out, char *err, size_t errlen) {
  region *g = calloc(1, sizeof *g);
  if (!g) return segops_errf(SEGOPS_E_NOMEM, err, errlen, "out of memory registering region '%s'", nb);
  struct stat st;
  int rc = SEGOPS_OK, fd = open_object(keyz, uid, offset + byte_size, nb, kb, &st, &rc, err, errlen);
  if (fd >= 0) rc = map_region(g, fd, offset, byte_size, uid, nb, kb, err, errlen);
  /* The mapping keeps the object; a descriptor per region would let registrations use up the
   * process's descriptors (and libmicrohttpd spins when accept() meets EMFILE). */
  if (fd >= 0) close(fd);
  if (rc) {
    free(g);
    return rc;
  }
  g->offset = offset;
  g->byte_size = byte_size;
  g->owner = uid;
  g->dev = st.st_dev;
  g->ino = st.st_ino;
  g->be = reg->be;
  /* Pinned within the uid's share of pinned memory; beyond it the region is used unpinned. */
  if (g->be && g->be->host_register && segops_share_take(SEGOPS_SHARE_PINNED, uid, g->map_len) == 0) {
    g->pinned = g->be->host_register(g->be->ctx, g->map, g->map_len) == 0;
    if (!g->pinned) segops_share_give(SEGOPS_SHARE_PINNED, uid, g->map_len);
  }
  *out = g;
  return SEGOPS_OK;
}

/* Puts g in the registry under its name, unless another request registered the name meanwhile. */
static int publish(segops_shm *reg, region *g, const char *name, size_t name_len, const char *nb, char *err,
                   size_t errlen) {
  pthread_mutex_lock(&reg->mu);
  if (find(reg, name, name_len)) {
    reg->registered -= g->byte_size;
    pthread_mutex_unlock(&reg->mu);
    region_destroy(g);
    return segops_errf(SEGOPS_E_INVALID_ARGUMENT, err, errlen,
                       "shared-memory region '%s' is already registered (unregister it first)", nb);
  }
  g->next = reg->head;
  reg->head = g;
  pthread_mutex_unlock(&reg->mu);
  return SEGOPS_OK;
}

int segops_shm_register(segops_shm *reg, int64_t uid, const char *name, size_t name_len, const char *key,
                        size_t key_len, uint64_t offset, uint64_t byte_size, char *err, size_t errlen) {
  char nb[80], kb[80];
  show(nb, sizeof nb, name, name_len);
  show(kb, sizeof kb, key, key_len);
  int rc = check_request(uid, name, name_len, key, key_len, offset, byte_size, nb, kb, err, errlen);
  if (rc) return rc;
  char keyz[SEGOPS_SHM_KEY_MAX + 1];
  memcpy(keyz, key, key_len);
  keyz[key_len] = 0;
  pthread_mutex_lock(&reg->mu);
  rc = claim(reg, uid, name, name_len, byte_size, nb, err, errlen);
  pthread_mutex_unlock(&reg->mu);
  if (rc) return rc;
  region *g = NULL;
  rc = new_region(reg, uid, keyz, offset, byte_size, nb, kb, &g, err, errlen);
  if (rc) {
    unclaim(reg, byte_size);
    return rc;
  }
  memcpy(g->name, name, name_len);
  memcpy(g->key, key, key_len);
  rc = publish(reg, g, name, name_len, nb, err, errlen);
  if (rc) return rc;
  SEGOPS_LOGD("shm: uid %lld registered region '%s' = %s [%" PRIu64 ", +%" PRIu64 ")%s", (long long)uid, nb, kb, offset,
              byte_size, g->pinned ? ", pinned" : "");
  return SEGOPS_OK;
}

int segops_shm_unregister(segops_shm *reg, int64_t uid, const char *name, size_t name_len, char *err, size_t errlen) {
  pthread_mutex_lock(&reg->mu);
  region **pp = &reg->head;
  while (*pp && !(strlen((*pp)->name) == name_len && memcmp((*pp)->name, name, name_len) == 0)) pp = &(*pp)->next;
  region *g = *pp && (*pp)->owner == uid ? *pp : NULL; /* another uid's region is not there for this one */
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

/* Takes every region of uid (every region at all when all) off the list; drops them after. */
static void unregister_some(segops_shm *reg, int64_t uid, bool all) {
  region *gone = NULL;
  pthread_mutex_lock(&reg->mu);
  for (region **pp = &reg->head; *pp;) {
    region *g = *pp;
    if (!all && g->owner != uid) {
      pp = &g->next;
      continue;
    }
    *pp = g->next;
    reg->registered -= g->byte_size;
    g->next = gone;
    gone = g;
  }
  pthread_mutex_unlock(&reg->mu);
  while (gone) {
    region *next = gone->next;
    region_put(gone);
    gone = next;
  }
}

void segops_shm_unregister_all(segops_shm *reg, int64_t uid) {
  if (uid >= 0) unregister_some(reg, uid, false);
}

int segops_shm_status(segops_shm *reg, int64_t uid, const char *name, size_t name_len, segops_shm_info *out, int cap) {
  pthread_mutex_lock(&reg->mu);
  int n = 0;
  for (region *g = reg->head; g; g = g->next) {
    if (g->owner != uid) continue;
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

/* True while the object still reaches the region's last page. Without a descriptor there is no
 * size to ask for: the last byte is read instead, and an object cut short of its page faults
 * there, which the SIGBUS guard turns into zero pages and the flag. (A cut inside the last page
 * reads as zeros and is not seen: the bytes are then the owner's zeros, never anyone else's.) */
static bool intact(region *g) {
  if (atomic_load(&g->truncated)) return false;
  volatile const char *last = g->map + g->delta + g->byte_size - 1;
  (void)*last;
  return !atomic_load(&g->truncated);
}

/* No free block left on the filesystem of POSIX shm objects: a written page had no room. */
static bool shm_fs_full(void) {
  struct statvfs v;
  return statvfs("/dev/shm", &v) == 0 && v.f_bavail == 0;
}

static int damaged_msg(region *g, bool written, char *err, size_t errlen) {
  /* A fault of a write finds no page either when the object is too short or when the filesystem
   * is full; the size is not known (no descriptor), the free space is. The write may also have been
   * an earlier one that found the flag set before this use: pinning the region for the GPU
   * (host_register) writes every page at registration. So a full filesystem is said whenever it is
   * full now; `written` only says that this use wrote. */
  (void)written;
  if (shm_fs_full()) atomic_store(&g->no_room, 1);
  if (atomic_load(&g->no_room))
    return segops_errf(SEGOPS_E_INVALID_ARGUMENT, err, errlen,
                       "shared-memory region '%s' could not be written: the shared-memory filesystem (/dev/shm) is "
                       "full; free room there, then unregister and register the region again",
                       g->name);
  return segops_errf(SEGOPS_E_INVALID_ARGUMENT, err, errlen,
                     "shared-memory region '%s' was truncated by its owner (shm object '%s' is now shorter than the "
                     "%" PRIu64 " bytes the region needs); unregister and register it again",
                     g->name, g->key, g->offset + g->byte_size);
}

int segops_shm_acquire(segops_shm *reg, int64_t uid, const char *name, size_t name_len, uint64_t offset,
                       uint64_t byte_size, segops_shm_ref *ref, char *err, size_t errlen) {
  memset(ref, 0, sizeof *ref);
  char nb[80];
  pthread_mutex_lock(&reg->mu);
  region *g = find(reg, name, name_len);
  if (g && g->owner != uid) g = NULL; /* another uid's region: unknown to this one */
  if (g) atomic_fetch_add(&g->refs, 1);
  pthread_mutex_unlock(&reg->mu);
  if (!g)
    return segops_errf(SEGOPS_E_SHM_REGION_UNKNOWN, err, errlen,
                       "shared-memory region '%s' is not registered (register it again: the server may have "
                       "restarted)",
                       show(nb, sizeof nb, name, name_len));
  if (offset > g->byte_size || byte_size > g->byte_size - offset) {
    int rc =
        segops_errf(SEGOPS_E_INVALID_ARGUMENT, err, errlen,
                    "bytes [%" PRIu64 ", %" PRIu64 ") are outside shared-memory region '%s' (byte_size %" PRIu64 ")",
                    offset, offset > UINT64_MAX - byte_size ? UINT64_MAX : offset + byte_size, g->name, g->byte_size);
    region_put(g);
    return rc;
  }
  if (!intact(g)) {
    int rc = damaged_msg(g, false, err, errlen);
    region_put(g);
    return rc;
  }
  ref->ptr = g->map + g->delta + offset;
  ref->len = (size_t)byte_size;
  ref->region = g;
  return SEGOPS_OK;
}

bool segops_shm_ref_damaged(const segops_shm_ref *ref, bool written, char *err, size_t errlen) {
  region *g = ref->region;
  if (!g || !atomic_load(&g->truncated)) return false;
  damaged_msg(g, written, err, errlen);
  return true;
}

bool segops_shm_refs_overlap(const segops_shm_ref *a, const segops_shm_ref *b) {
  const region *ga = a->region, *gb = b->region;
  if (!ga || !gb || !a->len || !b->len || ga->dev != gb->dev || ga->ino != gb->ino) return false;
  /* Object offsets: the region's offset plus the ref's place in the region. */
  uint64_t x = ga->offset + (uint64_t)((const char *)a->ptr - (ga->map + ga->delta));
  uint64_t y = gb->offset + (uint64_t)((const char *)b->ptr - (gb->map + gb->delta));
  return x < y + b->len && y < x + a->len;
}

const char *segops_shm_ref_name(const segops_shm_ref *ref) {
  return ref->region ? ((const region *)ref->region)->name : "";
}

void segops_shm_release(segops_shm_ref *ref) {
  if (ref->region) region_put(ref->region);
  memset(ref, 0, sizeof *ref);
}

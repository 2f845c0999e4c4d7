/* native_mem.c: memory a native-channel client hands the daemon (see native_mem.h). */
#include "native_mem.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "errors.h"
#include "shm_guard.h"

#ifndef F_SEAL_FUTURE_WRITE
#define F_SEAL_FUTURE_WRITE 0x0010
#endif
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif
#ifndef HUGETLBFS_MAGIC
#define HUGETLBFS_MAGIC 0x958458f6
#endif

int segops_native_mem_backed(int fd, uint64_t size, const char *what, char *err, size_t errlen) {
  struct statfs fs;
  if (fstatfs(fd, &fs) == 0 && (unsigned long)fs.f_type == (unsigned long)HUGETLBFS_MAGIC)
    return segops_errf(SEGOPS_E_INVALID_ARGUMENT, err, errlen,
                       "%s is a hugetlb object: its huge pages may be gone when the daemon touches them (a SIGBUS "
                       "the daemon cannot contain); use memory of normal pages",
                       what);
  /* What the client paid for: its allocated pages (st_blocks counts fallocated ones, which
   * SEEK_HOLE reports as holes until they are written). */
  struct stat st;
  if (fstat(fd, &st) != 0 || (uint64_t)st.st_blocks * 512u < size)
    return segops_errf(SEGOPS_E_INVALID_ARGUMENT, err, errlen,
                       "%s is not fully backed (%llu of its %llu bytes allocated): the daemon would pay for the "
                       "pages it touches; allocate every page first (fallocate, or write it)",
                       what, (unsigned long long)st.st_blocks * 512u, (unsigned long long)size);
  return SEGOPS_OK;
}

/* What the descriptor is, before anything is mapped: SEGOPS_OK or an error naming the rule. */
static int check_fd(int fd, uint64_t expect, uint64_t room, const char *what, struct stat *st, char *err,
                    size_t errlen) {
  if (fstat(fd, st) != 0)
    return segops_errf(SEGOPS_E_INVALID_ARGUMENT, err, errlen, "%s: cannot stat the descriptor: %s", what,
                       strerror(errno));
  if (!S_ISREG(st->st_mode))
    return segops_errf(SEGOPS_E_INVALID_ARGUMENT, err, errlen,
                       "%s is not a regular file (a memfd from memfd_create is expected)", what);
  int fl = fcntl(fd, F_GETFL);
  if (fl < 0 || (fl & O_ACCMODE) != O_RDWR)
    return segops_errf(SEGOPS_E_INVALID_ARGUMENT, err, errlen,
                       "%s is not open read-write (the daemon writes outputs into it): hand over the memfd itself",
                       what);
  int seals = fcntl(fd, F_GET_SEALS);
  if (seals < 0)
    return segops_errf(SEGOPS_E_INVALID_ARGUMENT, err, errlen,
                       "%s is not a memfd (it cannot carry seals): create it with memfd_create(MFD_ALLOW_SEALING)",
                       what);
  if (!(seals & F_SEAL_SHRINK))
    return segops_errf(SEGOPS_E_INVALID_ARGUMENT, err, errlen,
                       "%s is not sealed against shrinking: add F_SEAL_SHRINK (fcntl F_ADD_SEALS) before handing it "
                       "over",
                       what);
  if (seals & (F_SEAL_WRITE | F_SEAL_FUTURE_WRITE))
    return segops_errf(SEGOPS_E_INVALID_ARGUMENT, err, errlen,
                       "%s is sealed against writing; the daemon writes outputs into it", what);

  uint64_t size = (uint64_t)st->st_size;
  if (size == 0) return segops_errf(SEGOPS_E_INVALID_ARGUMENT, err, errlen, "%s is empty", what);
  if (expect && size != expect)
    return segops_errf(SEGOPS_E_INVALID_ARGUMENT, err, errlen, "%s is %" PRIu64 " bytes, but its message says %" PRIu64,
                       what, size, expect);
  if (size > room || size > (uint64_t)SIZE_MAX / 2)
    return segops_errf(SEGOPS_E_RESOURCE_EXHAUSTED, err, errlen,
                       "%s is %" PRIu64 " bytes, more than this channel may still hand over (%" PRIu64
                       " bytes; --native-max-map-bytes)",
                       what, size, room);
  return segops_native_mem_backed(fd, size, what, err, errlen);
}

int segops_native_mem_open(segops_native_mem *m, int fd, uint64_t expect, uint64_t room, int64_t uid, const char *what,
                           char *err, size_t errlen) {
  memset(m, 0, sizeof *m);
  m->fd = -1;
  m->guard = -1;
  struct stat st;
  int rc = check_fd(fd, expect, room, what, &st, err, errlen);
  if (rc) {
    close(fd);
    return rc;
  }
  size_t size = (size_t)st.st_size;
  void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    rc = segops_errf(SEGOPS_E_INVALID_ARGUMENT, err, errlen, "%s: cannot map it read-write: %s", what, strerror(errno));
    close(fd);
    return rc;
  }
  close(fd); /* the mapping holds the object: no descriptor per pool */
  /* Its pages are allocated (the check above: the client paid for them); mapping them all now
   * makes every one of them count as present (mincore), so that before each call a hole punched
   * since is told apart from a page allocated and not yet written (segops_native_range_backed). */
  if (madvise(p, size, MADV_POPULATE_WRITE) != 0) {
    if (errno != EINVAL) {
      rc =
          segops_errf(SEGOPS_E_INVALID_ARGUMENT, err, errlen, "%s: cannot map in its pages: %s", what, strerror(errno));
      munmap(p, size);
      return rc;
    }
    long pg = sysconf(_SC_PAGESIZE);
    for (size_t at = 0; at<size; at += pg> 0 ? (size_t)pg : 4096u) /* before Linux 5.14: a read each */
      (void)*((volatile unsigned char *)p + at);
  }
  atomic_init(&m->damaged, 0);
  m->guard = segops_guard_add(p, size, &m->damaged, uid);
  if (m->guard < 0) {
    int why = m->guard;
    munmap(p, size);
    return segops_guard_refusal(why, what, uid, err, errlen);
  }
  m->base = p;
  m->size = size;
  m->fd = -1;
  m->dev = (unsigned long long)st.st_dev;
  m->ino = (unsigned long long)st.st_ino;
  return SEGOPS_OK;
}

bool segops_native_mem_pin(segops_native_mem *m, const segops_backend *be) {
  if (!m->base || m->pinned || !be || !be->host_register) return false;
  m->pinned = be->host_register(be->ctx, m->base, m->size) == 0;
  return m->pinned;
}

void segops_native_mem_close(segops_native_mem *m, const segops_backend *be) {
  if (m->pinned && be && be->host_unregister) be->host_unregister(be->ctx, m->base);
  m->pinned = false;
  segops_guard_remove(m->guard);
  m->guard = -1;
  if (m->base) munmap(m->base, m->size);
  m->base = NULL;
  if (m->fd >= 0) close(m->fd);
  m->fd = -1;
}

int segops_native_range_backed(const unsigned char *base, uint64_t offset, uint64_t nbytes, uint64_t *missing) {
  if (nbytes == 0) return 1;
  long pg = sysconf(_SC_PAGESIZE);
  uint64_t page = pg > 0 ? (uint64_t)pg : 4096u;
  uint64_t first = offset / page * page, end = offset + nbytes;
  unsigned char vec[1024];
  for (uint64_t at = first; at < end;) {
    uint64_t pages = (end - at + page - 1) / page;
    if (pages > sizeof vec) pages = sizeof vec;
    if (mincore((void *)(base + at), (size_t)(pages * page), vec) != 0) return -1;
    for (uint64_t k = 0; k < pages; k++)
      if (!(vec[k] & 1)) {
        *missing = at + k * page;
        return 0;
      }
    at += pages * page;
  }
  return 1;
}

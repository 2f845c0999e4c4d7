/* native_mem.c: memory a native-channel client hands the daemon (see native_mem.h). */
#include "native_mem.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "errors.h"
#include "shm_guard.h"

#ifndef F_SEAL_FUTURE_WRITE
#define F_SEAL_FUTURE_WRITE 0x0010
#endif

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
  return SEGOPS_OK;
}

int segops_native_mem_open(segops_native_mem *m, int fd, uint64_t expect, uint64_t room, const char *what, char *err,
                           size_t errlen) {
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
  atomic_init(&m->damaged, 0);
  m->guard = segops_guard_add(p, size, &m->damaged);
  if (m->guard < 0) {
    munmap(p, size);
    close(fd);
    return segops_errf(SEGOPS_E_RESOURCE_EXHAUSTED, err, errlen,
                       "%s: the daemon guards %d mappings at most, and every one is in use", what, SEGOPS_GUARD_SLOTS);
  }
  m->base = p;
  m->size = size;
  m->fd = fd;
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

/* native_mem.h: memory a native-channel client hands the daemon (its ring and its pools): the
 * checks a memfd must pass, the mapping, the SIGBUS guard over it and its pinning for device
 * copies. The daemon never opens memory by name: only a descriptor the client passed. */
#ifndef SEGOPS_NATIVE_MEM_H
#define SEGOPS_NATIVE_MEM_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backend.h"

typedef struct {
  unsigned char *base; /* the mapping, read-write, MAP_SHARED; NULL when closed */
  size_t size;         /* the memfd's size at the hand-over */
  int fd;              /* owned; -1 when closed */
  unsigned long long dev, ino;
  atomic_int damaged; /* set by the SIGBUS guard: part of the mapping is zero pages now */
  int guard;          /* slot in the guard table, or -1 */
  bool pinned;        /* registered with the backend (host_register) */
} segops_native_mem;

/* Checks the memfd fd (taken over: closed in every case, the mapping keeps the object) and maps
 * it: a regular file open read-write, a memfd sealed against shrinking (F_SEAL_SHRINK) and not
 * against writing, fully backed and not hugetlb (segops_native_mem_backed), of at least 1 byte and
 * at most `room` bytes, and of exactly `expect` bytes when expect > 0; its guard slot is held
 * for uid (segops_guard_add: a uid's share of the table). what names it in messages
 * ("the ring", "pool 3"). Returns SEGOPS_OK, or SEGOPS_E_INVALID_ARGUMENT /
 * SEGOPS_E_RESOURCE_EXHAUSTED (over the room, the guard table full) with a message. */
int segops_native_mem_open(segops_native_mem *m, int fd, uint64_t expect, uint64_t room, int64_t uid, const char *what,
                           char *err, size_t errlen);

/* Whether the object fd of size bytes is memory the client paid for: not hugetlb (fstatfs; its
 * huge pages may be gone by the time the daemon touches them, and the SIGBUS guard cannot put a
 * zero page into a huge mapping) and fully allocated (st_blocks: the daemon would be charged for
 * the pages it faults in). SEGOPS_OK or SEGOPS_E_INVALID_ARGUMENT naming what. */
int segops_native_mem_backed(int fd, uint64_t size, const char *what, char *err, size_t errlen);

/* Whether every page of bytes [offset, offset + nbytes) of a mapping at base has its memory
 * (mincore): 1 yes, 0 no (*missing: the first page's offset without: a hole punched after the
 * hand-over, or a page swapped out), -1 mincore failed. Before a call touches a pool, so that the
 * daemon never faults in, and pays for, pages the client took away. */
int segops_native_range_backed(const unsigned char *base, uint64_t offset, uint64_t nbytes, uint64_t *missing);

/* Pins the mapping through be->host_register when the backend has it; true when pinned. */
bool segops_native_mem_pin(segops_native_mem *m, const segops_backend *be);

/* Unpins (before the unmap), unguards, unmaps and closes; accepts a closed m. */
void segops_native_mem_close(segops_native_mem *m, const segops_backend *be);

#endif

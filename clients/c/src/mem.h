/* mem.h: inside libsegops, the client's memory shared with daemons over the native channel: a few
 * memfds ("pools", sealed against shrinking) that every native channel of the client hands to its
 * daemon once (and again after a reconnect), and an allocator over them. Arrays that lie here
 * travel without a copy; segops_alloc gives such memory. Owned by the client; thread-safe. Not
 * installed. */
#ifndef SEGOPS_CLIENT_MEM_H
#define SEGOPS_CLIENT_MEM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct segops_mem segops_mem;

/* A new, empty set of pools (the first pool is made on the first allocation). NULL when memfds
 * cannot be made here (then the client has no shared memory and the native channel is off). */
segops_mem *segops_mem_new(void);
void segops_mem_free_all(segops_mem *m); /* unmaps and closes every pool; accepts NULL */

/* 64-byte-aligned memory in a pool, growing the set by a new pool when none has room; NULL when
 * no pool can be made. Freed with segops_mem_release; the pools' sizes stay flat over any number
 * of allocate/free cycles of the same sizes. */
void *segops_mem_alloc(segops_mem *m, size_t nbytes);
void segops_mem_release(segops_mem *m, void *p);

/* Where [p, p + nbytes) lies: true with the pool's id and the offset in it when the whole range is
 * inside one pool, false otherwise (then it must be copied into the pools to travel). */
bool segops_mem_locate(segops_mem *m, const void *p, size_t nbytes, uint32_t *pool, uint64_t *offset);

/* The pools made so far (ids 0..n-1, never reused while m lives): generation changes whenever a
 * pool is added, so a channel knows when to hand over the new ones. */
uint32_t segops_mem_generation(segops_mem *m);
int segops_mem_pool_count(segops_mem *m);
/* Pool k's memfd and size (the fd stays owned by m). */
int segops_mem_pool_fd(segops_mem *m, int k, size_t *size);

/* For the client's fork handlers (client.c): m's lock held across fork(), taken before it and
 * given back after it in the parent and in the child, so that a child never inherits the lock
 * held by a thread it does not have (its first allocation would wait forever). Accept NULL. */
void segops_mem_fork_lock(segops_mem *m);
void segops_mem_fork_unlock(segops_mem *m);

#endif

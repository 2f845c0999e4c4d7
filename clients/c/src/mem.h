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
/* Gives back the block that starts at p; a held block (below) goes back when its last hold goes. */
void segops_mem_release(segops_mem *m, void *p);

/* Holds: a daemon may still write into the memory of a call that timed out (its outputs, in place),
 * so the blocks of that call are held, and a held block is not given back (nor handed out again)
 * until it is unheld. p may point anywhere inside a block of this process's own pools; false when
 * it points into none (then there is nothing to hold). */
bool segops_mem_hold(segops_mem *m, const void *p);
void segops_mem_unhold(segops_mem *m, const void *p);
/* Unholds blocks[0..n) once fd, the socket of the native channel that carried their calls (taken:
 * m closes it), shows the daemon's end closed: the daemon closes a channel only after every call
 * it took on it is over. Looked at on each allocation; segops_mem_free_all drops what is left.
 * blocks is copied. false (nothing taken: the blocks stay held, fd stays the caller's) without
 * memory. */
bool segops_mem_unhold_on_hangup(segops_mem *m, int fd, void *const *blocks, int n);

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

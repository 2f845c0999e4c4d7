/* hostbuf.h: host buffers for what a request carries in and out: its body and its outputs.
 *
 * A buffer of SEGOPS_HOSTBUF_MIN bytes or more comes from a process-wide pool of mappings that
 * are reused from request to request (no page faults for a fresh mapping per request) and, once a
 * backend is attached, pinned once through its host_register hook when the mapping is made, so
 * the CUDA backend copies a body's tensors to the device and its outputs back straight from and
 * to them (no staging copy by the CPU). Smaller buffers are ordinary aligned heap blocks.
 *
 * The pool maps at most its cap in bytes (buffers in use and idle together: the pinned memory
 * is bounded by it); past the cap a buffer comes from the heap instead, after unmapping idle
 * buffers of other sizes that have not been used for a second to make room. A buffer larger than
 * SEGOPS_HOSTBUF_MAX is never pooled (a heap block, given back to the system when freed). Sizes
 * are rounded up to a quarter of their power of two; an idle buffer up to half as large again as
 * the class asked for serves it. --host-pool-bytes (segops_hostbuf_settings) sets the cap (0 turns
 * the pool off), default 1 GiB or a sixteenth of the machine's memory if that is less.
 * Thread-safe. Contents are not cleared between uses: like malloc'd memory, every byte a caller
 * reads it has written. */
#ifndef SEGOPS_HOSTBUF_H
#define SEGOPS_HOSTBUF_H

#include <stddef.h>
#include <stdint.h>

#include "backend.h"

#define SEGOPS_HOSTBUF_MIN ((size_t)1 << 20)
#define SEGOPS_HOSTBUF_MAX ((size_t)64 << 20)

/* nbytes (at least 1), 64-byte aligned; NULL on failure. Free with segops_hostbuf_free. */
void *segops_hostbuf_alloc(size_t nbytes);

/* Gives a buffer back (NULL: nothing). */
void segops_hostbuf_free(void *p);

/* Pins the pool's mappings through be->host_register from now on (be borrowed until
 * segops_hostbuf_detach; NULL or a backend without the hook: unpinned). Mappings made before stay
 * as they are. */
void segops_hostbuf_attach(const segops_backend *be);

/* Before the attached backend goes (after the last request): unmaps every idle buffer, unpinning
 * it first; a buffer still in use is unmapped, not unpinned, when it comes back. */
void segops_hostbuf_detach(void);

typedef struct {
  size_t mapped, idle, pinned, cap;  /* bytes */
  uint64_t reused, mapped_new, heap; /* large allocations by where they came from */
} segops_hostbuf_stats_t;
void segops_hostbuf_stats(segops_hostbuf_stats_t *st);

/* Sets the cap (tests; otherwise --host-pool-bytes is read on first use) and unmaps every idle
 * buffer. */
void segops_hostbuf_set_cap(size_t cap);

/* How long a buffer must have been idle before it is unmapped to make room (tests; default
 * 1000 ms). */
void segops_hostbuf_set_stale_ms(uint64_t ms);

#endif

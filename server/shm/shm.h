/* shm.h: the system shared-memory registry (Triton's extension, proto/API.md, Shared memory): named regions of
 * POSIX shm objects, each mapped once, bounds-checked on every use, refcounted so that an
 * unregister during a request is safe, pinned for direct GPU copies when the backend can, and
 * guarded against an owner truncating the object under the daemon (a SIGBUS in a registered
 * mapping is turned into zero pages and a failed request, never a crash).
 * Safety (proto/API.md, Shared memory): a region belongs to the uid that registered it (the
 * peer's uid as the kernel reports it, peer.h); only that uid sees, uses or unregisters it, and a
 * name one uid holds cannot be taken by another. An object is mapped only when it is owned by the
 * registering uid or its "other" bits grant read and write, judged on the opened descriptor; the
 * descriptor is closed once mapped. Overlaps are judged on the object (device, inode, offset),
 * not on addresses: one object under two names is still one object. */
#ifndef SEGOPS_SHM_H
#define SEGOPS_SHM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backend.h"

#define SEGOPS_SHM_NAME_MAX 128     /* region names (client-chosen labels) */
#define SEGOPS_SHM_KEY_MAX 255      /* shm object names, "/" included (NAME_MAX) */
#define SEGOPS_SHM_MAX_REGIONS 1024 /* the default of --max-shm-regions */

typedef struct segops_shm segops_shm;
/* One pinned use of a region's bytes: valid until segops_shm_release. */
typedef struct {
  void *ptr;
  size_t len;
  void *region; /* opaque; NULL in a zeroed ref */
} segops_shm_ref;

/* A region as status reports it. */
typedef struct {
  char name[SEGOPS_SHM_NAME_MAX + 1];
  char key[SEGOPS_SHM_KEY_MAX + 1];
  uint64_t offset, byte_size;
} segops_shm_info;

/* The registry; backend (borrowed, may be NULL) pins mappings through its host_register hook.
 * Installs the process's SIGBUS guard (once). NULL on failure. */
segops_shm *segops_shm_new(uint64_t max_bytes, const segops_backend *backend);
/* One uid's shares: of max_bytes (bytes_per_uid), and of the regions (max_regions at once,
 * regions_per_uid of one uid); by default half of max_bytes, SEGOPS_SHM_MAX_REGIONS and half of
 * it. Call before any registration. A region's mapping and pinning also count against its uid's
 * shares of mapped and pinned memory (shares.h). */
void segops_shm_set_shares(segops_shm *reg, uint64_t bytes_per_uid, int max_regions, int regions_per_uid);
/* Unregisters everything (mappings go when their last use ends) and frees the registry; call
 * it when no request can use it any more. Accepts NULL. */
void segops_shm_free(segops_shm *reg);

/* `uid` below is the requesting peer's uid, or -1 when the kernel does not report one: such a
 * peer has no regions and can register none. */

/* Registers region `name` for uid as bytes [offset, offset+byte_size) of the shm object `key`.
 * Returns SEGOPS_OK, or SEGOPS_E_INVALID_ARGUMENT (unknown uid, bad name or key, a name already
 * registered, object missing, not accessible to uid, or too small, over the cap) /
 * SEGOPS_E_NOMEM with a message. */
int segops_shm_register(segops_shm *reg, int64_t uid, const char *name, size_t name_len, const char *key,
                        size_t key_len, uint64_t offset, uint64_t byte_size, char *err, size_t errlen);
/* Unregisters uid's region `name`: SEGOPS_OK or SEGOPS_E_NOT_FOUND (none of uid's has that name).
 * Uses in flight keep it mapped. */
int segops_shm_unregister(segops_shm *reg, int64_t uid, const char *name, size_t name_len, char *err, size_t errlen);
void segops_shm_unregister_all(segops_shm *reg, int64_t uid); /* uid's regions only */
/* Copies up to cap of uid's regions (all when name is NULL, else the one named) into out;
 * returns how many there are (may exceed cap), or SEGOPS_E_NOT_FOUND for a name uid does not
 * hold. */
int segops_shm_status(segops_shm *reg, int64_t uid, const char *name, size_t name_len, segops_shm_info *out, int cap);
uint64_t segops_shm_registered_bytes(segops_shm *reg);
uint64_t segops_shm_max_bytes(const segops_shm *reg);

/* Takes bytes [offset, offset+byte_size) of uid's region `name` for one use. Checks the bounds
 * against the region and that the object still reaches the region's last page. Returns
 * SEGOPS_OK, SEGOPS_E_SHM_REGION_UNKNOWN (uid has no region of that name: e.g. the daemon
 * restarted; register it again) or SEGOPS_E_INVALID_ARGUMENT (out of bounds, truncated), with a
 * message. */
int segops_shm_acquire(segops_shm *reg, int64_t uid, const char *name, size_t name_len, uint64_t offset,
                       uint64_t byte_size, segops_shm_ref *ref, char *err, size_t errlen);
/* After the use: true (with a message naming the region) when the mapping faulted while the ref
 * was held (the object was truncated by its owner, or, for a ref written to (`written`), the
 * shared-memory filesystem had no room for a page), so the bytes read or written are not the
 * client's. */
bool segops_shm_ref_damaged(const segops_shm_ref *ref, bool written, char *err, size_t errlen);
/* True when a and b cover a common byte of one object (same device and inode, overlapping
 * object offsets), whichever regions and mappings they came through. Zeroed refs overlap nothing. */
bool segops_shm_refs_overlap(const segops_shm_ref *a, const segops_shm_ref *b);
/* The region's name, for answers. "" for a zeroed ref. */
const char *segops_shm_ref_name(const segops_shm_ref *ref);
void segops_shm_release(segops_shm_ref *ref); /* accepts a zeroed ref; zeroes it */

/* True when s is a plain shm object name: "/" then 1..254 printable bytes, no further "/",
 * not "/." or "/..". */
bool segops_shm_key_ok(const char *s, size_t len);
/* True when s is a usable region name: 1..SEGOPS_SHM_NAME_MAX printable bytes, no "/". */
bool segops_shm_name_ok(const char *s, size_t len);

#endif

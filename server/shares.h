/* shares.h: every uid's share of the daemon's memory that outlives a request: client memory it maps
 * (native channels' rings and pools, shm regions) with the daemon's own bookkeeping for it, and the
 * part of it pinned for device copies. Each kind has a whole (all uids together) and a uid's share
 * of it, so that one uid can never hold what another needs to get in. */
#ifndef SEGOPS_SHARES_H
#define SEGOPS_SHARES_H

#include <stddef.h>
#include <stdint.h>

typedef enum {
  SEGOPS_SHARE_MAPPED, /* --max-mapped-bytes, --max-mapped-bytes-per-uid */
  SEGOPS_SHARE_PINNED, /* --max-pinned-bytes, --max-pinned-bytes-per-uid */
  SEGOPS_SHARE_KINDS
} segops_share_kind;

/* Sets a kind's whole and per-uid share (bytes; < 0: no bound, as before any call). At startup,
 * before any take. */
void segops_share_configure(segops_share_kind k, int64_t whole, int64_t per_uid);

/* Takes bytes of kind k for uid. Returns 0 (taken), -1 (the whole would be exceeded, or too many
 * uids hold memory at once) or -2 (uid's share would be). */
int segops_share_take(segops_share_kind k, int64_t uid, uint64_t bytes);

/* Gives back what segops_share_take took; accepts 0 bytes. */
void segops_share_give(segops_share_kind k, int64_t uid, uint64_t bytes);

/* Bytes of kind k held now by uid, or by every uid together when uid < 0. */
int64_t segops_share_held(segops_share_kind k, int64_t uid);

/* The error of a refused take (why: its -1 or -2) of bytes of kind k by uid for `what` (e.g.
 * "pool 3"), written to err: SEGOPS_E_RESOURCE_EXHAUSTED, naming the option to raise. */
int segops_share_refusal(int why, segops_share_kind k, int64_t uid, uint64_t bytes, const char *what, char *err,
                         size_t errlen);

#endif

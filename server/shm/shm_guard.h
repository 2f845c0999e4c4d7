/* shm_guard.h: the daemon's SIGBUS guard over memory that clients share with it (the registry's
 * regions, shm.h, and the native channel's rings and pools, server/native/): a client that
 * truncates or otherwise invalidates pages under a mapping cannot crash the daemon. */
#ifndef SEGOPS_SHM_GUARD_H
#define SEGOPS_SHM_GUARD_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Mappings guarded at once, over every user. */
#define SEGOPS_GUARD_SLOTS 8192

/* Installs the process's SIGBUS handler (once; later calls only report). A fault inside a
 * guarded mapping maps anonymous zero pages over it, from the faulting page to the mapping's
 * end, and sets the mapping's flag: the access proceeds and its owner fails the use when it
 * looks at the flag. A fault anywhere else goes to the previous handler (or the default
 * action). Returns true when the handler is in place. */
bool segops_guard_install(void);

/* Of them, the most one uid's mappings (its shm regions, its channels' rings and pools) may hold
 * (--max-mappings-per-uid; half the table until set). At startup, before any segops_guard_add. */
void segops_guard_set_share(int per_uid);

/* Guards [base, base + len) with flag (borrowed until segops_guard_remove), held for uid (< 0:
 * none, no share). Returns the slot, -1 when every slot is taken, or -2 when uid holds its share
 * (segops_guard_set_share) already. Async-signal-safe readers: the handler never blocks on
 * this. */
int segops_guard_add(void *base, size_t len, atomic_int *flag, int64_t uid);
/* The error of a refused segops_guard_add (why: its -1 or -2) for the mapping of `what` (e.g.
 * "region 'x'"), held for uid, written to err: SEGOPS_E_RESOURCE_EXHAUSTED, naming the table. */
int segops_guard_refusal(int why, const char *what, int64_t uid, char *err, size_t errlen);
/* Stops guarding a slot from segops_guard_add, before the mapping goes; accepts -1. */
void segops_guard_remove(int slot);

#endif

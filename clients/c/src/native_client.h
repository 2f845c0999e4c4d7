/* native_client.h: libsegops' side of the native same-node channel (transport.h; the wire contract
 * is proto/segops_ring.h, the mechanics both ends share proto/segops_chan.h, the protocol
 * proto/native.md), as its files share it. A channel is one SOCK_SEQPACKET connection to the
 * daemon's channel socket, the ring's memfd and the client's pools (mem.h) handed over on it. A
 * call claims a slot, writes its descriptor, rings the doorbell and waits for the slot's state:
 * spinning for spin_us, then asleep on the futex. By role, as the daemon's server/native/:
 *   native_conn.c    a channel: connect, the peer's identity, the ring, the handshake, the pools'
 *                    hand-over, the current channel of a transport (opened again when it broke)
 *   native_place.c   a call's tensors placed in the pools (or copied there), its outputs taken back
 *   native_submit.c  a call: a slot claimed, submitted, awaited and answered; the transport itself
 *   native_orphans.c what forks and timed-out calls leave: a parent's channel in a child, slots and
 *                    pool blocks the daemon may still write
 * Not for the rest of libsegops, which goes through transport.h. */
#ifndef SEGOPS_NATIVE_CLIENT_H
#define SEGOPS_NATIVE_CLIENT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "mem.h"
#include "ops.h"
#include "segops_chan.h"
#include "segops_ring.h"
#include "transport.h"

/* The first pool's size (mem.c's FIRST_POOL): a process that cannot size it does not open a channel. */
#define NATIVE_FIRST_POOL ((size_t)4 << 20)
/* Slots of a client's ring: calls in flight at once per channel (one bit each of a 64-bit mask). */
#define NATIVE_SLOTS 64
/* Pool blocks one call may hold: its inputs' copies, and each output's place and copy. */
#define NATIVE_CALL_BLOCKS (SEGOPS_MAX_INPUTS + 1 + 2 * SEGOPS_MAX_OUTPUTS)

/* A call that timed out: the daemon may still write its outputs, so its slot stays taken and the
 * pool blocks it wrote or read stay held (mem.h) until the slot is answered or the daemon ends the
 * channel (native_orphans.c). */
typedef struct abandoned {
  uint32_t slot;
  void *held[NATIVE_CALL_BLOCKS];
  int n;
  struct abandoned *next;
} abandoned;

/* One channel to one daemon (native_conn.c). */
typedef struct {
  int sock;
  int ring_fd;
  unsigned char *ring;
  size_t ring_len;
  segops_ring_header *hdr;
  atomic_uint_fast64_t free_slots; /* bit k: slot k is free */
  atomic_uint_fast64_t seq;
  atomic_int refs;     /* the transport's, plus one per call using it */
  atomic_bool broken;  /* the daemon went away or is draining: open a new one */
  pthread_mutex_t ctl; /* the control exchange (POOL) */
  atomic_int pools_sent;
  pthread_mutex_t ab_mu;
  abandoned *ab;
  segops_mem *mem;
} chan;

/* The transport: a daemon's channel socket and the channel on it now. */
typedef struct {
  segops_transport base;
  char path[108];
  uid_t uid; /* the daemon's: every channel's peer and its socket's owner must be it */
  pid_t pid; /* the daemon's as /v1/info said, for the first channel only (0: not compared) */
  char *token;
  int spin_us;
  segops_mem *mem;
  pthread_mutex_t mu; /* cur */
  chan *cur;
  unsigned epoch; /* the fork epoch cur was opened in (native_orphans.c) */
} native_t;

/* Where a call's tensors go: the request's descriptors, the pool memory it borrowed for copies, and
 * for each output where its bytes land and whether they are copied out afterwards. */
typedef struct {
  segops_ring_request req;
  void *tmp[SEGOPS_MAX_INPUTS + 1 + SEGOPS_MAX_OUTPUTS];
  int ntmp;
  void *out_place[SEGOPS_MAX_OUTPUTS]; /* where the daemon writes output k */
  bool out_copy[SEGOPS_MAX_OUTPUTS];   /* copied to the caller's data afterwards */
  bool out_alloc[SEGOPS_MAX_OUTPUTS];  /* allocated here for a caller's NULL data */
  uint64_t out_need[SEGOPS_MAX_OUTPUTS];
} placed;

/* Slot k of c's ring. */
static inline segops_ring_slot *segops_nc_slot(chan *c, uint32_t k) { return segops_chan_slot(c->ring, k); }

/* Gives slot k back: FREE for the daemon's scan, then free for this side's claims. */
static inline void segops_nc_slot_release(chan *c, int k) {
  __atomic_store_n(&segops_nc_slot(c, (uint32_t)k)->state, SEGOPS_SLOT_FREE, __ATOMIC_RELEASE);
  atomic_fetch_or(&c->free_slots, (uint_fast64_t)1 << k);
}

/* ---- native_conn.c ---- */
/* The current channel with a reference for the caller, opened when there is none or it broke (one
 * attempt that never waits for a daemon to come; deadline bounds the handshake); NULL with e
 * filled (*gone: the daemon is not there or is draining, rather than refusing this client).
 * *fresh: opened by this call. After a fork the parent's is left alone. */
chan *segops_nc_get(native_t *t, double deadline, bool *fresh, bool *gone, segops_error *e);
/* Drops a reference; the last one frees the channel (NULL: nothing). */
void segops_nc_put(chan *c);
/* Hands over the pools made since the last hand-over on this channel (in id order), so that a
 * call never names a pool the daemon does not have. *gone as segops_nc_get's. */
int segops_nc_send_pools(chan *c, double deadline, bool *gone, segops_error *e);
/* The daemon's end of the socket is closed (it died, or ended the channel). */
bool segops_nc_peer_gone(chan *c);

/* ---- native_place.c ---- */
/* Places every tensor of call in the pools (pl zeroed by the caller): SEGOPS_OK or the error. */
int segops_nc_place_call(native_t *t, placed *pl, const segops_tcall *call, segops_error *e);
/* The answer of a successful call into the caller's arrays (copies out where needed). */
int segops_nc_take_outputs(const segops_tcall *call, placed *pl, const segops_ring_answer *a, segops_error *e);
/* Gives back the pool memory pl borrowed for copies. */
void segops_nc_placed_free(native_t *t, placed *pl);

/* ---- native_orphans.c ---- */
/* The process's fork count: a channel belongs to the process that opened it. */
unsigned segops_nc_fork_epoch(void);
/* After a fork: the parent's channel, of which only this process's copies of the descriptors and
 * the mapping go; its locks and abandoned list are the parent's business. Under t->mu. */
void segops_nc_forget_parent(native_t *t);
/* For a channel that goes: lists in out the blocks of its timed-out calls that the daemon may
 * still write and returns how many; unholds the others; frees the list. */
int segops_nc_still_held(chan *c, void **out, int cap);
/* Frees the memory of timed-out calls whose slots the daemon has answered since. */
void segops_nc_sweep_abandoned(chan *c);
/* A timed-out call on slot k: the slot and the blocks the daemon may still use stay taken. */
void segops_nc_abandon(native_t *t, chan *c, uint32_t k, placed *pl);

#endif

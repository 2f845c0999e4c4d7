/* native_orphans.c: what libsegops' native channel leaves behind and must not lose (native_client.h):
 * a forked child's copy of its parent's channel (neither used nor closed there: the socket and the
 * ring are shared with the parent, so the child opens its own), and the calls that timed out, whose
 * slots and pool blocks the daemon may still write until it answers them or ends the channel. */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "native_client.h"

/* Forks this process has come out of as the child: a channel opened in an earlier epoch is a
 * parent's (pthread_atfork, registered by the first transport). */
static atomic_uint fork_epoch;
static pthread_once_t fork_once = PTHREAD_ONCE_INIT;
static void on_fork_child(void) { atomic_fetch_add(&fork_epoch, 1); }
static void register_fork(void) { pthread_atfork(NULL, NULL, on_fork_child); }

unsigned segops_nc_fork_epoch(void) {
  pthread_once(&fork_once, register_fork);
  return atomic_load(&fork_epoch);
}

static void unhold_abandoned(chan *c, abandoned *a) {
  for (int i = 0; i < a->n; i++) segops_mem_unhold(c->mem, a->held[i]);
  free(a);
}

/* For a channel that goes: lists in out the blocks of its timed-out calls that the daemon may
 * still write (their slots unanswered, the daemon still there) and returns how many; unholds the
 * others (nothing writes them any more); frees the list. */
int segops_nc_still_held(chan *c, void **out, int cap) {
  bool gone = c->sock < 0 || segops_nc_peer_gone(c);
  int n = 0;
  while (c->ab) {
    abandoned *a = c->ab;
    c->ab = a->next;
    uint32_t st = __atomic_load_n(&segops_nc_slot(c, a->slot)->state, __ATOMIC_ACQUIRE) & SEGOPS_SLOT_STATE_MASK;
    if (!gone && st == SEGOPS_SLOT_SUBMITTED && n + a->n <= cap) {
      memcpy(out + n, a->held, (size_t)a->n * sizeof *out);
      n += a->n;
      free(a);
    } else if (!gone && st == SEGOPS_SLOT_SUBMITTED) {
      free(a); /* no room to list them: they stay held, never reused under the daemon's pen */
    } else {
      unhold_abandoned(c, a);
    }
  }
  return n;
}

/* After a fork: the parent's channel, of which only this process's copies of the descriptors and
 * the mapping go; its locks and abandoned list are the parent's business. Under t->mu. */
void segops_nc_forget_parent(native_t *t) {
  unsigned ep = atomic_load(&fork_epoch);
  if (ep == t->epoch) return;
  chan *old = t->cur;
  t->cur = NULL;
  t->epoch = ep;
  if (!old) return;
  if (old->ring) munmap(old->ring, old->ring_len);
  if (old->ring_fd >= 0) close(old->ring_fd);
  if (old->sock >= 0) close(old->sock);
  free(old);
}

/* Frees the memory of timed-out calls whose slots the daemon has answered since. */
void segops_nc_sweep_abandoned(chan *c) {
  if (!c->ab) return;
  pthread_mutex_lock(&c->ab_mu);
  for (abandoned **pp = &c->ab; *pp;) {
    abandoned *a = *pp;
    uint32_t st = __atomic_load_n(&segops_nc_slot(c, a->slot)->state, __ATOMIC_ACQUIRE) & SEGOPS_SLOT_STATE_MASK;
    if (st != SEGOPS_SLOT_SUBMITTED) {
      *pp = a->next;
      segops_nc_slot_release(c, (int)a->slot);
      unhold_abandoned(c, a);
    } else {
      pp = &a->next;
    }
  }
  pthread_mutex_unlock(&c->ab_mu);
}

/* A timed-out call: its slot stays taken, and every pool block the daemon may still read or write
 * for it (the copies and outputs this library allocated, given back once unheld, and the caller's
 * own outputs in place) stays held until the daemon answers the slot (sweep_abandoned) or ends the
 * channel (chan_destroy). */
void segops_nc_abandon(native_t *t, chan *c, uint32_t k, placed *pl) {
  abandoned *a = calloc(1, sizeof *a);
  void *blocks[NATIVE_CALL_BLOCKS];
  int n = 0;
  for (int i = 0; i < pl->ntmp; i++)
    if (segops_mem_hold(t->mem, pl->tmp[i])) blocks[n++] = pl->tmp[i];
  for (int o = 0; o < SEGOPS_MAX_OUTPUTS; o++) /* out_copy places are among tmp */
    if (pl->out_place[o] && !pl->out_copy[o] && segops_mem_hold(t->mem, pl->out_place[o]))
      blocks[n++] = pl->out_place[o];
  segops_nc_placed_free(t, pl); /* held: given back when unheld */
  for (int o = 0; o < SEGOPS_MAX_OUTPUTS; o++)
    if (pl->out_alloc[o]) {
      segops_mem_release(t->mem, pl->out_place[o]);
      pl->out_alloc[o] = false;
    }
  if (!a) return; /* the slot and the blocks stay taken: never reused under the daemon's pen */
  a->slot = k;
  memcpy(a->held, blocks, (size_t)n * sizeof blocks[0]);
  a->n = n;
  pthread_mutex_lock(&c->ab_mu);
  a->next = c->ab;
  c->ab = a;
  pthread_mutex_unlock(&c->ab_mu);
}

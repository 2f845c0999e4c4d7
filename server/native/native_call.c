/* native_call.c: one call of the native channel, from the slot's copy to its answer: the
 * descriptor check, segops_prepare (the same validation and messages as HTTP), the outputs
 * pointed at the client's memory, the scheduler (inline when it would start the call at once),
 * and the answer written into the slot before its state turns DONE. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "errors.h"
#include "log.h"
#include "metrics.h"
#include "native_internal.h"

#define DRAINING_MSG                                                                                          \
  "segopsd is draining (it is shutting down): the call was not run; send it to another daemon or again once " \
  "this one is back"

/* True when any pool the call touched (or the ring) lost pages under the daemon while it ran:
 * then the bytes read or written were not the client's. */
static bool damaged(const native_call *c, char *err, size_t errlen) {
  const native_channel *ch = c->ch;
  const segops_native_range *r[SEGOPS_MAX_INPUTS + 1 + SEGOPS_MAX_OUTPUTS];
  int n = 0;
  for (int j = 0; j <= SEGOPS_MAX_INPUTS; j++) r[n++] = &c->chk.in[j];
  for (int k = 0; k < SEGOPS_MAX_OUTPUTS; k++) r[n++] = &c->chk.out[k];
  for (int i = 0; i < n; i++) {
    if (!r[i]->present || r[i]->pool >= ch->npools) continue;
    if (atomic_load(&ch->pools[r[i]->pool].damaged)) {
      segops_errf(SEGOPS_E_INVALID_ARGUMENT, err, errlen,
                  "native channel: pool %" PRIu32
                  " lost pages under the daemon during the call (a hole punched in it, or memory the kernel could "
                  "not provide), so the bytes used were not the client's; hand over a new pool",
                  r[i]->pool);
      return true;
    }
  }
  return false;
}

/* Writes the answer into the slot, counts the call, then sets its state and wakes the client when
 * it sleeps; frees what the call holds and gives the slot back to the channel's scan. */
static void finish(native_call *c, int status, const char *msg) {
  native_channel *ch = c->ch;
  segops_ring_slot *s = segops_native_slot(ch, c->slot);
  segops_ring_answer *a = &s->ans;
  a->status = status;
  a->seq = c->seq;
  const segops_fn_desc *fn = c->prep.call.fn;
  for (int k = 0; k < SEGOPS_MAX_OUTPUTS; k++) {
    segops_ring_shape sh = {0};
    if (status == SEGOPS_OK && fn && k < fn->n_out && c->prep.requested[k]) {
      sh.dtype = (uint32_t)c->prep.call.dtype;
      sh.ndim = (uint32_t)c->prep.out_ndim[k];
      for (int d = 0; d < c->prep.out_ndim[k]; d++) sh.shape[d] = c->prep.out_shape[k][d];
    }
    a->out[k] = sh;
  }
  if (status != SEGOPS_OK) {
    snprintf(a->name, sizeof a->name, "%s", segops_err_code(status));
    snprintf(a->message, sizeof a->message, "%s", msg && *msg ? msg : segops_err_message(status));
  } else {
    a->name[0] = 0;
    a->message[0] = 0;
  }
  /* Counted before it is published: a client that reads /metrics once it has its answer finds the
   * call there (answered, its duration, no longer in flight). The state's exchange orders the
   * count's relaxed increments before the client's acquire load of DONE. */
  segops_metrics_native_call(c->chk.fn, status, segops_now() - c->t0);
  uint32_t old = __atomic_exchange_n(&s->state, SEGOPS_SLOT_DONE, __ATOMIC_SEQ_CST);
  if (old & SEGOPS_SLOT_WAITING) segops_chan_futex_wake(&s->state, 1);
  segops_test_hook_answered();
  segops_prepared_free(&c->prep);
  atomic_store_explicit(&ch->busy[c->slot], 0, memory_order_release);
}

/* After the backend ran it (inline or from a worker). */
static void complete(native_call *c) {
  char err[512];
  int status = c->job.status;
  const char *msg = c->job.err;
  if (status == SEGOPS_OK && damaged(c, err, sizeof err)) {
    status = SEGOPS_E_INVALID_ARGUMENT;
    msg = err;
  }
  finish(c, status, msg);
}

static void on_done(segops_job *job) {
  native_call *c = job->user;
  native_channel *ch = c->ch;
  complete(c); /* c may be reused by the channel's thread from here on */
  /* The client may have submitted this slot again while it was still busy here, and the channel's
   * thread, finding it busy, gone to sleep: ring the doorbell for it (Dekker with daemon_sleeps,
   * as the client does). */
  segops_chan_ring_doorbell(ch->hdr);
  pthread_mutex_lock(&ch->mu);
  if (--ch->inflight == 0) pthread_cond_broadcast(&ch->idle);
  pthread_mutex_unlock(&ch->mu);
}

/* Every page the call reads or writes still has its memory: a client that punched a hole in a
 * pool after handing it over (or whose page was swapped out) gets its call refused rather than
 * the daemon faulting in, and paying for, pages in its place. */
static int check_backed(native_channel *ch, const segops_native_checked *k, char *err, size_t errlen) {
  const segops_native_range *r[SEGOPS_MAX_INPUTS + 1 + SEGOPS_MAX_OUTPUTS];
  int n = 0;
  for (int i = 0; i < SEGOPS_MAX_INPUTS + 1; i++)
    if (k->in[i].present) r[n++] = &k->in[i];
  for (int i = 0; i < SEGOPS_MAX_OUTPUTS; i++)
    if (k->out[i].present) r[n++] = &k->out[i];
  for (int i = 0; i < n; i++) {
    uint64_t missing = 0;
    int b = segops_native_range_backed(ch->views[r[i]->pool].base, r[i]->offset, r[i]->nbytes, &missing);
    if (b == 0)
      return segops_errf(SEGOPS_E_INVALID_ARGUMENT, err, errlen,
                         "%s: pool %" PRIu32 " has no memory at byte %" PRIu64
                         " (a hole punched after it was handed over, or a page swapped out): the daemon touches only "
                         "memory its client keeps backed",
                         segops_op_name((segops_op)(k->fn / SEGOPS_PASS_COUNT)), r[i]->pool, missing);
  }
  return SEGOPS_OK;
}

/* Check, prepare, place the outputs. SEGOPS_OK or an error with its message. */
static int prepare_call(native_channel *ch, native_call *c, char *err, size_t errlen) {
  const segops_native *n = ch->srv;
  if (!n->d.takes_work(n->d.ctx)) return segops_errf(SEGOPS_E_UNAVAILABLE, err, errlen, DRAINING_MSG);
  int rc = segops_native_check(&c->req, ch->views, ch->npools, &c->chk, err, errlen);
  if (rc) return rc;
  c->chk.req.owner = (uint32_t)ch->uid + 1u; /* validated-idx cache entries are per uid */
  rc = segops_prepare(&c->chk.req, n->d.limits, &c->prep, err, errlen);
  if (rc) return rc;
  rc = segops_native_place_outputs(&c->chk, ch->views, ch->npools, &c->prep, err, errlen);
  if (rc) return rc;
  return check_backed(ch, &c->chk, err, errlen);
}

void segops_native_call_start(native_channel *ch, uint32_t k, bool may_inline) {
  native_call *c = &ch->calls[k];
  segops_ring_slot *s = segops_native_slot(ch, k);
  memset(&c->prep, 0, sizeof c->prep);
  c->ch = ch;
  c->slot = k;
  c->chk.fn = -1;
  /* The copy comes first: from here on nothing the client writes into the slot matters. */
  c->seq = __atomic_load_n(&s->seq, __ATOMIC_RELAXED);
  memcpy(&c->req, (const void *)&s->req, sizeof c->req);
  c->t0 = segops_now();
  segops_metrics_native_start();
  char err[512];
  int rc = prepare_call(ch, c, err, sizeof err);
  if (rc) {
    finish(c, rc, err);
    return;
  }
  const segops_native *n = ch->srv;
  double timeout = n->d.cfg->request_timeout_s;
  if (c->chk.timeout_s > 0 && c->chk.timeout_s < timeout) timeout = c->chk.timeout_s;
  memset(&c->job, 0, sizeof c->job);
  c->job.call = &c->prep.call;
  c->job.deadline = c->t0 + timeout;
  c->job.done = on_done;
  c->job.user = c;
  c->job.owner = (uint32_t)ch->uid + 1u; /* its uid's share of the queue */
  if (may_inline && segops_sched_run_inline(n->d.sched, &c->job)) {
    complete(c);
    return;
  }
  pthread_mutex_lock(&ch->mu);
  ch->inflight++;
  pthread_mutex_unlock(&ch->mu);
  rc = segops_sched_submit(n->d.sched, &c->job);
  if (rc == SEGOPS_OK) return; /* on_done answers, maybe already has */
  pthread_mutex_lock(&ch->mu);
  if (--ch->inflight == 0) pthread_cond_broadcast(&ch->idle);
  pthread_mutex_unlock(&ch->mu);
  if (rc == SEGOPS_E_UNAVAILABLE) {
    finish(c, rc, DRAINING_MSG);
  } else {
    segops_metrics_rejected(rc);
    finish(c, rc,
           segops_sched_owner_full(&c->job)
               ? "this channel's uid has its share of segopsd's queue waiting (--max-queue-per-uid); retry shortly"
               : "segopsd's queue is full (--max-queue); retry shortly");
  }
}

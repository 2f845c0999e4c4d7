/* native_submit.c: one call over libsegops' native channel (native_client.h) and the transport's
 * functions (transport.h): the call placed in the pools, a slot claimed, the request written and
 * the doorbell rung, the answer awaited (spinning for spin_us, then asleep on the slot's state) and
 * taken; a daemon found gone mid-call gets one more try on a channel opened again at once (a
 * restarted daemon may be on the socket already), never a wait for one to come. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "native_client.h"

/* The default spin budget (spin_us < 0 and no $SEGOPS_CLIENT_SPIN_US): proto/native.md, Doorbells. */
#define DEFAULT_SPIN_US 50
/* A sleeping caller looks at the socket this often, so a daemon that died is noticed. */
#define SLEEP_S 0.05
/* How long the one reconnect after a lost daemon may take for its handshake (a successor already
 * on the socket answers in microseconds; one that is not there refuses the connection at once). */
#define RECONNECT_S 0.25

/* The calling thread's tid (cached: gettid is a system call), told to the daemon in the ring's
 * caller_tid so that its spin policy looks at whether this thread runs (proto/native.md, Doorbells). A
 * fork's child forgets the cache: its one thread is not the parent's. */
static _Thread_local pid_t my_tid;
static pthread_once_t tid_once = PTHREAD_ONCE_INIT;
static void tid_forget(void) { my_tid = 0; }
static void tid_once_init(void) { pthread_atfork(NULL, NULL, tid_forget); }
static void tell_tid(segops_ring_header *h) {
  if (my_tid == 0) {
    pthread_once(&tid_once, tid_once_init);
    my_tid = (pid_t)syscall(SYS_gettid);
  }
  if (__atomic_load_n(&h->caller_tid, __ATOMIC_RELAXED) != my_tid)
    __atomic_store_n(&h->caller_tid, (int32_t)my_tid, __ATOMIC_RELAXED);
}

static void sleep_s(double s) {
  if (s <= 0) return;
  struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
  nanosleep(&ts, NULL);
}

/* Claims a free slot of c: its index, or -1 when none came free before deadline. */
static int slot_claim(chan *c, double deadline) {
  for (unsigned i = 0;; i++) {
    uint_fast64_t m = atomic_load(&c->free_slots);
    while (m) {
      int k = __builtin_ctzll((unsigned long long)m);
      if (atomic_compare_exchange_weak(&c->free_slots, &m, m & ~((uint_fast64_t)1 << k))) return k;
    }
    if (atomic_load(&c->broken) || ((i & 15u) == 0 && segops_client_now() >= deadline)) return -1;
    sleep_s(20e-6);
  }
}

/* Waits for slot k's answer: spinning for spin_us, then asleep on its state. SEGOPS_OK when it
 * is DONE; SEGOPS_E_CONNECTION when the daemon went away; SEGOPS_E_TIMEOUT at the deadline. */
static int await(chan *c, uint32_t k, int spin_us, double deadline) {
  uint32_t *st = &segops_nc_slot(c, k)->state;
  double spin_until = segops_client_now() + spin_us * 1e-6;
  for (unsigned i = 0;; i++) {
    if ((__atomic_load_n(st, __ATOMIC_ACQUIRE) & SEGOPS_SLOT_STATE_MASK) == SEGOPS_SLOT_DONE) return SEGOPS_OK;
    if ((i & 63u) == 0 && segops_client_now() >= spin_until) break;
    segops_chan_cpu_relax();
  }
  for (;;) {
    uint32_t v = __atomic_load_n(st, __ATOMIC_ACQUIRE);
    if ((v & SEGOPS_SLOT_STATE_MASK) == SEGOPS_SLOT_DONE) return SEGOPS_OK;
    double now = segops_client_now();
    if (now >= deadline) return SEGOPS_E_TIMEOUT;
    if (segops_nc_peer_gone(c)) return SEGOPS_E_CONNECTION;
    /* Say we sleep (the daemon then wakes us), unless the answer came meanwhile. */
    if (!(v & SEGOPS_SLOT_WAITING) &&
        !__atomic_compare_exchange_n(st, &v, v | SEGOPS_SLOT_WAITING, false, __ATOMIC_SEQ_CST, __ATOMIC_ACQUIRE))
      continue;
    v |= SEGOPS_SLOT_WAITING;
    double nap = deadline - now < SLEEP_S ? deadline - now : SLEEP_S;
    segops_chan_futex_wait(st, v, nap);
  }
}

static int answer_error(const segops_ring_answer *a, segops_error *e) {
  int code = a->status < 0 && a->status > -100 ? a->status : SEGOPS_E_INTERNAL;
  if (e) {
    e->code = code;
    e->http_status = segops_err_status(code);
    memcpy(e->name, a->name, sizeof e->name);
    e->name[sizeof e->name - 1] = 0;
    size_t n = sizeof a->message < sizeof e->message ? sizeof a->message : sizeof e->message;
    memcpy(e->message, a->message, n);
    e->message[n - 1] = 0;
  }
  return code;
}

/* How one try on a channel ended, beyond its code. */
typedef enum { TRY_DONE, TRY_GONE, TRY_DRAINING } try_end;

/* One try on channel c: TRY_GONE when its daemon went away (the call was not answered), TRY_DRAINING
 * when it answered that it drains; either way the channel is broken and a new one is opened for
 * the next call. */
static int call_on(native_t *t, chan *c, const segops_tcall *call, placed *pl, double deadline, try_end *end,
                   segops_error *e) {
  *end = TRY_DONE;
  segops_nc_sweep_abandoned(c);
  bool gone = false;
  int rc = segops_nc_send_pools(c, deadline, &gone, e);
  if (rc) {
    /* A refused pool leaves the channel as it was; anything else leaves the exchange unknown. */
    if (gone) *end = rc == SEGOPS_E_UNAVAILABLE ? TRY_DRAINING : TRY_GONE;
    if (gone || rc == SEGOPS_E_TIMEOUT || rc == SEGOPS_E_PROTOCOL || rc == SEGOPS_E_CONNECTION)
      atomic_store(&c->broken, true);
    return rc;
  }
  double left = deadline - segops_client_now();
  pl->req.timeout_us = left > 0 ? (uint64_t)(left * 1e6) + 1 : 1;
  int k = slot_claim(c, deadline);
  if (k < 0) {
    bool broken = atomic_load(&c->broken);
    *end = broken ? TRY_GONE : TRY_DONE;
    return segops_client_err(e, broken ? SEGOPS_E_CONNECTION : SEGOPS_E_TIMEOUT,
                             "%s: no free slot on the native channel before the %s", call->op,
                             broken ? "channel broke" : "deadline");
  }
  segops_ring_slot *s = segops_nc_slot(c, (uint32_t)k);
  uint64_t seq = atomic_fetch_add(&c->seq, 1) + 1;
  memcpy(&s->req, &pl->req, sizeof s->req);
  s->seq = seq;
  __atomic_store_n(&s->state, SEGOPS_SLOT_SUBMITTED, __ATOMIC_RELEASE);
  tell_tid(c->hdr);
  segops_chan_ring_doorbell(c->hdr);
  rc = await(c, (uint32_t)k, t->spin_us, deadline);
  if (rc == SEGOPS_E_TIMEOUT) {
    segops_nc_abandon(t, c, (uint32_t)k, pl);
    return segops_client_err(e, SEGOPS_E_TIMEOUT, "%s: no answer from the native channel before the deadline",
                             call->op);
  }
  if (rc == SEGOPS_E_CONNECTION) {
    atomic_store(&c->broken, true);
    *end = TRY_GONE;
    segops_nc_slot_release(c, k);
    return segops_client_err(e, SEGOPS_E_CONNECTION, "%s: the native channel's daemon went away during the call",
                             call->op);
  }
  segops_ring_answer a;
  memcpy(&a, &s->ans, sizeof a);
  segops_nc_slot_release(c, k);
  if (a.seq != seq) {
    atomic_store(&c->broken, true);
    return segops_client_err(e, SEGOPS_E_PROTOCOL, "%s: the native channel answered another call", call->op);
  }
  if (a.status == SEGOPS_E_UNAVAILABLE) { /* draining: this daemon goes away */
    atomic_store(&c->broken, true);
    *end = TRY_DRAINING;
    return answer_error(&a, e);
  }
  if (a.status != SEGOPS_OK) return answer_error(&a, e);
  return segops_nc_take_outputs(call, pl, &a, e);
}

/* The call on the current channel. When that channel was open before this call and its daemon is
 * found gone, the channel is opened once more (a restarted daemon may be on the socket already; a
 * missing one refuses at once) and the call sent there; otherwise, or when that fails, the daemon's
 * going is reported (CONNECTION, or UNAVAILABLE for a drain) for client.c to wait or move on. */
static int send_call(native_t *t, const segops_tcall *call, placed *pl, double deadline, segops_error *e) {
  bool fresh, gone;
  chan *c = segops_nc_get(t, deadline, &fresh, &gone, e);
  if (!c) return e->code;
  try_end end;
  int rc = call_on(t, c, call, pl, deadline, &end, e);
  segops_nc_put(c);
  if (end != TRY_GONE || fresh) return rc;
  double soon = segops_client_now() + RECONNECT_S;
  segops_error again;
  c = segops_nc_get(t, soon < deadline ? soon : deadline, &fresh, &gone, &again);
  if (!c) return rc; /* the first failure says what happened */
  rc = call_on(t, c, call, pl, deadline, &end, e);
  segops_nc_put(c);
  return rc;
}

static int native_call(segops_transport *tp, const segops_tcall *call, double deadline, segops_error *e) {
  native_t *t = (native_t *)tp;
  segops_error own;
  if (!e) e = &own;
  placed pl;
  memset(&pl, 0, sizeof pl);
  int rc = segops_nc_place_call(t, &pl, call, e);
  if (rc == SEGOPS_OK) rc = send_call(t, call, &pl, deadline, e);
  for (int k = 0; k < SEGOPS_MAX_OUTPUTS; k++)
    if (pl.out_alloc[k]) segops_mem_release(t->mem, pl.out_place[k]);
  segops_nc_placed_free(t, &pl);
  return rc;
}

static int native_info(segops_transport *tp, char **json, double deadline, segops_error *e) {
  (void)tp, (void)json, (void)deadline;
  return segops_client_err(e, SEGOPS_E_NOT_IMPLEMENTED,
                           "the native channel carries calls only; ask the daemon's HTTP address for /v1/info");
}

static void native_close(segops_transport *tp) {
  native_t *t = (native_t *)tp;
  if (!t) return;
  segops_nc_forget_parent(t);
  if (t->cur) segops_nc_put(t->cur);
  if (t->token) {
    explicit_bzero(t->token, strlen(t->token));
    free(t->token);
  }
  pthread_mutex_destroy(&t->mu);
  free(t);
}

/* forget: native_close is a forked child's too (the parent's channel is left alone). */
static const segops_transport_vt NATIVE_VT = {"native", native_call, native_info, native_close, native_close};

static int default_spin_us(void) {
  const char *v = getenv("SEGOPS_CLIENT_SPIN_US");
  if (v && *v) {
    char *end;
    long n = strtol(v, &end, 10);
    if (!*end && n >= 0 && n <= 1000000) return (int)n;
  }
  return DEFAULT_SPIN_US;
}

segops_transport *segops_native_open(const char *path, struct segops_mem *mem, const char *token, int spin_us,
                                     uid_t uid, pid_t pid, double deadline, segops_error *e) {
  if (!mem) {
    segops_client_err(e, SEGOPS_E_NOT_IMPLEMENTED, "the native channel needs memfds, which this system does not give");
    return NULL;
  }
  if (!path || !path[0] || strlen(path) >= sizeof((native_t *)0)->path) {
    segops_client_err(e, SEGOPS_E_INVALID_ARGUMENT, "the native channel's socket path is empty or too long");
    return NULL;
  }
  native_t *t = calloc(1, sizeof *t);
  if (!t || (token && !(t->token = strdup(token)))) {
    free(t);
    segops_client_err(e, SEGOPS_E_NOMEM, "out of memory");
    return NULL;
  }
  t->base.vt = &NATIVE_VT;
  snprintf(t->path, sizeof t->path, "%s", path);
  t->mem = mem;
  t->uid = uid;
  t->pid = pid;
  t->spin_us = spin_us >= 0 ? spin_us : default_spin_us();
  t->epoch = segops_nc_fork_epoch(); /* and watches for forks from now on */
  pthread_mutex_init(&t->mu, NULL);
  bool fresh, gone;
  chan *c = segops_nc_get(t, deadline, &fresh, &gone, e);
  if (!c) {
    native_close(&t->base);
    return NULL;
  }
  segops_nc_put(c);
  t->pid = 0; /* a restarted daemon has another pid: its uid and its socket's owner still hold */
  return &t->base;
}

/* client.h: inside libsegops, the client and its daemons ("endpoints"), shared by client.c (open,
 * close, memory, the public entry points), endpoints.c (which daemon takes a call, failover,
 * back-off), resolve.c (the transport of each daemon) and call_check.c (arguments -> segops_tcall).
 * Not installed. */
#ifndef SEGOPS_CLIENT_CLIENT_H
#define SEGOPS_CLIENT_CLIENT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <sys/types.h>

#include "mem.h"
#include "segops.h"
#include "transport.h"

/* The transport choice of segops_options.transport. */
typedef enum {
  SEGOPS_WANT_AUTO,
  SEGOPS_WANT_NATIVE,
  SEGOPS_WANT_UNIX,
  SEGOPS_WANT_HTTP,
  SEGOPS_WANT_LOCAL
} segops_want;

/* A transport and the calls using it: a transport that is replaced (its daemon restarted) is closed
 * when its last call returns. Guarded by the client's mu. */
typedef struct segops_held {
  segops_transport *t;
  int refs;
  bool retired;
} segops_held;

typedef enum { SEGOPS_EP_UNRESOLVED, SEGOPS_EP_RESOLVING, SEGOPS_EP_READY } segops_ep_state;

/* One daemon (one URL of the list). Every field but url and local is guarded by the client's mu. */
typedef struct {
  char *url;         /* as given, trimmed (owned) */
  bool local;        /* "local": the CPU backend in this process, no daemon */
  segops_held *http; /* HTTP over the URL, made at open (no connection): probes, /v1/info; NULL for local */
  segops_held *cur;  /* what calls use once resolved (may be http); NULL before */
  segops_ep_state state;
  int in_flight;
  int failures;         /* in a row; 0 = healthy */
  double resting_until; /* segops_client_now() seconds: no call before then */
  segops_error last;    /* the last failure */
  /* The uid the daemon's native channel first reported (resolve.c; only the resolving call writes
   * it): a later /v1/info naming another uid is not believed (proto/native.md, Trust). */
  bool native_uid_known;
  uid_t native_uid;
} segops_endpoint;

struct segops_client {
  pthread_mutex_t mu; /* held briefly, never across I/O */
  pthread_cond_t cv;  /* an endpoint's resolution finished (CLOCK_MONOTONIC) */
  segops_endpoint *eps;
  int n_eps;
  unsigned turn; /* ties between endpoints go round */
  segops_want want;
  char *token; /* owned; NULL: none */
  double timeout_s;
  int spin_us, threads;
  segops_mem *mem;                /* shared memory for the native channel (a forked child allocates in pools of its own:
                                     mem.c); NULL where memfds cannot be made */
  _Atomic(const char *) used;     /* segops_transport_used */
  _Atomic unsigned fork_gen;      /* the fork count when the transports were made (client.c) */
  struct segops_client *reg_next; /* the registry fork handlers walk (client.c) */
  struct segops_client *reg_prev;
};

/* ---- call_check.c ---- */

/* Checks what the caller gave (fn, arrays, want, outputs) and fills *tc; outs[k] NULL: output k
 * not asked for (all NULL: refused). SEGOPS_OK or INVALID_ARGUMENT with a message. */
int segops_call_build(int fn, const segops_array *const *in, const segops_array *idx, int64_t num_segments,
                      segops_array *const *outs, segops_tcall *tc, segops_error *e);

/* Runs one function on c with outputs by pointer (NULL: not requested): segops_run's and the
 * typed functions' body. */
int segops_client_run(segops_client *c, int fn, const segops_array *const *in, const segops_array *idx,
                      int64_t num_segments, segops_array *const *outs, segops_error *e);

/* ---- endpoints.c ---- */

/* One attempt of a call on the transport t of endpoint ep, before deadline. */
typedef int (*segops_attempt_fn)(segops_endpoint *ep, segops_transport *t, void *arg, double deadline, segops_error *e);

/* Runs attempt on one daemon after another (fewest calls in flight first; a daemon that failed
 * rests for a back-off and must answer /readyz before it gets work again) until one succeeds, one
 * fails with an error another daemon would give too, or the client's timeout passes; what: the
 * call's name for the final error ("segmented_sum forward"). */
int segops_endpoints_run(segops_client *c, segops_attempt_fn attempt, void *arg, const char *what, segops_error *e);

/* Whether another daemon (or this one, later) may answer a call that failed with code. */
bool segops_retryable(int code);

/* ---- resolve.c ---- */

/* Makes ep's transport for c->want (the first call to ep, or after its daemon went away):
 * "auto" asks the daemon's /v1/info for a native channel, then a unix listener that answers here
 * as the same daemon, else HTTP over the URL. Called without mu, by one thread per endpoint at a
 * time; returns the new transport (ep->http's, or a new one) or NULL with e filled. */
segops_held *segops_resolve(segops_client *c, segops_endpoint *ep, double deadline, segops_error *e);

/* A holder for t (NULL when t is NULL or no memory: t is closed then). */
segops_held *segops_held_new(segops_transport *t);

#endif

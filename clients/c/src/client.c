/* client.c: libsegops' public entry points (segops.h): options and their environment defaults,
 * opening a client on one URL or a list (no connection yet), calls, memory, /v1/info, and what a
 * fork does to a client (the child makes its own connections). */
#include "client.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEFAULT_URL "http://127.0.0.1:8080"
#define DEFAULT_TIMEOUT_S 60.0
/* How long a native call polls for its answer before it sleeps, when neither the options nor
 * $SEGOPS_CLIENT_SPIN_US say: the native channel's budget (proto/native.md, Doorbells). Without it
 * every call sleeps on the futex: a call of 2^10 elements took 25-28 us from C on a 2-core VM
 * instead of 2.5 us (bench/client/lib_overhead --only native with SEGOPS_CLIENT_SPIN_US=0 and 50). */
#define DEFAULT_SPIN_US 50
#define MAX_SPIN_US 100000
#define MAX_URLS 64 /* endpoints.c keeps the daemons a call tried in one 64-bit mask */

/* ---- fork: every open client is in a registry; the fork handlers hold every client's locks (its
 * mu and its shared memory's allocator) across fork(), so the child never inherits one held by a
 * thread it does not have, and count forks in the child, where the next call drops the parent's
 * transports (after_fork). Nothing else of the parent's is used in the child: its transports' own
 * locks, sockets and threads are left alone (transport.h, forget). */

static pthread_mutex_t reg_mu = PTHREAD_MUTEX_INITIALIZER;
static segops_client *reg_head;
static pthread_once_t reg_once = PTHREAD_ONCE_INIT;
static atomic_uint fork_gen;

/* Lock order: reg_mu, then clients' mu, then their memory's lock (mem.c takes no other lock
 * while it holds its own), then orphan_mu (after_fork holds a client's mu when it takes
 * orphan_mu). */
static pthread_mutex_t orphan_mu = PTHREAD_MUTEX_INITIALIZER;

static void fork_prepare(void) {
  pthread_mutex_lock(&reg_mu);
  for (segops_client *c = reg_head; c; c = c->reg_next) {
    pthread_mutex_lock(&c->mu);
    segops_mem_fork_lock(c->mem); /* a native call allocates there without c->mu */
  }
  pthread_mutex_lock(&orphan_mu);
}

static void fork_parent(void) {
  pthread_mutex_unlock(&orphan_mu);
  for (segops_client *c = reg_head; c; c = c->reg_next) {
    segops_mem_fork_unlock(c->mem);
    pthread_mutex_unlock(&c->mu);
  }
  pthread_mutex_unlock(&reg_mu);
}

static void cond_init_monotonic(pthread_cond_t *cv) {
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(cv, &ca);
  pthread_condattr_destroy(&ca);
}

static void fork_child(void) {
  atomic_fetch_add(&fork_gen, 1);
  pthread_mutex_unlock(&orphan_mu);
  for (segops_client *c = reg_head; c; c = c->reg_next) {
    cond_init_monotonic(&c->cv); /* its waiters were the parent's threads */
    segops_mem_fork_unlock(c->mem);
    pthread_mutex_unlock(&c->mu);
  }
  pthread_mutex_unlock(&reg_mu);
}

static void reg_init(void) { pthread_atfork(fork_prepare, fork_parent, fork_child); }

static void reg_add(segops_client *c) {
  pthread_once(&reg_once, reg_init);
  pthread_mutex_lock(&reg_mu);
  c->reg_next = reg_head;
  if (reg_head) reg_head->reg_prev = c;
  reg_head = c;
  pthread_mutex_unlock(&reg_mu);
}

static void reg_remove(segops_client *c) {
  pthread_mutex_lock(&reg_mu);
  if (c->reg_prev) c->reg_prev->reg_next = c->reg_next;
  if (c->reg_next) c->reg_next->reg_prev = c->reg_prev;
  if (reg_head == c) reg_head = c->reg_next;
  pthread_mutex_unlock(&reg_mu);
}

/* Transports a forked child inherited: forgotten where the transport can do that without touching
 * the parent's connections (transport.h), else never closed (their sockets and threads are the
 * parent's) and kept reachable from here, so that they are not leaks. */
typedef struct orphan {
  segops_held *h;
  struct orphan *next;
} orphan;
static orphan *orphans;

static void orphan_add(segops_held *h) {
  if (!h) return;
  if (h->t && h->t->vt->forget) {
    h->t->vt->forget(h->t);
    free(h);
    return;
  }
  orphan *o = malloc(sizeof *o);
  if (!o) return; /* unreachable then; nothing better to do with it in the child */
  o->h = h;
  pthread_mutex_lock(&orphan_mu);
  o->next = orphans;
  orphans = o;
  pthread_mutex_unlock(&orphan_mu);
}

/* First use in a process that is not the one that made the transports: they are set aside, and
 * every daemon is resolved again from this process. */
static void after_fork(segops_client *c) {
  unsigned gen = atomic_load(&fork_gen);
  pthread_mutex_lock(&c->mu);
  if (atomic_load(&c->fork_gen) == gen) {
    pthread_mutex_unlock(&c->mu);
    return;
  }
  for (int i = 0; i < c->n_eps; i++) {
    segops_endpoint *ep = &c->eps[i];
    if (ep->cur && ep->cur != ep->http) orphan_add(ep->cur);
    ep->cur = NULL;
    if (ep->http) {
      segops_error e;
      segops_transport *t = segops_http_open(ep->url, c->token, &e); /* NULL only without memory */
      orphan_add(ep->http);
      ep->http = segops_held_new(t);
    }
    ep->state = SEGOPS_EP_UNRESOLVED;
    ep->in_flight = 0;
  }
  atomic_store(&c->used, "");
  atomic_store(&c->fork_gen, gen); /* last: a thread that sees it sees the rest */
  pthread_mutex_unlock(&c->mu);
}

static inline void check_fork(segops_client *c) {
  if (atomic_load_explicit(&fork_gen, memory_order_relaxed) != atomic_load(&c->fork_gen)) after_fork(c);
}

/* ---- options ---- */

void segops_options_init(segops_options *o) {
  if (!o) return;
  memset(o, 0, sizeof *o);
  o->timeout_s = DEFAULT_TIMEOUT_S;
  o->spin_us = -1;
}

static int parse_want(const char *s, segops_want *w, segops_error *e) {
  static const char *const names[] = {"auto", "native", "unix", "http", "local"};
  if (!s) s = "auto";
  for (int i = 0; i < 5; i++)
    if (!strcmp(s, names[i])) {
      *w = (segops_want)i;
      return SEGOPS_OK;
    }
  return segops_client_err(e, SEGOPS_E_INVALID_ARGUMENT,
                           "transport must be \"auto\", \"native\", \"unix\", \"http\" or \"local\", not \"%.64s\"", s);
}

static int parse_spin(int given, int *spin_us, segops_error *e) {
  if (given >= 0) {
    if (given > MAX_SPIN_US)
      return segops_client_err(e, SEGOPS_E_INVALID_ARGUMENT, "spin_us must be 0 to %d microseconds, not %d",
                               MAX_SPIN_US, given);
    *spin_us = given;
    return SEGOPS_OK;
  }
  const char *v = getenv("SEGOPS_CLIENT_SPIN_US");
  *spin_us = DEFAULT_SPIN_US;
  if (!v || !*v) return SEGOPS_OK;
  char *end = NULL;
  errno = 0;
  double d = strtod(v, &end);
  if (errno || end == v || *end || !(d >= 0 && d <= MAX_SPIN_US))
    return segops_client_err(e, SEGOPS_E_INVALID_ARGUMENT,
                             "SEGOPS_CLIENT_SPIN_US must be a number of microseconds from 0 to %d, not '%.32s'",
                             MAX_SPIN_US, v);
  *spin_us = (int)d;
  return SEGOPS_OK;
}

/* First contact's wait: given, else $SEGOPS_WAIT_S, else FIRST_CONTACT_S. */
static int parse_wait(double given, double *wait_s, segops_error *e) {
  *wait_s = FIRST_CONTACT_S;
  if (given > 0) {
    *wait_s = given;
    return SEGOPS_OK;
  }
  const char *v = getenv("SEGOPS_WAIT_S");
  if (!v || !*v) return SEGOPS_OK;
  char *end = NULL;
  errno = 0;
  double d = strtod(v, &end);
  if (errno || end == v || *end || !(d >= 0 && d <= 1e6))
    return segops_client_err(e, SEGOPS_E_INVALID_ARGUMENT,
                             "SEGOPS_WAIT_S must be a number of seconds from 0 to 1000000, not '%.32s'", v);
  if (d > 0) *wait_s = d;
  return SEGOPS_OK;
}

/* ---- open and close ---- */

static void endpoint_free(segops_endpoint *ep) {
  if (ep->cur && ep->cur != ep->http) {
    ep->cur->t->vt->close(ep->cur->t);
    free(ep->cur);
  }
  if (ep->http) {
    ep->http->t->vt->close(ep->http->t);
    free(ep->http);
  }
  free(ep->url);
}

void segops_close(segops_client *c) {
  if (!c) return;
  reg_remove(c);
  check_fork(c); /* a child closes nothing of the parent's */
  for (int i = 0; i < c->n_eps; i++) endpoint_free(&c->eps[i]);
  free(c->eps);
  segops_mem_free_all(c->mem);
  free(c->token);
  pthread_cond_destroy(&c->cv);
  pthread_mutex_destroy(&c->mu);
  free(c);
}

/* One URL of the list: "local", "unix:///path", "http(s)://host[:port][/prefix]" or "host:port". */
static int endpoint_init(segops_client *c, segops_endpoint *ep, const char *url, size_t len, segops_error *e) {
  ep->url = strndup(url, len);
  if (!ep->url) return segops_client_err(e, SEGOPS_E_NOMEM, "out of memory");
  ep->local = c->want == SEGOPS_WANT_LOCAL || !strcmp(ep->url, "local");
  if (ep->local) return SEGOPS_OK;
  segops_transport *t = segops_http_open(ep->url, c->token, e);
  if (!t) return e ? e->code : SEGOPS_E_INVALID_ARGUMENT;
  ep->http = segops_held_new(t);
  return ep->http ? SEGOPS_OK : segops_client_err(e, SEGOPS_E_NOMEM, "out of memory");
}

/* The comma-separated list into c->eps. */
static int parse_urls(segops_client *c, const char *list, segops_error *e) {
  c->eps = calloc(MAX_URLS, sizeof *c->eps);
  if (!c->eps) return segops_client_err(e, SEGOPS_E_NOMEM, "out of memory");
  if (c->want == SEGOPS_WANT_LOCAL) list = "local"; /* one in-process backend, whatever the URLs */
  for (const char *p = list; *p;) {
    const char *end = strchr(p, ',');
    if (!end) end = p + strlen(p);
    const char *a = p, *b = end;
    while (a < b && (*a == ' ' || *a == '\t')) a++;
    while (b > a && (b[-1] == ' ' || b[-1] == '\t')) b--;
    if (b > a) {
      if (c->n_eps == MAX_URLS)
        return segops_client_err(e, SEGOPS_E_INVALID_ARGUMENT, "at most %d URLs, not more", MAX_URLS);
      int rc = endpoint_init(c, &c->eps[c->n_eps++], a, (size_t)(b - a), e);
      if (rc) return rc;
    }
    p = *end ? end + 1 : end;
  }
  if (c->n_eps == 0) return segops_client_err(e, SEGOPS_E_INVALID_ARGUMENT, "no URL in \"%.200s\"", list);
  return SEGOPS_OK;
}

static int client_options(segops_client *c, const segops_options *opts, segops_error *e) {
  segops_options def;
  segops_options_init(&def);
  if (!opts) opts = &def;
  int rc = parse_want(opts->transport, &c->want, e);
  if (!rc) rc = parse_spin(opts->spin_us, &c->spin_us, e);
  if (!rc) rc = parse_wait(opts->wait_s, &c->wait_s, e);
  if (rc) return rc;
  c->log = opts->log;
  c->log_user = opts->log_user;
  const char *token = opts->token ? opts->token : getenv("SEGOPS_TOKEN");
  if (token && *token && !(c->token = strdup(token))) return segops_client_err(e, SEGOPS_E_NOMEM, "out of memory");
  c->timeout_s = opts->timeout_s > 0 ? opts->timeout_s : DEFAULT_TIMEOUT_S;
  c->threads = opts->threads;
  return SEGOPS_OK;
}

int segops_open(segops_client **out, const char *url, const segops_options *opts, segops_error *err) {
  if (!out) return segops_client_err(err, SEGOPS_E_INVALID_ARGUMENT, "segops_open: out is NULL");
  *out = NULL;
  segops_client *c = calloc(1, sizeof *c);
  if (!c) return segops_client_err(err, SEGOPS_E_NOMEM, "out of memory");
  pthread_mutex_init(&c->mu, NULL);
  cond_init_monotonic(&c->cv);
  atomic_init(&c->used, "");
  atomic_init(&c->fork_gen, atomic_load(&fork_gen));
  atomic_init(&c->reached, false);
  atomic_init(&c->said_waiting, false);
  if (!url || !*url) url = getenv("SEGOPS_URL");
  if (!url || !*url) url = DEFAULT_URL;
  int rc = client_options(c, opts, err);
  if (!rc) rc = parse_urls(c, url, err);
  if (rc) {
    segops_close(c);
    return rc;
  }
  /* Shared memory only where a native channel may carry it. */
  if (c->want == SEGOPS_WANT_AUTO || c->want == SEGOPS_WANT_NATIVE) c->mem = segops_mem_new();
  reg_add(c);
  *out = c;
  return SEGOPS_OK;
}

const char *segops_transport_used(segops_client *c) { return c ? atomic_load(&c->used) : ""; }

/* ---- memory ---- */

void *segops_alloc(segops_client *c, size_t nbytes) {
  if (!c) return NULL;
  check_fork(c);
  return segops_client_alloc(c->mem, nbytes);
}

void segops_free(segops_client *c, void *p) {
  if (!p) return;
  uint32_t pool;
  uint64_t off;
  /* The pools' own fork rule (mem.c) lets a child give back memory of its parent's pools. */
  if (c && c->mem && segops_mem_locate(c->mem, p, 1, &pool, &off))
    segops_mem_release(c->mem, p);
  else
    free(p);
}

/* ---- calls ---- */

static int attempt_call(segops_endpoint *ep, segops_transport *t, void *arg, double deadline, segops_error *e) {
  (void)ep;
  return t->vt->call(t, arg, deadline, e);
}

int segops_client_run(segops_client *c, int fn, const segops_array *const *in, const segops_array *idx,
                      int64_t num_segments, segops_array *const *outs, segops_error *e) {
  if (!c) return segops_client_err(e, SEGOPS_E_INVALID_ARGUMENT, "the client is NULL");
  segops_tcall tc;
  int rc = segops_call_build(fn, in, idx, num_segments, outs, &tc, e);
  if (rc) return rc;
  check_fork(c);
  char what[64];
  snprintf(what, sizeof what, "%s %s", tc.op, tc.pass);
  return segops_endpoints_run(c, attempt_call, &tc, what, e);
}

/* segops_run's outputs and want as one pointer per output (NULL: not asked for). */
static int outputs_by_want(int fn, unsigned want, segops_array *outputs, segops_array *outs[], segops_error *e) {
  int n_out = segops_fn_outputs(fn);
  if (n_out < 0)
    return segops_client_err(e, SEGOPS_E_INVALID_ARGUMENT, "function %d does not exist (SEGOPS_FN_*: 0 to %d)", fn,
                             SEGOPS_FN_COUNT - 1);
  if (want == 0) want = (1u << n_out) - 1;
  if (want >> n_out)
    return segops_client_err(e, SEGOPS_E_INVALID_ARGUMENT, "%s %s: want (0x%x) asks for output %d, but it has %d",
                             segops_fn_op(fn), segops_fn_pass(fn), want, 31 - __builtin_clz(want), n_out);
  if (!outputs)
    return segops_client_err(e, SEGOPS_E_INVALID_ARGUMENT, "%s %s: outputs is NULL", segops_fn_op(fn),
                             segops_fn_pass(fn));
  for (int k = 0; k < SEGOPS_MAX_OUTPUTS; k++) outs[k] = k < n_out && (want >> k) & 1u ? &outputs[k] : NULL;
  return SEGOPS_OK;
}

int segops_run(segops_client *c, int fn, const segops_array *const *inputs, const segops_array *idx,
               int64_t num_segments, unsigned want, segops_array *outputs, segops_error *e) {
  segops_array *outs[SEGOPS_MAX_OUTPUTS];
  int rc = outputs_by_want(fn, want, outputs, outs, e);
  return rc ? rc : segops_client_run(c, fn, inputs, idx, num_segments, outs, e);
}

int segops_output_shapes(int fn, const segops_array *const *inputs, const segops_array *idx, int64_t num_segments,
                         unsigned want, segops_array *outputs, segops_error *e) {
  segops_array *outs[SEGOPS_MAX_OUTPUTS], probe[SEGOPS_MAX_OUTPUTS] = {{0}};
  int rc = outputs_by_want(fn, want, outputs, outs, e);
  if (rc) return rc;
  segops_array *probes[SEGOPS_MAX_OUTPUTS] = {0};
  for (int k = 0; k < SEGOPS_MAX_OUTPUTS; k++) probes[k] = outs[k] ? &probe[k] : NULL; /* no memory to check */
  segops_tcall tc;
  rc = segops_call_build(fn, inputs, idx, num_segments, probes, &tc, e);
  if (rc) return rc;
  if (!tc.expect_known)
    return segops_client_err(e, SEGOPS_E_INVALID_ARGUMENT,
                             "%s %s: the inputs do not determine the outputs (the call will be refused: run it for "
                             "the reason)",
                             tc.op, tc.pass);
  for (int k = 0; k < tc.n_out; k++) {
    if (!outs[k]) continue;
    outs[k]->dtype = tc.out_dtype;
    outs[k]->ndim = tc.out_ndim[k];
    memcpy(outs[k]->shape, tc.out_shape[k], sizeof outs[k]->shape);
    outs[k]->nbytes = tc.out_nbytes[k];
  }
  return SEGOPS_OK;
}

/* ---- /v1/info ---- */

/* /v1/info over HTTP to the daemon (the native channel carries calls only), or local's own. */
static int attempt_info(segops_endpoint *ep, segops_transport *t, void *arg, double deadline, segops_error *e) {
  if (ep->http) t = ep->http->t;
  return t->vt->info(t, (char **)arg, deadline, e);
}

int segops_info(segops_client *c, char **json, segops_error *e) {
  if (!json) return segops_client_err(e, SEGOPS_E_INVALID_ARGUMENT, "segops_info: json is NULL");
  *json = NULL;
  if (!c) return segops_client_err(e, SEGOPS_E_INVALID_ARGUMENT, "the client is NULL");
  check_fork(c);
  return segops_endpoints_run(c, attempt_info, json, "info", e);
}

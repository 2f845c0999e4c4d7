/* endpoints.c: which daemon takes a call, and failover, as the Python client's _endpoints.py does
 * it. A call goes to the healthy daemon with the fewest calls in flight (ties in turn). A refused
 * or dropped connection, a 503 or a drain marks that daemon failed and moves the call to another
 * (every function is pure: sending it again is safe), and so does an attempt that used up its share
 * of the call's time (what is left, shared among the daemons not yet tried). A failed daemon rests for
 * a back-off (at least its Retry-After; doubling with each failure in a row) and must answer /readyz
 * before it gets work again. When every daemon rests, the call waits for the first to come back, until its
 * timeout (the whole deadline, failover included); then it fails naming every daemon's last
 * failure and the time spent, and after a second of waiting it tells the client's log once.
 *
 * That wait is for daemons the client has reached (a restart). A client that has never reached
 * any (first contact: a forgotten daemon, a typo in the URL) gives up after wait_s (1 s unless told
 * otherwise), a name that does not resolve at once (unless told to wait longer), and says every
 * URL, why, and how to start a daemon; a connection, name resolution included, must be made within that time too. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "client.h"

_Thread_local double segops_connect_by;
_Thread_local bool segops_no_such_host;

#define BACKOFF_MIN_S 0.25
#define BACKOFF_MAX_S 30.0

bool segops_retryable(int code) {
  return code == SEGOPS_E_CONNECTION || code == SEGOPS_E_UNAVAILABLE || code == SEGOPS_E_RESOURCE_EXHAUSTED;
}

segops_held *segops_held_new(segops_transport *t) {
  if (!t) return NULL;
  segops_held *h = calloc(1, sizeof *h);
  if (!h) t->vt->close(t);
  if (h) h->t = t;
  return h;
}

static void sleep_s(double s) {
  if (s <= 0) return;
  struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
  while (nanosleep(&ts, &ts) == -1 && errno == EINTR) {
  }
}

/* ---- choosing a daemon (all under c->mu) ---- */

typedef struct {
  double deadline, t0;
  double give_up; /* deadline, or before it the end of first contact's wait (not reached yet) */
  uint64_t tried; /* bit i: endpoint i failed this call */
  uint64_t gone;  /* bit i: endpoint i's name does not resolve (first contact: not tried again) */
  bool last_try;  /* the final attempt, just before the deadline, ignores rests */
  int last_code;
} call_state;

/* Whether endpoint i may take this attempt: not resting (unless this is the last try), and in the
 * first round not one this call already tried. */
static bool candidate(const segops_client *c, const call_state *cs, int i, double now, bool fresh_only) {
  return (c->eps[i].resting_until <= now || cs->last_try) && !(fresh_only && ((cs->tried >> i) & 1u)) &&
         !((cs->gone >> i) & 1u);
}

/* The healthy endpoint with the fewest calls in flight (ties in turn), preferring those this call
 * has not tried; with none, the time to wait (< 0: give up). Takes the endpoint's in_flight. */
static segops_endpoint *pick(segops_client *c, call_state *cs, double now, double *wait) {
  for (int round = 0; round < 2; round++) {
    bool fresh_only = round == 0;
    int least = -1, ties = 0;
    for (int i = 0; i < c->n_eps; i++) {
      if (!candidate(c, cs, i, now, fresh_only)) continue;
      if (least < 0 || c->eps[i].in_flight < least) {
        least = c->eps[i].in_flight;
        ties = 0;
      }
      ties += c->eps[i].in_flight == least;
    }
    if (least < 0) continue;
    int k = (int)(c->turn++ % (unsigned)ties);
    for (int i = 0; i < c->n_eps; i++)
      if (candidate(c, cs, i, now, fresh_only) && c->eps[i].in_flight == least && k-- == 0) {
        c->eps[i].in_flight++;
        return &c->eps[i];
      }
  }
  double earliest = -1;
  for (int i = 0; i < c->n_eps; i++)
    if (!((cs->gone >> i) & 1u) && (earliest < 0 || c->eps[i].resting_until < earliest))
      earliest = c->eps[i].resting_until;
  if (earliest < 0) { /* every name fails to resolve */
    *wait = -1;
    return NULL;
  }
  /* Keep trying until the timeout: the last attempt goes out shortly before the deadline. */
  double span = cs->give_up - cs->t0;
  double reserve = span / 10 < 0.25 ? span / 10 : 0.25;
  if (earliest < cs->give_up - reserve) {
    *wait = earliest - now;
  } else if (!cs->last_try && now < cs->give_up) {
    *wait = cs->give_up - reserve - now;
    cs->last_try = true;
  } else {
    *wait = -1;
  }
  return NULL;
}

/* Marks ep failed (under c->mu); returns a replaced transport that no call uses any more, which
 * the caller closes after unlocking. */
static segops_held *mark_failed(segops_client *c, segops_endpoint *ep, const segops_error *err) {
  ep->failures++;
  ep->last = *err;
  double rest = BACKOFF_MIN_S * (double)(1u << (ep->failures < 8 ? ep->failures - 1 : 7));
  if (rest > BACKOFF_MAX_S) rest = BACKOFF_MAX_S;
  if (err->retry_after_s > rest) rest = err->retry_after_s < BACKOFF_MAX_S ? err->retry_after_s : BACKOFF_MAX_S;
  ep->resting_until = segops_client_now() + rest;
  /* A daemon that went away (refused, dropped, drained) may come back changed: another native
   * channel, no unix listener. Its transport is found again on its next call. */
  if (ep->state != SEGOPS_EP_READY || ep->local || c->want == SEGOPS_WANT_HTTP) return NULL;
  if (err->code == SEGOPS_E_RESOURCE_EXHAUSTED) return NULL; /* busy, not gone: keep its channel */
  segops_held *h = ep->cur;
  ep->cur = NULL;
  ep->state = SEGOPS_EP_UNRESOLVED;
  if (h == ep->http) return NULL; /* the URL's own HTTP stays */
  h->retired = true;
  return h->refs == 0 ? h : NULL;
}

static void held_close(segops_held *h) {
  if (!h) return;
  h->t->vt->close(h->t);
  free(h);
}

static void release(segops_client *c, segops_held *h) {
  pthread_mutex_lock(&c->mu);
  bool close_it = --h->refs == 0 && h->retired;
  pthread_mutex_unlock(&c->mu);
  if (close_it) held_close(h);
}

/* ---- one attempt ---- */

/* The endpoint's transport, resolved by this thread or waited for; a reference is taken. */
static segops_held *acquire(segops_client *c, segops_endpoint *ep, double deadline, segops_error *e) {
  pthread_mutex_lock(&c->mu);
  for (;;) {
    if (ep->state == SEGOPS_EP_READY) {
      segops_held *h = ep->cur;
      h->refs++;
      pthread_mutex_unlock(&c->mu);
      return h;
    }
    if (ep->state == SEGOPS_EP_UNRESOLVED) break;
    double left = deadline - segops_client_now();
    if (left <= 0) {
      pthread_mutex_unlock(&c->mu);
      segops_client_err(e, SEGOPS_E_TIMEOUT, "%s: its transport was still being found when the timeout passed",
                        ep->url);
      return NULL;
    }
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    double at = (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9 + left;
    ts.tv_sec = (time_t)at;
    ts.tv_nsec = (long)((at - (double)ts.tv_sec) * 1e9);
    pthread_cond_timedwait(&c->cv, &c->mu, &ts);
  }
  ep->state = SEGOPS_EP_RESOLVING;
  pthread_mutex_unlock(&c->mu);
  segops_held *h = segops_resolve(c, ep, deadline, e);
  pthread_mutex_lock(&c->mu);
  ep->cur = h;
  ep->state = h ? SEGOPS_EP_READY : SEGOPS_EP_UNRESOLVED;
  if (h) h->refs++;
  pthread_cond_broadcast(&c->cv);
  pthread_mutex_unlock(&c->mu);
  return h;
}

/* A failed daemon's way back: /readyz answers 200. */
static int rejoin_ok(segops_endpoint *ep, double deadline, segops_error *e) {
  if (ep->local || !ep->http) return SEGOPS_OK;
  return segops_http_ready(ep->http->t, deadline, e);
}

static int attempt_on(segops_client *c, segops_endpoint *ep, int failures, segops_attempt_fn fn, void *arg,
                      double deadline, segops_error *e) {
  if (failures) {
    int rc = rejoin_ok(ep, deadline, e);
    if (rc) return rc;
  }
  segops_held *h = acquire(c, ep, deadline, e);
  if (!h) return e ? e->code : SEGOPS_E_CONNECTION;
  int rc = fn(ep, h->t, arg, deadline, e);
  if (rc == SEGOPS_OK) atomic_store(&c->used, h->t->vt->name);
  release(c, h);
  return rc;
}

/* One attempt; connect_by: 0, or the time by which first contact's connection must be made. */
static int attempt(segops_client *c, segops_endpoint *ep, int failures, segops_attempt_fn fn, void *arg,
                   double deadline, double connect_by, segops_error *e) {
  segops_connect_by = connect_by;
  segops_no_such_host = false;
  int rc = attempt_on(c, ep, failures, fn, arg, deadline, e);
  segops_connect_by = 0;
  /* Any answer (a result, a refusal, a 503 while it starts) means a daemon is there. */
  if (rc != SEGOPS_E_CONNECTION && !ep->local) atomic_store(&c->reached, true);
  return rc;
}

/* ---- the call ---- */

static int fail_all(segops_client *c, call_state *cs, const char *what, segops_error *e) {
  if (!e) return cs->last_code;
  char msg[sizeof e->message];
  size_t o = (size_t)snprintf(msg, sizeof msg, "%s: no daemon took the call in %.3g s (timeout %.3g s)", what,
                              segops_client_now() - cs->t0, c->timeout_s);
  pthread_mutex_lock(&c->mu);
  for (int i = 0; i < c->n_eps && o < sizeof msg; i++) {
    const segops_endpoint *ep = &c->eps[i];
    const char *m = ep->last.message;
    if (!strncmp(m, "segops: ", 8)) m += 8;
    o += (size_t)snprintf(msg + o, sizeof msg - o, "; %s: %s", ep->url, ep->failures ? m : "not tried");
  }
  pthread_mutex_unlock(&c->mu);
  return segops_client_err(e, cs->last_code, "%s", msg);
}

/* A client that never reached a daemon gives up: every URL and why, and what to do. */
static int fail_first_contact(segops_client *c, call_state *cs, const char *what, segops_error *e) {
  if (!e) return cs->last_code;
  char msg[sizeof e->message];
  size_t o = (size_t)snprintf(msg, sizeof msg,
                              "%s: no segops daemon answered in %.2g s (this client has not reached one yet):", what,
                              segops_client_now() - cs->t0);
  pthread_mutex_lock(&c->mu);
  for (int i = 0; i < c->n_eps && o < sizeof msg; i++) {
    const segops_endpoint *ep = &c->eps[i];
    const char *m = ep->last.message;
    if (!strncmp(m, "segops: ", 8)) m += 8;
    if (!strncmp(m, "GET ", 4) || !strncmp(m, "POST ", 5)) { /* the URL is named already: its reason */
      const char *why = strstr(m, ": ");
      if (why) m = why + 2;
    }
    o += (size_t)snprintf(msg + o, sizeof msg - o, "%s %s: %s", i ? ";" : "", ep->url, ep->failures ? m : "not tried");
  }
  pthread_mutex_unlock(&c->mu);
  if (o < sizeof msg)
    snprintf(msg + o, sizeof msg - o,
             ". Start one (segopsd --listen HOST:PORT; scripts/run.sh in a source tree) or point SEGOPS_URL at "
             "one; to wait for a daemon that is starting, set SEGOPS_WAIT_S (or the client's wait option) to the "
             "seconds to wait");
  return segops_client_err(e, SEGOPS_E_CONNECTION, "%s", msg);
}

/* Once per outage, after a second of waiting: what the call waits for, and until when. */
static void say_waiting(segops_client *c, const call_state *cs, segops_endpoint *ep) {
  if (!c->log || atomic_exchange(&c->said_waiting, true)) return;
  char last[300] = "", until[32] = "?";
  pthread_mutex_lock(&c->mu);
  const char *m = ep->last.message;
  snprintf(last, sizeof last, "%.299s", strncmp(m, "segops: ", 8) ? m : m + 8);
  pthread_mutex_unlock(&c->mu);
  struct timespec wall;
  clock_gettime(CLOCK_REALTIME, &wall);
  time_t at = wall.tv_sec + (time_t)(cs->deadline - segops_client_now() + 0.5);
  struct tm tm;
  if (localtime_r(&at, &tm)) strftime(until, sizeof until, "%H:%M:%S", &tm);
  char msg[700];
  snprintf(msg, sizeof msg, "segops: waiting for %s%s until %s (the call's timeout of %.3g s): %s",
           c->n_eps > 1 ? "a daemon of " : "", c->n_eps > 1 ? "the client's list" : ep->url, until, c->timeout_s, last);
  c->log(c->log_user, SEGOPS_LOG_LEVEL_WARNING, msg);
}

/* The deadline of one attempt: an equal share of what is left among the daemons this call has not
 * tried yet (all of it for the last one), so that one that answers slowly, or trickles its answer,
 * leaves time for the others. */
static double attempt_deadline(const segops_client *c, const call_state *cs, double now) {
  int untried = 0;
  for (int i = 0; i < c->n_eps; i++) untried += !((cs->tried >> i) & 1u);
  return untried > 1 ? now + (cs->deadline - now) / untried : cs->deadline;
}

int segops_endpoints_run(segops_client *c, segops_attempt_fn fn, void *arg, const char *what, segops_error *e) {
  call_state cs = {.t0 = segops_client_now(), .last_code = SEGOPS_E_CONNECTION};
  cs.deadline = cs.t0 + c->timeout_s;
  double contact_by = cs.t0 + c->wait_s < cs.deadline ? cs.t0 + c->wait_s : cs.deadline;
  segops_error local_err;
  if (!e) e = &local_err;         /* failover reads the error */
  segops_endpoint *waited = NULL; /* the daemon that failed last */
  for (;;) {
    bool first = !atomic_load(&c->reached);
    if (!first && cs.give_up < cs.deadline) cs.last_try = false; /* reached meanwhile: the whole timeout */
    cs.give_up = first ? contact_by : cs.deadline;
    double now = segops_client_now(), wait = 0;
    pthread_mutex_lock(&c->mu);
    segops_endpoint *ep = pick(c, &cs, now, &wait);
    int failures = ep ? ep->failures : 0;
    pthread_mutex_unlock(&c->mu);
    if (!ep) {
      if (wait < 0)
        return first && contact_by < cs.deadline ? fail_first_contact(c, &cs, what, e) : fail_all(c, &cs, what, e);
      if (!first && waited && c->log && !atomic_load(&c->said_waiting)) { /* say it after 1 s, not later */
        if (now - cs.t0 >= 1.0)
          say_waiting(c, &cs, waited);
        else if (wait > cs.t0 + 1.0 - now)
          wait = cs.t0 + 1.0 - now;
      }
      sleep_s(wait > 0 ? wait : 0.001);
      continue;
    }
    double until = attempt_deadline(c, &cs, now);
    int rc = attempt(c, ep, failures, fn, arg, until, first ? contact_by : 0, e);
    if (rc == SEGOPS_OK && atomic_load(&c->said_waiting)) atomic_store(&c->said_waiting, false);
    /* An attempt that used up its share moves on, as a daemon that went away does. */
    bool retry = rc != SEGOPS_OK && (segops_retryable(rc) || (rc == SEGOPS_E_TIMEOUT && until < cs.deadline));
    pthread_mutex_lock(&c->mu);
    ep->in_flight--;
    if (rc == SEGOPS_OK) ep->failures = 0;
    segops_held *gone = retry ? mark_failed(c, ep, e) : NULL;
    pthread_mutex_unlock(&c->mu);
    held_close(gone);
    if (!retry) return rc;
    cs.tried |= 1ull << (ep - c->eps);
    cs.last_code = rc;
    waited = ep;
    first = !atomic_load(&c->reached);
    /* A typo does not get better; a client told to wait may be waiting for its daemon's DNS name. */
    if (first && segops_no_such_host && c->wait_s <= FIRST_CONTACT_S) cs.gone |= 1ull << (ep - c->eps);
    if (first && contact_by < cs.deadline && (segops_client_now() >= contact_by || cs.last_try))
      return fail_first_contact(c, &cs, what, e);
    if (segops_client_now() >= cs.deadline || cs.last_try) return fail_all(c, &cs, what, e);
  }
}

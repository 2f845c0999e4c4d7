/* sched_queue.c: the bounded FIFO, the per-device workers and the deadline reaper.
 * One mutex guards the queue; workers and the reaper wait on condition variables bound to
 * CLOCK_MONOTONIC so deadlines are immune to wall-clock changes. */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "errors.h"
#include "log.h"
#include "metrics.h"
#include "scheduler.h"

/* Bounds the jobs joined in one backend call, whatever their size. */
#define MAX_BATCH_JOBS 256
/* Only requests of at most this many rows join a batch. Batching concatenates every input and
 * splits every output on the host, and the joined block is ordinary memory (no direct DMA from a
 * registered region): that pays where a call's fixed costs (launch, synchronisation, hand-off)
 * dominate, and costs more than it saves once a request's own copies do. Measured on an sm_90 GPU,
 * 16 workers over shared memory (bench/worker/worker_bench.py --backend cuda --workers 16
 * --transport shm, --max-batch-elements 256k against 0): at 2^17 rows batching took sum's steps/s from
 * 1722 to 918 and mul's from 752 to 327 (pairs of requests joined up to the 256k-row cap); at 2^14
 * it made no difference beyond the noise, at 2^10 it gained about 20 %. */
#define BATCH_JOIN_MAX_ROWS ((int64_t)1 << 14)
/* Owners (users) with jobs waiting at once that get a share each; beyond, a job counts as no one's. */
#define SCHED_OWNERS 256

struct segops_sched {
  segops_backend *backend;
  segops_sched_opts opts;
  pthread_mutex_t mu;
  pthread_cond_t work;   /* queue gained a job, or stopping */
  pthread_cond_t idle;   /* queue empty and nothing running */
  pthread_cond_t reaper; /* stopping; a job queued while the reaper is parked */
  bool reaper_parked;    /* the reaper sleeps without a timeout: the queue was empty */
  double tick;           /* the reaper's longest sleep, seconds */
  segops_job *head, *tail;
  int64_t depth;
  atomic_long depth_hint; /* depth, readable without the lock (for spinning workers) */
  atomic_bool spinning;   /* a worker is polling for work */
  int running;            /* jobs taken by workers and not yet done */
  bool closed, stopping;
  int n_workers;
  pthread_t *workers;
  pthread_t reaper_thread;
  bool reaper_started;
  int64_t inline_max_work; /* segops_sched_run_inline's bound on n + s; 0 = never inline */
  bool *dev_busy;          /* device d is running a call (its worker's or one run inline) */
  int inline_running;      /* calls running inline now */
  /* Owners with jobs waiting or running (opts.max_queue_per_owner > 0): an entry per owner while it
   * has any. */
  struct {
    uint32_t owner;
    int64_t queued, running;
  } owners[SCHED_OWNERS];
  int last_slot; /* the owner entry served last: the next pick starts after it */
};

/* A call this small costs less to compute than to hand to a worker and back (a wake-up and a
 * resume, tens of microseconds), so it runs on the submitting thread when a device is free.
 * Measured on one sm_90 GPU (bench/worker/worker_bench.py, CUDA backend, shared memory) against never
 * inlining: one worker's step 1.1-2x faster at 2^10-2^14 rows; a bound of 2^22 did no better. */
#define INLINE_MAX_WORK ((int64_t)1 << 15)

static struct timespec abs_ts(double t) {
  struct timespec ts;
  if (t < 0) t = 0;
  ts.tv_sec = (time_t)t;
  ts.tv_nsec = (long)((t - (double)ts.tv_sec) * 1e9);
  if (ts.tv_nsec >= 1000000000L) ts.tv_nsec = 999999999L;
  return ts;
}

static void cond_init_mono(pthread_cond_t *c) {
  pthread_condattr_t a;
  pthread_condattr_init(&a);
  pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
  pthread_cond_init(c, &a);
  pthread_condattr_destroy(&a);
}

/* Removes job (whose predecessor is prev, NULL for the head) from the queue. Lock held. */
static void unlink_job(segops_sched *s, segops_job *prev, segops_job *job) {
  if (job->owner_slot >= 0) s->owners[job->owner_slot].queued--;
  if (prev)
    prev->next = job->next;
  else
    s->head = job->next;
  if (s->tail == job) s->tail = prev;
  job->next = NULL;
  s->depth--;
  atomic_store_explicit(&s->depth_hint, s->depth, memory_order_relaxed);
}

/* Whether worker `device` may run job (backend->accepts; every worker takes every call without it). */
static bool takes(const segops_sched *s, int device, const segops_job *job) {
  return !s->backend->accepts || s->backend->accepts(s->backend->ctx, device, job->call);
}

/* Whether every worker may run job (then waking any one of them is enough). */
static bool all_take(const segops_sched *s, const segops_job *job) {
  if (!s->backend->accepts) return true;
  for (int d = 0; d < s->n_workers; d++)
    if (!takes(s, d, job)) return false;
  return true;
}

/* Whether an owner entry is taken (it has jobs waiting or running). */
static bool slot_used(const segops_sched *s, int k) { return s->owners[k].queued > 0 || s->owners[k].running > 0; }

/* Whether job's owner runs its share of the workers already; lock held. */
static bool at_running_share(const segops_sched *s, const segops_job *j) {
  return j->owner_slot >= 0 && s->owners[j->owner_slot].running >= s->opts.max_running_per_owner;
}

/* The next queued job worker `device` may run, and the job before it (for unlink_job); lock held.
 * Without owners, the first; with them, round-robin across owners: the first job of the first
 * owner after the one served last (jobs of no owner count as one more owner), passing over owners
 * at their running share while any other owner's job waits. */
static segops_job *first_for(segops_sched *s, int device, segops_job **prev) {
  *prev = NULL;
  if (s->opts.max_queue_per_owner <= 0) {
    for (segops_job *j = s->head; j; *prev = j, j = j->next)
      if (takes(s, device, j)) return j;
    return NULL;
  }
  segops_job *best = NULL, *best_prev = NULL, *p = NULL;
  int best_rank = 2 * (SCHED_OWNERS + 2);
  for (segops_job *j = s->head; j; p = j, j = j->next) {
    if (!takes(s, device, j)) continue;
    int slot = j->owner_slot >= 0 ? j->owner_slot : SCHED_OWNERS; /* no owner: one more */
    int rank = (slot - s->last_slot - 1 + 2 * (SCHED_OWNERS + 1)) % (SCHED_OWNERS + 1);
    if (at_running_share(s, j)) rank += SCHED_OWNERS + 1; /* only when no one else waits */
    if (rank < best_rank) {
      best = j, best_prev = p, best_rank = rank;
      if (rank == 0) break;
    }
  }
  if (best) s->last_slot = best->owner_slot >= 0 ? best->owner_slot : SCHED_OWNERS;
  *prev = best_prev;
  return best;
}

/* Whether job may wait in the queue now, with its owner's entry taken (job->owner_slot) when it
 * has one; lock held. */
static bool admit(segops_sched *s, segops_job *job) {
  job->owner_slot = -1;
  if (s->opts.max_queue_per_owner <= 0 || job->owner == 0) return s->depth < s->opts.max_queue;
  int slot = -1, free_slot = -1;
  for (int k = 0; k < SCHED_OWNERS && slot < 0; k++) {
    if (slot_used(s, k) && s->owners[k].owner == job->owner) slot = k;
    if (!slot_used(s, k) && free_slot < 0) free_slot = k;
  }
  int64_t mine = slot >= 0 ? s->owners[slot].queued : 0;
  /* An owner with nothing waiting is taken even when the queue is full: one owner's burst never
   * shuts another out. */
  if (mine >= s->opts.max_queue_per_owner || (mine > 0 && s->depth >= s->opts.max_queue)) {
    job->owner_slot = -2; /* refused for its share */
    return false;
  }
  if (slot < 0) slot = free_slot;
  if (slot < 0) return s->depth < s->opts.max_queue; /* too many owners at once: no one's */
  s->owners[slot].owner = job->owner;
  s->owners[slot].queued++;
  job->owner_slot = slot;
  return true;
}

bool segops_sched_owner_full(const segops_job *job) { return job->owner_slot == -2; }

/* The entry of owner for a call run inline (taken when it has none), or -1 (no owner, no shares,
 * or no entry free); lock held. */
static int owner_slot_for(segops_sched *s, uint32_t owner) {
  if (s->opts.max_queue_per_owner <= 0 || owner == 0) return -1;
  int free_slot = -1;
  for (int k = 0; k < SCHED_OWNERS; k++) {
    if (slot_used(s, k) && s->owners[k].owner == owner) return k;
    if (!slot_used(s, k) && free_slot < 0) free_slot = k;
  }
  if (free_slot >= 0) s->owners[free_slot].owner = owner;
  return free_slot;
}

int64_t segops_sched_running_share(const segops_sched *s) { return s->opts.max_running_per_owner; }

static void finish(segops_job *job, int status, const char *msg) {
  job->status = status;
  if (status != SEGOPS_OK && msg && job->err[0] == 0) snprintf(job->err, sizeof job->err, "%s", msg);
  job->done(job);
}

int segops_sched_submit(segops_sched *s, segops_job *job) {
  job->next = NULL;
  job->status = SEGOPS_OK;
  job->err[0] = 0;
  job->batch_size = 0;
  job->t_enqueued = segops_now();
  job->t_started = job->t_finished = 0;
  pthread_mutex_lock(&s->mu);
  if (s->closed) {
    pthread_mutex_unlock(&s->mu);
    return SEGOPS_E_UNAVAILABLE;
  }
  if (!admit(s, job)) {
    pthread_mutex_unlock(&s->mu);
    return SEGOPS_E_RESOURCE_EXHAUSTED;
  }
  if (s->tail)
    s->tail->next = job;
  else
    s->head = job;
  s->tail = job;
  s->depth++;
  if (s->reaper_parked) { /* the first job after an idle spell: one signal, later ones none */
    s->reaper_parked = false;
    pthread_cond_signal(&s->reaper);
  }
  atomic_store_explicit(&s->depth_hint, s->depth, memory_order_relaxed);
  /* Broadcast: a worker filling a batch (max-queue-delay) also waits on `work`, and while a call
   * runs inline the worker that one signal would wake may be the one whose device it holds. */
  /* A spinning worker takes the job without being woken. */
  /* With backend->accepts, the one worker a signal wakes might not take this job. */
  if (s->opts.max_queue_delay_us > 0 || s->inline_running > 0 || !all_take(s, job))
    pthread_cond_broadcast(&s->work);
  else if (!atomic_load(&s->spinning))
    pthread_cond_signal(&s->work);
  pthread_mutex_unlock(&s->mu);
  return SEGOPS_OK;
}

bool segops_sched_run_inline(segops_sched *s, segops_job *job) {
  const segops_call *c = job->call;
  if (s->inline_max_work <= 0 || c->n + c->s > s->inline_max_work || segops_test_hook_slow_backend()) return false;
  pthread_mutex_lock(&s->mu);
  /* Only where a worker would start it at once: nothing waits (FIFO and batching untouched) and
   * a device is free (its worker idle); the call holds that device as its worker would. */
  int device = -1;
  if (!s->closed && !s->head)
    for (int d = 0; d < s->n_workers && device < 0; d++)
      if (!s->dev_busy[d] && takes(s, d, job)) device = d;
  if (device < 0) {
    pthread_mutex_unlock(&s->mu);
    return false;
  }
  s->dev_busy[device] = true;
  s->inline_running++;
  s->running++;
  job->owner_slot = owner_slot_for(s, job->owner);
  if (job->owner_slot >= 0) s->owners[job->owner_slot].running++;
  pthread_mutex_unlock(&s->mu);
  job->next = NULL;
  job->err[0] = 0;
  job->batch_size = 1;
  job->t_enqueued = job->t_started = segops_now();
  segops_metrics_executing_add(1);
  int rc = segops_test_hook_before_run(c, job->err, sizeof job->err);
  if (rc == SEGOPS_OK) rc = s->backend->run(s->backend->ctx, device, c, job->err, sizeof job->err);
  job->t_finished = segops_now();
  segops_metrics_executing_add(-1);
  segops_metrics_backend_busy(device, job->t_finished - job->t_started);
  segops_metrics_batch(1, c->n);
  job->status = rc;
  pthread_mutex_lock(&s->mu);
  s->dev_busy[device] = false;
  s->inline_running--;
  s->running--;
  if (job->owner_slot >= 0) s->owners[job->owner_slot].running--;
  /* A job queued meanwhile may be waiting for this very device's worker. */
  if (s->head || s->stopping) pthread_cond_broadcast(&s->work);
  if (!s->head && s->running == 0) pthread_cond_broadcast(&s->idle);
  pthread_mutex_unlock(&s->mu);
  return true;
}

int64_t segops_sched_depth(segops_sched *s) {
  pthread_mutex_lock(&s->mu);
  int64_t d = s->depth;
  pthread_mutex_unlock(&s->mu);
  return d;
}

/* Takes compatible jobs from the queue into jobs[1..] after the head jobs[0] (their owners' entries
 * into slots[1..], counted running); lock held. Returns the count. With a queue delay, waits (releasing the lock) for
 * more to arrive. */
static int collect_batch(segops_sched *s, int device, segops_job **jobs, int *slots) {
  int n = 1;
  if (s->opts.max_batch_elements <= 0 || jobs[0]->call->n > BATCH_JOIN_MAX_ROWS) return n;
  int64_t rows = jobs[0]->call->n, segs = jobs[0]->call->s;
  double until = jobs[0]->t_enqueued + (double)s->opts.max_queue_delay_us * 1e-6;
  for (;;) {
    segops_job *prev = NULL, *j = s->head;
    while (j && n < MAX_BATCH_JOBS && rows < s->opts.max_batch_elements) {
      segops_job *next = j->next;
      const segops_call *c = j->call;
      if (c->n <= BATCH_JOIN_MAX_ROWS && segops_batch_compatible(jobs[0]->call, c) &&
          rows + c->n <= s->opts.max_batch_elements && segs + c->s <= INT32_MAX && takes(s, device, j)) {
        unlink_job(s, prev, j);
        if ((slots[n] = j->owner_slot) >= 0) s->owners[slots[n]].running++;
        jobs[n++] = j;
        rows += c->n;
        segs += c->s;
      } else {
        prev = j;
      }
      j = next;
    }
    if (n >= MAX_BATCH_JOBS || rows >= s->opts.max_batch_elements || s->stopping) break;
    if (s->opts.max_queue_delay_us <= 0 || segops_now() >= until) break;
    struct timespec ts = abs_ts(until);
    pthread_cond_timedwait(&s->work, &s->mu, &ts);
  }
  return n;
}

typedef struct {
  segops_sched *s;
  int device;
} worker_arg;

static void run_jobs(segops_sched *s, int device, segops_job **jobs, int n) {
  double t0 = segops_now();
  for (int i = 0; i < n; i++) jobs[i]->t_started = t0;
  /* A job that waited past its deadline is not run: its client has been answered 504. */
  int live = 0;
  for (int i = 0; i < n; i++) {
    if (jobs[i]->deadline > 0 && t0 > jobs[i]->deadline) {
      jobs[i]->t_finished = t0;
      finish(jobs[i], SEGOPS_E_DEADLINE_EXCEEDED, "the request waited in the queue past --request-timeout");
    } else {
      jobs[live++] = jobs[i];
    }
  }
  if (!live) return;
  char err[256] = "";
  segops_metrics_executing_add(live);
  int rc = segops_test_hook_before_run(jobs[0]->call, err, sizeof err);
  if (rc == SEGOPS_OK) {
    if (live == 1)
      rc = s->backend->run(s->backend->ctx, device, jobs[0]->call, err, sizeof err);
    else
      rc = segops_batch_run(s->backend, device, jobs, live, err, sizeof err);
  }
  double t1 = segops_now();
  segops_metrics_executing_add(-live);
  segops_metrics_backend_busy(device, t1 - t0);
  int64_t rows = 0;
  for (int i = 0; i < live; i++) rows += jobs[i]->call->n;
  segops_metrics_batch(live, rows);
  if (rc != SEGOPS_OK && live > 1) {
    /* A failed batch is retried one by one so a fault stays with the request that caused it. */
    SEGOPS_LOGW("batched call of %d requests failed (%s); running them one by one", live, err);
    for (int i = 0; i < live; i++) {
      char e1[256] = "";
      double a = segops_now();
      int r1 = segops_test_hook_before_run(jobs[i]->call, e1, sizeof e1);
      if (r1 == SEGOPS_OK) r1 = s->backend->run(s->backend->ctx, device, jobs[i]->call, e1, sizeof e1);
      jobs[i]->t_started = a;
      jobs[i]->t_finished = segops_now();
      jobs[i]->batch_size = 1;
      segops_metrics_batch(1, jobs[i]->call->n);
      finish(jobs[i], r1, e1);
    }
    return;
  }
  for (int i = 0; i < live; i++) {
    jobs[i]->t_finished = t1;
    jobs[i]->batch_size = live;
    finish(jobs[i], rc, err);
  }
}

/* Waking a sleeping worker costs a futex wake and a trip through the kernel's scheduler, tens of
 * microseconds on a busy machine: more than a small call's compute. So before sleeping, one
 * worker at a time polls the queue for spin_us, yielding the CPU at every turn so it only uses
 * time nobody else wants. Lock held on entry and exit. */
static void spin_for_work(segops_sched *s) {
  bool expected = false;
  if (!atomic_compare_exchange_strong(&s->spinning, &expected, true)) return;
  pthread_mutex_unlock(&s->mu);
  double until = segops_now() + (double)s->opts.spin_us * 1e-6;
  while (atomic_load_explicit(&s->depth_hint, memory_order_relaxed) == 0 && segops_now() < until) sched_yield();
  atomic_store(&s->spinning, false);
  pthread_mutex_lock(&s->mu);
}

static void *worker_main(void *argp) {
  worker_arg *wa = argp;
  segops_sched *s = wa->s;
  int device = wa->device;
  free(wa);
  segops_job *jobs[MAX_BATCH_JOBS];
  pthread_mutex_lock(&s->mu);
  for (;;) {
    if (!s->head && !s->stopping && s->opts.spin_us > 0) spin_for_work(s);
    /* A call running inline on this device finishes first, stopping or not. */
    segops_job *prev = NULL, *job = NULL;
    for (;;) {
      if (!s->dev_busy[device]) job = first_for(s, device, &prev);
      if (!s->dev_busy[device] && (job || s->stopping)) break;
      pthread_cond_wait(&s->work, &s->mu);
    }
    if (!job) break; /* stopping and nothing left that this worker may run */
    jobs[0] = job;
    unlink_job(s, prev, job);
    s->dev_busy[device] = true;
    s->running++;
    /* The owners' running counts, taken as each job leaves the queue (collect_batch may wait with
     * the lock released) and given back after the run (done() may reuse a job at once). */
    int slots[MAX_BATCH_JOBS];
    if ((slots[0] = job->owner_slot) >= 0) s->owners[slots[0]].running++;
    int n = collect_batch(s, device, jobs, slots);
    s->running += n - 1;
    /* Jobs submitted while a worker spun woke nobody: pass the rest on to a sleeping worker (to
     * all of them when not every worker takes every job). */
    if (s->head) {
      if (!all_take(s, s->head))
        pthread_cond_broadcast(&s->work);
      else
        pthread_cond_signal(&s->work);
    }
    pthread_mutex_unlock(&s->mu);
    run_jobs(s, device, jobs, n);
    pthread_mutex_lock(&s->mu);
    s->dev_busy[device] = false;
    s->running -= n;
    for (int i = 0; i < n; i++)
      if (slots[i] >= 0) s->owners[slots[i]].running--;
    if (!s->head && s->running == 0) pthread_cond_broadcast(&s->idle);
  }
  pthread_mutex_unlock(&s->mu);
  return NULL;
}

/* Answers queued jobs whose deadline passed, so a stuck backend cannot hold clients forever
 * and the slot is freed at once. Sleeps until the earliest deadline in the queue. */
static void *reaper_main(void *arg) {
  segops_sched *s = arg;
  pthread_mutex_lock(&s->mu);
  while (!s->stopping) {
    double now = segops_now();
    double next = 0;
    segops_job *expired = NULL, **tailp = &expired;
    segops_job *prev = NULL, *j = s->head;
    while (j) {
      segops_job *nx = j->next;
      if (j->deadline > 0 && j->deadline <= now) {
        unlink_job(s, prev, j);
        *tailp = j;
        tailp = &j->next;
      } else {
        if (j->deadline > 0 && (next == 0 || j->deadline < next)) next = j->deadline;
        prev = j;
      }
      j = nx;
    }
    if (expired) {
      s->running++; /* keeps drain waiting until these are answered */
      pthread_mutex_unlock(&s->mu);
      int cnt = 0;
      while (expired) {
        segops_job *nx = expired->next;
        expired->next = NULL;
        expired->t_started = expired->t_finished = segops_now();
        finish(expired, SEGOPS_E_DEADLINE_EXCEEDED, "the request waited in the queue past --request-timeout");
        expired = nx;
        cnt++;
      }
      SEGOPS_LOGW("%d queued request(s) passed their deadline", cnt);
      pthread_mutex_lock(&s->mu);
      s->running--;
      if (!s->head && s->running == 0) pthread_cond_broadcast(&s->idle);
      continue;
    }
    /* An empty queue: sleep until a job comes (enqueue signals a parked reaper), so an idle
     * daemon does not wake ten times a second. Otherwise wake at the earliest deadline or after
     * one tick: submissions into a non-empty queue never signal the reaper (that would cost a
     * context switch per request), so a job that arrives while it sleeps is seen within one
     * tick, which bounds how late a 504 can be. */
    if (!s->head) {
      s->reaper_parked = true;
      pthread_cond_wait(&s->reaper, &s->mu);
      s->reaper_parked = false;
      continue;
    }
    double wake = now + s->tick;
    if (next > 0 && next < wake) wake = next;
    struct timespec ts = abs_ts(wake);
    pthread_cond_timedwait(&s->reaper, &s->mu, &ts);
  }
  pthread_mutex_unlock(&s->mu);
  return NULL;
}

segops_sched *segops_sched_new(segops_backend *backend, const segops_sched_opts *opts) {
  segops_sched *s = calloc(1, sizeof *s);
  if (!s) return NULL;
  s->backend = backend;
  s->opts = *opts;
  if (s->opts.max_queue < 1) s->opts.max_queue = 1;
  s->last_slot = SCHED_OWNERS;
  s->tick = s->opts.request_timeout_s / 20;
  if (s->tick > 0.1) s->tick = 0.1;
  if (s->tick < 0.001) s->tick = 0.001;
  pthread_mutex_init(&s->mu, NULL);
  cond_init_mono(&s->work);
  cond_init_mono(&s->idle);
  cond_init_mono(&s->reaper);
  s->n_workers = backend->n_devices > 0 ? backend->n_devices : 1;
  if (s->opts.max_running_per_owner <= 0) s->opts.max_running_per_owner = s->n_workers / 2 > 0 ? s->n_workers / 2 : 1;
  /* Not with a batching window (--max-queue-delay-us): a worker would wait for company there. */
  s->inline_max_work = s->opts.max_queue_delay_us <= 0 ? INLINE_MAX_WORK : 0;
  s->workers = calloc((size_t)s->n_workers, sizeof *s->workers);
  s->dev_busy = calloc((size_t)s->n_workers, sizeof *s->dev_busy);
  if (!s->workers || !s->dev_busy) {
    s->n_workers = 0; /* none started: nothing to join */
    goto fail;
  }
  if (pthread_create(&s->reaper_thread, NULL, reaper_main, s) != 0) goto fail;
  s->reaper_started = true;
  for (int d = 0; d < s->n_workers; d++) {
    worker_arg *wa = malloc(sizeof *wa);
    if (!wa) goto fail_workers;
    wa->s = s;
    wa->device = d;
    if (pthread_create(&s->workers[d], NULL, worker_main, wa) != 0) {
      free(wa);
      goto fail_workers;
    }
    continue;
  fail_workers:
    s->n_workers = d;
    goto fail;
  }
  return s;
fail:
  segops_sched_free(s);
  return NULL;
}

void segops_sched_close(segops_sched *s) {
  pthread_mutex_lock(&s->mu);
  s->closed = true;
  pthread_mutex_unlock(&s->mu);
}

void segops_sched_drain(segops_sched *s) {
  pthread_mutex_lock(&s->mu);
  while (s->head || s->running) pthread_cond_wait(&s->idle, &s->mu);
  pthread_mutex_unlock(&s->mu);
}

void segops_sched_free(segops_sched *s) {
  if (!s) return;
  pthread_mutex_lock(&s->mu);
  s->closed = true;
  s->stopping = true;
  /* Workers finish what is queued before they see an empty queue and exit. */
  pthread_cond_broadcast(&s->work);
  pthread_cond_broadcast(&s->reaper);
  pthread_mutex_unlock(&s->mu);
  for (int d = 0; d < s->n_workers; d++) pthread_join(s->workers[d], NULL);
  if (s->reaper_started) pthread_join(s->reaper_thread, NULL);
  /* Only reachable with no workers (startup failure): answer what is left. */
  while (s->head) {
    segops_job *j = s->head;
    unlink_job(s, NULL, j);
    finish(j, SEGOPS_E_UNAVAILABLE, "the server is shutting down");
  }
  pthread_cond_destroy(&s->work);
  pthread_cond_destroy(&s->idle);
  pthread_cond_destroy(&s->reaper);
  pthread_mutex_destroy(&s->mu);
  free(s->workers);
  free(s->dev_busy);
  free(s);
}

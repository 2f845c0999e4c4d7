/* test_sched.c: the scheduler's ownership of backend devices. Many threads submit calls to a
 * fake backend of several devices, each call either run inline on the calling thread
 * (segops_sched_run_inline) or queued for a worker, as the daemon does; the backend checks that no
 * device ever runs two calls at once, and the test that every call ran exactly once, that both
 * paths were taken, and that a batching window (max_queue_delay_us) turns inlining off. With backend->accepts
 * (device 0 alone takes calls of more than LARGE rows), no large call runs elsewhere, small calls
 * still run on every device, and nothing is left waiting. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "errors.h"
#include "scheduler.h"
#include "test_util.h"

#define DEVICES 3
#define THREADS 8
#define CALLS 1500

#define CHECK(cond) TU_CHECK(cond, "%s:%d: %s", __FILE__, __LINE__, #cond)

static atomic_int in_use[DEVICES];
static atomic_long runs[DEVICES];
static atomic_long overlaps, bad_device, misplaced;
#define LARGE 120 /* with accepts: calls of more rows run on device 0 only */
static bool use_accepts;

static int fake_accepts(void *ctx, int device, const segops_call *call) {
  (void)ctx;
  return device == 0 || call->n <= LARGE;
}

static int fake_run(void *ctx, int device, const segops_call *call, char *err, size_t errlen) {
  (void)ctx, (void)call, (void)err, (void)errlen;
  if (device < 0 || device >= DEVICES) {
    atomic_fetch_add(&bad_device, 1);
    return SEGOPS_OK;
  }
  if (atomic_fetch_add(&in_use[device], 1) != 0) atomic_fetch_add(&overlaps, 1);
  if (use_accepts && !fake_accepts(ctx, device, call)) atomic_fetch_add(&misplaced, 1);
  atomic_fetch_add(&runs[device], 1);
  /* Long enough for other threads to find this device busy. */
  struct timespec ts = {0, 20000 + (long)(call->n % 7) * 10000};
  nanosleep(&ts, NULL);
  atomic_fetch_sub(&in_use[device], 1);
  return SEGOPS_OK;
}

typedef struct {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  bool done;
} waiter;

static void on_done(segops_job *job) {
  waiter *w = job->user;
  pthread_mutex_lock(&w->mu);
  w->done = true;
  pthread_cond_signal(&w->cv);
  pthread_mutex_unlock(&w->mu);
}

typedef struct {
  segops_sched *s;
  int id;
  long inlined, queued, refused, bad_status;
} client;

static void *client_main(void *arg) {
  client *c = arg;
  waiter w;
  pthread_mutex_init(&w.mu, NULL);
  pthread_cond_init(&w.cv, NULL);
  for (int i = 0; i < CALLS; i++) {
    /* Think between calls, so the queue is often empty and inlining happens. */
    struct timespec think = {0, 10000 + (long)((c->id * 31 + i * 17) % 5) * 20000};
    nanosleep(&think, NULL);
    segops_call call;
    memset(&call, 0, sizeof call);
    call.n = 64 + (c->id * CALLS + i) % 97;
    call.s = 4;
    segops_job job;
    memset(&job, 0, sizeof job);
    job.call = &call;
    job.done = on_done;
    job.user = &w;
    if (segops_sched_run_inline(c->s, &job)) {
      c->inlined++;
      if (job.status != SEGOPS_OK || job.batch_size != 1) c->bad_status++;
      continue;
    }
    w.done = false;
    int rc = segops_sched_submit(c->s, &job);
    if (rc != SEGOPS_OK) {
      c->refused++;
      continue;
    }
    pthread_mutex_lock(&w.mu);
    while (!w.done) pthread_cond_wait(&w.cv, &w.mu);
    pthread_mutex_unlock(&w.mu);
    if (job.status != SEGOPS_OK) c->bad_status++;
    c->queued++;
  }
  pthread_cond_destroy(&w.cv);
  pthread_mutex_destroy(&w.mu);
  return NULL;
}

/* delay_us: the batching window (max_queue_delay_us; no batching: max_batch_elements is 0). */
static void run_round(int64_t delay_us, bool expect_inline, bool accepts) {
  use_accepts = accepts;
  atomic_store(&misplaced, 0);
  for (int d = 0; d < DEVICES; d++) atomic_store(&runs[d], 0);
  atomic_store(&overlaps, 0);
  atomic_store(&bad_device, 0);
  segops_backend be;
  memset(&be, 0, sizeof be);
  be.name = "fake";
  be.n_devices = DEVICES;
  be.run = fake_run;
  be.accepts = accepts ? fake_accepts : NULL;
  segops_sched_opts o;
  memset(&o, 0, sizeof o);
  o.max_queue = 1 << 20;
  o.request_timeout_s = 30;
  o.spin_us = 50; /* a spinning worker takes jobs without a wake-up: that path too */
  o.max_queue_delay_us = delay_us;
  segops_sched *s = segops_sched_new(&be, &o);
  CHECK(s != NULL);
  if (!s) return;
  client cl[THREADS];
  pthread_t th[THREADS];
  memset(cl, 0, sizeof cl);
  for (int i = 0; i < THREADS; i++) {
    cl[i].s = s;
    cl[i].id = i;
    pthread_create(&th[i], NULL, client_main, &cl[i]);
  }
  long inlined = 0, queued = 0, refused = 0, bad = 0, total = 0;
  for (int i = 0; i < THREADS; i++) {
    pthread_join(th[i], NULL);
    inlined += cl[i].inlined, queued += cl[i].queued, refused += cl[i].refused, bad += cl[i].bad_status;
  }
  segops_sched_drain(s);
  segops_sched_free(s);
  for (int d = 0; d < DEVICES; d++) total += atomic_load(&runs[d]);
  printf("%smax_queue_delay_us=%lld: %ld inline, %ld queued; per device %ld / %ld / %ld; overlaps %ld\n",
         accepts ? "large calls on device 0 only, " : "", (long long)delay_us, inlined, queued, atomic_load(&runs[0]),
         atomic_load(&runs[1]), atomic_load(&runs[2]), atomic_load(&overlaps));
  CHECK(atomic_load(&overlaps) == 0); /* a device never ran two calls at once */
  CHECK(atomic_load(&bad_device) == 0);
  CHECK(atomic_load(&misplaced) == 0); /* with accepts: every large call ran on device 0 */
  CHECK(refused == 0 && bad == 0);
  CHECK(inlined + queued == (long)THREADS * CALLS);
  CHECK(total == (long)THREADS * CALLS); /* each call ran once */
  if (expect_inline) {
    CHECK(inlined > 0);
    CHECK(queued > 0); /* 8 callers on 3 devices: some found every device busy */
  } else {
    CHECK(inlined == 0);
  }
  for (int d = 0; d < DEVICES; d++) CHECK(atomic_load(&runs[d]) > 0);
}

int main(void) {
  run_round(0, true, false);
  run_round(100, false, false);
  run_round(0, true, true);
  run_round(100, false, true);
  return tu_summary("scheduler");
}

/* scheduler.h: the scheduler between HTTP and the backend: a bounded FIFO with backpressure,
 * one worker thread per backend device, per-request deadlines, drain for graceful shutdown,
 * and dynamic batching of compatible waiting requests (sched_batch.c). */
#ifndef SEGOPS_SCHED_H
#define SEGOPS_SCHED_H

#include <stdbool.h>
#include <stdint.h>

#include "backend.h"
#include "ops.h"

typedef struct segops_job segops_job;

/* Called exactly once per accepted job, from a worker, the deadline reaper, or (when the
 * scheduler shuts down) the freeing thread. After it returns the scheduler never touches
 * the job again, so the callback may hand it back to its owner (e.g. resume a connection). */
typedef void (*segops_job_done_fn)(segops_job *job);

struct segops_job {
  /* Set by the submitter. call is borrowed: its inputs and outputs stay valid until done. */
  segops_call *call;
  double deadline; /* segops_now() seconds; 0 = none */
  /* Who submitted it, for the per-user share of the queue and the round-robin across users: the
   * client's uid + 1; 0 for none known (then only the queue's own bound applies). */
  uint32_t owner;
  segops_job_done_fn done;
  void *user;
  /* Set by the scheduler before done(). */
  int status;                               /* SEGOPS_OK or a negative SEGOPS_E_* code */
  char err[256];                            /* detail when status != OK */
  double t_enqueued, t_started, t_finished; /* t_started = t_finished when never run */
  int batch_size;                           /* requests in the backend call that computed it (1 = alone) */
  /* Private to the scheduler. */
  segops_job *next;
  int owner_slot; /* its owner's entry in the scheduler's table, -1 for none */
};

typedef struct {
  int64_t max_queue;          /* jobs waiting (not running) before submit refuses */
  int64_t max_batch_elements; /* 0 = no batching; else the most rows (N) in one backend call */
  int64_t max_queue_delay_us; /* how long a worker waits for more compatible jobs */
  double request_timeout_s;   /* sets how often the deadline reaper looks at the queue */
  int64_t spin_us;            /* how long an idle worker polls for work before sleeping (0 = never) */
  /* Jobs one owner (segops_job.owner) may have waiting; 0 = no per-owner share. An owner with
   * nothing waiting is taken even when the queue is full; owners' waiting jobs are served
   * round-robin (in submission order within one owner). */
  int64_t max_queue_per_owner;
  /* Calls of one owner running at once while another owner's job waits (with max_queue_per_owner);
   * <= 0: half the workers, at least 1. A worker that frees up passes over the jobs of an owner at
   * its share while another owner's job waits; an owner alone uses every worker. */
  int64_t max_running_per_owner;
} segops_sched_opts;

typedef struct segops_sched segops_sched;

/* segops_now(): backend.h. */

/* Starts one worker per backend device and the deadline reaper. The backend is borrowed
 * and must outlive the scheduler. NULL on failure. */
segops_sched *segops_sched_new(segops_backend *backend, const segops_sched_opts *opts);

/* Queues a job. Returns SEGOPS_OK (done will be called later, possibly before this returns
 * on another thread), SEGOPS_E_RESOURCE_EXHAUSTED when the queue is full (or its owner's share of
 * it, with max_queue_per_owner: segops_sched_owner_full tells which), or
 * SEGOPS_E_UNAVAILABLE after segops_sched_close: then done is NOT called. */
int segops_sched_submit(segops_sched *s, segops_job *job);

/* Runs a small job on the calling thread, now, when that is what a worker would do anyway
 * (nothing queued, a device free, no batching window): true with status, err and the times set,
 * and done NOT called. False: nothing happened; submit it. Saves the hand-off to a worker and
 * back. The call holds its device as a worker would, so each device still runs one call at a
 * time. Any backend; calls of n + s up to 2^15, never with a batching window (max_queue_delay_us > 0). */
bool segops_sched_run_inline(segops_sched *s, segops_job *job);

/* After SEGOPS_E_RESOURCE_EXHAUSTED from submit: whether job's owner was at its share (true) or
 * the queue full (false). */
bool segops_sched_owner_full(const segops_job *job);

/* The running share in force (opts.max_running_per_owner, or its default from the workers). */
int64_t segops_sched_running_share(const segops_sched *s);

/* Jobs waiting now (for /metrics). */
int64_t segops_sched_depth(segops_sched *s);

/* Refuses further submissions (SEGOPS_E_UNAVAILABLE). */
void segops_sched_close(segops_sched *s);

/* Blocks until no job is queued or running. */
void segops_sched_drain(segops_sched *s);

/* Stops the threads; jobs still queued complete with SEGOPS_E_UNAVAILABLE. Accepts NULL. */
void segops_sched_free(segops_sched *s);

/* --- batching (sched_batch.c) --- */

/* True when b can join a backend call with a: same function, dtype, layout, idx order
 * class, and the same set of present inputs and requested outputs. */
bool segops_batch_compatible(const segops_call *a, const segops_call *b);

/* Runs jobs[0..n) as one backend call on device: concatenates inputs (segment-indexed ones by
 * segment, element-indexed ones by element), offsets idx by the segments before each job,
 * runs, and splits the outputs back into each job's call. Results are bit-identical to n
 * separate calls on a backend that reduces each segment in a fixed order. Returns SEGOPS_OK
 * or an error (the jobs' outputs are then unspecified). */
int segops_batch_run(segops_backend *b, int device, segops_job **jobs, int n, char *err, size_t errlen);

/* --- test hooks (hooks_off.c in segopsd, hooks_test.c in the test daemon only) --- */

/* Called by a worker before each backend call; returns SEGOPS_OK or an error to inject. */
int segops_test_hook_before_run(const segops_call *call, char *err, size_t errlen);
/* True while the test daemon injects a backend delay: calls then always go through the workers
 * (a slow call on an HTTP thread would stall that thread's connections, which the delay models
 * for the queue, deadline and drain tests). */
bool segops_test_hook_slow_backend(void);
/* Called by the native channel right after a call's answer is published to its client (the slot's
 * state set DONE and the client woken). SEGOPS_TEST_ANSWERED_DELAY_MS=N sleeps there, so that
 * whatever the daemon still does for the call afterwards shows as missing to a client that looks at
 * once (tests/native: native_metrics_order). */
void segops_test_hook_answered(void);
/* True in the test daemon: logged at startup so a test build is never mistaken for a real one. */
bool segops_test_hooks_enabled(void);

#endif

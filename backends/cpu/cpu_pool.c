/* cpu_pool.c: a small pthreads pool running one parallel-for at a time for the CPU backend.
 *
 * Chunks are claimed from one atomic word holding (job generation << 32 | next chunk), so a
 * worker that wakes late, after its job is over, claims nothing of the next job by mistake; and
 * the caller waits only for the chunks to be done, never for sleeping workers to wake up (which
 * matters on a loaded machine: a parallel-for costs no more than running it alone). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "cpu_internal.h"

struct segops_cpu_pool {
  int threads; /* including the caller */
  int nworkers, started;
  pthread_t *workers;
  pthread_mutex_t run_lock; /* held by the caller of the parallel-for in progress */
  pthread_mutex_t mu;       /* guards generation, stop and the job fields */
  pthread_cond_t wake, done_cv;
  uint32_t generation; /* of the current job; workers wake when it changes */
  bool stop;
  segops_cpu_task_fn fn;
  void *arg;
  int64_t nchunks;
  _Atomic uint64_t claim; /* generation << 32 | next chunk to hand out */
  _Atomic int64_t done;   /* chunks of the current job finished */
};

/* Claims and runs chunks of job `gen` until none is left (or the job is no longer current). */
static void work(segops_cpu_pool *p, uint32_t gen, segops_cpu_task_fn fn, void *arg, int64_t nchunks) {
  uint64_t v = atomic_load(&p->claim);
  for (;;) {
    int64_t c = (int64_t)(v & 0xffffffffu);
    if ((uint32_t)(v >> 32) != gen || c >= nchunks) return;
    if (!atomic_compare_exchange_weak(&p->claim, &v, v + 1)) continue; /* v reloaded */
    fn(arg, c);
    if (atomic_fetch_add(&p->done, 1) + 1 == nchunks) {
      pthread_mutex_lock(&p->mu);
      pthread_cond_signal(&p->done_cv);
      pthread_mutex_unlock(&p->mu);
    }
    v = atomic_load(&p->claim);
  }
}

static void *worker_main(void *vp) {
  segops_cpu_pool *p = vp;
  pthread_mutex_lock(&p->mu);
  uint32_t seen = p->generation;
  for (;;) {
    while (!p->stop && p->generation == seen) pthread_cond_wait(&p->wake, &p->mu);
    if (p->stop) break;
    seen = p->generation;
    segops_cpu_task_fn fn = p->fn;
    void *arg = p->arg;
    int64_t nchunks = p->nchunks;
    pthread_mutex_unlock(&p->mu);
    work(p, seen, fn, arg, nchunks);
    pthread_mutex_lock(&p->mu);
  }
  pthread_mutex_unlock(&p->mu);
  return NULL;
}

segops_cpu_pool *segops_cpu_pool_new(int threads) {
  if (threads < 1) threads = 1;
  segops_cpu_pool *p = calloc(1, sizeof *p);
  if (!p) return NULL;
  p->threads = threads;
  p->nworkers = threads - 1;
  pthread_mutex_init(&p->run_lock, NULL);
  pthread_mutex_init(&p->mu, NULL);
  pthread_cond_init(&p->wake, NULL);
  pthread_cond_init(&p->done_cv, NULL);
  atomic_init(&p->claim, 0);
  atomic_init(&p->done, 0);
  if (p->nworkers > 0) {
    p->workers = calloc((size_t)p->nworkers, sizeof *p->workers);
    if (!p->workers) {
      segops_cpu_pool_free(p);
      return NULL;
    }
    for (int i = 0; i < p->nworkers; i++) {
      if (pthread_create(&p->workers[i], NULL, worker_main, p) != 0) {
        segops_cpu_pool_free(p);
        return NULL;
      }
      p->started++;
    }
  }
  return p;
}

void segops_cpu_pool_free(segops_cpu_pool *p) {
  if (!p) return;
  pthread_mutex_lock(&p->mu);
  p->stop = true;
  pthread_cond_broadcast(&p->wake);
  pthread_mutex_unlock(&p->mu);
  for (int i = 0; i < p->started; i++) pthread_join(p->workers[i], NULL);
  free(p->workers);
  pthread_cond_destroy(&p->done_cv);
  pthread_cond_destroy(&p->wake);
  pthread_mutex_destroy(&p->mu);
  pthread_mutex_destroy(&p->run_lock);
  free(p);
}

int segops_cpu_pool_threads(const segops_cpu_pool *p) { return p ? p->threads : 1; }

void segops_cpu_parallel_for(segops_cpu_pool *p, int64_t nchunks, segops_cpu_task_fn fn, void *arg) {
  /* Busy pool: another worker of the scheduler has it. Running here alone gives the same bits,
   * and never waiting for the pool keeps small calls from queueing behind a big one. */
  if (!p || p->started == 0 || nchunks <= 1 || nchunks > 0xffffffffLL || pthread_mutex_trylock(&p->run_lock) != 0) {
    for (int64_t c = 0; c < nchunks; c++) fn(arg, c);
    return;
  }
  pthread_mutex_lock(&p->mu);
  uint32_t gen = ++p->generation;
  p->fn = fn;
  p->arg = arg;
  p->nchunks = nchunks;
  atomic_store(&p->done, 0);
  atomic_store(&p->claim, (uint64_t)gen << 32);
  pthread_cond_broadcast(&p->wake);
  pthread_mutex_unlock(&p->mu);

  work(p, gen, fn, arg, nchunks);

  pthread_mutex_lock(&p->mu);
  while (atomic_load(&p->done) < nchunks) pthread_cond_wait(&p->done_cv, &p->mu);
  pthread_mutex_unlock(&p->mu);
  pthread_mutex_unlock(&p->run_lock);
}

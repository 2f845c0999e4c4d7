/* cpu_pool.c: a small pthreads pool running one parallel-for at a time for the CPU backend. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "cpu_internal.h"

struct segops_cpu_pool {
  int threads; /* including the caller */
  int nworkers, started;
  pthread_t *workers;
  pthread_mutex_t run_lock; /* held by the caller of the parallel-for in progress */
  pthread_mutex_t mu;       /* guards everything below */
  pthread_cond_t wake, done;
  uint64_t generation; /* bumped for every job: workers wake when it changes */
  bool stop;
  int active; /* workers still inside the current job */
  /* The current job. */
  segops_cpu_task_fn fn;
  void *arg;
  int64_t nchunks;
  atomic_int_fast64_t next; /* next chunk to hand out */
};

static void drain(segops_cpu_pool *p, segops_cpu_task_fn fn, void *arg, int64_t nchunks) {
  for (;;) {
    int64_t c = atomic_fetch_add(&p->next, 1);
    if (c >= nchunks) return;
    fn(arg, c);
  }
}

static void *worker_main(void *vp) {
  segops_cpu_pool *p = vp;
  uint64_t seen = 0;
  pthread_mutex_lock(&p->mu);
  for (;;) {
    while (!p->stop && p->generation == seen) pthread_cond_wait(&p->wake, &p->mu);
    if (p->stop) break;
    seen = p->generation;
    segops_cpu_task_fn fn = p->fn;
    void *arg = p->arg;
    int64_t nchunks = p->nchunks;
    pthread_mutex_unlock(&p->mu);
    drain(p, fn, arg, nchunks);
    pthread_mutex_lock(&p->mu);
    if (--p->active == 0) pthread_cond_signal(&p->done);
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
  pthread_cond_init(&p->done, NULL);
  atomic_init(&p->next, 0);
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
  pthread_cond_destroy(&p->done);
  pthread_cond_destroy(&p->wake);
  pthread_mutex_destroy(&p->mu);
  pthread_mutex_destroy(&p->run_lock);
  free(p);
}

int segops_cpu_pool_threads(const segops_cpu_pool *p) { return p ? p->threads : 1; }

void segops_cpu_parallel_for(segops_cpu_pool *p, int64_t nchunks, segops_cpu_task_fn fn, void *arg) {
  /* Busy pool: another worker of the scheduler has it. Running here alone gives the same bits,
   * and never waiting for the pool keeps small calls from queueing behind a big one. */
  if (!p || p->started == 0 || nchunks <= 1 || pthread_mutex_trylock(&p->run_lock) != 0) {
    for (int64_t c = 0; c < nchunks; c++) fn(arg, c);
    return;
  }
  pthread_mutex_lock(&p->mu);
  p->fn = fn;
  p->arg = arg;
  p->nchunks = nchunks;
  atomic_store(&p->next, 0);
  p->active = p->started;
  p->generation++;
  pthread_cond_broadcast(&p->wake);
  pthread_mutex_unlock(&p->mu);

  drain(p, fn, arg, nchunks);

  pthread_mutex_lock(&p->mu);
  while (p->active > 0) pthread_cond_wait(&p->done, &p->mu);
  pthread_mutex_unlock(&p->mu);
  pthread_mutex_unlock(&p->run_lock);
}

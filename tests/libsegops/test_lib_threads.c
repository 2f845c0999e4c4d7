/* test_lib_threads.c: one client shared by many threads, and by forked children. Eight threads call
 * every function at once through one HTTP client and one "local" client: each answer has the
 * bits the function gives alone. Then four children are forked while the parent's threads keep
 * calling (a fork lands in the middle of calls): each child calls through the same two clients,
 * which make their own connections and backend there, and every answer in both processes stays
 * right. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib_test.h"

#define THREADS 8
#define CHILDREN 4

static segops_client *remote, *local; /* remote: the daemon's URL, "auto" (its native channel here) */
static char parent_transport[16];
/* Under AddressSanitizer a fork must not land while another thread allocates: the sanitizer's own
 * allocator (GCC 12's) keeps a lock the child inherits held, and the child hangs in malloc. There
 * the parent's threads hold this lock for reading around each call and the fork takes it for
 * writing; elsewhere forks land in the middle of calls, which the library must survive. */
static pthread_rwlock_t calling; /* writer-preferring: the fork is not starved by the callers */
#if defined(__SANITIZE_ADDRESS__)
static const bool pause_for_fork = true;
#else
static const bool pause_for_fork = false;
#endif
static volatile int stop = 1; /* threads make 150 calls, and more until stop while children run */

/* One random call through both clients; true when both answered with the same bits. */
static bool one_call(tl_rng *r, int k) {
  int fn = (int)(tl_next(r) % SEGOPS_FN_COUNT);
  tl_call c;
  tl_call_make(&c, fn, k % 2 ? SEGOPS_F32 : SEGOPS_F64, 1 + 2 * (k % 2), 1 + (int64_t)(tl_next(r) % 300),
               1 + (int64_t)(tl_next(r) % 20), k % 3 == 0, k % 5 == 0, r);
  segops_array a[SEGOPS_MAX_OUTPUTS] = {{0}}, b[SEGOPS_MAX_OUTPUTS] = {{0}};
  segops_error ea, eb;
  int ra = segops_run(remote, fn, c.inp, &c.idx, c.s, 0, a, &ea);
  int rb = segops_run(local, fn, c.inp, &c.idx, c.s, 0, b, &eb);
  bool ok = ra == SEGOPS_OK && rb == SEGOPS_OK;
  if (!ok)
    fprintf(stderr, "pid %d: %s %s: remote %d '%s', local %d '%s'\n", getpid(), segops_fn_op(fn), segops_fn_pass(fn),
            ra, ea.message, rb, eb.message);
  for (int o = 0; ok && o < c.row->n_out; o++)
    ok = a[o].nbytes == b[o].nbytes && !memcmp(a[o].data, b[o].data, a[o].nbytes);
  for (int o = 0; o < c.row->n_out; o++) {
    segops_free(remote, a[o].data);
    segops_free(local, b[o].data);
  }
  tl_call_free(&c);
  return ok;
}

static void *worker(void *arg) {
  tl_rng r = {(uint64_t)(intptr_t)arg * 977 + 1};
  for (int k = 0; k < 150 || !stop; k++) {
    if (pause_for_fork) pthread_rwlock_rdlock(&calling);
    bool ok = one_call(&r, k);
    if (pause_for_fork) pthread_rwlock_unlock(&calling);
    TL_CHECK(ok, "thread %d call %d", (int)(intptr_t)arg, k);
  }
  return NULL;
}

static void threads_at_once(void) {
  pthread_t th[THREADS];
  for (int t = 0; t < THREADS; t++) pthread_create(&th[t], NULL, worker, (void *)(intptr_t)t);
  for (int t = 0; t < THREADS; t++) pthread_join(th[t], NULL);
}

/* A child: calls through the inherited clients; exit 0 when every answer was right. */
static void child(int i) {
  tl_rng r = {(uint64_t)i * 31 + 7};
  int bad = 0;
  for (int k = 0; k < 60; k++) bad += !one_call(&r, k);
  bad += strcmp(segops_transport_used(remote), parent_transport) != 0; /* found again here, the same way */
  _exit(bad ? 1 : 0); /* the parent's atexit handlers and its clients are the parent's */
}

static void forked_children(void) {
  stop = 0;
  pthread_t th[THREADS / 2];
  for (int t = 0; t < THREADS / 2; t++) pthread_create(&th[t], NULL, worker, (void *)(intptr_t)(100 + t));
  pid_t kids[CHILDREN];
  for (int i = 0; i < CHILDREN; i++) {
    usleep(20000);
    if (pause_for_fork) pthread_rwlock_wrlock(&calling);
    kids[i] = fork();
    if (kids[i] == 0) child(i);
    if (pause_for_fork) pthread_rwlock_unlock(&calling);
    TL_CHECK(kids[i] > 0, "fork");
  }
  for (int i = 0; i < CHILDREN; i++) {
    int st = 0;
    if (kids[i] > 0) waitpid(kids[i], &st, 0);
    TL_CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child %d: status %d", i, st);
  }
  stop = 1;
  for (int t = 0; t < THREADS / 2; t++) pthread_join(th[t], NULL);
  tl_rng r = {99};
  for (int k = 0; k < 20; k++) TL_CHECK(one_call(&r, k), "parent after the children, call %d", k);
}

int main(void) {
  pthread_rwlockattr_t ra;
  pthread_rwlockattr_init(&ra);
  pthread_rwlockattr_setkind_np(&ra, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
  pthread_rwlock_init(&calling, &ra);
  const char *args[] = {"--backend", "cpu", "--threads", "2", NULL};
  tl_daemon d;
  if (!tl_daemon_start(&d, "127.0.0.1:0", args)) return 1;
  segops_options o, ol;
  segops_options_init(&o);
  o.timeout_s = 30;
  segops_options_init(&ol);
  ol.threads = 2;
  segops_error e;
  if (segops_open(&remote, d.url, &o, &e) || segops_open(&local, "local", &ol, &e)) {
    fprintf(stderr, "open: %s\n", e.message);
    return 1;
  }
  threads_at_once();
  snprintf(parent_transport, sizeof parent_transport, "%s", segops_transport_used(remote));
  TL_CHECK(!strcmp(parent_transport, "native"), "auto used %s", parent_transport);
  forked_children();
  segops_close(remote);
  segops_close(local);
  TL_CHECK(tl_daemon_stop(&d), "segopsd did not exit 0");
  return tl_summary("test_lib_threads");
}

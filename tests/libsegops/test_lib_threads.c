/* test_lib_threads.c: clients shared by many threads, and by forked children. Eight threads call
 * every function at once through three clients: two of one daemon ("auto", which takes its native
 * channel here, and plain HTTP) and one "local": each answer has the bits the function gives
 * in-process. Then four children are forked while the parent's threads keep calling (a fork lands
 * in the middle of calls): each child calls through the same clients, which make their own
 * channels, connections and backend there, and every answer in both processes stays right. A hang
 * fails the test with the process, the thread and the step it hung in (and its stack) well before
 * CTest's timeout. */
#include <execinfo.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "lib_test.h"

#define THREADS 8
#define CHILDREN 4
/* A child's 60 calls take 0.1 s alone; the whole test 0.3 s (CTest stops it at 120 s). Limits far
 * past what a loaded machine or the sanitizers need, and short of CTest's. */
#define CHILD_LIMIT_S 30
#define TOTAL_LIMIT_S 80

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

/* ---- watchdog -------------------------------------------------------------------------------
 * Every caller says what it is doing in its row of `steps` (shared memory, so the parent reads
 * its children's rows too): row 0 the main thread, 1..THREADS the callers, then the children. A
 * child past CHILD_LIMIT_S, or the whole test past TOTAL_LIMIT_S, is reported with its row and
 * its stack (SIGUSR1 prints it) and killed. Rows are read without a lock: a diagnostic only. */
#define ROW_MAIN 0
#define ROW_CHILD(i) (1 + THREADS + (i))
#define ROWS (1 + THREADS + CHILDREN)
typedef struct {
  char what[160];
} step_row;
static step_row *steps;
static _Atomic pid_t kid_pid[CHILDREN]; /* 0: not running */
static tl_daemon daemon_;
static pthread_t callers[THREADS];
static atomic_int n_callers;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void step(int row, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void step(int row, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(steps[row].what, sizeof steps[row].what, fmt, ap);
  va_end(ap);
}

/* The stack of the thread that gets SIGUSR1, on stderr (backtrace is loaded before any hang). */
static void on_usr1(int sig) {
  (void)sig;
  void *f[48];
  int n = backtrace(f, 48);
  backtrace_symbols_fd(f, n, 2);
}

static void stack_of_thread(pthread_t t) {
  pthread_kill(t, SIGUSR1);
  usleep(200000);
}

/* The parent's whole run past TOTAL_LIMIT_S: every row and stack, then the children and the
 * daemon are killed and the test fails. */
static void *watchdog(void *arg) {
  (void)arg;
  double end = now_s() + TOTAL_LIMIT_S;
  while (now_s() < end) usleep(100000);
  fprintf(stderr, "FAIL test_lib_threads: no end after %d s (pid %d); main thread: %s\n", TOTAL_LIMIT_S, getpid(),
          steps[ROW_MAIN].what);
  for (int t = 0; t < atomic_load(&n_callers); t++) {
    fprintf(stderr, "caller %d: %s; its stack:\n", t, steps[1 + t].what);
    stack_of_thread(callers[t]);
  }
  for (int i = 0; i < CHILDREN; i++) {
    pid_t p = atomic_load(&kid_pid[i]);
    if (p > 0) fprintf(stderr, "child %d (pid %d): %s\n", i, (int)p, steps[ROW_CHILD(i)].what);
    if (p > 0) kill(p, SIGKILL);
  }
  tl_daemon_signal(&daemon_, SIGKILL);
  _exit(1);
}

/* Waits for child i, forked at forked_at; past CHILD_LIMIT_S it is reported and killed. Its
 * wait status. */
static int wait_child(int i, pid_t pid, double forked_at) {
  int st = 0;
  pid_t r;
  while ((r = waitpid(pid, &st, WNOHANG)) == 0 && now_s() - forked_at < CHILD_LIMIT_S) usleep(10000);
  if (r == 0) {
    fprintf(stderr,
            "FAIL test_lib_threads: child %d (pid %d) did not end within %d s of its fork; it is at: %s; "
            "its stack:\n",
            i, (int)pid, CHILD_LIMIT_S, steps[ROW_CHILD(i)].what);
    kill(pid, SIGUSR1);
    usleep(500000);
    kill(pid, SIGKILL);
    waitpid(pid, &st, 0);
  }
  atomic_store(&kid_pid[i], 0);
  return st;
}

/* The clients every call goes through: the daemon over "auto" (its native channel here), the
 * daemon over plain HTTP (libcurl), and "local"; the last one's answer is the reference. */
enum { NATIVE, WEB, LOCAL, N_CLIENTS };
static segops_client *clients[N_CLIENTS];
static const char *const client_name[N_CLIENTS] = {"the daemon's auto client", "the daemon's HTTP client",
                                                   "the local client"};

/* One random call through every client; true when all answered with the same bits. */
static bool one_call(tl_rng *r, int k, int row) {
  int fn = (int)(tl_next(r) % SEGOPS_FN_COUNT);
  step(row, "call %d: making its inputs", k);
  tl_call c;
  tl_call_make(&c, fn, k % 2 ? SEGOPS_F32 : SEGOPS_F64, 1 + 2 * (k % 2), 1 + (int64_t)(tl_next(r) % 300),
               1 + (int64_t)(tl_next(r) % 20), k % 3 == 0, k % 5 == 0, r);
  segops_array out[N_CLIENTS][SEGOPS_MAX_OUTPUTS] = {{{0}}};
  bool ok = true;
  for (int i = 0; i < N_CLIENTS; i++) {
    segops_error e;
    step(row, "call %d: %s %s through %s", k, segops_fn_op(fn), segops_fn_pass(fn), client_name[i]);
    int rc = segops_run(clients[i], fn, c.inp, &c.idx, c.s, 0, out[i], &e);
    if (rc)
      fprintf(stderr, "pid %d: %s %s through %s: %d '%s'\n", getpid(), segops_fn_op(fn), segops_fn_pass(fn),
              client_name[i], rc, e.message);
    ok = ok && rc == SEGOPS_OK;
  }
  step(row, "call %d: comparing and freeing the answers", k);
  for (int i = 0; ok && i < LOCAL; i++)
    for (int o = 0; ok && o < c.row->n_out; o++)
      ok = out[i][o].nbytes == out[LOCAL][o].nbytes && !memcmp(out[i][o].data, out[LOCAL][o].data, out[i][o].nbytes);
  for (int i = 0; i < N_CLIENTS; i++)
    for (int o = 0; o < c.row->n_out; o++) segops_free(clients[i], out[i][o].data);
  tl_call_free(&c);
  return ok;
}

static void *worker(void *arg) {
  int t = (int)(intptr_t)arg, id = stop ? t : 100 + t; /* beside the children: other calls */
  tl_rng r = {(uint64_t)id * 977 + 1};
  for (int k = 0; k < 150 || !stop; k++) {
    if (pause_for_fork) pthread_rwlock_rdlock(&calling);
    bool ok = one_call(&r, k, 1 + t);
    if (pause_for_fork) pthread_rwlock_unlock(&calling);
    TL_CHECK(ok, "thread %d call %d", id, k);
  }
  step(1 + t, "done");
  return NULL;
}

static void start_callers(int n) {
  for (int t = 0; t < n; t++) pthread_create(&callers[t], NULL, worker, (void *)(intptr_t)t);
  atomic_store(&n_callers, n);
}

static void join_callers(void) {
  for (int t = 0; t < atomic_load(&n_callers); t++) pthread_join(callers[t], NULL);
  atomic_store(&n_callers, 0);
}

static void threads_at_once(void) {
  step(ROW_MAIN, "waiting for %d threads calling at once", THREADS);
  start_callers(THREADS);
  join_callers();
}

/* A child: calls through the inherited clients; exit 0 when every answer was right. */
static void child(int i) {
  tl_rng r = {(uint64_t)i * 31 + 7};
  int bad = 0;
  for (int k = 0; k < 60; k++) bad += !one_call(&r, k, ROW_CHILD(i));
  bad += strcmp(segops_transport_used(clients[NATIVE]), parent_transport) != 0; /* found again here, the same way */
  step(ROW_CHILD(i), "exiting (%d bad)", bad);
  _exit(bad ? 1 : 0); /* the parent's atexit handlers and its clients are the parent's */
}

static void forked_children(void) {
  stop = 0;
  start_callers(THREADS / 2);
  pid_t kids[CHILDREN];
  double forked_at[CHILDREN];
  for (int i = 0; i < CHILDREN; i++) {
    usleep(20000);
    step(ROW_MAIN, "forking child %d", i);
    if (pause_for_fork) pthread_rwlock_wrlock(&calling);
    forked_at[i] = now_s();
    kids[i] = fork();
    if (kids[i] == 0) child(i);
    if (pause_for_fork) pthread_rwlock_unlock(&calling);
    TL_CHECK(kids[i] > 0, "fork");
    atomic_store(&kid_pid[i], kids[i]);
  }
  for (int i = 0; i < CHILDREN; i++) {
    step(ROW_MAIN, "waiting for child %d (pid %d)", i, (int)kids[i]);
    int st = kids[i] > 0 ? wait_child(i, kids[i], forked_at[i]) : 0;
    TL_CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child %d: status %d", i, st);
  }
  stop = 1;
  step(ROW_MAIN, "joining the callers after the children");
  join_callers();
  tl_rng r = {99};
  for (int k = 0; k < 20; k++) TL_CHECK(one_call(&r, k, ROW_MAIN), "parent after the children, call %d", k);
}

/* The watchdog's setup: shared rows, the stack printer (backtrace loaded now, not in a handler). */
static void watch(void) {
  steps = mmap(NULL, sizeof(step_row) * ROWS, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (steps == MAP_FAILED) abort();
  void *f[2];
  backtrace(f, 2);
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_usr1;
  sigaction(SIGUSR1, &sa, NULL);
  pthread_t w;
  pthread_create(&w, NULL, watchdog, NULL);
  pthread_detach(w);
}

static bool open_clients(void) {
  segops_options o[N_CLIENTS];
  for (int i = 0; i < N_CLIENTS; i++) {
    segops_options_init(&o[i]);
    o[i].timeout_s = 30;
  }
  o[WEB].transport = "http";
  o[LOCAL].threads = 2;
  for (int i = 0; i < N_CLIENTS; i++) {
    segops_error e;
    if (segops_open(&clients[i], i == LOCAL ? "local" : daemon_.url, &o[i], &e)) {
      fprintf(stderr, "open %s: %s\n", client_name[i], e.message);
      return false;
    }
  }
  return true;
}

int main(void) {
  pthread_rwlockattr_t ra;
  pthread_rwlockattr_init(&ra);
  pthread_rwlockattr_setkind_np(&ra, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
  pthread_rwlock_init(&calling, &ra);
  watch();
  step(ROW_MAIN, "starting segopsd");
  const char *args[] = {"--backend", "cpu", "--threads", "2", NULL};
  if (!tl_daemon_start(&daemon_, "127.0.0.1:0", args)) return 1;
  if (!open_clients()) return 1;
  threads_at_once();
  snprintf(parent_transport, sizeof parent_transport, "%s", segops_transport_used(clients[NATIVE]));
  TL_CHECK(!strcmp(parent_transport, "native"), "auto used %s", parent_transport);
  TL_CHECK(!strcmp(segops_transport_used(clients[WEB]), "http"), "the HTTP client used %s",
           segops_transport_used(clients[WEB]));
  forked_children();
  step(ROW_MAIN, "closing the clients and stopping segopsd");
  for (int i = 0; i < N_CLIENTS; i++) segops_close(clients[i]);
  TL_CHECK(tl_daemon_stop(&daemon_), "segopsd did not exit 0");
  return tl_summary("test_lib_threads");
}

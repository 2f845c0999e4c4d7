/* lib_test.c: the libsegops tests' shared helpers (lib_test.h). */
#include "lib_test.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

long tl_checks, tl_failures;

void tl_fail(const char *file, int line, const char *fmt, ...) {
  long n = __atomic_add_fetch(&tl_failures, 1, __ATOMIC_RELAXED);
  if (n > 50) return;
  char msg[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  fprintf(stderr, "FAIL %s:%d: %s\n", file, line, msg);
}

int tl_summary(const char *name) {
  printf("%s: %ld checks, %ld failures\n", name, tl_checks, tl_failures);
  return tl_failures ? 1 : 0;
}

int tl_skip(const char *why) {
  printf("SKIPPED: %s\n", why);
  return 77;
}

/* ---- daemons ---- */

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Reads the daemon's first stdout line (until '\n' or 30 s). */
static bool read_line(int fd, char *buf, size_t len) {
  size_t o = 0;
  double end = now_s() + 30;
  while (o + 1 < len && now_s() < end) {
    struct pollfd p = {fd, POLLIN, 0};
    if (poll(&p, 1, 100) <= 0) continue;
    ssize_t r = read(fd, buf + o, 1);
    if (r <= 0) break;
    if (buf[o] == '\n') break;
    o++;
  }
  buf[o] = 0;
  return o > 0;
}

bool tl_daemon_start(tl_daemon *d, const char *listen, const char *const *args) {
  memset(d, 0, sizeof *d);
  const char *bin = getenv("SEGOPSD");
  if (!bin) {
    fprintf(stderr, "lib_test: $SEGOPSD is not set\n");
    return false;
  }
  const char *argv[32] = {bin, "--listen", listen, "--log-level", "error"};
  int argc = 5;
  for (int i = 0; args && args[i] && argc < 31; i++) argv[argc++] = args[i];
  argv[argc] = NULL;
  int pipefd[2];
  if (pipe2(pipefd, O_CLOEXEC)) return false; /* dup2 onto the child's stdout clears it there */
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, pipefd[1], 1);
  posix_spawn_file_actions_addclose(&fa, pipefd[0]);
  posix_spawn_file_actions_addclose(&fa, pipefd[1]);
  /* The daemon gets no SEGOPS_* variable: a test says exactly what it configures. */
  char *env[512];
  int ne = 0;
  for (char **e = environ; *e && ne < 511; e++)
    if (strncmp(*e, "SEGOPS_", 7)) env[ne++] = *e;
  env[ne] = NULL;
  int rc = posix_spawn(&d->pid, bin, &fa, NULL, (char *const *)argv, env);
  posix_spawn_file_actions_destroy(&fa);
  close(pipefd[1]);
  if (rc) {
    close(pipefd[0]);
    return false;
  }
  char line[256], host[128];
  bool ok = read_line(pipefd[0], line, sizeof line) &&
            sscanf(line, "segopsd listening on http://%127[^:]:%d", host, &d->port) == 2;
  d->out_fd = pipefd[0];
  if (!ok) {
    fprintf(stderr, "lib_test: segopsd did not start: '%s'\n", line);
    tl_daemon_signal(d, SIGKILL);
    tl_daemon_wait(d, 10);
    return false;
  }
  snprintf(d->url, sizeof d->url, "http://%s:%d", host, d->port);
  return true;
}

void tl_daemon_signal(const tl_daemon *d, int sig) {
  if (d->pid > 0) kill(d->pid, sig);
}

int tl_daemon_wait(tl_daemon *d, double timeout_s) {
  if (d->pid <= 0) return -1;
  double end = now_s() + timeout_s;
  for (;;) {
    int st;
    pid_t r = waitpid(d->pid, &st, WNOHANG);
    if (r == d->pid) {
      d->pid = 0;
      close(d->out_fd);
      return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    }
    if (now_s() > end) {
      kill(d->pid, SIGKILL);
      waitpid(d->pid, &st, 0);
      d->pid = 0;
      close(d->out_fd);
      return -1;
    }
    usleep(10000);
  }
}

bool tl_daemon_stop(tl_daemon *d) {
  tl_daemon_signal(d, SIGTERM);
  return tl_daemon_wait(d, 30) == 0;
}

/* ---- random calls ---- */

uint64_t tl_next(tl_rng *r) {
  uint64_t z = (r->s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

double tl_uniform(tl_rng *r, double lo, double hi) { return lo + (hi - lo) * (double)(tl_next(r) >> 11) * 0x1p-53; }

const segops_fn_desc *tl_row(int fn) {
  return segops_fn((segops_op)(fn / SEGOPS_PASS_COUNT), (segops_pass)(fn % SEGOPS_PASS_COUNT));
}

size_t tl_nbytes(const segops_array *a) {
  size_t b = segops_dtype_size((segops_dtype)a->dtype);
  for (int i = 0; i < a->ndim; i++) b *= (size_t)a->shape[i];
  return b;
}

static void fill_float(segops_array *a, segops_dtype dt, tl_rng *r) {
  size_t count = tl_nbytes(a) / segops_dtype_size(dt);
  a->data = malloc(count * segops_dtype_size(dt) + 1);
  for (size_t i = 0; i < count; i++) {
    double v = tl_uniform(r, -1, 1);
    if (dt == SEGOPS_F32)
      ((float *)a->data)[i] = (float)v;
    else
      ((double *)a->data)[i] = v;
  }
}

static int cmp_i64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return (x > y) - (x < y);
}

void tl_call_make(tl_call *c, int fn, segops_dtype dtype, int width, int64_t n, int64_t s, bool shuffle, bool idx64,
                  tl_rng *r) {
  memset(c, 0, sizeof *c);
  c->fn = fn;
  c->row = tl_row(fn);
  c->dtype = dtype;
  c->width = c->row->vec3_only ? 3 : width;
  c->n = n;
  c->s = s;
  for (int k = 0; k < c->row->n_in; k++) {
    segops_array *a = &c->in[k];
    a->dtype = dtype;
    a->ndim = segops_shape_dims(c->row->in[k].shape, c->width, n, s, a->shape);
    fill_float(a, dtype, r);
    c->given[k] = c->row->in[k].use == SEGOPS_ARG_REQ || tl_next(r) % 4 != 0;
    c->inp[k] = c->given[k] ? a : NULL;
  }
  /* Segment ids drawn from the first s - s/4 segments (the rest stay empty), in order or shuffled. */
  int64_t used = s > 1 ? s - s / 4 : s;
  c->idx.dtype = idx64 ? SEGOPS_I64 : SEGOPS_I32;
  c->idx.ndim = 1;
  c->idx.shape[0] = n;
  c->idx.data = malloc((size_t)n * 8 + 1);
  int64_t *v = malloc((size_t)n * 8 + 1);
  for (int64_t i = 0; i < n; i++) v[i] = used ? (int64_t)(tl_next(r) % (uint64_t)used) : 0;
  if (!shuffle) qsort(v, (size_t)n, sizeof *v, cmp_i64);
  for (int64_t i = 0; i < n; i++) {
    if (idx64)
      ((int64_t *)c->idx.data)[i] = v[i];
    else
      ((int32_t *)c->idx.data)[i] = (int32_t)v[i];
  }
  free(v);
}

void tl_call_free(tl_call *c) {
  for (int k = 0; k < SEGOPS_MAX_INPUTS; k++) free(c->in[k].data);
  free(c->idx.data);
  memset(c, 0, sizeof *c);
}

/* lib_test.h: what the libsegops tests share: checks that count, the real segopsd started on port 0
 * (its path in $SEGOPSD) and stopped with signals, and random calls of any function built from the
 * op table. */
#ifndef SEGOPS_LIB_TEST_H
#define SEGOPS_LIB_TEST_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "ops.h"
#include "segops.h"

/* ---- checks: every one counts; failures print (the first 50) and make main return 1 ---- */
extern long tl_checks, tl_failures;
void tl_fail(const char *file, int line, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
#define TL_CHECK(cond, ...)                                \
  do {                                                     \
    __atomic_add_fetch(&tl_checks, 1, __ATOMIC_RELAXED);   \
    if (!(cond)) tl_fail(__FILE__, __LINE__, __VA_ARGS__); \
  } while (0)
/* Prints "name: N checks, M failures" and returns the exit status. */
int tl_summary(const char *name);
/* The SKIP exit (77) with a reason. */
int tl_skip(const char *why);

/* ---- daemons ---- */
typedef struct {
  pid_t pid;
  char url[192]; /* http://HOST:PORT as the daemon printed it */
  int port;
  int out_fd; /* its stdout, kept open (it may print more lines) until it is waited for */
} tl_daemon;
/* Starts $SEGOPSD --listen listen --log-level warn [args...] (NULL-terminated) and waits for its
 * "listening on" line; false when it did not start within 30 s. */
bool tl_daemon_start(tl_daemon *d, const char *listen, const char *const *args);
void tl_daemon_signal(const tl_daemon *d, int sig);
/* Waits up to timeout_s for the daemon to exit: its exit status, 128+signal, or -1 (still running:
 * then it is killed). */
int tl_daemon_wait(tl_daemon *d, double timeout_s);
/* SIGTERM and wait: true when it exited 0. */
bool tl_daemon_stop(tl_daemon *d);

/* ---- random calls ---- */
typedef struct {
  uint64_t s;
} tl_rng;
uint64_t tl_next(tl_rng *r);
double tl_uniform(tl_rng *r, double lo, double hi);

/* One call of a function with its inputs (owned). */
typedef struct {
  int fn;
  const segops_fn_desc *row;
  segops_dtype dtype;
  int width;
  int64_t n, s;
  segops_array in[SEGOPS_MAX_INPUTS];
  bool given[SEGOPS_MAX_INPUTS];
  const segops_array *inp[SEGOPS_MAX_INPUTS]; /* &in[k] or NULL */
  segops_array idx;
} tl_call;
/* A random call of fn: n elements in s segments (some empty), idx unsorted when shuffle, int64
 * when idx64; optional inputs left out at random. */
void tl_call_make(tl_call *c, int fn, segops_dtype dtype, int width, int64_t n, int64_t s, bool shuffle, bool idx64,
                  tl_rng *r);
void tl_call_free(tl_call *c);
/* The row of fn. */
const segops_fn_desc *tl_row(int fn);
size_t tl_nbytes(const segops_array *a);

#endif

/* native_harness.h: what the native channel's tests share: checks, the real segopsd started on
 * port 0 with its channel socket in a temporary directory, HTTP calls (libcurl, msgpack bodies)
 * to compare against, calls through the native transport (transport.h), and the daemon's
 * resources (descriptors, mappings, memory, CPU) read from /proc. */
#ifndef SEGOPS_NATIVE_HARNESS_H
#define SEGOPS_NATIVE_HARNESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "mem.h"
#include "ops.h"
#include "transport.h"

/* ---- checks: every failure is printed; nh_exit() returns 1 after any ---- */
extern int nh_failures;
void nh_fail(const char *file, int line, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
#define NH_CHECK(cond, ...)                                    \
  do {                                                         \
    if (!(cond)) nh_fail(__FILE__, __LINE__, __VA_ARGS__);     \
  } while (0)
/* Prints the case's verdict; the process's exit status. */
int nh_exit(const char *name);
/* Exits 77 (CTest SKIPPED) with the reason. */
void nh_skip(const char *why) __attribute__((noreturn));

/* ---- the daemon ---- */
typedef struct {
  pid_t pid;
  int port;
  char url[64];
  char sock[200];   /* the native channel's socket */
  char errpath[220];
  char dir[160];
} nh_daemon;

/* A fresh temporary directory (mode 0755) for sockets and logs. */
void nh_tempdir(char *dir, size_t len);
void nh_rmtree(const char *dir);
/* Starts $SEGOPSD (or $SEGOPSD_TEST when test_build) on 127.0.0.1:0 with --native-socket
 * dir/native.sock, then args (NULL-terminated, may be NULL), with env (NAME=VALUE strings,
 * NULL-terminated, may be NULL) added to an environment without SEGOPS_ variables. Waits for its
 * "listening on" line. 0, or -1 after a failed check. */
int nh_daemon_start(nh_daemon *d, const char *dir, bool test_build, const char *const *args, const char *const *env);
/* Sends sig and waits (at most 30 s); returns the exit status, or 128 + the signal that ended it.
 * With SIGTERM, checks exit 0 and no sanitizer report in its stderr. */
int nh_daemon_stop(nh_daemon *d, int sig);
/* The daemon's stderr so far (malloc'd, NUL-terminated). */
char *nh_daemon_log(const nh_daemon *d);

/* ---- resources of a process ---- */
typedef struct {
  int fds, maps, threads;
  long rss_kb;
} nh_usage;
nh_usage nh_usage_of(pid_t pid);
/* CPU time of a process (every thread), precise (clock_getcpuclockid). */
double nh_cpu_seconds(pid_t pid);
/* utime + stime of /proc/PID/stat, in clock ticks. */
long nh_stat_ticks(pid_t pid);

/* ---- HTTP (libcurl) ---- */
/* GET url path; *body malloc'd; returns the HTTP status, or -1. */
long nh_http_get(const char *url, const char *path, const char *token, char **body);
/* The call over POST /v1/{op}/{pass} (msgpack both ways); dtype >= 0 adds the request's "dtype"
 * key. Requested outputs with data NULL are malloc'd (free()). Returns SEGOPS_OK or the daemon's
 * error in e. */
int nh_http_call(const char *url, const segops_tcall *call, const char *token, int dtype, segops_error *e);

/* ---- native calls ---- */
/* Fills a call of function fn (SEGOPS_FN_*): inputs in[0..n_in) (NULL: omitted), idx,
 * num_segments, want (0: every output), out[k] for the outputs (unrequested ones untouched). */
void nh_tcall(segops_tcall *c, int fn, const segops_array *const *in, const segops_array *idx, int64_t s,
              unsigned want, segops_array *out);
/* A native transport on d's socket (NULL after a failed check). */
segops_transport *nh_native(const nh_daemon *d, segops_mem *mem, const char *token, double timeout_s);
/* A small call that must succeed (sum forward of 64 float64 into 4 segments, checked against its
 * sums): true when it did. Heap arrays, so every call copies through the pools. */
bool nh_good_call(segops_transport *t, segops_error *e);

/* Deterministic numbers. */
uint64_t nh_rand(uint64_t *s);
double nh_uniform(uint64_t *s);

/* Sleeps seconds. */
void nh_sleep(double s);

#endif

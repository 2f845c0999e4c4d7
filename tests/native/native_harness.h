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
#define NH_CHECK(cond, ...)                                \
  do {                                                     \
    if (!(cond)) nh_fail(__FILE__, __LINE__, __VA_ARGS__); \
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
  char sock[200]; /* the native channel's socket */
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
/* The same on 127.0.0.1:port (a restarted daemon at its predecessor's address). */
int nh_daemon_start_at(nh_daemon *d, const char *dir, bool test_build, int port, const char *const *args,
                       const char *const *env);
/* Sends sig and waits (at most 30 s); returns the exit status, or 128 + the signal that ended it.
 * With SIGTERM, checks exit 0 and no sanitizer report in its stderr. */
int nh_daemon_stop(nh_daemon *d, int sig);
/* The daemon's stderr so far (malloc'd, NUL-terminated). */
char *nh_daemon_log(const nh_daemon *d);

/* ---- resources of a process ---- */
typedef struct {
  int fds, maps, threads;
  int memfd_maps; /* mappings of memfds: clients' rings and pools */
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
/* POST a JSON body to url path; *body malloc'd; returns the HTTP status, or -1. */
long nh_http_post_json(const char *url, const char *path, const char *json, char **body);
/* The call over POST /v1/{op}/{pass} (msgpack both ways); dtype >= 0 adds the request's "dtype"
 * key. Requested outputs with data NULL are malloc'd (free()). Returns SEGOPS_OK or the daemon's
 * error in e. */
int nh_http_call(const char *url, const segops_tcall *call, const char *token, int dtype, segops_error *e);

/* ---- native calls ---- */
/* Fills a call of function fn (SEGOPS_FN_*): inputs in[0..n_in) (NULL: omitted), idx,
 * num_segments, want (0: every output), out[k] for the outputs (unrequested ones untouched). */
void nh_tcall(segops_tcall *c, int fn, const segops_array *const *in, const segops_array *idx, int64_t s, unsigned want,
              segops_array *out);
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

/* ---- a raw channel: the protocol by hand, for the tests that break it ---- */
#include "segops_ring.h"
typedef struct {
  int sock;
  int ring_fd;
  unsigned char *ring;
  size_t ring_len;
  segops_ring_header *hdr;
  uint32_t slots;
  uint32_t pools;
} nh_raw;

/* A sealed, fully allocated memfd of size bytes (seals: F_SEAL_SHRINK when sealed), or -1. */
int nh_memfd(size_t size, bool sealed);
/* Sends msg (len bytes) with fd (or none, -1); 0 or -1 (segops_chan_send). */
int nh_send(int sock, const void *msg, size_t len, int fd);
/* Receives one message into buf (cap bytes); its length, 0 at the end, -1 on error or timeout. */
ssize_t nh_recv(int sock, void *buf, size_t cap, double timeout_s);
/* Connects, HELLO (with token), RING of `slots` slots. 0, or the daemon's error code with its
 * message in msg (when not NULL, 512 bytes). */
int nh_raw_open(nh_raw *r, const char *sock, const char *token, uint32_t slots, char *msg);
/* POOL with fd (not closed) as the next pool id and size bytes: 0, or the error code (msg). */
int nh_raw_pool(nh_raw *r, int fd, uint64_t size, char *msg);
void nh_raw_close(nh_raw *r);
segops_ring_slot *nh_raw_slot(nh_raw *r, uint32_t k);
/* Writes req into slot k, SUBMITTED, rings. */
void nh_raw_submit(nh_raw *r, uint32_t k, const segops_ring_request *req, uint64_t seq);
/* Waits for slot k to be DONE (at most timeout_s): true when it is; then FREE again. */
bool nh_raw_wait(nh_raw *r, uint32_t k, double timeout_s, segops_ring_answer *ans);
/* A request descriptor: sum forward of x (N float64 at x_off of pool 0) with idx (N int32 at
 * idx_off) into S segments, out at out_off (S float64). */
segops_ring_request nh_sum_request(int64_t n, int64_t s, uint64_t x_off, uint64_t idx_off, uint64_t out_off);

/* bench_native.c: the empty call's round trip (segmented_sum forward, N = S = 0: through
 * validation, the scheduler and the backend) over the native channel, against the floors of the
 * same run: a bare spinning round trip between two processes on shared memory, a futex round trip
 * between them, and the same empty call over HTTP on a unix socket and on TCP (libcurl,
 * keep-alive, msgpack bodies). Client on one core, daemon (or the floor's peer) on another.
 * Prints median and p99 per round trip, and the client's and the daemon's CPU per call; then a
 * call with work in it (2^14 elements) with and without the client's spinning.
 *   bench_native --segopsd PATH [--calls N] [--out FILE] [--cpus C,D] */
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "mem.h"
#include "ops.h"
#include "transport.h"

static int CPU_CLIENT = 0, CPU_PEER = 1;
static FILE *OUT;

static void say(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vprintf(fmt, ap);
  va_end(ap);
  if (OUT) {
    va_start(ap, fmt);
    vfprintf(OUT, fmt, ap);
    va_end(ap);
  }
  fflush(stdout);
}

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double cpu_of(pid_t pid) {
  clockid_t c;
  struct timespec ts;
  if (pid == 0) {
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  } else if (clock_getcpuclockid(pid, &c) != 0 || clock_gettime(c, &ts) != 0) {
    return 0;
  }
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void pin(int cpu) {
  cpu_set_t s;
  CPU_ZERO(&s);
  CPU_SET(cpu, &s);
  sched_setaffinity(0, sizeof s, &s);
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

typedef struct {
  const char *name;
  double med_us, p99_us, client_us, peer_us;
} row;

static row summarize(const char *name, double *t, int n, double client_cpu, double peer_cpu) {
  qsort(t, (size_t)n, sizeof *t, cmp);
  row r = {name, t[n / 2] * 1e6, t[(int)(n * 0.99)] * 1e6, client_cpu / n * 1e6, peer_cpu / n * 1e6};
  return r;
}

/* ---- the floors: two processes answering each other on a shared page ---- */

static long futex(uint32_t *w, int op, uint32_t v) { return syscall(SYS_futex, w, op, v, NULL, NULL, 0); }

static row floor_pingpong(const char *name, int n, bool sleep) {
  uint32_t *w = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  uint32_t *ping = &w[0], *pong = &w[16];
  pid_t pid = fork();
  if (pid == 0) {
    pin(CPU_PEER);
    for (uint32_t i = 1; i <= (uint32_t)n; i++) {
      while (__atomic_load_n(ping, __ATOMIC_ACQUIRE) != i)
        if (sleep) futex(ping, FUTEX_WAIT, i - 1);
      __atomic_store_n(pong, i, __ATOMIC_RELEASE);
      if (sleep) futex(pong, FUTEX_WAKE, 1);
    }
    _exit(0);
  }
  double *t = malloc(sizeof(double) * (size_t)n);
  double c0 = cpu_of(0);
  for (uint32_t i = 1; i <= (uint32_t)n; i++) {
    double a = now();
    __atomic_store_n(ping, i, __ATOMIC_RELEASE);
    if (sleep) futex(ping, FUTEX_WAKE, 1);
    while (__atomic_load_n(pong, __ATOMIC_ACQUIRE) != i)
      if (sleep) futex(pong, FUTEX_WAIT, i - 1);
    t[i - 1] = now() - a;
  }
  double c1 = cpu_of(0);
  /* The peer's CPU from its rusage at exit: a process that never sleeps may not have its clock
   * brought up to date while it runs. */
  struct rusage ru;
  wait4(pid, NULL, 0, &ru);
  double peer = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec * 1e-6 + (double)ru.ru_stime.tv_sec +
                (double)ru.ru_stime.tv_usec * 1e-6;
  row r = summarize(name, t, n, c1 - c0, peer);
  free(t);
  munmap(w, 4096);
  return r;
}

/* ---- the daemon ---- */

static pid_t start_daemon(const char *bin, const char *dir, int *port) {
  int pfd[2];
  if (pipe(pfd) != 0) return -1;
  char sock[256], unixl[300];
  snprintf(sock, sizeof sock, "%s/native.sock", dir);
  snprintf(unixl, sizeof unixl, "127.0.0.1:0,unix:%s/http.sock", dir);
  pid_t pid = fork();
  if (pid == 0) {
    pin(CPU_PEER);
    dup2(pfd[1], 1);
    close(pfd[0]);
    execl(bin, bin, "--listen", unixl, "--native-socket", sock, "--log-level", "warn", "--backend", "cpu",
          (char *)NULL);
    _exit(127);
  }
  close(pfd[1]);
  char line[256] = "";
  size_t got = 0;
  while (got + 1 < sizeof line && read(pfd[0], line + got, 1) == 1 && line[got] != '\n') got++;
  line[got] = 0;
  if (sscanf(line, "segopsd listening on http://127.0.0.1:%d", port) != 1) {
    fprintf(stderr, "bench_native: segopsd did not start (%s)\n", line);
    kill(pid, SIGKILL);
    return -1;
  }
  /* drain the other listener lines so the daemon never blocks on a full pipe */
  for (int i = 0; i < 200 && access(sock, F_OK) != 0; i++) usleep(10000);
  close(pfd[0]);
  return pid;
}

/* ---- the empty call ---- */

/* segmented_sum forward of `elems` float64 into 64 segments (0: the empty call, S = 0), arrays in
 * the pools as segops_alloc gives them: nothing is copied. */
static row native_call(const char *name, const char *sock, pid_t daemon, int n, int spin_us, int64_t elems) {
  segops_mem *mem = segops_mem_new();
  segops_error e;
  segops_transport *t = segops_native_open(sock, mem, NULL, spin_us, geteuid(), 0, now() + 10, &e);
  if (!t) {
    fprintf(stderr, "bench_native: %s\n", e.message);
    exit(1);
  }
  int64_t segs = elems ? 64 : 0;
  double *xs = segops_mem_alloc(mem, (size_t)elems * 8 + 64);
  int32_t *is = segops_mem_alloc(mem, (size_t)elems * 4 + 64);
  void *p = segops_mem_alloc(mem, (size_t)segs * 8 + 64);
  for (int64_t i = 0; i < elems; i++) xs[i] = (double)i, is[i] = (int32_t)(i * segs / elems);
  segops_array x = {SEGOPS_F64, 1, {elems}, xs, 0}, idx = {SEGOPS_I32, 1, {elems}, is, 0};
  segops_array out = {SEGOPS_F64, 1, {segs}, p, (size_t)segs * 8 + 64};
  segops_tcall c;
  memset(&c, 0, sizeof c);
  c.fn = SEGOPS_FN_SEGMENTED_SUM_FORWARD;
  c.op = "segmented_sum";
  c.pass = "forward";
  c.n_in = 1;
  c.n_out = 1;
  c.in_name[0] = "x";
  c.in[0] = &x;
  c.idx = &idx;
  c.num_segments = segs;
  c.want = 1;
  c.out_name[0] = "out";
  c.out[0] = &out;
  for (int i = 0; i < n / 10 + 100; i++) t->vt->call(t, &c, now() + 10, &e); /* warm up */
  double *tm = malloc(sizeof(double) * (size_t)n);
  double c0 = cpu_of(0), p0 = cpu_of(daemon);
  for (int i = 0; i < n; i++) {
    double a = now();
    int rc = t->vt->call(t, &c, a + 10, &e);
    tm[i] = now() - a;
    if (rc) {
      fprintf(stderr, "bench_native: native call: %s\n", e.message);
      exit(1);
    }
  }
  double c1 = cpu_of(0), p1 = cpu_of(daemon);
  row r = summarize(name, tm, n, c1 - c0, p1 - p0);
  free(tm);
  t->vt->close(t);
  segops_mem_free_all(mem);
  return r;
}

static size_t sink(char *d, size_t s, size_t m, void *u) {
  (void)d, (void)u;
  return s * m;
}

static row http_empty(const char *name, const char *url, const char *unix_path, pid_t daemon, int n) {
  /* {"x": {"dtype": "float64", "shape": [0], "data": bin 0}, "idx": {... int32 ...}, "num_segments": 0} */
  static const unsigned char BODY[] = {
      0x83, 0xa1, 'x', 0x83, 0xa5, 'd',  't',  'y', 'p', 'e', 0xa7, 'f',  'l',  'o',  'a', 't', '6',  '4',  0xa5, 's',
      'h',  'a',  'p', 'e',  0x91, 0x00, 0xa4, 'd', 'a', 't', 'a',  0xc4, 0x00, 0xa3, 'i', 'd', 'x',  0x83, 0xa5, 'd',
      't',  'y',  'p', 'e',  0xa5, 'i',  'n',  't', '3', '2', 0xa5, 's',  'h',  'a',  'p', 'e', 0x91, 0x00, 0xa4, 'd',
      'a',  't',  'a', 0xc4, 0x00, 0xac, 'n',  'u', 'm', '_', 's',  'e',  'g',  'm',  'e', 'n', 't',  's',  0x00};
  CURL *h = curl_easy_init();
  char full[300];
  snprintf(full, sizeof full, "%s/v1/segmented_sum/forward", url);
  curl_easy_setopt(h, CURLOPT_URL, full);
  if (unix_path) curl_easy_setopt(h, CURLOPT_UNIX_SOCKET_PATH, unix_path);
  struct curl_slist *hd = curl_slist_append(NULL, "Content-Type: application/msgpack");
  curl_easy_setopt(h, CURLOPT_HTTPHEADER, hd);
  curl_easy_setopt(h, CURLOPT_POSTFIELDS, BODY);
  curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, (long)sizeof BODY);
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, sink);
  curl_easy_setopt(h, CURLOPT_TCP_NODELAY, 1L);
  double *tm = malloc(sizeof(double) * (size_t)n);
  long st = 0;
  for (int i = 0; i < n / 10 + 50; i++) curl_easy_perform(h);
  double c0 = cpu_of(0), p0 = cpu_of(daemon);
  for (int i = 0; i < n; i++) {
    double a = now();
    CURLcode rc = curl_easy_perform(h);
    tm[i] = now() - a;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &st);
    if (rc != CURLE_OK || st != 200) {
      fprintf(stderr, "bench_native: HTTP call failed (%d, status %ld)\n", (int)rc, st);
      exit(1);
    }
  }
  double c1 = cpu_of(0), p1 = cpu_of(daemon);
  row r = summarize(name, tm, n, c1 - c0, p1 - p0);
  free(tm);
  curl_slist_free_all(hd);
  curl_easy_cleanup(h);
  return r;
}

int main(int argc, char **argv) {
  const char *segopsd = NULL, *out = NULL;
  int n = 20000;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--segopsd") && i + 1 < argc)
      segopsd = argv[++i];
    else if (!strcmp(argv[i], "--calls") && i + 1 < argc)
      n = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--out") && i + 1 < argc)
      out = argv[++i];
    else if (!strcmp(argv[i], "--cpus") && i + 1 < argc)
      sscanf(argv[++i], "%d,%d", &CPU_CLIENT, &CPU_PEER);
    else {
      fprintf(stderr, "usage: %s --segopsd PATH [--calls N] [--out FILE] [--cpus CLIENT,DAEMON]\n", argv[0]);
      return 2;
    }
  }
  if (!segopsd || n < 100) {
    fprintf(stderr, "bench_native: --segopsd PATH is required (and --calls >= 100)\n");
    return 2;
  }
  if (out && !(OUT = fopen(out, "w"))) {
    perror(out);
    return 1;
  }
  pin(CPU_CLIENT);
  char dir[] = "/tmp/segops-bench-XXXXXX";
  if (!mkdtemp(dir)) return 1;
  int port = 0;
  pid_t d = start_daemon(segopsd, dir, &port);
  if (d < 0) return 1;
  char sock[256], hsock[256], url[64];
  snprintf(sock, sizeof sock, "%s/native.sock", dir);
  snprintf(hsock, sizeof hsock, "%s/http.sock", dir);
  snprintf(url, sizeof url, "http://127.0.0.1:%d", port);
  row rows[8];
  int nr = 0;
  rows[nr++] = floor_pingpong("floor: spinning round trip (shared memory)", n, false);
  rows[nr++] = floor_pingpong("floor: futex round trip (shared memory)", n, true);
  rows[nr++] = native_call("native, default spin (client 50 us)", sock, d, n, -1, 0);
  rows[nr++] = native_call("native, client spin 0 (sleeps at once)", sock, d, n, 0, 0);
  rows[nr++] = http_empty("HTTP on the unix socket", "http://localhost", hsock, d, n / 4);
  rows[nr++] = http_empty("HTTP on TCP 127.0.0.1", url, NULL, d, n / 4);
  /* The spin budget against a call with work in it: 2^14 elements (MLIP sizes). */
  row big[2];
  big[0] = native_call("N = 2^14, default spin (client 50 us)", sock, d, n / 4, -1, 1 << 14);
  big[1] = native_call("N = 2^14, client spin 0", sock, d, n / 4, 0, 1 << 14);
  kill(d, SIGTERM);
  waitpid(d, NULL, 0);
  unlink(sock);
  unlink(hsock);
  rmdir(dir);
  say("empty call (segmented_sum forward, N = S = 0): client on CPU %d, daemon / peer on CPU %d, %d calls\n",
      CPU_CLIENT, CPU_PEER, n);
  say("%-44s %10s %10s %12s %12s %10s\n", "", "median us", "p99 us", "client us/c", "daemon us/c", "/ spin");
  for (int i = 0; i < nr; i++)
    say("%-44s %10.2f %10.2f %12.2f %12.2f %10.1f\n", rows[i].name, rows[i].med_us, rows[i].p99_us, rows[i].client_us,
        rows[i].peer_us, rows[i].med_us / rows[0].med_us);
  say("\nsegmented_sum forward, N = 2^14 float64 into 64 segments, arrays in the pools:\n");
  for (int i = 0; i < 2; i++)
    say("%-44s %10.2f %10.2f %12.2f %12.2f\n", big[i].name, big[i].med_us, big[i].p99_us, big[i].client_us,
        big[i].peer_us);
  if (OUT) fclose(OUT);
  return 0;
}

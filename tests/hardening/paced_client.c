/* paced_client.c: a native-channel client that makes a cheap call (segmented_sum of 4 rows in the
 * channel's memory) every PERIOD_US microseconds and sleeps in between, for SECONDS, then prints
 * its own CPU time and the daemon's over exactly that stretch (the daemon's from /proc/PID/stat),
 * and how often the daemon's threads went to sleep (their voluntary context switches):
 *   paced_client URL DAEMON_PID SECONDS PERIOD_US [CLIENT_SPIN_US]
 * A negative PERIOD_US makes it compute instead: -PERIOD_US microseconds of busy work of its own
 * between calls, never sleeping (a client that keeps the daemon's spin paid for).
 * prints one line: calls=N client_cpu_s=C daemon_cpu_s=D daemon_sleeps=S p50_us=P p99_us=Q transport=T
 * (p50_us, p99_us: the median and 99th percentile of the calls' own wall times, the wake-up after a
 * sleep included: what a paced client waits for each answer)
 * test_paced.py runs it against the real segopsd: the spin policy (proto/native.md, Doorbells). */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "segops.h"

/* utime + stime of a process, seconds (-1 when unreadable). */
static double proc_cpu(long pid) {
  char path[64], buf[2048];
  snprintf(path, sizeof path, "/proc/%ld/stat", pid);
  FILE *f = fopen(path, "r");
  if (!f) return -1;
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = 0;
  const char *p = strrchr(buf, ')'); /* the name may hold spaces */
  unsigned long ut = 0, st = 0;
  if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st) != 2) return -1;
  return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

/* The voluntary context switches of every thread of a process (a thread that sleeps on a futex
 * makes one), or -1 when unreadable. */
static long proc_sleeps(long pid) {
  char path[96], line[256];
  snprintf(path, sizeof path, "/proc/%ld/task", pid);
  DIR *d = opendir(path);
  if (!d) return -1;
  long total = 0;
  struct dirent *de;
  while ((de = readdir(d))) {
    if (de->d_name[0] == '.') continue;
    snprintf(path, sizeof path, "/proc/%ld/task/%.20s/status", pid, de->d_name);
    FILE *f = fopen(path, "r");
    if (!f) continue; /* a thread gone meanwhile */
    long v;
    while (fgets(line, sizeof line, f))
      if (sscanf(line, "voluntary_ctxt_switches: %ld", &v) == 1) total += v;
    fclose(f);
  }
  closedir(d);
  return total;
}

static double mono(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double self_cpu(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int by_value(const void *a, const void *b) {
  const double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* The q-quantile of the n sorted values v (nearest rank), or 0 for none. */
static double quantile(const double *v, long n, double q) {
  if (n <= 0) return 0;
  long k = (long)(q * (double)n);
  return v[k < n ? k : n - 1];
}

static int call(segops_client *c, segops_array *x, segops_array *idx, segops_array *out) {
  segops_error e;
  int rc = segops_segmented_sum_forward(c, x, idx, 2, out, &e);
  if (rc) fprintf(stderr, "paced_client: %s\n", e.message);
  return rc;
}

int main(int argc, char **argv) {
  if (argc != 5 && argc != 6) {
    fprintf(stderr, "usage: paced_client URL DAEMON_PID SECONDS PERIOD_US [CLIENT_SPIN_US]\n");
    return 2;
  }
  long pid = strtol(argv[2], NULL, 10);
  double seconds = strtod(argv[3], NULL);
  long period_us = strtol(argv[4], NULL, 10), period_ns = period_us * 1000L;
  segops_options o;
  segops_options_init(&o);
  o.transport = "native";
  o.timeout_s = 10;
  if (argc == 6) o.spin_us = (int)strtol(argv[5], NULL, 10); /* else libsegops' default */
  segops_client *c;
  segops_error e;
  if (segops_open(&c, argv[1], &o, &e)) {
    fprintf(stderr, "paced_client: %s\n", e.message);
    return 1;
  }
  double *xs = segops_alloc(c, 4 * sizeof(double)), *os = segops_alloc(c, 2 * sizeof(double));
  int *ids = segops_alloc(c, 4 * sizeof(int));
  for (int i = 0; i < 4; i++) xs[i] = i, ids[i] = i / 2;
  segops_array x = {SEGOPS_F64, 1, {4}, xs, 4 * sizeof(double)};
  segops_array idx = {SEGOPS_I32, 1, {4}, ids, 4 * sizeof(int)};
  segops_array out = {SEGOPS_F64, 1, {2}, os, 2 * sizeof(double)};
  for (int i = 0; i < 200; i++) /* the channel and its pools set up, caches warm */
    if (call(c, &x, &idx, &out)) return 1;
  long calls = 0, cap = 1 << 16;
  double *lat = malloc((size_t)cap * sizeof *lat);
  if (!lat) return 1;
  long s0 = proc_sleeps(pid);
  double d0 = proc_cpu(pid), c0 = self_cpu();
  struct timespec next, now;
  clock_gettime(CLOCK_MONOTONIC, &next);
  double end = (double)next.tv_sec + (double)next.tv_nsec * 1e-9 + seconds;
  for (;;) {
    clock_gettime(CLOCK_MONOTONIC, &now);
    if ((double)now.tv_sec + (double)now.tv_nsec * 1e-9 >= end) break;
    const double t0 = mono();
    if (call(c, &x, &idx, &out)) return 1;
    if (calls == cap) {
      double *more = realloc(lat, (size_t)(cap *= 2) * sizeof *lat);
      if (!more) return 1;
      lat = more;
    }
    lat[calls++] = mono() - t0;
    if (period_us < 0) { /* busy work of its own, never asleep */
      double until = mono() - (double)period_us * 1e-6;
      while (mono() < until) {
      }
      continue;
    }
    next.tv_nsec += period_ns;
    while (next.tv_nsec >= 1000000000L) next.tv_nsec -= 1000000000L, next.tv_sec++;
    clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL); /* asleep until the next call */
  }
  double dd = proc_cpu(pid) - d0, cc = self_cpu() - c0;
  long ds = proc_sleeps(pid) - s0;
  qsort(lat, (size_t)calls, sizeof *lat, by_value);
  printf("calls=%ld client_cpu_s=%.4f daemon_cpu_s=%.4f daemon_sleeps=%ld p50_us=%.1f p99_us=%.1f transport=%s\n", calls,
         cc, dd, ds, quantile(lat, calls, 0.5) * 1e6, quantile(lat, calls, 0.99) * 1e6, segops_transport_used(c));
  free(lat);
  segops_free(c, xs);
  segops_free(c, os);
  segops_free(c, ids);
  segops_close(c);
  return 0;
}

/* test_lib_failover.c: one libsegops client over three real daemons on 127.0.0.2, .3 and .4 (port 0
 * each), "auto" finding each one's native channel. Eight threads call every function while one
 * daemon is SIGKILLed and another drained (SIGTERM with --drain-seconds): no call fails, each
 * moves on promptly (a call in flight on the killed daemon goes to another at once, far within
 * its timeout), every answer has the bits of "local", every call went over the native channel,
 * the survivor takes the work. With every daemon gone a call fails after its timeout naming each
 * daemon's last failure; a call made while they are all down is answered by a daemon that comes
 * back on its address before the timeout. */
#include <curl/curl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "lib_test.h"

#define THREADS 8
#define TIMEOUT_S 30.0

static segops_client *multi, *local;
static volatile int stop;
static long done[THREADS], not_native[THREADS];
static double slowest[THREADS];

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static size_t collect(char *p, size_t size, size_t n, void *arg) {
  char *buf = arg;
  size_t have = strlen(buf), len = size * n;
  if (have + len < 1 << 16) {
    memcpy(buf + have, p, len);
    buf[have + len] = 0;
  }
  return len;
}

/* The sum of the samples of metric whose labels hold label (a line "\nmetric{...label...} N"). */
static double sum_samples(const char *text, const char *metric, const char *label) {
  char head[96];
  snprintf(head, sizeof head, "\n%s{", metric);
  double total = 0;
  for (const char *l = strstr(text, head); l; l = strstr(l + 1, head)) {
    const char *close = strchr(l, '}');
    if (close && memmem(l, (size_t)(close - l), label, strlen(label))) total += strtod(close + 1, NULL);
  }
  return total;
}

/* Calls a daemon answered (200s over HTTP and the native channel); -1 if it is gone. */
static double ok_count(const tl_daemon *d) {
  static char buf[1 << 16];
  char url[256];
  snprintf(url, sizeof url, "%s/metrics", d->url);
  buf[0] = 0;
  CURL *h = curl_easy_init();
  curl_easy_setopt(h, CURLOPT_URL, url);
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, collect);
  curl_easy_setopt(h, CURLOPT_WRITEDATA, buf);
  curl_easy_setopt(h, CURLOPT_TIMEOUT, 5L);
  CURLcode rc = curl_easy_perform(h);
  curl_easy_cleanup(h);
  if (rc != CURLE_OK) return -1;
  return sum_samples(buf, "segops_requests_total", "status=\"200\""); /* every transport's */
}

/* Every function in turn through the three daemons, each answer checked against "local". */
static void *worker(void *arg) {
  int t = (int)(intptr_t)arg;
  tl_rng r = {(uint64_t)t + 1};
  for (int k = 0; !stop; k++) {
    int fn = (t * 7 + k) % SEGOPS_FN_COUNT;
    tl_call c;
    tl_call_make(&c, fn, SEGOPS_F64, 1 + 2 * (k % 2), 3 + k % 40, 1 + k % 6, k % 3 == 0, false, &r);
    segops_array got[SEGOPS_MAX_OUTPUTS] = {{0}}, want[SEGOPS_MAX_OUTPUTS] = {{0}};
    segops_error e, el;
    double t0 = now_s();
    int rc = segops_run(multi, fn, c.inp, &c.idx, c.s, 0, got, &e);
    double took = now_s() - t0;
    if (took > slowest[t]) slowest[t] = took;
    if (!rc) not_native[t] += strcmp(segops_transport_used(multi), "native") != 0;
    int rl = segops_run(local, fn, c.inp, &c.idx, c.s, 0, want, &el);
    TL_CHECK(rc == SEGOPS_OK, "thread %d call %d (%s %s): %d %s", t, k, segops_fn_op(fn), segops_fn_pass(fn), rc,
             e.message);
    TL_CHECK(rl == SEGOPS_OK, "local: %s", el.message);
    for (int o = 0; !rc && !rl && o < c.row->n_out; o++)
      TL_CHECK(got[o].nbytes == want[o].nbytes && !memcmp(got[o].data, want[o].data, got[o].nbytes),
               "thread %d call %d: %s differs from local", t, k, c.row->out[o].name);
    for (int o = 0; o < c.row->n_out; o++) {
      segops_free(multi, got[o].data);
      segops_free(local, want[o].data);
    }
    tl_call_free(&c);
    if (!rc) done[t]++;
  }
  return NULL;
}

static int sum_call(segops_client *c, segops_error *e) {
  double x[2] = {1, 2}, r = 0;
  int32_t idx[2] = {0, 0};
  segops_array ax = {SEGOPS_F64, 1, {2}, x, 0}, ai = {SEGOPS_I32, 1, {2}, idx, 0}, out = {.data = &r, .nbytes = 8};
  int rc = segops_segmented_sum_forward(c, &ax, &ai, 1, &out, e);
  return rc ? rc : r == 3 ? 0 : -100;
}

static void kill_and_drain(tl_daemon d[3]) {
  pthread_t th[THREADS];
  for (int t = 0; t < THREADS; t++) pthread_create(&th[t], NULL, worker, (void *)(intptr_t)t);
  double end = now_s() + 15;
  while (now_s() < end && !(ok_count(&d[0]) > 0 && ok_count(&d[1]) > 0 && ok_count(&d[2]) > 0)) usleep(50000);
  TL_CHECK(ok_count(&d[0]) > 0 && ok_count(&d[1]) > 0 && ok_count(&d[2]) > 0, "calls are not spread over the three");
  usleep(300000);
  tl_daemon_signal(&d[0], SIGKILL);
  usleep(500000);
  tl_daemon_signal(&d[1], SIGTERM);
  TL_CHECK(tl_daemon_wait(&d[1], 15) == 0, "the drained daemon did not exit 0");
  double before = ok_count(&d[2]);
  usleep(500000);
  double after = ok_count(&d[2]);
  stop = 1;
  for (int t = 0; t < THREADS; t++) pthread_join(th[t], NULL);
  long total = 0, other = 0;
  double most = 0;
  for (int t = 0; t < THREADS; t++) {
    total += done[t];
    other += not_native[t];
    if (slowest[t] > most) most = slowest[t];
  }
  printf("%ld calls; the slowest took %.3f s\n", total, most);
  TL_CHECK(total > 50, "only %ld calls were made", total);
  TL_CHECK(other == 0, "%ld calls did not go over the native channel", other);
  TL_CHECK(most < TIMEOUT_S / 10, "a call took %.2f s to move on (timeout %.0f s)", most, TIMEOUT_S);
  TL_CHECK(after > before, "the survivor took no work (%g then %g)", before, after);
  tl_daemon_wait(&d[0], 5);
}

/* Every daemon gone: an error after the timeout that names each one. */
static void all_down(tl_daemon d[3]) {
  segops_client *c = NULL;
  segops_options o;
  segops_options_init(&o);
  o.timeout_s = 1.0;
  o.wait_s = 10; /* a client that never reached them waits as one that did (a restart) */
  char urls[600];
  snprintf(urls, sizeof urls, "%s,%s,%s", d[0].url, d[1].url, d[2].url);
  segops_error e;
  TL_CHECK(segops_open(&c, urls, &o, &e) == 0, "open: %s", e.message);
  double t0 = now_s();
  int rc = sum_call(c, &e);
  double took = now_s() - t0;
  TL_CHECK(rc == SEGOPS_E_CONNECTION, "all down: %d %s", rc, e.message);
  for (int i = 0; i < 3; i++)
    TL_CHECK(strstr(e.message, d[i].url) != NULL, "'%s' does not name %s", e.message, d[i].url);
  TL_CHECK(strstr(e.message, "no daemon took the call in") != NULL, "'%s' does not say the time spent", e.message);
  TL_CHECK(took > 0.7 && took < 3, "all down: gave up after %.2f s with a 1 s timeout", took);
  segops_close(c);
}

typedef struct {
  tl_daemon *d;
  char listen[64];
  bool ok;
} restart_arg;

static void *restart_later(void *arg) {
  restart_arg *ra = arg;
  usleep(1000000);
  const char *args[] = {"--backend", "cpu", "--threads", "1", NULL};
  ra->ok = tl_daemon_start(ra->d, ra->listen, args);
  return NULL;
}

/* A call made while every daemon is down waits for the one that comes back. */
static void comes_back(tl_daemon d[3]) {
  restart_arg ra = {.d = &d[0]};
  snprintf(ra.listen, sizeof ra.listen, "127.0.0.2:%d", d[0].port);
  pthread_t th;
  pthread_create(&th, NULL, restart_later, &ra);
  double t0 = now_s();
  segops_error e;
  int rc = sum_call(multi, &e);
  double took = now_s() - t0;
  pthread_join(th, NULL);
  TL_CHECK(ra.ok, "the daemon did not start again on %s", ra.listen);
  TL_CHECK(rc == SEGOPS_OK, "call while all were down: %d %s", rc, e.message);
  TL_CHECK(took > 0.9 && took < 20, "answered after %.2f s", took);
  TL_CHECK(tl_daemon_stop(&d[0]), "the restarted daemon did not exit 0");
}

int main(void) {
  const char *base[] = {"--backend", "cpu", "--threads", "1", NULL};
  const char *drained[] = {"--backend",          "cpu", "--threads", "1", "--drain-seconds", "0.5",
                           "--shutdown-timeout", "10",  NULL};
  tl_daemon d[3];
  if (!tl_daemon_start(&d[0], "127.0.0.2:0", base)) return tl_skip("cannot listen on 127.0.0.2");
  if (!tl_daemon_start(&d[1], "127.0.0.3:0", drained) || !tl_daemon_start(&d[2], "127.0.0.4:0", base)) return 1;
  segops_options o, ol;
  segops_options_init(&o);
  o.timeout_s = TIMEOUT_S; /* transport "auto": the daemons are on this host, so native */
  segops_options_init(&ol);
  ol.threads = 1;
  char urls[600];
  snprintf(urls, sizeof urls, "%s,%s,%s", d[0].url, d[1].url, d[2].url);
  segops_error e;
  if (segops_open(&multi, urls, &o, &e) || segops_open(&local, "local", &ol, &e)) {
    fprintf(stderr, "open: %s\n", e.message);
    return 1;
  }
  kill_and_drain(d);
  tl_daemon_signal(&d[2], SIGKILL);
  tl_daemon_wait(&d[2], 5);
  all_down(d);
  comes_back(d);
  segops_close(multi);
  segops_close(local);
  return tl_summary("test_lib_failover");
}

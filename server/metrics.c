/* metrics.c: request counters, latency and batch histograms, and their Prometheus rendering. */
#include "metrics.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The statuses SPEC §5 can produce; anything else lands in the last slot ("other"). */
static const int STATUSES[] = {200, 400, 401, 404, 405, 406, 413, 415, 500, 503, 504, 0};
#define N_STATUS (sizeof STATUSES / sizeof STATUSES[0])

static const char *const ROUTE_NAMES[SEGOPS_ROUTE_COUNT] = {"op",      "info", "healthz", "readyz",
                                                            "metrics", "v2",   "shm",     "other"};

/* Seconds; spans a tiny CPU request (tens of microseconds) to the request timeout. */
static const double BUCKETS[] = {0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                 0.1,     0.25,   0.5,     1,      2.5,   5,      10,    30,   60};
#define N_BUCKETS (sizeof BUCKETS / sizeof BUCKETS[0])
static const char *const HIST_NAMES[SEGOPS_HIST_COUNT] = {"queue", "compute", "total"};
static const char *const HIST_HELP[SEGOPS_HIST_COUNT] = {"Time a request waited in the scheduler queue",
                                                         "Time of the backend call that ran a request",
                                                         "Time from the request's headers to its completion"};

/* Requests per backend call: powers of two. */
static const int BATCH_BUCKETS[] = {1, 2, 4, 8, 16, 32, 64, 128, 256};
#define N_BATCH (sizeof BATCH_BUCKETS / sizeof BATCH_BUCKETS[0])

typedef struct {
  atomic_uint_fast64_t bucket[N_BUCKETS + 1]; /* last: +Inf */
  atomic_uint_fast64_t count;
  atomic_uint_fast64_t sum_ns;
} hist;

static struct {
  atomic_uint_fast64_t op_req[SEGOPS_OP_COUNT][SEGOPS_PASS_COUNT][N_STATUS];
  atomic_uint_fast64_t route_req[SEGOPS_ROUTE_COUNT][N_STATUS];
  atomic_uint_fast64_t bytes_in, bytes_out;
  atomic_int_fast64_t inflight;
  hist h[SEGOPS_HIST_COUNT];
  atomic_uint_fast64_t batch_bucket[N_BATCH + 1];
  atomic_uint_fast64_t batch_count, batch_sum, batch_elements;
  atomic_uint_fast64_t busy_ns;
} M;

static size_t status_slot(int status) {
  for (size_t i = 0; i + 1 < N_STATUS; i++)
    if (STATUSES[i] == status) return i;
  return N_STATUS - 1;
}

#define RLX memory_order_relaxed

void segops_metrics_request(segops_route route, int op, int pass, int status, uint64_t bytes_in, uint64_t bytes_out) {
  size_t s = status_slot(status);
  if (route == SEGOPS_ROUTE_OP && op >= 0 && op < SEGOPS_OP_COUNT && pass >= 0 && pass < SEGOPS_PASS_COUNT)
    atomic_fetch_add_explicit(&M.op_req[op][pass][s], 1, RLX);
  else if ((unsigned)route < SEGOPS_ROUTE_COUNT)
    atomic_fetch_add_explicit(&M.route_req[route == SEGOPS_ROUTE_OP ? SEGOPS_ROUTE_OTHER : route][s], 1, RLX);
  atomic_fetch_add_explicit(&M.bytes_in, bytes_in, RLX);
  atomic_fetch_add_explicit(&M.bytes_out, bytes_out, RLX);
}

void segops_metrics_observe(segops_hist which, double seconds) {
  if ((unsigned)which >= SEGOPS_HIST_COUNT) return;
  hist *h = &M.h[which];
  if (seconds < 0) seconds = 0;
  size_t b = 0;
  while (b < N_BUCKETS && seconds > BUCKETS[b]) b++;
  atomic_fetch_add_explicit(&h->bucket[b], 1, RLX);
  atomic_fetch_add_explicit(&h->count, 1, RLX);
  atomic_fetch_add_explicit(&h->sum_ns, (uint64_t)(seconds * 1e9), RLX);
}

void segops_metrics_batch(int requests, int64_t elements) {
  size_t b = 0;
  while (b < N_BATCH && requests > BATCH_BUCKETS[b]) b++;
  atomic_fetch_add_explicit(&M.batch_bucket[b], 1, RLX);
  atomic_fetch_add_explicit(&M.batch_count, 1, RLX);
  atomic_fetch_add_explicit(&M.batch_sum, (uint64_t)requests, RLX);
  atomic_fetch_add_explicit(&M.batch_elements, (uint64_t)(elements > 0 ? elements : 0), RLX);
}

void segops_metrics_backend_busy(double seconds) {
  if (seconds > 0) atomic_fetch_add_explicit(&M.busy_ns, (uint64_t)(seconds * 1e9), RLX);
}

void segops_metrics_inflight_add(int delta) { atomic_fetch_add_explicit(&M.inflight, delta, RLX); }

/* A growable text buffer; on OOM it stops growing and render returns NULL. */
typedef struct {
  char *p;
  size_t len, cap;
  int oom;
} sbuf;

static void put(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(sbuf *b, const char *fmt, ...) {
  if (b->oom) return;
  for (;;) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if ((size_t)n < b->cap - b->len) {
      b->len += (size_t)n;
      return;
    }
    size_t ncap = b->cap * 2 + (size_t)n;
    char *np = realloc(b->p, ncap);
    if (!np) {
      b->oom = 1;
      return;
    }
    b->p = np;
    b->cap = ncap;
  }
}

static uint64_t ld(atomic_uint_fast64_t *a) { return atomic_load_explicit(a, RLX); }

char *segops_metrics_render(int64_t queue_depth, const segops_backend *be, size_t *len) {
  sbuf b = {malloc(16384), 0, 16384, 0};
  if (!b.p) return NULL;
  put(&b, "# HELP segops_requests_total Op requests answered, by op, pass and HTTP status.\n");
  put(&b, "# TYPE segops_requests_total counter\n");
  for (int o = 0; o < SEGOPS_OP_COUNT; o++)
    for (int p = 0; p < SEGOPS_PASS_COUNT; p++)
      for (size_t s = 0; s < N_STATUS; s++) {
        uint64_t v = ld(&M.op_req[o][p][s]);
        /* Zero series for 200 are always shown so every function appears; others when seen. */
        if (!v && STATUSES[s] != 200) continue;
        if (STATUSES[s])
          put(&b, "segops_requests_total{op=\"%s\",pass=\"%s\",status=\"%d\"} %llu\n", segops_op_name(o),
              segops_pass_name(p), STATUSES[s], (unsigned long long)v);
        else
          put(&b, "segops_requests_total{op=\"%s\",pass=\"%s\",status=\"other\"} %llu\n", segops_op_name(o),
              segops_pass_name(p), (unsigned long long)v);
      }
  put(&b, "# HELP segops_http_requests_total Requests to other routes, by route and HTTP status.\n");
  put(&b, "# TYPE segops_http_requests_total counter\n");
  for (int r = 1; r < SEGOPS_ROUTE_COUNT; r++)
    for (size_t s = 0; s < N_STATUS; s++) {
      uint64_t v = ld(&M.route_req[r][s]);
      if (!v) continue;
      if (STATUSES[s])
        put(&b, "segops_http_requests_total{route=\"%s\",status=\"%d\"} %llu\n", ROUTE_NAMES[r], STATUSES[s],
            (unsigned long long)v);
      else
        put(&b, "segops_http_requests_total{route=\"%s\",status=\"other\"} %llu\n", ROUTE_NAMES[r],
            (unsigned long long)v);
    }
  for (int h = 0; h < SEGOPS_HIST_COUNT; h++) {
    const char *n = HIST_NAMES[h];
    put(&b, "# HELP segops_%s_seconds %s.\n# TYPE segops_%s_seconds histogram\n", n, HIST_HELP[h], n);
    uint64_t cum = 0;
    for (size_t k = 0; k < N_BUCKETS; k++) {
      cum += ld(&M.h[h].bucket[k]);
      put(&b, "segops_%s_seconds_bucket{le=\"%g\"} %llu\n", n, BUCKETS[k], (unsigned long long)cum);
    }
    cum += ld(&M.h[h].bucket[N_BUCKETS]);
    put(&b, "segops_%s_seconds_bucket{le=\"+Inf\"} %llu\n", n, (unsigned long long)cum);
    put(&b, "segops_%s_seconds_sum %.9f\n", n, (double)ld(&M.h[h].sum_ns) / 1e9);
    put(&b, "segops_%s_seconds_count %llu\n", n, (unsigned long long)ld(&M.h[h].count));
  }
  put(&b, "# HELP segops_batch_size Requests joined into one backend call.\n# TYPE segops_batch_size histogram\n");
  uint64_t cum = 0;
  for (size_t k = 0; k < N_BATCH; k++) {
    cum += ld(&M.batch_bucket[k]);
    put(&b, "segops_batch_size_bucket{le=\"%d\"} %llu\n", BATCH_BUCKETS[k], (unsigned long long)cum);
  }
  cum += ld(&M.batch_bucket[N_BATCH]);
  put(&b, "segops_batch_size_bucket{le=\"+Inf\"} %llu\n", (unsigned long long)cum);
  put(&b, "segops_batch_size_sum %llu\nsegops_batch_size_count %llu\n", (unsigned long long)ld(&M.batch_sum),
      (unsigned long long)ld(&M.batch_count));
  put(&b, "# HELP segops_batch_elements_total Elements (N) sent to the backend.\n");
  put(&b, "# TYPE segops_batch_elements_total counter\nsegops_batch_elements_total %llu\n",
      (unsigned long long)ld(&M.batch_elements));
  put(&b, "# HELP segops_backend_busy_seconds_total Time the backend spent running calls.\n");
  put(&b, "# TYPE segops_backend_busy_seconds_total counter\nsegops_backend_busy_seconds_total %.9f\n",
      (double)ld(&M.busy_ns) / 1e9);
  put(&b, "# HELP segops_bytes_received_total Request body bytes received on op routes.\n");
  put(&b, "# TYPE segops_bytes_received_total counter\nsegops_bytes_received_total %llu\n",
      (unsigned long long)ld(&M.bytes_in));
  put(&b, "# HELP segops_bytes_sent_total Response body bytes sent.\n");
  put(&b, "# TYPE segops_bytes_sent_total counter\nsegops_bytes_sent_total %llu\n",
      (unsigned long long)ld(&M.bytes_out));
  put(&b, "# HELP segops_in_flight_requests Requests received and not yet answered.\n");
  put(&b, "# TYPE segops_in_flight_requests gauge\nsegops_in_flight_requests %lld\n",
      (long long)atomic_load_explicit(&M.inflight, RLX));
  put(&b, "# HELP segops_queue_depth Requests waiting for a worker.\n");
  put(&b, "# TYPE segops_queue_depth gauge\nsegops_queue_depth %lld\n", (long long)queue_depth);
  if (be && be->device_info) {
    put(&b, "# HELP segops_device_memory_used_bytes Memory in use on each device.\n");
    put(&b, "# TYPE segops_device_memory_used_bytes gauge\n");
    segops_device_info di[16];
    int nd = be->n_devices < 16 ? be->n_devices : 16;
    for (int d = 0; d < nd; d++) {
      memset(&di[d], 0, sizeof di[d]);
      if (be->device_info(be->ctx, d, &di[d]) != 0) di[d].name[0] = 0;
    }
    for (int d = 0; d < nd; d++)
      put(&b, "segops_device_memory_used_bytes{device=\"%d\"} %llu\n", d, (unsigned long long)di[d].memory_used);
    put(&b, "# HELP segops_device_memory_total_bytes Memory of each device.\n");
    put(&b, "# TYPE segops_device_memory_total_bytes gauge\n");
    for (int d = 0; d < nd; d++)
      put(&b, "segops_device_memory_total_bytes{device=\"%d\"} %llu\n", d, (unsigned long long)di[d].memory_total);
  }
  if (b.oom) {
    free(b.p);
    return NULL;
  }
  *len = b.len;
  return b.p;
}

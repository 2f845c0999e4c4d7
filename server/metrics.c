/* metrics.c: request counters, latency, size and batch histograms, gauges and per-device
 * counters, and their Prometheus rendering (units in names: _seconds, _bytes, _total). */
#include "metrics.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "errors.h"
#include "hostbuf.h"
#include "idx_cache.h"

/* The statuses proto/API.md lists; anything else lands in the last slot ("other"). */
static const int STATUSES[] = {200, 400, 401, 404, 405, 406, 413, 415, 500, 503, 504, 0};
#define N_STATUS (sizeof STATUSES / sizeof STATUSES[0])

static const char *const ROUTE_NAMES[SEGOPS_ROUTE_COUNT] = {"op",      "info", "healthz", "readyz",
                                                            "metrics", "v2",   "shm",     "other"};

/* Seconds; spans a tiny CPU request (tens of microseconds) to the request timeout. */
static const double BUCKETS[] = {0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                 0.1,     0.25,   0.5,     1,      2.5,   5,      10,    30,   60};
#define N_BUCKETS (sizeof BUCKETS / sizeof BUCKETS[0])
static const char *const HIST_NAMES[SEGOPS_HIST_COUNT] = {"queue", "compute", "request"};
static const char *const HIST_HELP[SEGOPS_HIST_COUNT] = {
    "Time an op request waited in the scheduler queue, by op and pass",
    "Time of the backend call that ran an op request, by op and pass",
    "Time from an op request's headers to its completion, by op and pass (probes and scrapes not counted)"};

/* Body sizes in bytes: powers of four from 64 B to 1 GiB. */
static const double SIZE_BUCKETS[] = {64,      256,     1024,     4096,     16384,     65536,     262144,
                                      1048576, 4194304, 16777216, 67108864, 268435456, 1073741824};
#define N_SIZE (sizeof SIZE_BUCKETS / sizeof SIZE_BUCKETS[0])

/* Why a request was turned away (segops_metrics_rejected); the label is the wire code but for
 * out_of_memory, which shares resource_exhausted on the wire. */
static const struct {
  int err;
  const char *reason;
} REJECT[] = {{SEGOPS_E_UNAUTHENTICATED, "unauthenticated"},
              {SEGOPS_E_TOO_LARGE, "too_large"},
              {SEGOPS_E_RESOURCE_EXHAUSTED, "resource_exhausted"},
              {SEGOPS_E_NOMEM, "out_of_memory"},
              {SEGOPS_E_UNAVAILABLE, "unavailable"},
              {SEGOPS_E_DEADLINE_EXCEEDED, "deadline_exceeded"}};
#define N_REJECT (sizeof REJECT / sizeof REJECT[0])
#define MAX_DEV 64

/* Native-channel call statuses: SEGOPS_OK and the SEGOPS_E_* codes (0, -1 ... -18) by -status. */
#define N_NATIVE_STATUS 19

/* Requests per backend call: powers of two. */
static const int BATCH_BUCKETS[] = {1, 2, 4, 8, 16, 32, 64, 128, 256};
#define N_BATCH (sizeof BATCH_BUCKETS / sizeof BATCH_BUCKETS[0])

typedef struct {
  atomic_uint_fast64_t bucket[N_BUCKETS + 1]; /* last: +Inf */
  atomic_uint_fast64_t count;
  atomic_uint_fast64_t sum_ns;
} hist;

typedef struct {
  atomic_uint_fast64_t bucket[N_SIZE + 1];
  atomic_uint_fast64_t count, sum;
} size_hist;

/* Op requests count in the same families whatever carried them, by a transport label: HTTP
 * (TCP or a unix socket) or the native channel. */
enum { TR_HTTP, TR_NATIVE, N_TR };
static const char *const TR_NAMES[N_TR] = {"http", "native"};

static struct {
  atomic_uint_fast64_t op_req[N_TR][SEGOPS_OP_COUNT][SEGOPS_PASS_COUNT][N_STATUS];
  atomic_uint_fast64_t route_req[SEGOPS_ROUTE_COUNT][N_STATUS];
  size_hist req_size, resp_size;
  atomic_int_fast64_t inflight[N_TR], executing;
  hist h[N_TR][SEGOPS_HIST_COUNT][SEGOPS_OP_COUNT][SEGOPS_PASS_COUNT];
  atomic_uint_fast64_t rejected[N_REJECT];
  atomic_uint_fast64_t batch_bucket[N_BATCH + 1];
  atomic_uint_fast64_t batch_count, batch_sum, batch_elements;
  atomic_uint_fast64_t busy_ns[MAX_DEV];
  atomic_int_fast64_t native_channels, native_mapped, native_pinned;
  atomic_uint_fast64_t native_calls[SEGOPS_OP_COUNT * SEGOPS_PASS_COUNT + 1][N_NATIVE_STATUS];
} M;

static size_t status_slot(int status) {
  for (size_t i = 0; i + 1 < N_STATUS; i++)
    if (STATUSES[i] == status) return i;
  return N_STATUS - 1;
}

#define RLX memory_order_relaxed

static bool is_fn(int op, int pass) { return op >= 0 && op < SEGOPS_OP_COUNT && pass >= 0 && pass < SEGOPS_PASS_COUNT; }

static void observe_size(size_hist *h, uint64_t bytes) {
  size_t b = 0;
  while (b < N_SIZE && (double)bytes > SIZE_BUCKETS[b]) b++;
  atomic_fetch_add_explicit(&h->bucket[b], 1, RLX);
  atomic_fetch_add_explicit(&h->count, 1, RLX);
  atomic_fetch_add_explicit(&h->sum, bytes, RLX);
}

void segops_metrics_request(segops_route route, int op, int pass, int status, uint64_t bytes_in, uint64_t bytes_out) {
  size_t s = status_slot(status);
  if (route == SEGOPS_ROUTE_OP && is_fn(op, pass)) {
    atomic_fetch_add_explicit(&M.op_req[TR_HTTP][op][pass][s], 1, RLX);
    observe_size(&M.req_size, bytes_in);
    observe_size(&M.resp_size, bytes_out);
  } else if ((unsigned)route < SEGOPS_ROUTE_COUNT) {
    atomic_fetch_add_explicit(&M.route_req[route == SEGOPS_ROUTE_OP ? SEGOPS_ROUTE_OTHER : route][s], 1, RLX);
  }
}

void segops_metrics_rejected(int err) {
  for (size_t k = 0; k < N_REJECT; k++)
    if (REJECT[k].err == err) atomic_fetch_add_explicit(&M.rejected[k], 1, RLX);
}

static void observe(int tr, segops_hist which, int op, int pass, double seconds) {
  hist *h = &M.h[tr][which][op][pass];
  if (seconds < 0) seconds = 0;
  size_t b = 0;
  while (b < N_BUCKETS && seconds > BUCKETS[b]) b++;
  atomic_fetch_add_explicit(&h->bucket[b], 1, RLX);
  atomic_fetch_add_explicit(&h->count, 1, RLX);
  atomic_fetch_add_explicit(&h->sum_ns, (uint64_t)(seconds * 1e9), RLX);
}

void segops_metrics_observe(segops_hist which, int op, int pass, double seconds) {
  if ((unsigned)which >= SEGOPS_HIST_COUNT || !is_fn(op, pass)) return;
  observe(TR_HTTP, which, op, pass, seconds);
}

void segops_metrics_batch(int requests, int64_t elements) {
  size_t b = 0;
  while (b < N_BATCH && requests > BATCH_BUCKETS[b]) b++;
  atomic_fetch_add_explicit(&M.batch_bucket[b], 1, RLX);
  atomic_fetch_add_explicit(&M.batch_count, 1, RLX);
  atomic_fetch_add_explicit(&M.batch_sum, (uint64_t)requests, RLX);
  atomic_fetch_add_explicit(&M.batch_elements, (uint64_t)(elements > 0 ? elements : 0), RLX);
}

void segops_metrics_backend_busy(int device, double seconds) {
  if (seconds > 0 && device >= 0 && device < MAX_DEV)
    atomic_fetch_add_explicit(&M.busy_ns[device], (uint64_t)(seconds * 1e9), RLX);
}

void segops_metrics_inflight_add(int delta) { atomic_fetch_add_explicit(&M.inflight[TR_HTTP], delta, RLX); }
void segops_metrics_executing_add(int delta) { atomic_fetch_add_explicit(&M.executing, delta, RLX); }

void segops_metrics_native_channels(int delta) { atomic_fetch_add_explicit(&M.native_channels, delta, RLX); }

/* A native call costs the channel's thread three atomics here besides native_calls (on the path of
 * the client's next call): its start, and its duration's bucket and sum. Its line in
 * segops_requests_total, its histogram's count and the calls in flight are derived from
 * native_calls when /metrics is rendered (native_requests, native_finished). */
void segops_metrics_native_start(void) { atomic_fetch_add_explicit(&M.inflight[TR_NATIVE], 1, RLX); }

void segops_metrics_native_call(int fn, int status, double seconds) {
  int f = fn >= 0 && fn < SEGOPS_OP_COUNT * SEGOPS_PASS_COUNT ? fn : SEGOPS_OP_COUNT * SEGOPS_PASS_COUNT;
  int s = status <= 0 && status > -N_NATIVE_STATUS ? -status : -SEGOPS_E_INTERNAL;
  atomic_fetch_add_explicit(&M.native_calls[f][s], 1, RLX);
  if (f == SEGOPS_OP_COUNT * SEGOPS_PASS_COUNT) return; /* no function: in native_calls_total only */
  hist *h = &M.h[TR_NATIVE][SEGOPS_HIST_TOTAL][f / SEGOPS_PASS_COUNT][f % SEGOPS_PASS_COUNT];
  size_t b = 0;
  while (b < N_BUCKETS && seconds > BUCKETS[b]) b++;
  atomic_fetch_add_explicit(&h->bucket[b], 1, RLX);
  atomic_fetch_add_explicit(&h->sum_ns, (uint64_t)(seconds > 0 ? seconds * 1e9 : 0), RLX);
}

void segops_metrics_native_bytes(int64_t mapped_delta, int64_t pinned_delta) {
  atomic_fetch_add_explicit(&M.native_mapped, mapped_delta, RLX);
  atomic_fetch_add_explicit(&M.native_pinned, pinned_delta, RLX);
}

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

/* Native calls of function f answered with the HTTP status STATUSES[slot] (the status its error
 * has over HTTP; 200 for ok). */
static uint64_t native_requests(int f, size_t slot) {
  uint64_t v = 0;
  for (int k = 0; k < N_NATIVE_STATUS; k++) {
    int code = -k;
    if (status_slot(code == SEGOPS_OK ? 200 : segops_err_http_status(code)) == slot) v += ld(&M.native_calls[f][k]);
  }
  return v;
}

/* Native calls answered, every function and status. */
static uint64_t native_finished(void) {
  uint64_t v = 0;
  for (int f = 0; f <= SEGOPS_OP_COUNT * SEGOPS_PASS_COUNT; f++)
    for (int k = 0; k < N_NATIVE_STATUS; k++) v += ld(&M.native_calls[f][k]);
  return v;
}

static void put_size_hist(sbuf *b, const char *name, const char *help, size_hist *h) {
  put(b, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name);
  uint64_t cum = 0;
  for (size_t k = 0; k < N_SIZE; k++) {
    cum += ld(&h->bucket[k]);
    put(b, "%s_bucket{le=\"%.0f\"} %llu\n", name, SIZE_BUCKETS[k], (unsigned long long)cum);
  }
  cum += ld(&h->bucket[N_SIZE]);
  put(b, "%s_bucket{le=\"+Inf\"} %llu\n%s_sum %llu\n%s_count %llu\n", name, (unsigned long long)cum, name,
      (unsigned long long)ld(&h->sum), name, (unsigned long long)ld(&h->count));
}

/* One latency histogram family: a series per function that has observations. */
static void put_latency(sbuf *b, int which) {
  const char *n = HIST_NAMES[which];
  put(b, "# HELP segops_%s_duration_seconds %s.\n# TYPE segops_%s_duration_seconds histogram\n", n, HIST_HELP[which],
      n);
  for (int t = 0; t < N_TR; t++)
    for (int o = 0; o < SEGOPS_OP_COUNT; o++)
      for (int p = 0; p < SEGOPS_PASS_COUNT; p++) {
        hist *h = &M.h[t][which][o][p];
        uint64_t count = ld(&h->count);
        if (t == TR_NATIVE) /* native_call keeps no count: the buckets' */
          for (size_t k = 0; k <= N_BUCKETS; k++) count += ld(&h->bucket[k]);
        if (!count) continue;
        const char *on = segops_op_name(o), *pn = segops_pass_name(p), *tn = TR_NAMES[t];
        uint64_t cum = 0;
        for (size_t k = 0; k <= N_BUCKETS; k++) {
          cum += ld(&h->bucket[k]);
          char le[32];
          if (k < N_BUCKETS)
            snprintf(le, sizeof le, "%g", BUCKETS[k]);
          else
            snprintf(le, sizeof le, "+Inf");
          put(b, "segops_%s_duration_seconds_bucket{op=\"%s\",pass=\"%s\",transport=\"%s\",le=\"%s\"} %llu\n", n, on,
              pn, tn, le, (unsigned long long)cum);
        }
        put(b, "segops_%s_duration_seconds_sum{op=\"%s\",pass=\"%s\",transport=\"%s\"} %.9f\n", n, on, pn, tn,
            (double)ld(&h->sum_ns) / 1e9);
        put(b, "segops_%s_duration_seconds_count{op=\"%s\",pass=\"%s\",transport=\"%s\"} %llu\n", n, on, pn, tn,
            (unsigned long long)count);
      }
}

static void put_gauge(sbuf *b, const char *name, const char *help, long long v) {
  put(b, "# HELP %s %s\n# TYPE %s gauge\n%s %lld\n", name, help, name, name, v);
}

/* A native call's status label: "ok", or the wire code, but out_of_memory and device for the codes
 * that share resource_exhausted and internal on the wire (labels must stay distinct). */
static const char *native_status_label(int status) {
  if (status == SEGOPS_OK) return "ok";
  if (status == SEGOPS_E_NOMEM) return "out_of_memory";
  if (status == SEGOPS_E_DEVICE) return "device";
  return segops_err_code(status);
}

static void put_native(sbuf *b) {
  put_gauge(b, "segops_native_channels", "Native channels open now.",
            (long long)atomic_load_explicit(&M.native_channels, RLX));
  put_gauge(b, "segops_native_mapped_bytes", "Client memory (rings and pools) mapped for native channels.",
            (long long)atomic_load_explicit(&M.native_mapped, RLX));
  put_gauge(b, "segops_native_pinned_bytes", "Of that, memory pinned for direct device copies.",
            (long long)atomic_load_explicit(&M.native_pinned, RLX));
  put(b,
      "# HELP segops_native_calls_total Calls answered over native channels, by op, pass and status (ok, or the "
      "error code).\n# TYPE segops_native_calls_total counter\n");
  for (int f = 0; f <= SEGOPS_OP_COUNT * SEGOPS_PASS_COUNT; f++)
    for (int s = 0; s < N_NATIVE_STATUS; s++) {
      uint64_t v = ld(&M.native_calls[f][s]);
      bool fn = f < SEGOPS_OP_COUNT * SEGOPS_PASS_COUNT;
      if (!v && (s != 0 || !fn)) continue; /* every function's ok series, others when seen */
      put(b, "segops_native_calls_total{op=\"%s\",pass=\"%s\",status=\"%s\"} %llu\n",
          fn ? segops_op_name(f / SEGOPS_PASS_COUNT) : "unknown",
          fn ? segops_pass_name(f % SEGOPS_PASS_COUNT) : "unknown", native_status_label(-s), (unsigned long long)v);
    }
}

static void put_requests(sbuf *b) {
  put(b,
      "# HELP segops_requests_total Op requests answered, by op, pass, HTTP status (a native call's: the status its "
      "error has over HTTP) and transport (http, native).\n");
  put(b, "# TYPE segops_requests_total counter\n");
  for (int t = 0; t < N_TR; t++)
    for (int o = 0; o < SEGOPS_OP_COUNT; o++)
      for (int p = 0; p < SEGOPS_PASS_COUNT; p++)
        for (size_t s = 0; s < N_STATUS; s++) {
          uint64_t v = t == TR_NATIVE ? native_requests(o * SEGOPS_PASS_COUNT + p, s) : ld(&M.op_req[t][o][p][s]);
          /* Zero series for 200 are always shown so every function appears; others when seen. */
          if (!v && STATUSES[s] != 200) continue;
          if (STATUSES[s])
            put(b, "segops_requests_total{op=\"%s\",pass=\"%s\",status=\"%d\",transport=\"%s\"} %llu\n",
                segops_op_name(o), segops_pass_name(p), STATUSES[s], TR_NAMES[t], (unsigned long long)v);
          else
            put(b, "segops_requests_total{op=\"%s\",pass=\"%s\",status=\"other\",transport=\"%s\"} %llu\n",
                segops_op_name(o), segops_pass_name(p), TR_NAMES[t], (unsigned long long)v);
        }
  put(b, "# HELP segops_http_requests_total Requests to other routes, by route and HTTP status.\n");
  put(b, "# TYPE segops_http_requests_total counter\n");
  for (int r = 1; r < SEGOPS_ROUTE_COUNT; r++)
    for (size_t s = 0; s < N_STATUS; s++) {
      uint64_t v = ld(&M.route_req[r][s]);
      if (!v) continue;
      if (STATUSES[s])
        put(b, "segops_http_requests_total{route=\"%s\",status=\"%d\"} %llu\n", ROUTE_NAMES[r], STATUSES[s],
            (unsigned long long)v);
      else
        put(b, "segops_http_requests_total{route=\"%s\",status=\"other\"} %llu\n", ROUTE_NAMES[r],
            (unsigned long long)v);
    }
  put(b,
      "# HELP segops_rejected_requests_total Requests turned away, by reason (the error code; out_of_memory "
      "for host memory).\n# TYPE segops_rejected_requests_total counter\n");
  for (size_t k = 0; k < N_REJECT; k++)
    put(b, "segops_rejected_requests_total{reason=\"%s\"} %llu\n", REJECT[k].reason,
        (unsigned long long)ld(&M.rejected[k]));
}

static void put_batches(sbuf *b) {
  put(b, "# HELP segops_batch_size Requests joined into one backend call.\n# TYPE segops_batch_size histogram\n");
  uint64_t cum = 0;
  for (size_t k = 0; k < N_BATCH; k++) {
    cum += ld(&M.batch_bucket[k]);
    put(b, "segops_batch_size_bucket{le=\"%d\"} %llu\n", BATCH_BUCKETS[k], (unsigned long long)cum);
  }
  cum += ld(&M.batch_bucket[N_BATCH]);
  put(b, "segops_batch_size_bucket{le=\"+Inf\"} %llu\n", (unsigned long long)cum);
  put(b, "segops_batch_size_sum %llu\nsegops_batch_size_count %llu\n", (unsigned long long)ld(&M.batch_sum),
      (unsigned long long)ld(&M.batch_count));
  put(b, "# HELP segops_batch_elements_total Elements (N) sent to the backend.\n");
  put(b, "# TYPE segops_batch_elements_total counter\nsegops_batch_elements_total %llu\n",
      (unsigned long long)ld(&M.batch_elements));
}

static void put_load(sbuf *b, int64_t queue_depth) {
  put(b,
      "# HELP segops_in_flight_requests Requests received and not yet answered, by transport (http: every HTTP "
      "route; native: native channel calls).\n# TYPE segops_in_flight_requests gauge\n");
  for (int t = 0; t < N_TR; t++)
    put(b, "segops_in_flight_requests{transport=\"%s\"} %lld\n", TR_NAMES[t],
        (long long)atomic_load_explicit(&M.inflight[t], RLX) - (t == TR_NATIVE ? (long long)native_finished() : 0));
  put_gauge(b, "segops_queued_requests", "Op requests waiting for a backend worker.", (long long)queue_depth);
  put_gauge(b, "segops_executing_requests", "Op requests in a backend call now.",
            (long long)atomic_load_explicit(&M.executing, RLX));
}

/* A gauge with one series per device: v[d] for devices 0..nd-1. */
static void put_per_device(sbuf *b, const char *name, const char *help, const uint64_t *v, int nd) {
  put(b, "# HELP %s %s\n# TYPE %s gauge\n", name, help, name);
  for (int d = 0; d < nd; d++) put(b, "%s{device=\"%d\"} %llu\n", name, d, (unsigned long long)v[d]);
}

static void put_devices(sbuf *b, const segops_backend *be) {
  int nd = be ? (be->n_devices < MAX_DEV ? be->n_devices : MAX_DEV) : 0;
  put(b, "# HELP segops_device_busy_seconds_total Time each backend device (worker) spent running calls.\n");
  put(b, "# TYPE segops_device_busy_seconds_total counter\n");
  for (int d = 0; d < nd; d++)
    put(b, "segops_device_busy_seconds_total{device=\"%d\"} %.9f\n", d, (double)ld(&M.busy_ns[d]) / 1e9);
  if (!be || !be->device_info) return;
  segops_device_info di[MAX_DEV];
  for (int d = 0; d < nd; d++) {
    memset(&di[d], 0, sizeof di[d]);
    if (be->device_info(be->ctx, d, &di[d]) != 0) di[d].name[0] = 0;
  }
  uint64_t used[MAX_DEV], total[MAX_DEV];
  for (int d = 0; d < nd; d++) {
    used[d] = di[d].memory_used;
    total[d] = di[d].memory_total;
  }
  put_per_device(b, "segops_device_memory_used_bytes", "Memory in use on each device.", used, nd);
  put_per_device(b, "segops_device_memory_total_bytes", "Memory of each device.", total, nd);
}

static void put_layout_cache(sbuf *b, const segops_backend *be) {
  if (!be || !be->cache_stats) return;
  segops_cache_stats cs[16];
  int nd = be->n_devices < 16 ? be->n_devices : 16;
  for (int d = 0; d < nd; d++)
    if (be->cache_stats(be->ctx, d, &cs[d]) != 0) memset(&cs[d], 0, sizeof cs[d]);
  uint64_t bytes[16], cap[16];
  for (int d = 0; d < nd; d++) {
    bytes[d] = cs[d].bytes;
    cap[d] = cs[d].cap;
  }
  put_per_device(b, "segops_layout_cache_bytes", "Device memory held by each worker's segment layout cache.", bytes,
                 nd);
  put_per_device(b, "segops_layout_cache_capacity_bytes", "Cap of each worker's segment layout cache.", cap, nd);
  put(b, "# HELP segops_layout_cache_lookups_total Layout cache lookups by result.\n");
  put(b, "# TYPE segops_layout_cache_lookups_total counter\n");
  for (int d = 0; d < nd; d++)
    put(b,
        "segops_layout_cache_lookups_total{device=\"%d\",result=\"hit\"} %llu\n"
        "segops_layout_cache_lookups_total{device=\"%d\",result=\"miss\"} %llu\n",
        d, cs[d].hits, d, cs[d].misses);
}

static void put_idx_cache(sbuf *b) {
  segops_idx_cache_stats_t ic;
  segops_idx_cache_stats(&ic);
  put(b, "# HELP segops_idx_cache_bytes Host memory held by validated copies of idx from shared memory.\n");
  put(b, "# TYPE segops_idx_cache_bytes gauge\n");
  put(b, "segops_idx_cache_bytes %llu\n", (unsigned long long)ic.bytes);
  put(b, "# HELP segops_idx_cache_capacity_bytes Cap of the validated-idx cache.\n");
  put(b, "# TYPE segops_idx_cache_capacity_bytes gauge\n");
  put(b, "segops_idx_cache_capacity_bytes %llu\n", (unsigned long long)ic.cap);
  put(b, "# HELP segops_idx_cache_lookups_total Validated-idx cache lookups by result.\n");
  put(b, "# TYPE segops_idx_cache_lookups_total counter\n");
  put(b, "segops_idx_cache_lookups_total{result=\"hit\"} %llu\nsegops_idx_cache_lookups_total{result=\"miss\"} %llu\n",
      (unsigned long long)ic.hits, (unsigned long long)ic.misses);
}

static void put_host_pool(sbuf *b) {
  segops_hostbuf_stats_t hs;
  segops_hostbuf_stats(&hs);
  put(b, "# HELP segops_host_pool_bytes Host memory mapped by the pool of large request and output buffers.\n");
  put(b, "# TYPE segops_host_pool_bytes gauge\n");
  put(b, "segops_host_pool_bytes{state=\"in_use\"} %llu\nsegops_host_pool_bytes{state=\"idle\"} %llu\n",
      (unsigned long long)(hs.mapped - hs.idle), (unsigned long long)hs.idle);
  put_gauge(b, "segops_host_pool_pinned_bytes", "Pool memory pinned for direct device copies.", (long long)hs.pinned);
  put_gauge(b, "segops_host_pool_capacity_bytes", "Cap of the host buffer pool.", (long long)hs.cap);
  put(b, "# HELP segops_host_pool_allocations_total Large host buffers by where they came from.\n");
  put(b, "# TYPE segops_host_pool_allocations_total counter\n");
  put(b,
      "segops_host_pool_allocations_total{source=\"reused\"} %llu\n"
      "segops_host_pool_allocations_total{source=\"mapped\"} %llu\n"
      "segops_host_pool_allocations_total{source=\"heap\"} %llu\n",
      (unsigned long long)hs.reused, (unsigned long long)hs.mapped_new, (unsigned long long)hs.heap);
}

char *segops_metrics_render(int64_t queue_depth, const segops_backend *be, size_t *len) {
  sbuf b = {malloc(65536), 0, 65536, 0};
  if (!b.p) return NULL;
  put(&b, "# HELP segops_build_info The daemon's version and backend (always 1).\n# TYPE segops_build_info gauge\n");
  put(&b, "segops_build_info{version=\"%s\",backend=\"%s\"} 1\n", SEGOPS_VERSION, be && be->name ? be->name : "none");
  put_requests(&b);
  for (int h = 0; h < SEGOPS_HIST_COUNT; h++) put_latency(&b, h);
  put_size_hist(&b, "segops_request_size_bytes", "Body sizes of op requests.", &M.req_size);
  put_size_hist(&b, "segops_response_size_bytes", "Body sizes of op responses (0 when the connection broke).",
                &M.resp_size);
  put_batches(&b);
  put_load(&b, queue_depth);
  put_native(&b);
  put_devices(&b, be);
  put_layout_cache(&b, be);
  put_idx_cache(&b);
  put_host_pool(&b);
  if (b.oom) {
    free(b.p);
    return NULL;
  }
  *len = b.len;
  return b.p;
}

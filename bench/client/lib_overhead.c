/* lib_overhead.c: libsegops' cost per call against its floor, a raw libcurl POST of the same
 * prebuilt msgpack body on a keep-alive connection (answer read, not decoded), measured in the
 * same run, interleaved. segmented_sum forward of N float64 (N = 0: the empty call, through the
 * daemon's validation, scheduler and backend) over HTTP/TCP, HTTP over the daemon's unix socket
 * when given, the native channel, and "local" (no daemon); the last two print no ratio (no HTTP
 * floor fits them: their medians stand beside the others').
 *
 *   lib_overhead URL [UNIX_SOCKET_PATH] [--calls 10000] [--n 1024] [--only WORD]
 * Prints the median microseconds per call of each way and its ratio to the floor of its socket;
 * --only keeps the ways whose name holds WORD (e.g. native: the empty call's floor alone, as
 * bench/client/overhead.py takes it). */
#include <curl/curl.h>
#include <msgpack.h>
#include <segops.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define ROUNDS 5

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_d(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

typedef struct {
  const char *name;
  int (*call)(void *arg);
  void *arg;
  double *t; /* per-call seconds */
  int n;
} way;

/* ---- the floor: a raw POST of a prebuilt body ---- */

typedef struct {
  CURL *h;
  msgpack_sbuffer body;
  char *resp;
  size_t len, cap;
} raw;

static size_t sink(char *p, size_t size, size_t n, void *arg) {
  raw *r = arg;
  size_t len = size * n;
  if (r->len + len > r->cap) {
    r->cap = (r->len + len) * 2;
    r->resp = realloc(r->resp, r->cap);
  }
  memcpy(r->resp + r->len, p, len);
  r->len += len;
  return len;
}

static void pack_str(msgpack_packer *pk, const char *s) {
  msgpack_pack_str(pk, strlen(s));
  msgpack_pack_str_body(pk, s, strlen(s));
}

static void pack_tensor(msgpack_packer *pk, const char *name, const char *dt, int64_t n, const void *d, size_t nb) {
  pack_str(pk, name);
  msgpack_pack_map(pk, 3);
  pack_str(pk, "dtype");
  pack_str(pk, dt);
  pack_str(pk, "shape");
  msgpack_pack_array(pk, 1);
  msgpack_pack_int64(pk, n);
  pack_str(pk, "data");
  msgpack_pack_bin(pk, nb);
  if (nb) msgpack_pack_bin_body(pk, d, nb);
}

static void raw_init(raw *r, const char *url, const char *unix_path, const double *x, const int32_t *idx, int64_t n,
                     int64_t s) {
  memset(r, 0, sizeof *r);
  msgpack_sbuffer_init(&r->body);
  msgpack_packer pk;
  msgpack_packer_init(&pk, &r->body, msgpack_sbuffer_write);
  msgpack_pack_map(&pk, 3);
  pack_tensor(&pk, "x", "float64", n, x, (size_t)n * 8);
  pack_tensor(&pk, "idx", "int32", n, idx, (size_t)n * 4);
  pack_str(&pk, "num_segments");
  msgpack_pack_int64(&pk, s);
  static struct curl_slist *hdrs;
  if (!hdrs) {
    hdrs = curl_slist_append(NULL, "Content-Type: application/msgpack");
    hdrs = curl_slist_append(hdrs, "Accept: application/msgpack");
    hdrs = curl_slist_append(hdrs, "Expect:");
  }
  char full[512];
  snprintf(full, sizeof full, "%s/v1/segmented_sum/forward", unix_path ? "http://localhost" : url);
  r->h = curl_easy_init();
  curl_easy_setopt(r->h, CURLOPT_URL, full);
  if (unix_path) curl_easy_setopt(r->h, CURLOPT_UNIX_SOCKET_PATH, unix_path);
  curl_easy_setopt(r->h, CURLOPT_POSTFIELDS, r->body.data);
  curl_easy_setopt(r->h, CURLOPT_POSTFIELDSIZE, (long)r->body.size);
  curl_easy_setopt(r->h, CURLOPT_HTTPHEADER, hdrs);
  curl_easy_setopt(r->h, CURLOPT_WRITEFUNCTION, sink);
  curl_easy_setopt(r->h, CURLOPT_WRITEDATA, r);
  curl_easy_setopt(r->h, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(r->h, CURLOPT_PROXY, "");
}

static int raw_call(void *arg) {
  raw *r = arg;
  r->len = 0;
  long status = 0;
  if (curl_easy_perform(r->h) != CURLE_OK) return 1;
  curl_easy_getinfo(r->h, CURLINFO_RESPONSE_CODE, &status);
  return status != 200;
}

/* ---- libsegops ---- */

typedef struct {
  segops_client *c;
  segops_array x, idx, out;
} lib;

static int lib_call(void *arg) {
  lib *l = arg;
  segops_error e;
  int rc = segops_segmented_sum_forward(l->c, &l->x, &l->idx, l->idx.shape[0] ? 1 : 0, &l->out, &e);
  if (rc) fprintf(stderr, "lib_overhead: %s\n", e.message);
  return rc;
}

static void lib_init(lib *l, const char *url, const char *transport, double *x, int32_t *idx, int64_t n, double *out) {
  segops_options o;
  segops_options_init(&o);
  o.transport = transport;
  o.threads = 1;
  segops_error e;
  if (segops_open(&l->c, url, &o, &e)) {
    fprintf(stderr, "lib_overhead: %s\n", e.message);
    exit(1);
  }
  l->x = (segops_array){SEGOPS_F64, 1, {n}, x, 0};
  l->idx = (segops_array){SEGOPS_I32, 1, {n}, idx, 0};
  l->out = (segops_array){.data = out, .nbytes = 8};
}

/* Each way `calls` times in ROUNDS interleaved blocks, every call timed. */
static void measure(way *w, int nw, int calls) {
  for (int i = 0; i < nw; i++) {
    w[i].t = malloc(sizeof(double) * (size_t)calls);
    w[i].n = 0;
    for (int k = 0; k < 100; k++) w[i].call(w[i].arg); /* warm: connections, pools */
  }
  for (int r = 0; r < ROUNDS; r++)
    for (int i = 0; i < nw; i++)
      for (int k = 0; k < calls / ROUNDS; k++) {
        double t0 = now_s();
        if (w[i].call(w[i].arg)) exit(1);
        w[i].t[w[i].n++] = now_s() - t0;
      }
  for (int i = 0; i < nw; i++) qsort(w[i].t, (size_t)w[i].n, sizeof(double), cmp_d);
}

static double median(const way *w) { return w->t[w->n / 2]; }

int main(int argc, char **argv) {
  const char *url = NULL, *unix_path = NULL, *only = NULL;
  int calls = 10000, big = 1024;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--calls") && i + 1 < argc)
      calls = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--n") && i + 1 < argc)
      big = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--only") && i + 1 < argc)
      only = argv[++i];
    else if (!url)
      url = argv[i];
    else
      unix_path = argv[i];
  }
  if (!url || calls < ROUNDS) {
    fprintf(stderr, "usage: lib_overhead URL [UNIX_SOCKET_PATH] [--calls 10000] [--n 1024] [--only WORD]\n");
    return 2;
  }
  curl_global_init(CURL_GLOBAL_DEFAULT);
  char unix_url[512];
  if (unix_path) snprintf(unix_url, sizeof unix_url, "unix://%s", unix_path);
  printf("%-8s %-22s %12s %12s\n", "N", "way", "median_us", "vs_floor");
  int sizes[2] = {0, big};
  for (int si = 0; si < 2; si++) {
    int64_t n = sizes[si];
    double *x = calloc((size_t)n + 1, 8), out = 0;
    int32_t *idx = calloc((size_t)n + 1, 4);
    for (int64_t i = 0; i < n; i++) x[i] = (double)i;
    raw rt, ru;
    lib lt, lu, ll, ln;
    raw_init(&rt, url, NULL, x, idx, n, n ? 1 : 0);
    lib_init(&lt, url, "http", x, idx, n, &out);
    lib_init(&ll, "local", NULL, x, idx, n, &out);
    lib_init(&ln, url, "native", x, idx, n, &out);
    way w[6] = {{"floor: curl POST tcp", raw_call, &rt, NULL, 0},
                {"libsegops http tcp", lib_call, &lt, NULL, 0},
                {"libsegops local", lib_call, &ll, NULL, 0},
                {"libsegops native", lib_call, &ln, NULL, 0}};
    int nw = 4;
    if (unix_path) {
      raw_init(&ru, url, unix_path, x, idx, n, n ? 1 : 0);
      lib_init(&lu, unix_url, "http", x, idx, n, &out);
      w[nw++] = (way){"floor: curl POST unix", raw_call, &ru, NULL, 0};
      w[nw++] = (way){"libsegops http unix", lib_call, &lu, NULL, 0};
    }
    if (only) { /* the ways asked for; the others were made but are not measured */
      int kept = 0;
      for (int i = 0; i < nw; i++)
        if (strstr(w[i].name, only)) w[kept++] = w[i];
      nw = kept;
    }
    measure(w, nw, calls);
    for (int i = 0; i < nw; i++) {
      const char *floor_of = strstr(w[i].name, "unix") ? "floor: curl POST unix" : "floor: curl POST tcp";
      const way *f = w;
      for (int k = 0; k < nw; k++)
        if (!strcmp(w[k].name, floor_of)) f = &w[k];
      if (strstr(w[i].name, "local") || strstr(w[i].name, "native")) /* no HTTP floor fits them */
        printf("%-8lld %-22s %12.2f %12s\n", (long long)n, w[i].name, median(&w[i]) * 1e6, "-");
      else
        printf("%-8lld %-22s %12.2f %12.3f\n", (long long)n, w[i].name, median(&w[i]) * 1e6, median(&w[i]) / median(f));
      free(w[i].t);
    }
    segops_close(lt.c);
    segops_close(ll.c);
    segops_close(ln.c);
    curl_easy_cleanup(rt.h);
    msgpack_sbuffer_destroy(&rt.body);
    free(rt.resp);
    if (unix_path) {
      segops_close(lu.c);
      curl_easy_cleanup(ru.h);
      msgpack_sbuffer_destroy(&ru.body);
      free(ru.resp);
    }
    free(x);
    free(idx);
  }
  return 0;
}

/* loadgen.c: the service benchmark's client: raw sockets, HTTP/1.1 keep-alive, one thread per
 * connection, each sending the same msgpack request back to back.
 * Reports requests/s, p50/p99 latency and request-body bytes/s of the requests that complete in
 * a measured window after a warm-up. Usage:
 *   loadgen HOST PORT [--fn OP/PASS] [--path P] [--n N] [--vec3] [--segments S] [--connections C]
 *                     [--duration SEC] [--warmup SEC] [--token T] [--dump-body FILE]
 * --fn: segmented_sum or segmented_rms_norm, forward / backward / double_backward (default
 * segmented_sum/forward); --path overrides the URL path (e.g. for the echo floor); --dump-body
 * writes the request body to FILE and exits (wrk_gen.sh sends the same bytes with wrk).
 * Output (one line): rps=.. p50_ms=.. p99_ms=.. body_MBps=.. resp_MBps=.. requests=.. errors=.. */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* --- a msgpack body for segmented_sum forward, encoded by hand --- */
typedef struct {
  unsigned char *p;
  size_t len, cap;
} buf;

static void put(buf *b, const void *d, size_t n) {
  if (b->len + n > b->cap) {
    b->cap = (b->len + n) * 2;
    b->p = realloc(b->p, b->cap);
    if (!b->p) exit(1);
  }
  memcpy(b->p + b->len, d, n);
  b->len += n;
}
static void put1(buf *b, unsigned c) {
  unsigned char x = (unsigned char)c;
  put(b, &x, 1);
}
static void put_be32(buf *b, uint32_t v) {
  unsigned char x[4] = {(unsigned char)(v >> 24), (unsigned char)(v >> 16), (unsigned char)(v >> 8), (unsigned char)v};
  put(b, x, 4);
}
static void put_str(buf *b, const char *s) {
  put1(b, 0xa0 | (unsigned)strlen(s));
  put(b, s, strlen(s));
}
static void put_uint(buf *b, uint32_t v) {
  put1(b, 0xce);
  put_be32(b, v);
}
static void put_tensor(buf *b, const char *dtype, const uint32_t *shape, int nd, const void *data, size_t n) {
  put1(b, 0x83);
  put_str(b, "dtype");
  put_str(b, dtype);
  put_str(b, "shape");
  put1(b, 0x90 | (unsigned)nd);
  for (int i = 0; i < nd; i++) put_uint(b, shape[i]);
  put_str(b, "data");
  put1(b, 0xc6);
  put_be32(b, (uint32_t)n);
  put(b, data, n);
}

/* Inputs of the functions the benchmarks drive: name and kind (E3: (N,3), E: (N,) or (N,3) by
 * --vec3, G: (S,) or (S,3) by --vec3, G1: (S,)). */
typedef struct {
  const char *fn;
  int nin;
  struct {
    const char *name;
    char kind; /* 'E', 'G', '1' (S,), '3' (N,3) */
  } in[3];
} fn_inputs;
static const fn_inputs FNS[] = {
    {"segmented_sum/forward", 1, {{"x", 'E'}}},
    {"segmented_sum/backward", 1, {{"g_out", 'G'}}},
    {"segmented_sum/double_backward", 1, {{"gg_x", 'E'}}},
    {"segmented_rms_norm/forward", 1, {{"x", '3'}}},
    {"segmented_rms_norm/backward", 2, {{"g_out", '1'}, {"x", '3'}}},
    {"segmented_rms_norm/double_backward", 3, {{"gg_x", '3'}, {"g_out", '1'}, {"x", '3'}}},
};

static buf make_body(const fn_inputs *f, uint32_t n, int vec3, uint32_t s) {
  buf b = {0};
  put1(&b, 0x80 | (unsigned)(f->nin + 2));
  for (int k = 0; k < f->nin; k++) {
    char kind = f->in[k].kind;
    uint32_t rows = (kind == 'E' || kind == '3') ? n : s;
    int w3 = kind == '3' || ((kind == 'E' || kind == 'G') && vec3);
    size_t cnt = (size_t)rows * (w3 ? 3 : 1);
    float *x = malloc(cnt * sizeof *x + 1);
    for (size_t i = 0; i < cnt; i++) x[i] = (float)((i * 7 + (size_t)k) % 17) * 0.25f - 1.0f;
    uint32_t shape[2] = {rows, 3};
    put_str(&b, f->in[k].name);
    put_tensor(&b, "float32", shape, w3 ? 2 : 1, x, cnt * sizeof *x);
    free(x);
  }
  int32_t *idx = malloc((size_t)n * sizeof *idx + 1);
  for (uint32_t i = 0; i < n; i++) idx[i] = (int32_t)((uint64_t)i * s / n);
  put_str(&b, "idx");
  put_tensor(&b, "int32", &n, 1, idx, (size_t)n * sizeof *idx);
  put_str(&b, "num_segments");
  put_uint(&b, s);
  free(idx);
  return b;
}

/* --- the connections --- */
typedef struct {
  struct sockaddr_storage addr;
  socklen_t addrlen;
  const char *head;
  size_t head_len;
  const unsigned char *body;
  size_t body_len;
  double t_measure, t_end;
  atomic_int stop;
} shared_t;

typedef struct {
  shared_t *sh;
  pthread_t th;
  double *lat;
  size_t nlat, caplat;
  uint64_t requests, errors, resp_bytes;
} conn_t;

static int dial(shared_t *sh) {
  int fd = socket(sh->addr.ss_family, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  if (connect(fd, (struct sockaddr *)&sh->addr, sh->addrlen) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

static int send_all(int fd, const char *h, size_t hl, const unsigned char *b, size_t bl) {
  struct iovec iov[2] = {{(void *)h, hl}, {(void *)b, bl}};
  int cnt = 2, i = 0;
  while (i < cnt) {
    ssize_t w = writev(fd, iov + i, cnt - i);
    if (w < 0) {
      if (errno == EINTR) continue;
      return -1;
    }
    size_t left = (size_t)w;
    while (i < cnt && left >= iov[i].iov_len) left -= iov[i++].iov_len;
    if (i < cnt) {
      iov[i].iov_base = (char *)iov[i].iov_base + left;
      iov[i].iov_len -= left;
    }
  }
  return 0;
}

/* Reads one response; returns its status (0 on failure), sets *close_after and *bytes. */
static int read_response(int fd, char *rb, size_t rbcap, int *close_after, uint64_t *bytes) {
  size_t have = 0;
  char *eoh = NULL;
  while (!eoh) {
    if (have == rbcap - 1) return 0;
    ssize_t r = read(fd, rb + have, rbcap - 1 - have);
    if (r <= 0) {
      if (r < 0 && errno == EINTR) continue;
      return 0;
    }
    have += (size_t)r;
    rb[have] = 0;
    eoh = strstr(rb, "\r\n\r\n");
  }
  int status = 0;
  if (sscanf(rb, "HTTP/1.%*d %d", &status) != 1) return 0;
  size_t hlen = (size_t)(eoh + 4 - rb);
  uint64_t clen = 0;
  *close_after = 0;
  for (char *line = strstr(rb, "\r\n") + 2; line < eoh; line = strstr(line, "\r\n") + 2) {
    if (strncasecmp(line, "Content-Length:", 15) == 0) clen = strtoull(line + 15, NULL, 10);
    if (strncasecmp(line, "Connection:", 11) == 0 && strstr(line, "close") && strstr(line, "close") < eoh)
      *close_after = 1;
  }
  uint64_t got = have - hlen;
  while (got < clen) {
    ssize_t r = read(fd, rb, rbcap);
    if (r <= 0) {
      if (r < 0 && errno == EINTR) continue;
      return 0;
    }
    got += (uint64_t)r;
  }
  *bytes = clen;
  return status;
}

static void *conn_main(void *arg) {
  conn_t *c = arg;
  shared_t *sh = c->sh;
  size_t rbcap = 1 << 20;
  char *rb = malloc(rbcap);
  int fd = -1;
  while (!atomic_load(&sh->stop)) {
    if (fd < 0 && (fd = dial(sh)) < 0) {
      c->errors++;
      usleep(1000);
      continue;
    }
    if (now() > sh->t_end) break; /* past the window: start nothing new */
    double t0 = now();
    int close_after = 0;
    uint64_t bytes = 0;
    int st = send_all(fd, sh->head, sh->head_len, sh->body, sh->body_len) == 0
                 ? read_response(fd, rb, rbcap, &close_after, &bytes)
                 : 0;
    double t1 = now();
    if (st == 0 || close_after) {
      close(fd);
      fd = -1;
    }
    /* Counted by completion time: long requests (large bodies, many connections) that straddle
     * the window's start still count once they finish inside it. */
    if (t1 < sh->t_measure || t1 > sh->t_end) continue;
    if (st != 200) {
      c->errors++;
      continue;
    }
    c->requests++;
    c->resp_bytes += bytes;
    if (c->nlat == c->caplat) {
      c->caplat = c->caplat ? c->caplat * 2 : 4096;
      c->lat = realloc(c->lat, c->caplat * sizeof *c->lat);
      if (!c->lat) exit(1);
    }
    c->lat[c->nlat++] = t1 - t0;
  }
  if (fd >= 0) close(fd);
  free(rb);
  return NULL;
}

static int cmp_d(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr,
            "usage: loadgen HOST PORT [--fn OP/PASS] [--path P] [--n N] [--vec3] [--segments S] [--connections C] "
            "[--duration SEC] [--warmup SEC] [--token T] [--dump-body FILE]\n");
    return 2;
  }
  const char *host = argv[1], *port = argv[2], *path = NULL, *fn = "segmented_sum/forward", *token = NULL, *dump = NULL;
  uint32_t n = 64, s = 8;
  int vec3 = 0, conns = 1;
  double duration = 2, warmup = 0.3;
  for (int i = 3; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : "";
    if (!strcmp(a, "--vec3")) {
      vec3 = 1;
      continue;
    }
    if (!strcmp(a, "--path"))
      path = v;
    else if (!strcmp(a, "--fn"))
      fn = v;
    else if (!strcmp(a, "--n"))
      n = (uint32_t)strtoul(v, NULL, 10);
    else if (!strcmp(a, "--segments"))
      s = (uint32_t)strtoul(v, NULL, 10);
    else if (!strcmp(a, "--connections"))
      conns = atoi(v);
    else if (!strcmp(a, "--duration"))
      duration = atof(v);
    else if (!strcmp(a, "--warmup"))
      warmup = atof(v);
    else if (!strcmp(a, "--token"))
      token = v;
    else if (!strcmp(a, "--dump-body"))
      dump = v;
    else {
      fprintf(stderr, "loadgen: unknown option %s\n", a);
      return 2;
    }
    i++;
  }
  if (conns < 1 || n < 1 || s < 1 || duration <= 0) return 2;
  shared_t sh;
  memset(&sh, 0, sizeof sh);
  struct addrinfo hints = {0}, *ai;
  hints.ai_socktype = SOCK_STREAM;
  if (getaddrinfo(host, port, &hints, &ai) != 0) {
    fprintf(stderr, "loadgen: cannot resolve %s:%s\n", host, port);
    return 2;
  }
  memcpy(&sh.addr, ai->ai_addr, ai->ai_addrlen);
  sh.addrlen = ai->ai_addrlen;
  freeaddrinfo(ai);
  const fn_inputs *f = NULL;
  for (size_t k = 0; k < sizeof FNS / sizeof FNS[0]; k++)
    if (!strcmp(FNS[k].fn, fn)) f = &FNS[k];
  if (!f) {
    fprintf(stderr,
            "loadgen: --fn must be segmented_sum/... or segmented_rms_norm/... (forward, backward, "
            "double_backward)\n");
    return 2;
  }
  char defpath[96];
  snprintf(defpath, sizeof defpath, "/v1/%s", fn);
  if (!path) path = defpath;
  buf body = make_body(f, n, vec3, s);
  if (dump) {
    FILE *out = fopen(dump, "wb");
    int ok = out && fwrite(body.p, 1, body.len, out) == body.len;
    if (out && fclose(out) != 0) ok = 0;
    free(body.p);
    if (!ok) fprintf(stderr, "loadgen: cannot write %s\n", dump);
    return ok ? 0 : 1;
  }
  char head[1024];
  char auth[600] = "";
  if (token) snprintf(auth, sizeof auth, "Authorization: Bearer %s\r\n", token);
  sh.head_len = (size_t)snprintf(head, sizeof head,
                                 "POST %s HTTP/1.1\r\nHost: %s:%s\r\nContent-Type: application/msgpack\r\n"
                                 "Accept: application/msgpack\r\n%sContent-Length: %zu\r\n\r\n",
                                 path, host, port, auth, body.len);
  sh.head = head;
  sh.body = body.p;
  sh.body_len = body.len;
  double t0 = now();
  sh.t_measure = t0 + warmup;
  sh.t_end = sh.t_measure + duration;
  conn_t *cs = calloc((size_t)conns, sizeof *cs);
  for (int i = 0; i < conns; i++) {
    cs[i].sh = &sh;
    if (pthread_create(&cs[i].th, NULL, conn_main, &cs[i]) != 0) {
      fprintf(stderr, "loadgen: cannot start thread %d\n", i);
      return 1;
    }
  }
  struct timespec ts = {(time_t)(warmup + duration),
                        (long)((warmup + duration - (double)(time_t)(warmup + duration)) * 1e9)};
  nanosleep(&ts, NULL);
  atomic_store(&sh.stop, 1);
  uint64_t reqs = 0, errs = 0, resp = 0;
  size_t nl = 0;
  for (int i = 0; i < conns; i++) {
    pthread_join(cs[i].th, NULL);
    reqs += cs[i].requests;
    errs += cs[i].errors;
    resp += cs[i].resp_bytes;
    nl += cs[i].nlat;
  }
  double *all = malloc((nl + 1) * sizeof *all);
  size_t k = 0;
  for (int i = 0; i < conns; i++) {
    memcpy(all + k, cs[i].lat, cs[i].nlat * sizeof *all);
    k += cs[i].nlat;
    free(cs[i].lat);
  }
  qsort(all, nl, sizeof *all, cmp_d);
  double p50 = nl ? all[(size_t)(0.50 * (double)(nl - 1))] : 0, p99 = nl ? all[(size_t)(0.99 * (double)(nl - 1))] : 0;
  printf("rps=%.1f p50_ms=%.3f p99_ms=%.3f body_MBps=%.2f resp_MBps=%.2f requests=%llu errors=%llu body_bytes=%zu\n",
         (double)reqs / duration, p50 * 1e3, p99 * 1e3, (double)reqs * (double)body.len / duration / 1e6,
         (double)resp / duration / 1e6, (unsigned long long)reqs, (unsigned long long)errs, body.len);
  free(all);
  free(cs);
  free(body.p);
  return 0;
}

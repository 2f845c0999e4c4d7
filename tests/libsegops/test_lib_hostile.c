/* test_lib_hostile.c: libsegops' HTTP transport against a peer that is not a good daemon: a server
 * in this test answers each call with a crafted reply. Answers that break the protocol (a body
 * declared 1 GiB long, an endless body, wrong shapes, dtypes, outputs, trailing or garbage bytes)
 * are SEGOPS_E_PROTOCOL without the allocation; a trickling answer ends at the call's deadline; a
 * connection dropped mid-answer is a connection failure; error bodies keep the peer's message
 * verbatim and map its code, and a non-segops error page is shown as such. */
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "lib_test.h"

static const char *reply; /* what the server sends: head, then body bytes */
static size_t reply_len;
static double trickle_s; /* > 0: the body one byte at a time, this far apart */
static int listen_fd, port;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Reads one request (head and Content-Length body); false when the peer went away. */
static bool read_request(int fd) {
  char buf[1 << 16];
  size_t have = 0;
  char *end = NULL;
  while (!end) {
    ssize_t r = read(fd, buf + have, sizeof buf - 1 - have);
    if (r <= 0) return false;
    have += (size_t)r;
    buf[have] = 0;
    end = strstr(buf, "\r\n\r\n");
  }
  const char *cl = strcasestr(buf, "Content-Length:");
  size_t body = cl ? strtoul(cl + 15, NULL, 10) : 0, got = have - (size_t)(end + 4 - buf);
  while (got < body) {
    ssize_t r = read(fd, buf, sizeof buf);
    if (r <= 0) return false;
    got += (size_t)r;
  }
  return true;
}

static void *serve(void *arg) {
  (void)arg;
  for (;;) {
    int fd = accept(listen_fd, NULL, NULL);
    if (fd < 0) return NULL;
    if (read_request(fd)) {
      const char *head_end = strstr(reply, "\r\n\r\n");
      size_t head = trickle_s > 0 && head_end ? (size_t)(head_end + 4 - reply) : reply_len;
      ssize_t w = send(fd, reply, head, MSG_NOSIGNAL);
      for (size_t i = head; w >= 0 && i < reply_len; i++) {
        usleep((useconds_t)(trickle_s * 1e6));
        w = send(fd, reply + i, 1, MSG_NOSIGNAL);
      }
    }
    close(fd);
  }
}

/* A sum forward of 3 float64 in 2 segments against the server's reply; its code and message. */
static int call_with(const char *r, size_t len, double timeout_s, segops_error *e, double *took) {
  reply = r;
  reply_len = len ? len : strlen(r);
  char url[64];
  snprintf(url, sizeof url, "http://127.0.0.1:%d", port);
  segops_options o;
  segops_options_init(&o);
  o.transport = "http";
  o.timeout_s = timeout_s;
  segops_client *c = NULL;
  segops_open(&c, url, &o, e);
  double x[3] = {1, 2, 3};
  int32_t idx[3] = {0, 1, 1};
  segops_array ax = {SEGOPS_F64, 1, {3}, x, 0}, ai = {SEGOPS_I32, 1, {3}, idx, 0}, out = {0};
  double t0 = now_s();
  int rc = segops_segmented_sum_forward(c, &ax, &ai, 2, &out, e);
  *took = now_s() - t0;
  TL_CHECK(rc != SEGOPS_OK || out.data, "success without an output");
  TL_CHECK(rc == SEGOPS_OK || !out.data, "an output left allocated after an error");
  segops_free(c, out.data);
  segops_close(c);
  return rc;
}

static void expect(const char *label, const char *r, size_t len, int code, const char *msg) {
  segops_error e;
  double took;
  int rc = call_with(r, len, 2.0, &e, &took);
  TL_CHECK(rc == code && strstr(e.message, msg), "%s: %d '%s' (want %d '%s')", label, rc, e.message, code, msg);
  TL_CHECK(took < 1.0 || code == SEGOPS_E_CONNECTION, "%s: took %.2f s", label, took);
}

#define HEAD200 "HTTP/1.1 200 OK\r\nContent-Type: application/msgpack\r\nContent-Length: "

/* {"out": {"dtype": dt, "shape": [n], "data": bin(8n)}}, as a daemon would send it, then an
 * output extra_key (nil) and `trailing` zero bytes. */
static size_t answer(char *buf, const char *dt, int n, const char *extra_key, int trailing) {
  char body[512];
  size_t b = 0;
  body[b++] = (char)(0x81 + (extra_key != NULL));
  b += (size_t)sprintf(body + b,
                       "\xa3out\x83\xa5"
                       "dtype%c%s\xa5shape\x91%c\xa4"
                       "data\xc4%c",
                       (char)(0xa0 + strlen(dt)), dt, (char)n, (char)(8 * n));
  memset(body + b, 0, 8 * (size_t)n);
  b += 8 * (size_t)n;
  if (extra_key) b += (size_t)sprintf(body + b, "%c%s\xc0", (char)(0xa0 + strlen(extra_key)), extra_key);
  memset(body + b, 0, (size_t)trailing);
  b += (size_t)trailing;
  size_t h = (size_t)sprintf(buf, HEAD200 "%zu\r\n\r\n", b);
  memcpy(buf + h, body, b);
  return h + b;
}

static void protocol_breaks(void) {
  char buf[1024];
  size_t n = answer(buf, "float64", 2, NULL, 0);
  expect("a good answer", buf, n, SEGOPS_OK, "");
  n = answer(buf, "float64", 5, NULL, 0);
  expect("wrong shape", buf, n, SEGOPS_E_PROTOCOL, "the answer's out has another shape");
  n = answer(buf, "float32", 2, NULL, 0);
  expect("wrong dtype", buf, n, SEGOPS_E_PROTOCOL, "has another dtype");
  n = answer(buf, "float64", 2, "grad_x", 0);
  expect("an output not asked for", buf, n, SEGOPS_E_PROTOCOL, "an output 'grad_x' that was not asked for");
  expect("no outputs", HEAD200 "1\r\n\r\n\x80", 0, SEGOPS_E_PROTOCOL, "the answer lacks output out");
  n = answer(buf, "float64", 2, NULL, 1);
  expect("trailing bytes", buf, n, SEGOPS_E_PROTOCOL, "1 bytes after the answer");
  expect("garbage", HEAD200 "5\r\n\r\nhello", 0, SEGOPS_E_PROTOCOL, "not a msgpack map");
  expect("not msgpack", "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 2\r\n\r\nhi", 0,
         SEGOPS_E_PROTOCOL, "not application/msgpack");
  expect("a 1 GiB body declared", HEAD200 "1073741824\r\n\r\n\x81", 0, SEGOPS_E_PROTOCOL,
         "declares a body of 1073741824 bytes");
  expect("a 1 GiB error declared",
         "HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\nContent-Length: 1073741824\r\n\r\n{", 0,
         SEGOPS_E_PROTOCOL, "declares a body of 1073741824 bytes");
  /* Chunked, without a length: cut once past what the answer can be. */
  static char endless[300000];
  size_t h = (size_t)sprintf(endless,
                             "HTTP/1.1 200 OK\r\nContent-Type: application/msgpack\r\n"
                             "Transfer-Encoding: chunked\r\n\r\n");
  while (h + 1100 < sizeof endless) {
    h += (size_t)sprintf(endless + h, "400\r\n");
    memset(endless + h, 'a', 1024);
    h += 1024;
    h += (size_t)sprintf(endless + h, "\r\n");
  }
  expect("an endless body", endless, h, SEGOPS_E_PROTOCOL, "longer than the");
}

static void errors(void) {
  const char *b1 = "{\"error\":{\"code\":\"invalid_argument\",\"message\":\"segmented_sum: x is odd (a test)\"}}";
  char r[512];
  snprintf(r, sizeof r, "HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n\r\n%s",
           strlen(b1), b1);
  segops_error e;
  double took;
  int rc = call_with(r, 0, 2, &e, &took);
  TL_CHECK(rc == SEGOPS_E_INVALID_ARGUMENT && !strcmp(e.message, "segmented_sum: x is odd (a test)") &&
               e.http_status == 400 && !strcmp(e.name, "invalid_argument"),
           "verbatim: %d %d %s '%s'", rc, e.http_status, e.name, e.message);
  const char *b2 = "{\"error\":{\"code\":\"brand_new\",\"message\":\"m\"}}";
  snprintf(r, sizeof r, "HTTP/1.1 413 Too Large\r\nContent-Length: %zu\r\n\r\n%s", strlen(b2), b2);
  rc = call_with(r, 0, 2, &e, &took);
  TL_CHECK(rc == SEGOPS_E_TOO_LARGE && !strcmp(e.name, "brand_new") && e.http_status == 413, "by status: %d %s", rc,
           e.name);
  rc = call_with("HTTP/1.1 404 Not Found\r\nContent-Type: text/html\r\nContent-Length: 17\r\n\r\n<html>nope</html>", 0,
                 2, &e, &took);
  TL_CHECK(rc == SEGOPS_E_NOT_FOUND && strstr(e.message, "HTTP 404: <html>nope</html>"), "404 page: %d '%s'", rc,
           e.message);
}

static void slow_and_cut(void) {
  /* A byte every 0.2 s: the 1 s deadline ends it, not the 40 s the answer would take. */
  static char slow[1024];
  size_t n = answer(slow, "float64", 2, NULL, 0);
  trickle_s = 0.2;
  segops_error e;
  double took;
  int rc = call_with(slow, n, 1.0, &e, &took);
  trickle_s = 0;
  TL_CHECK(rc == SEGOPS_E_TIMEOUT && took > 0.9 && took < 2.0, "trickle: %d after %.2f s: %s", rc, took, e.message);
  /* Cut mid-answer: a connection failure (another daemon may answer), retried until the deadline. */
  rc = call_with(HEAD200 "100\r\n\r\n\x81\xa3out", 0, 0.6, &e, &took);
  TL_CHECK(rc == SEGOPS_E_CONNECTION && took > 0.4 && took < 2, "cut: %d after %.2f s: %s", rc, took, e.message);
  /* 503 with Retry-After: retried (after at least that rest) until the deadline, then unavailable. */
  rc = call_with("HTTP/1.1 503 Service Unavailable\r\nRetry-After: 1\r\nContent-Length: 0\r\n\r\n", 0, 0.6, &e, &took);
  TL_CHECK(rc == SEGOPS_E_UNAVAILABLE && took > 0.4 && took < 2, "503: %d after %.2f s: %s", rc, took, e.message);
}

int main(void) {
  listen_fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t al = sizeof a;
  if (bind(listen_fd, (struct sockaddr *)&a, sizeof a) || listen(listen_fd, 16) ||
      getsockname(listen_fd, (struct sockaddr *)&a, &al))
    return tl_skip("no loopback socket");
  port = ntohs(a.sin_port);
  pthread_t th;
  pthread_create(&th, NULL, serve, NULL);
  protocol_breaks();
  errors();
  slow_and_cut();
  shutdown(listen_fd, SHUT_RDWR);
  close(listen_fd);
  pthread_join(th, NULL);
  return tl_summary("test_lib_hostile");
}

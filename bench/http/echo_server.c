/* echo_server.c: the floor for the service benchmark: a bare libmicrohttpd server in segopsd's
 * threading mode (epoll, internal thread pool, suspend/resume enabled) that answers every POST with
 * the bytes it received, and nothing else. With --sink it answers "{}" instead (a stricter floor
 * for large bodies: it only takes the bytes in, as segopsd does). Prints
 * "echo listening on http://127.0.0.1:PORT". */
#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http_connmem.h"

static int sink_mode;

typedef struct {
  char *buf;
  size_t len, cap;
} body;

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
                                  const char *version, const char *data, size_t *size, void **con_cls) {
  (void)cls, (void)url, (void)method, (void)version;
  body *b = *con_cls;
  if (!b) {
    b = calloc(1, sizeof *b);
    if (!b) return MHD_NO;
    const char *cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
    b->cap = cl ? (size_t)strtoull(cl, NULL, 10) + 1 : 65536; /* same allocation policy as segopsd */
    b->buf = malloc(b->cap);
    *con_cls = b;
    return b->buf ? MHD_YES : MHD_NO;
  }
  if (*size) {
    if (b->len + *size > b->cap) {
      size_t nc = b->cap * 2 > b->len + *size ? b->cap * 2 : b->len + *size;
      char *nb = realloc(b->buf, nc);
      if (!nb) return MHD_NO;
      b->buf = nb;
      b->cap = nc;
    }
    memcpy(b->buf + b->len, data, *size);
    b->len += *size;
    *size = 0;
    return MHD_YES;
  }
  /* The response borrows the buffer; it is freed in the completion callback. */
  struct MHD_Response *r = sink_mode ? MHD_create_response_from_buffer(2, (void *)"{}", MHD_RESPMEM_PERSISTENT)
                                     : MHD_create_response_from_buffer(b->len, b->buf, MHD_RESPMEM_PERSISTENT);
  if (!r) return MHD_NO;
  MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "application/msgpack");
  enum MHD_Result ret = MHD_queue_response(conn, MHD_HTTP_OK, r);
  MHD_destroy_response(r);
  return ret;
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls, enum MHD_RequestTerminationCode t) {
  (void)cls, (void)conn, (void)t;
  body *b = *con_cls;
  if (b) {
    free(b->buf);
    free(b);
    *con_cls = NULL;
  }
}

int main(int argc, char **argv) {
  unsigned threads = 2;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--threads") && i + 1 < argc)
      threads = (unsigned)atoi(argv[++i]);
    else if (!strcmp(argv[i], "--sink"))
      sink_mode = 1;
  }
  if (threads < 1) threads = 1;
  const size_t conn_mem = segops_http_connection_memory(); /* the same as segopsd's */
  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGTERM);
  sigaddset(&sigs, SIGINT);
  pthread_sigmask(SIG_BLOCK, &sigs, NULL);
  signal(SIGPIPE, SIG_IGN);
  struct sockaddr_in sa;
  memset(&sa, 0, sizeof sa);
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  struct MHD_Daemon *d = MHD_start_daemon(
      MHD_USE_EPOLL_INTERNAL_THREAD | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ITC, 0, NULL, NULL, on_request, NULL,
      MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&sa, MHD_OPTION_THREAD_POOL_SIZE, threads, MHD_OPTION_CONNECTION_LIMIT,
      1024u, MHD_OPTION_CONNECTION_TIMEOUT, 30u, MHD_OPTION_NOTIFY_COMPLETED, on_completed, NULL,
      MHD_OPTION_CONNECTION_MEMORY_LIMIT, conn_mem, MHD_OPTION_LISTEN_BACKLOG_SIZE, 1024u, MHD_OPTION_END);
  if (!d) {
    fprintf(stderr, "echo_server: cannot start\n");
    return 1;
  }
  const union MHD_DaemonInfo *di = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
  printf("echo listening on http://127.0.0.1:%u\n", di ? di->port : 0);
  fflush(stdout);
  int sig;
  sigwait(&sigs, &sig);
  MHD_stop_daemon(d);
  return 0;
}

/* config.c: command line and environment parsing for segopsd, driven by one option table
 * (so --help, the environment names and the defaults cannot drift apart). */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "log.h"

typedef enum { OPT_STR, OPT_BYTES, OPT_INT, OPT_SECONDS, OPT_FLAG } opt_kind;

typedef struct {
  const char *flag; /* without the leading "--" */
  const char *env;
  const char *arg; /* metavariable for --help; NULL for flags without a value */
  const char *def; /* default as text (applied through the same parser) */
  const char *help;
} opt_desc;

/* One row per option. Defaults are deliberately conservative: a daemon on a shared node. */
static const opt_desc OPTS[] = {
    {"listen", "SEGOPS_LISTEN", "ADDR[,ADDR]", "127.0.0.1:8080",
     "HOST:PORT or unix:/path/segops.sock; repeat or comma-separate to serve several; port 0 picks a free port"},
    {"socket-mode", "SEGOPS_SOCKET_MODE", "OCTAL", "0660", "permission bits of unix-socket listeners"},
    {"backend", "SEGOPS_BACKEND", "auto|cpu|cuda", "auto", "compute backend; auto = CUDA when a GPU is usable"},
    {"devices", "SEGOPS_DEVICES", "LIST", "", "GPU ordinals to use, e.g. 0,1 (empty = all)"},
    {"threads", "SEGOPS_THREADS", "N", "0", "CPU backend compute threads and HTTP pool size (0 = online CPUs)"},
    {"http-threads", "SEGOPS_HTTP_THREADS", "N", "0", "HTTP thread pool size (decode, encode, I/O); 0 = as --threads"},
    {"token-file", "SEGOPS_TOKEN_FILE", "PATH", "", "file holding the bearer token (SEGOPS_TOKEN sets it directly)"},
    {"max-body-bytes", "SEGOPS_MAX_BODY_BYTES", "BYTES", "256M", "largest request body (k/M/G suffixes)"},
    {"max-elements", "SEGOPS_MAX_ELEMENTS", "N", "64M", "most elements per tensor (N*3 for vec3)"},
    {"max-body-items", "SEGOPS_MAX_BODY_ITEMS", "N", "4M",
     "most array/map items in one body (each JSON number is one); bounds the JSON decoder's memory"},
    {"max-segments", "SEGOPS_MAX_SEGMENTS", "N", "", "largest num_segments (default: max-elements)"},
    {"max-connections", "SEGOPS_MAX_CONNECTIONS", "N", "1024",
     "most concurrent connections; a few more are kept for /healthz and /readyz alone"},
    {"max-connections-per-peer", "SEGOPS_MAX_CONNECTIONS_PER_PEER", "N", "",
     "most concurrent connections of one peer (its uid on a unix socket or loopback TCP, else its address); more "
     "are refused at once (default: half of --max-connections)"},
    {"max-inflight-bytes", "SEGOPS_MAX_INFLIGHT_BYTES", "BYTES", "2G",
     "request memory held at once over all connections (bodies, decoded inputs, outputs, encoded answers); "
     "beyond it 503 + Retry-After"},
    {"max-inflight-bytes-per-peer", "SEGOPS_MAX_INFLIGHT_BYTES_PER_PEER", "BYTES", "",
     "the share of --max-inflight-bytes one peer may hold at once; beyond it that peer gets 503 + Retry-After "
     "(default: half of --max-inflight-bytes)"},
    {"max-shm-bytes", "SEGOPS_MAX_SHM_BYTES", "BYTES", "1G",
     "shared-memory regions registered at once (all clients together); beyond it registration fails"},
    {"max-output-bytes", "SEGOPS_MAX_OUTPUT_BYTES", "BYTES", "256M",
     "largest answer of one request (its outputs together, before encoding); beyond it 413"},
    {"min-upload-rate", "SEGOPS_MIN_UPLOAD_RATE", "BYTES", "16k",
     "bytes per second a request body must keep up after --idle-timeout, else it is cut (0 = any)"},
    {"min-download-rate", "SEGOPS_MIN_DOWNLOAD_RATE", "BYTES", "1M",
     "bytes per second an answer must be taken at: one not taken whole within --answer-stall-timeout plus its size "
     "at this rate is cut (0 = any)"},
    {"answer-stall-timeout", "SEGOPS_ANSWER_STALL_TIMEOUT", "SECONDS", "10",
     "an answer the client takes nothing of for this long is cut, and the memory it holds freed (0 = never)"},
    {"idle-timeout", "SEGOPS_IDLE_TIMEOUT", "SECONDS", "30", "close connections idle (or trickling) this long"},
    {"head-timeout", "SEGOPS_HEAD_TIMEOUT", "SECONDS", "5",
     "a new connection must send a complete request head within this long (at most --idle-timeout)"},
    {"request-timeout", "SEGOPS_REQUEST_TIMEOUT", "SECONDS", "60",
     "a request still queued after this long fails with 504; an upload still running after this long is cut"},
    {"max-queue", "SEGOPS_MAX_QUEUE", "N", "1024", "requests waiting for a worker before 503 + Retry-After"},
    {"max-batch-elements", "SEGOPS_MAX_BATCH_ELEMENTS", "N|auto", "auto",
     "join compatible waiting requests of at most 16k rows each into one backend call of up to N rows (0 = off; "
     "auto = 256k on the CUDA backend, 0 on the CPU backend, where HTTP is the limit and batching does not pay)"},
    {"max-queue-delay-us", "SEGOPS_MAX_QUEUE_DELAY_US", "US", "0",
     "how long a worker may wait to fill a batch (0 = batch only what already waits)"},
    {"worker-spin-us", "SEGOPS_WORKER_SPIN_US", "US", "50",
     "an idle worker polls for new work this long before it sleeps (0 = sleep at once)"},
    {"log-level", "SEGOPS_LOG_LEVEL", "LEVEL", "info", "error, warn, info or debug (to stderr)"},
    {"drain-seconds", "SEGOPS_DRAIN_SECONDS", "SECONDS", "0",
     "on SIGTERM/SIGINT /readyz turns 503 at once, and work is still served this long (so load balancers "
     "can remove the endpoint)"},
    {"shutdown-timeout", "SEGOPS_SHUTDOWN_TIMEOUT", "SECONDS", "30",
     "after the drain, new work gets 503 and in-flight work must finish within this long (else exit 1)"},
    {"allow-unauthenticated", "SEGOPS_ALLOW_UNAUTHENTICATED", NULL, "0",
     "allow a non-loopback --listen address without a token (flag; env 1 or 0)"},
    {"native-socket", "SEGOPS_NATIVE_SOCKET", "PATH|off", "",
     "unix socket of the native same-node channel (clients hand over their memory as memfds; mode as "
     "--socket-mode); empty: /tmp/segopsd-PORT.native.sock from the first TCP port; off: none"},
    {"native-spin-us", "SEGOPS_NATIVE_SPIN_US", "US", "50",
     "a native channel's thread polls its ring this long after a call before it sleeps (0 = sleep at once)"},
    {"native-max-channels-per-uid", "SEGOPS_NATIVE_MAX_CHANNELS_PER_UID", "N", "256",
     "native channels one user id may hold open at once (all users together: --max-connections)"},
    {"native-max-map-bytes", "SEGOPS_NATIVE_MAX_MAP_BYTES", "BYTES", "16G",
     "client memory one native channel may hand over (its ring and pools), mapped by the daemon"},
    {"native-max-pinned-bytes", "SEGOPS_NATIVE_MAX_PINNED_BYTES", "BYTES", "2G",
     "of a native channel's memory, how much is pinned for direct device copies (CUDA); the rest is used unpinned"},
    {"help", NULL, NULL, NULL, "print this help and exit"},
    {"version", NULL, NULL, NULL, "print the version and exit"},
};
#define N_OPTS (sizeof OPTS / sizeof OPTS[0])

/* Integer with an optional binary suffix (k, M, G, T; "MiB" style also accepted). */
static int parse_i64(const char *s, bool allow_suffix, int64_t *out) {
  if (!*s) return -1;
  errno = 0;
  char *end;
  long long v = strtoll(s, &end, 10);
  if (errno || end == s || v < 0) return -1;
  int shift = 0;
  if (allow_suffix && *end) {
    switch (*end) {
      case 'k':
      case 'K':
        shift = 10;
        break;
      case 'm':
      case 'M':
        shift = 20;
        break;
      case 'g':
      case 'G':
        shift = 30;
        break;
      case 't':
      case 'T':
        shift = 40;
        break;
      default:
        return -1;
    }
    end++;
    if (*end == 'i' && end[1] == 'B')
      end += 2;
    else if (*end == 'B')
      end++;
  }
  if (*end) return -1;
  if (shift && v > (INT64_MAX >> shift)) return -1;
  *out = (int64_t)v << shift;
  return 0;
}

static bool addr_is_loopback(const struct sockaddr *sa) {
  if (sa->sa_family == AF_INET) return (ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr) >> 24) == 127;
  if (sa->sa_family == AF_INET6) {
    const struct in6_addr *a = &((const struct sockaddr_in6 *)sa)->sin6_addr;
    return IN6_IS_ADDR_LOOPBACK(a) || (IN6_IS_ADDR_V4MAPPED(a) && a->s6_addr[12] == 127);
  }
  return false;
}

/* True when only this host can reach a TCP listen address: a name or address all of whose
 * addresses are loopback (127.0.0.0/8, ::1). 0.0.0.0, :: and unresolvable names are not. */
static bool listen_is_loopback(const char *host) {
  struct addrinfo hints, *ai = NULL;
  memset(&hints, 0, sizeof hints);
  hints.ai_socktype = SOCK_STREAM;
  if (getaddrinfo(host, NULL, &hints, &ai) != 0 || !ai) return false;
  bool all = true;
  for (const struct addrinfo *p = ai; p; p = p->ai_next) all = all && addr_is_loopback(p->ai_addr);
  freeaddrinfo(ai);
  return all;
}

/* Seconds as a decimal number, at most a day; zero only when allow_zero. */
static int parse_seconds(const char *v, bool allow_zero, double *out) {
  char *end;
  errno = 0;
  double d = strtod(v, &end);
  if (errno || end == v || *end || !(allow_zero ? d >= 0 : d > 0) || d > 86400) return -1;
  *out = d;
  return 0;
}

static int parse_one_listen(segops_listen_addr *a, const char *s, size_t n) {
  memset(a, 0, sizeof *a);
  if (n > 5 && memcmp(s, "unix:", 5) == 0) {
    s += 5, n -= 5;
    if (n >= 2 && s[0] == '/' && s[1] == '/') s += 2, n -= 2; /* unix:///path */
    if (n == 0 || s[0] != '/' || n >= sizeof a->path || memchr(s, 0, n)) return -1;
    a->is_unix = 1;
    memcpy(a->path, s, n);
    return 0;
  }
  const char *colon;
  const char *host = s;
  size_t hlen;
  if (n > 0 && s[0] == '[') { /* [v6]:port */
    const char *rb = memchr(s, ']', n);
    if (!rb || (size_t)(rb - s) + 1 >= n || rb[1] != ':') return -1;
    host = s + 1;
    hlen = (size_t)(rb - host);
    colon = rb + 1;
  } else {
    colon = NULL;
    for (size_t k = n; k > 0; k--)
      if (s[k - 1] == ':') {
        colon = s + k - 1;
        break;
      }
    if (!colon) return -1;
    hlen = (size_t)(colon - s);
  }
  char port_text[16];
  size_t plen = n - (size_t)(colon + 1 - s);
  if (hlen == 0 || hlen >= sizeof a->host || plen >= sizeof port_text) return -1;
  memcpy(port_text, colon + 1, plen);
  port_text[plen] = 0;
  int64_t port;
  if (parse_i64(port_text, false, &port) || port > 65535) return -1;
  memcpy(a->host, host, hlen);
  a->port = (int)port;
  return 0;
}

/* Appends the comma-separated addresses of one --listen value. */
static int parse_listen(segops_config *c, const char *s) {
  for (;;) {
    const char *comma = strchr(s, ',');
    size_t n = comma ? (size_t)(comma - s) : strlen(s);
    if (c->n_listen >= SEGOPS_MAX_LISTEN || parse_one_listen(&c->listen[c->n_listen], s, n)) return -1;
    c->n_listen++;
    if (!comma) break;
    s = comma + 1;
  }
  c->listen_host[0] = 0;
  c->listen_port = 0;
  for (int k = 0; k < c->n_listen; k++)
    if (!c->listen[k].is_unix) {
      snprintf(c->listen_host, sizeof c->listen_host, "%s", c->listen[k].host);
      c->listen_port = c->listen[k].port;
      break;
    }
  return 0;
}

static int parse_devices(segops_config *c, const char *s) {
  c->n_devices = 0;
  if (!*s || strcmp(s, "all") == 0) return 0;
  const char *p = s;
  while (*p) {
    char *end;
    errno = 0;
    long v = strtol(p, &end, 10);
    if (errno || end == p || v < 0 || v > 1024 || c->n_devices >= SEGOPS_MAX_DEVICE_LIST) return -1;
    c->devices[c->n_devices++] = (int)v;
    if (*end == ',')
      end++;
    else if (*end)
      return -1;
    p = end;
  }
  return 0;
}

/* A configured token must be a clean string: SEGOPS_TOKEN_MIN..SEGOPS_TOKEN_MAX bytes of
 * printable ASCII without spaces (0x21..0x7e), after surrounding whitespace (spaces, tabs, CR,
 * LF) is trimmed, the same way for the file and the variable. Anything else (a NUL that would cut
 * the token or turn auth off, a BOM or UTF-16 file, a second line, a length the comparison would
 * truncate) refuses to start, so a misconfiguration cannot silently open or lock the daemon. */
static int set_token(segops_config *c, const char *raw, size_t n, const char *source, char *err, size_t errlen) {
  static const char WS[] = " \t\r\n";
  size_t a = 0;
  while (a < n && memchr(WS, raw[a], sizeof WS - 1)) a++;
  while (n > a && memchr(WS, raw[n - 1], sizeof WS - 1)) n--;
  size_t len = n - a;
  const char *t = raw + a;
  if (len == 0) {
    snprintf(err, errlen, "%s holds no token (unset it to run without auth)", source);
    return -1;
  }
  for (size_t i = 0; i < len; i++) {
    unsigned char ch = (unsigned char)t[i];
    if (ch < 0x21 || ch > 0x7e) {
      snprintf(err, errlen,
               "%s: the token has byte 0x%02x at offset %zu; a token is printable ASCII without spaces, on one line "
               "(no NUL, control characters, byte-order mark or other encoding)",
               source, ch, a + i);
      return -1;
    }
  }
  if (len < SEGOPS_TOKEN_MIN || len > SEGOPS_TOKEN_MAX) {
    snprintf(err, errlen, "%s: the token has %zu bytes; it must have %d to %d", source, len, SEGOPS_TOKEN_MIN,
             SEGOPS_TOKEN_MAX);
    return -1;
  }
  char *copy = malloc(len + 1);
  if (!copy) {
    snprintf(err, errlen, "%s: out of memory", source);
    return -1;
  }
  memcpy(copy, t, len);
  copy[len] = 0;
  free(c->token);
  c->token = copy;
  return 0;
}

static int read_token_file(segops_config *c, const char *path, char *err, size_t errlen) {
  char source[600];
  snprintf(source, sizeof source, "--token-file %s", path);
  FILE *f = fopen(path, "rb");
  if (!f) {
    snprintf(err, errlen, "%s: %s", source, strerror(errno));
    return -1;
  }
  /* Room for the longest token and generous surrounding whitespace; more is refused, not cut. */
  /* Its mode, for main's warning: a token others can read is no secret. */
  struct stat st;
  c->token_file_mode = fstat(fileno(f), &st) == 0 ? (unsigned)(st.st_mode & 07777) : 0;
  char buf[SEGOPS_TOKEN_MAX + 4096];
  size_t n = fread(buf, 1, sizeof buf, f);
  bool more = n == sizeof buf && fgetc(f) != EOF;
  fclose(f);
  if (more) {
    snprintf(err, errlen, "%s: the file is larger than %zu bytes; a token has at most %d", source, sizeof buf,
             SEGOPS_TOKEN_MAX);
    return -1;
  }
  if (set_token(c, buf, n, source, err, errlen)) return -1;
  snprintf(c->token_file, sizeof c->token_file, "%s", path);
  return 0;
}

/* Applies one option value; returns 0 or -1 with a message. */
static int apply(segops_config *c, const opt_desc *o, const char *v, bool *segs_set, char *err, size_t errlen) {
  const char *f = o->flag;
  int64_t i = 0;
  int bad = 0;
  if (!strcmp(f, "listen"))
    bad = parse_listen(c, v);
  else if (!strcmp(f, "backend")) {
    if (strcmp(v, "auto") && strcmp(v, "cpu") && strcmp(v, "cuda"))
      bad = 1;
    else
      snprintf(c->backend, sizeof c->backend, "%s", v);
  } else if (!strcmp(f, "devices"))
    bad = parse_devices(c, v);
  else if (!strcmp(f, "threads")) {
    bad = parse_i64(v, false, &i) || i > 4096;
    c->threads = (int)i;
  } else if (!strcmp(f, "http-threads")) {
    bad = parse_i64(v, false, &i) || i > 1024;
    c->http_threads = (int)i;
  } else if (!strcmp(f, "token-file")) {
    if (*v) return read_token_file(c, v, err, errlen);
  } else if (!strcmp(f, "max-body-bytes")) {
    bad = parse_i64(v, true, &i) || i < 1;
    c->max_body_bytes = i;
  } else if (!strcmp(f, "max-elements")) {
    bad = parse_i64(v, true, &i) || i < 1 || i > INT32_MAX; /* idx is int32 on the device */
    c->max_elements = i;
  } else if (!strcmp(f, "max-body-items")) {
    bad = parse_i64(v, true, &i) || i < 16;
    c->max_body_items = i;
  } else if (!strcmp(f, "max-segments")) {
    if (*v) {
      bad = parse_i64(v, true, &i) || i > INT32_MAX;
      c->max_segments = i;
      *segs_set = true;
    }
  } else if (!strcmp(f, "max-connections")) {
    bad = parse_i64(v, false, &i) || i < 1 || i > 1000000;
    c->max_connections = i;
  } else if (!strcmp(f, "max-inflight-bytes")) {
    bad = parse_i64(v, true, &i) || i < 1;
    c->max_inflight_bytes = i;
  } else if (!strcmp(f, "max-inflight-bytes-per-peer")) {
    if (*v) { /* "" (the default): half of --max-inflight-bytes, once that is known */
      bad = parse_i64(v, true, &i) || i < 1;
      c->max_inflight_bytes_per_peer = i;
    }
  } else if (!strcmp(f, "max-connections-per-peer")) {
    if (*v) { /* "" (the default): half of --max-connections */
      bad = parse_i64(v, false, &i) || i < 1 || i > 1000000;
      c->max_connections_per_peer = i;
    }
  } else if (!strcmp(f, "min-download-rate")) {
    bad = parse_i64(v, true, &i);
    c->min_download_rate = i;
  } else if (!strcmp(f, "answer-stall-timeout")) {
    bad = parse_seconds(v, true, &c->answer_stall_timeout_s);
  } else if (!strcmp(f, "head-timeout")) {
    bad = parse_seconds(v, false, &c->head_timeout_s);
  } else if (!strcmp(f, "socket-mode")) {
    char *end;
    errno = 0;
    unsigned long m = strtoul(v, &end, 8);
    bad = errno || end == v || *end || m > 0777;
    c->socket_mode = (unsigned)m;
  } else if (!strcmp(f, "max-shm-bytes")) {
    bad = parse_i64(v, true, &i);
    c->max_shm_bytes = i;
  } else if (!strcmp(f, "max-output-bytes")) {
    bad = parse_i64(v, true, &i) || i < 1;
    c->max_output_bytes = i;
  } else if (!strcmp(f, "min-upload-rate")) {
    bad = parse_i64(v, true, &i);
    c->min_upload_rate = i;
  } else if (!strcmp(f, "idle-timeout")) {
    bad = parse_i64(v, false, &i) || i > 86400;
    c->idle_timeout_s = i;
  } else if (!strcmp(f, "request-timeout")) {
    bad = parse_seconds(v, false, &c->request_timeout_s);
  } else if (!strcmp(f, "drain-seconds")) {
    bad = parse_seconds(v, true, &c->drain_seconds);
  } else if (!strcmp(f, "shutdown-timeout")) {
    bad = parse_seconds(v, false, &c->shutdown_timeout_s);
  } else if (!strcmp(f, "allow-unauthenticated")) {
    bad = strcmp(v, "1") && strcmp(v, "0") && strcmp(v, "true") && strcmp(v, "false");
    c->allow_unauthenticated = !strcmp(v, "1") || !strcmp(v, "true");
  } else if (!strcmp(f, "max-queue")) {
    bad = parse_i64(v, false, &i) || i < 1 || i > 1000000;
    c->max_queue = i;
  } else if (!strcmp(f, "max-batch-elements")) {
    if (!strcmp(v, "auto")) {
      c->max_batch_elements = SEGOPS_BATCH_AUTO;
    } else {
      bad = parse_i64(v, true, &i);
      c->max_batch_elements = i;
    }
  } else if (!strcmp(f, "max-queue-delay-us")) {
    bad = parse_i64(v, false, &i) || i > 10000000;
    c->max_queue_delay_us = i;
  } else if (!strcmp(f, "worker-spin-us")) {
    bad = parse_i64(v, false, &i) || i > 100000;
    c->worker_spin_us = i;
  } else if (!strcmp(f, "native-socket")) {
    bad = strcmp(v, "off") && *v && (v[0] != '/' || strlen(v) >= sizeof c->native_socket);
    snprintf(c->native_socket, sizeof c->native_socket, "%s", bad ? "" : v);
  } else if (!strcmp(f, "native-spin-us")) {
    bad = parse_i64(v, false, &i) || i > 100000;
    c->native_spin_us = i;
  } else if (!strcmp(f, "native-max-channels-per-uid")) {
    bad = parse_i64(v, false, &i) || i < 1 || i > 1000000;
    c->native_max_channels_per_uid = i;
  } else if (!strcmp(f, "native-max-map-bytes")) {
    bad = parse_i64(v, true, &i) || i < 1;
    c->native_max_map_bytes = i;
  } else if (!strcmp(f, "native-max-pinned-bytes")) {
    bad = parse_i64(v, true, &i);
    c->native_max_pinned_bytes = i;
  } else if (!strcmp(f, "log-level")) {
    c->log_level = segops_log_parse(v);
    bad = c->log_level < 0;
  }
  if (bad) {
    snprintf(err, errlen, "invalid value '%s' for --%s (expected %s)", v, f, o->arg ? o->arg : "no value");
    return -1;
  }
  return 0;
}

static void print_help(void) {
  printf(
      "usage: segopsd [options]\n\n"
      "segopsd serves the segops segment operations over HTTP (API v1).\n"
      "Every option can also be set by the environment variable shown; flags win.\n\n");
  for (size_t k = 0; k < N_OPTS; k++) {
    const opt_desc *o = &OPTS[k];
    char left[64];
    snprintf(left, sizeof left, "--%s%s%s", o->flag, o->arg ? " " : "", o->arg ? o->arg : "");
    printf("  %-36s %s\n", left, o->help);
    if (o->env)
      printf("  %-36s [env %s] default: %s\n", "", o->env,
             o->def && *o->def                  ? o->def
             : !strcmp(o->flag, "max-segments") ? "max-elements"
             : strstr(o->help, "(default: ")    ? "derived, as said above"
                                                : "(none)");
  }
  printf("  %-36s [env SEGOPS_TOKEN] the bearer token itself (prefer a file)\n", "");
  printf("  %-36s a token is %d to %d bytes of printable ASCII without spaces; surrounding\n", "", SEGOPS_TOKEN_MIN,
         SEGOPS_TOKEN_MAX);
  printf("  %-36s whitespace and newlines are trimmed; anything else refuses to start\n\n", "");
  printf(
      "With a token configured, every path but /healthz and /readyz needs\n"
      "'Authorization: Bearer <token>'. A non-loopback --listen address needs a token\n"
      "or --allow-unauthenticated. SIGTERM, SIGINT or any other signal that would end the\n"
      "process (SIGHUP is ignored): /readyz turns 503, work is served for\n"
      "--drain-seconds, then new work gets 503 and in-flight work finishes within\n"
      "--shutdown-timeout; exit 0 (1 when work was still running at the timeout).\n\n"
      "Tuning by environment only (README.md, Configuration): SEGOPS_CUDA_LANES,\n"
      "SEGOPS_CUDA_WAIT, SEGOPS_CUDA_WAIT_POLL_US, SEGOPS_CUDA_LARGE_LANES,\n"
      "SEGOPS_CUDA_LARGE_ROWS, SEGOPS_CUDA_DIRECT_COPIES, SEGOPS_LAYOUT_CACHE_BYTES,\n"
      "SEGOPS_IDX_CACHE_BYTES, SEGOPS_HOST_POOL_BYTES, SEGOPS_INLINE_MAX_WORK,\n"
      "SEGOPS_HTTP_CONNECTION_MEMORY.\n");
}

static const opt_desc *find_opt(const char *name, size_t len) {
  for (size_t k = 0; k < N_OPTS; k++)
    if (strlen(OPTS[k].flag) == len && memcmp(OPTS[k].flag, name, len) == 0) return &OPTS[k];
  return NULL;
}

int segops_config_load(segops_config *c, int argc, char **argv, char *err, size_t errlen) {
  memset(c, 0, sizeof *c);
  bool segs_set = false, listen_flag_seen = false;
  /* 1. defaults, 2. environment */
  for (size_t k = 0; k < N_OPTS; k++) {
    const opt_desc *o = &OPTS[k];
    if (!o->env) continue;
    if (apply(c, o, o->def, &segs_set, err, errlen)) return SEGOPS_CONFIG_ERROR;
  }
  for (size_t k = 0; k < N_OPTS; k++) {
    const opt_desc *o = &OPTS[k];
    const char *v = o->env ? getenv(o->env) : NULL;
    if (!v) continue;
    if (!strcmp(o->flag, "listen")) c->n_listen = 0; /* the variable replaces the default */
    if (apply(c, o, v, &segs_set, err, errlen)) {
      size_t l = strlen(err);
      snprintf(err + l, errlen - l, " (from %s)", o->env);
      return SEGOPS_CONFIG_ERROR;
    }
  }
  const char *envtok = getenv("SEGOPS_TOKEN");
  if (envtok && !c->token && set_token(c, envtok, strlen(envtok), "SEGOPS_TOKEN", err, errlen))
    return SEGOPS_CONFIG_ERROR;
  /* 3. flags: --name VALUE or --name=VALUE */
  for (int a = 1; a < argc; a++) {
    const char *s = argv[a];
    if (strncmp(s, "--", 2) != 0) {
      snprintf(err, errlen, "unexpected argument '%s' (see --help)", s);
      return SEGOPS_CONFIG_ERROR;
    }
    s += 2;
    const char *eq = strchr(s, '=');
    size_t nlen = eq ? (size_t)(eq - s) : strlen(s);
    const opt_desc *o = find_opt(s, nlen);
    if (!o) {
      snprintf(err, errlen, "unknown option '%s' (see --help)", argv[a]);
      return SEGOPS_CONFIG_ERROR;
    }
    if (!strcmp(o->flag, "help")) {
      print_help();
      return SEGOPS_CONFIG_EXIT_OK;
    }
    if (!strcmp(o->flag, "version")) {
      printf("segopsd %s\n", SEGOPS_VERSION);
      return SEGOPS_CONFIG_EXIT_OK;
    }
    const char *v = eq ? eq + 1 : o->arg ? NULL : "1"; /* a flag without a value sets it */
    if (!v) {
      if (a + 1 >= argc) {
        snprintf(err, errlen, "option --%s needs a value (%s)", o->flag, o->arg);
        return SEGOPS_CONFIG_ERROR;
      }
      v = argv[++a];
    }
    if (!strcmp(o->flag, "listen") && !listen_flag_seen) {
      c->n_listen = 0; /* the first --listen replaces the default and the variable; more add */
      listen_flag_seen = true;
    }
    if (apply(c, o, v, &segs_set, err, errlen)) return SEGOPS_CONFIG_ERROR;
  }
  if (!segs_set) c->max_segments = c->max_elements;
  /* A body of the largest allowed size must fit in the in-flight budget (+1: the buffer holds
   * one spare byte). */
  if (c->max_inflight_bytes < c->max_body_bytes + 1) c->max_inflight_bytes = c->max_body_bytes + 1;
  if (c->max_inflight_bytes_per_peer == 0) { /* half the whole, but room for a largest body and as much work */
    int64_t room = 2 * (c->max_body_bytes + 1);
    c->max_inflight_bytes_per_peer = c->max_inflight_bytes / 2;
    if (c->max_inflight_bytes_per_peer < room)
      c->max_inflight_bytes_per_peer = room < c->max_inflight_bytes ? room : c->max_inflight_bytes;
  }
  if (c->max_connections_per_peer == 0)
    c->max_connections_per_peer = c->max_connections > 1 ? c->max_connections / 2 : 1;
  /* A peer's share: within the whole, and room for one largest body. */
  if (c->max_inflight_bytes_per_peer > c->max_inflight_bytes) c->max_inflight_bytes_per_peer = c->max_inflight_bytes;
  if (c->max_inflight_bytes_per_peer < c->max_body_bytes + 1) c->max_inflight_bytes_per_peer = c->max_body_bytes + 1;
  if (c->max_connections_per_peer > c->max_connections) c->max_connections_per_peer = c->max_connections;
  if (c->idle_timeout_s > 0 && c->head_timeout_s > (double)c->idle_timeout_s)
    c->head_timeout_s = (double)c->idle_timeout_s;
  if (c->http_threads <= 0) {
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    c->http_threads = c->threads > 0 ? c->threads : (int)(cpus < 2 ? 2 : cpus > 64 ? 64 : cpus);
  }
  for (int k = 0; k < c->n_listen && !c->token && !c->allow_unauthenticated; k++)
    if (!c->listen[k].is_unix && !listen_is_loopback(c->listen[k].host)) {
      snprintf(err, errlen,
               "refusing to listen on %s without a token: anyone who can reach it could use it. Give a token "
               "(--token-file PATH or SEGOPS_TOKEN), listen on a loopback address, or pass --allow-unauthenticated",
               c->listen[k].host);
      return SEGOPS_CONFIG_ERROR;
    }
  return SEGOPS_CONFIG_OK;
}

void segops_config_free(segops_config *c) {
  if (!c) return;
  free(c->token);
  c->token = NULL;
}

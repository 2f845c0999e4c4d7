/* config_values.c: the parsers and printers of segopsd's composite setting values (see
 * config_values.h); the rows that use them, and argv, are config.c's. */
#include "config_values.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"
#include "log.h"
#include "peer.h"

/* A port number: decimal digits only, 0 to 65535. */
static int parse_port(const char *s, int *out) {
  if (!*s || strlen(s) > 5 || strspn(s, "0123456789") != strlen(s)) return -1;
  long v = strtol(s, NULL, 10);
  if (v > 65535) return -1;
  *out = (int)v;
  return 0;
}

/* True when only this host can reach a TCP listen address: a name or address all of whose
 * addresses are loopback (127.0.0.0/8, ::1). 0.0.0.0, :: and unresolvable names are not. */
bool segops_cfg_listen_is_loopback(const char *host) {
  struct addrinfo hints, *ai = NULL;
  memset(&hints, 0, sizeof hints);
  hints.ai_socktype = SOCK_STREAM;
  if (getaddrinfo(host, NULL, &hints, &ai) != 0 || !ai) return false;
  bool all = true;
  for (const struct addrinfo *p = ai; p; p = p->ai_next) all = all && segops_addr_is_loopback(p->ai_addr);
  freeaddrinfo(ai);
  return all;
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
  if (parse_port(port_text, &a->port)) return -1;
  memcpy(a->host, host, hlen);
  return 0;
}

/* Appends the comma-separated addresses of one --listen value (replacing the earlier ones unless
 * append: the environment replaces the default, the first flag the environment, more flags add). */
int segops_cfg_parse_listen(void *base, const char *s, int append, char *err, size_t errlen) {
  segops_config *c = base;
  (void)err, (void)errlen;
  if (!append) c->n_listen = 0;
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

int segops_cfg_parse_devices(void *base, const char *s, int append, char *err, size_t errlen) {
  segops_config *c = base;
  (void)err, (void)errlen;
  if (!append) c->n_devices = 0;
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
  /* Its mode, for main's warning: a token others can read is no secret. */
  struct stat st;
  c->token_file_mode = fstat(fileno(f), &st) == 0 ? (unsigned)(st.st_mode & 07777) : 0;
  /* Room for the longest token and generous surrounding whitespace; more is refused, not cut. */
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

int segops_cfg_parse_token_file(void *base, const char *v, int append, char *err, size_t errlen) {
  (void)append;
  return *v ? read_token_file(base, v, err, errlen) : 0;
}

/* SEGOPS_TOKEN: a token file, from the variable or the flag, wins over it. */
int segops_cfg_parse_token(void *base, const char *v, int append, char *err, size_t errlen) {
  segops_config *c = base;
  (void)append;
  return c->token_file[0] ? 0 : set_token(c, v, strlen(v), "SEGOPS_TOKEN", err, errlen);
}

int segops_cfg_parse_socket_mode(void *base, const char *v, int append, char *err, size_t errlen) {
  (void)append, (void)err, (void)errlen;
  char *end;
  errno = 0;
  unsigned long m = strtoul(v, &end, 8);
  if (errno || end == v || *end || m > 0777) return -1;
  ((segops_config *)base)->socket_mode = (unsigned)m;
  return 0;
}

int segops_cfg_parse_log_level(void *base, const char *v, int append, char *err, size_t errlen) {
  (void)append, (void)err, (void)errlen;
  int l = segops_log_parse(v); /* "warning" reads as warn */
  if (l < 0) return -1;
  ((segops_config *)base)->log_level = l;
  return 0;
}

const char *segops_cfg_format_listen(const void *base, char *buf, size_t len) {
  const segops_config *c = base;
  size_t o = 0;
  buf[0] = 0;
  for (int k = 0; k < c->n_listen && o < len; k++) {
    const segops_listen_addr *a = &c->listen[k];
    const char *sep = k ? "," : "";
    if (a->is_unix)
      o += (size_t)snprintf(buf + o, len - o, "%sunix:%s", sep, a->path);
    else
      o += (size_t)snprintf(buf + o, len - o, strchr(a->host, ':') ? "%s[%s]:%d" : "%s%s:%d", sep, a->host, a->port);
  }
  return buf;
}

const char *segops_cfg_format_devices(const void *base, char *buf, size_t len) {
  const segops_config *c = base;
  size_t o = 0;
  buf[0] = 0;
  for (int k = 0; k < c->n_devices && o < len; k++)
    o += (size_t)snprintf(buf + o, len - o, "%s%d", k ? "," : "", c->devices[k]);
  return buf;
}

const char *segops_cfg_format_socket_mode(const void *base, char *buf, size_t len) {
  snprintf(buf, len, "%04o", ((const segops_config *)base)->socket_mode);
  return buf;
}

const char *segops_cfg_format_token_file(const void *base, char *buf, size_t len) {
  snprintf(buf, len, "%s", ((const segops_config *)base)->token_file);
  return buf;
}

const char *segops_cfg_format_token(const void *base, char *buf, size_t len) {
  snprintf(buf, len, "%s", ((const segops_config *)base)->token ? "(set)" : "");
  return buf;
}

/* --native-socket: "off", empty (derived from the port), or an absolute path that fits a sockaddr_un. */
int segops_cfg_parse_native_socket(void *base, const char *v, int append, char *err, size_t errlen) {
  segops_config *c = base;
  (void)append, (void)err, (void)errlen;
  if (strcmp(v, "off") && *v && (v[0] != '/' || strlen(v) >= sizeof c->native_socket)) return -1;
  snprintf(c->native_socket, sizeof c->native_socket, "%s", v);
  return 0;
}

const char *segops_cfg_format_native_socket(const void *base, char *buf, size_t len) {
  snprintf(buf, len, "%s", ((const segops_config *)base)->native_socket);
  return buf;
}

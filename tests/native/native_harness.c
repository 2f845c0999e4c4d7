/* native_harness.c: the native channel tests' shared helpers (see native_harness.h). */
#include "native_harness.h"

#include <curl/curl.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <msgpack.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

int nh_failures;

void nh_fail(const char *file, int line, const char *fmt, ...) {
  nh_failures++;
  if (nh_failures > 40) return;
  fprintf(stderr, "FAIL %s:%d: ", file, line);
  va_list ap;
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
}

int nh_exit(const char *name) {
  printf("%s: %s (%d failure%s)\n", name, nh_failures ? "FAILED" : "passed", nh_failures, nh_failures == 1 ? "" : "s");
  return nh_failures ? 1 : 0;
}

void nh_skip(const char *why) {
  printf("SKIPPED: %s\n", why);
  exit(77);
}

void nh_sleep(double s) {
  struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

uint64_t nh_rand(uint64_t *s) {
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

double nh_uniform(uint64_t *s) { return (double)(nh_rand(s) >> 11) * 0x1.0p-53 * 2.0 - 1.0; }

/* ---- the daemon ----------------------------------------------------------------------------------- */

void nh_tempdir(char *dir, size_t len) {
  snprintf(dir, len, "/tmp/segops-native-XXXXXX");
  if (!mkdtemp(dir)) {
    perror("mkdtemp");
    exit(1);
  }
  chmod(dir, 0755); /* another user (the container test) reaches the socket inside */
}

void nh_rmtree(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) return;
  struct dirent *e;
  char p[512];
  while ((e = readdir(d))) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
    unlink(p);
  }
  closedir(d);
  rmdir(dir);
}

static void child_exec(const char *bin, const char *sock, const char *listen, int outfd, int errfd,
                       const char *const *args, const char *const *env) {
  dup2(outfd, 1);
  dup2(errfd, 2);
  extern char **environ;
  for (char **e = environ; *e;) {
    if (!strncmp(*e, "SEGOPS_", 7)) {
      char name[128];
      size_t n = strcspn(*e, "=");
      snprintf(name, sizeof name, "%.*s", (int)n, *e);
      unsetenv(name);
    } else {
      e++;
    }
  }
  for (int i = 0; env && env[i]; i++) putenv((char *)env[i]);
  const char *argv[64];
  int n = 0;
  argv[n++] = bin;
  argv[n++] = "--listen";
  argv[n++] = listen;
  argv[n++] = "--log-level";
  argv[n++] = getenv("NH_LOG_LEVEL") ? getenv("NH_LOG_LEVEL") : "warn";
  argv[n++] = "--native-socket";
  argv[n++] = sock;
  for (int i = 0; args && args[i] && n < 62; i++) argv[n++] = args[i];
  argv[n] = NULL;
  execv(bin, (char *const *)argv);
  perror("execv");
  _exit(127);
}

int nh_daemon_start(nh_daemon *d, const char *dir, bool test_build, const char *const *args, const char *const *env) {
  return nh_daemon_start_at(d, dir, test_build, 0, args, env);
}

int nh_daemon_start_at(nh_daemon *d, const char *dir, bool test_build, int port, const char *const *args,
                       const char *const *env) {
  memset(d, 0, sizeof *d);
  char listen[32];
  snprintf(listen, sizeof listen, "127.0.0.1:%d", port);
  const char *bin = getenv(test_build ? "SEGOPSD_TEST" : "SEGOPSD");
  if (!bin) nh_skip(test_build ? "SEGOPSD_TEST is not set" : "SEGOPSD is not set");
  snprintf(d->dir, sizeof d->dir, "%s", dir);
  snprintf(d->sock, sizeof d->sock, "%s/native.sock", dir);
  static int serial;
  snprintf(d->errpath, sizeof d->errpath, "%s/segopsd-%d.log", dir, ++serial);
  int errfd = open(d->errpath, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  int pfd[2];
  if (errfd < 0 || pipe2(pfd, O_CLOEXEC) != 0) {
    NH_CHECK(0, "cannot set up the daemon's output: %s", strerror(errno));
    return -1;
  }
  d->pid = fork();
  if (d->pid == 0) child_exec(bin, d->sock, listen, pfd[1], errfd, args, env);
  close(pfd[1]);
  close(errfd);
  char line[256] = "";
  size_t got = 0;
  double until = (double)time(NULL) + 30;
  while (got + 1 < sizeof line && (double)time(NULL) < until) {
    struct pollfd p = {pfd[0], POLLIN, 0};
    if (poll(&p, 1, 200) <= 0) continue;
    ssize_t n = read(pfd[0], line + got, 1);
    if (n <= 0) break;
    got++;
    if (line[got - 1] == '\n') break;
  }
  line[got] = 0;
  close(pfd[0]);
  char host[64];
  if (sscanf(line, "segopsd listening on http://%63[^:]:%d", host, &d->port) != 2) {
    char *log = nh_daemon_log(d);
    NH_CHECK(0, "segopsd did not start: %s %s", line, log ? log : "");
    free(log);
    kill(d->pid, SIGKILL);
    waitpid(d->pid, NULL, 0);
    d->pid = 0;
    return -1;
  }
  snprintf(d->url, sizeof d->url, "http://127.0.0.1:%d", d->port);
  /* The channel is served before the line is printed; a restart test's daemon may still wait for
   * the socket file of its predecessor to go, so look for it. */
  for (int i = 0; i < 500 && access(d->sock, F_OK) != 0; i++) nh_sleep(0.01);
  return 0;
}

char *nh_daemon_log(const nh_daemon *d) {
  FILE *f = fopen(d->errpath, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *b = malloc((size_t)n + 1);
  size_t r = b ? fread(b, 1, (size_t)n, f) : 0;
  if (b) b[r] = 0;
  fclose(f);
  return b;
}

int nh_daemon_stop(nh_daemon *d, int sig) {
  if (d->pid <= 0) return -1;
  kill(d->pid, sig);
  int st = 0;
  double until = (double)time(NULL) + 30;
  pid_t w;
  while ((w = waitpid(d->pid, &st, WNOHANG)) == 0 && (double)time(NULL) < until) nh_sleep(0.01);
  if (w == 0) {
    NH_CHECK(0, "segopsd did not exit within 30 s of signal %d", sig);
    kill(d->pid, SIGKILL);
    waitpid(d->pid, &st, 0);
  }
  d->pid = 0;
  int rc = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  if (sig == SIGTERM) {
    char *log = nh_daemon_log(d);
    NH_CHECK(rc == 0, "segopsd exited %d after SIGTERM: %s", rc, log ? log : "");
    static const char *const MARKERS[] = {"AddressSanitizer", "LeakSanitizer", "runtime error:"};
    for (size_t k = 0; log && k < 3; k++) NH_CHECK(!strstr(log, MARKERS[k]), "sanitizer report: %s", log);
    free(log);
  }
  return rc;
}

/* ---- resources ------------------------------------------------------------------------------------ */

static int count_dir(const char *path) {
  DIR *d = opendir(path);
  if (!d) return -1;
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)))
    if (e->d_name[0] != '.') n++;
  closedir(d);
  return n;
}

nh_usage nh_usage_of(pid_t pid) {
  nh_usage u = {-1, -1, -1, -1, -1};
  char p[64], line[512];
  snprintf(p, sizeof p, "/proc/%d/fd", (int)pid);
  u.fds = count_dir(p);
  snprintf(p, sizeof p, "/proc/%d/task", (int)pid);
  u.threads = count_dir(p);
  snprintf(p, sizeof p, "/proc/%d/maps", (int)pid);
  FILE *f = fopen(p, "r");
  if (f) {
    u.maps = u.memfd_maps = 0;
    while (fgets(line, sizeof line, f)) {
      u.maps++;
      u.memfd_maps += strstr(line, "/memfd:") != NULL;
    }
    fclose(f);
  }
  snprintf(p, sizeof p, "/proc/%d/status", (int)pid);
  f = fopen(p, "r");
  if (f) {
    while (fgets(line, sizeof line, f))
      if (!strncmp(line, "VmRSS:", 6)) u.rss_kb = strtol(line + 6, NULL, 10);
    fclose(f);
  }
  return u;
}

double nh_cpu_seconds(pid_t pid) {
  clockid_t c;
  struct timespec ts;
  if (clock_getcpuclockid(pid, &c) != 0 || clock_gettime(c, &ts) != 0) return -1;
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

long nh_stat_ticks(pid_t pid) {
  char p[64], buf[1024];
  snprintf(p, sizeof p, "/proc/%d/stat", (int)pid);
  FILE *f = fopen(p, "r");
  if (!f) return -1;
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = 0;
  char *s = strrchr(buf, ')'); /* the command may hold spaces */
  if (!s) return -1;
  long ut = 0, stt = 0;
  /* fields after ")": state(3) ... utime(14) stime(15) */
  if (sscanf(s + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %ld %ld", &ut, &stt) != 2) return -1;
  return ut + stt;
}

/* ---- HTTP ------------------------------------------------------------------------------------------- */

typedef struct {
  char *p;
  size_t n;
} grow;

static size_t on_body(char *data, size_t size, size_t nmemb, void *user) {
  grow *g = user;
  size_t n = size * nmemb;
  char *p = realloc(g->p, g->n + n + 1);
  if (!p) return 0;
  memcpy(p + g->n, data, n);
  g->p = p;
  g->n += n;
  g->p[g->n] = 0;
  return n;
}

static long perform(CURL *h, const char *url, const char *path, const char *token, struct curl_slist *hdrs, grow *g) {
  char full[512], auth[1100];
  snprintf(full, sizeof full, "%s%s", url, path);
  if (token) {
    snprintf(auth, sizeof auth, "Authorization: Bearer %s", token);
    hdrs = curl_slist_append(hdrs, auth);
  }
  curl_easy_setopt(h, CURLOPT_URL, full);
  curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
  curl_easy_setopt(h, CURLOPT_WRITEDATA, g);
  curl_easy_setopt(h, CURLOPT_TIMEOUT, 60L);
  long status = -1;
  if (curl_easy_perform(h) == CURLE_OK) curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
  curl_slist_free_all(hdrs);
  return status;
}

long nh_http_get(const char *url, const char *path, const char *token, char **body) {
  CURL *h = curl_easy_init();
  grow g = {NULL, 0};
  long st = perform(h, url, path, token, NULL, &g);
  curl_easy_cleanup(h);
  *body = g.p ? g.p : strdup("");
  return st;
}

long nh_http_post_json(const char *url, const char *path, const char *json, char **body) {
  CURL *h = curl_easy_init();
  curl_easy_setopt(h, CURLOPT_POSTFIELDS, json);
  grow g = {NULL, 0};
  long st = perform(h, url, path, NULL, curl_slist_append(NULL, "Content-Type: application/json"), &g);
  curl_easy_cleanup(h);
  *body = g.p ? g.p : strdup("");
  return st;
}

static void pack_str(msgpack_packer *pk, const char *s) {
  msgpack_pack_str(pk, strlen(s));
  msgpack_pack_str_body(pk, s, strlen(s));
}

static void pack_tensor(msgpack_packer *pk, const segops_array *a) {
  static const char *const DT[] = {"float32", "float64", "int32", "int64"};
  static const size_t SZ[] = {4, 8, 4, 8};
  size_t nb = SZ[a->dtype];
  for (int d = 0; d < a->ndim; d++) nb *= (size_t)a->shape[d];
  msgpack_pack_map(pk, 3);
  pack_str(pk, "dtype");
  pack_str(pk, DT[a->dtype]);
  pack_str(pk, "shape");
  msgpack_pack_array(pk, (size_t)a->ndim);
  for (int d = 0; d < a->ndim; d++) msgpack_pack_int64(pk, a->shape[d]);
  pack_str(pk, "data");
  msgpack_pack_bin(pk, nb);
  msgpack_pack_bin_body(pk, a->data, nb);
}

static void pack_call(msgpack_packer *pk, const segops_tcall *c, int dtype) {
  int n = 2 + (dtype >= 0); /* idx, num_segments, dtype */
  for (int k = 0; k < c->n_in; k++) n += c->in[k] != NULL;
  unsigned all = (1u << c->n_out) - 1u;
  bool outputs = c->want && c->want != all;
  msgpack_pack_map(pk, (size_t)(n + outputs));
  for (int k = 0; k < c->n_in; k++) {
    if (!c->in[k]) continue;
    pack_str(pk, c->in_name[k]);
    pack_tensor(pk, c->in[k]);
  }
  pack_str(pk, "idx");
  pack_tensor(pk, c->idx);
  pack_str(pk, "num_segments");
  msgpack_pack_int64(pk, c->num_segments);
  if (dtype >= 0) {
    pack_str(pk, "dtype");
    pack_str(pk, dtype == SEGOPS_F32 ? "float32" : "float64");
  }
  if (outputs) {
    pack_str(pk, "outputs");
    msgpack_pack_array(pk, (size_t)__builtin_popcount(c->want));
    for (int k = 0; k < c->n_out; k++)
      if ((c->want >> k) & 1u) pack_str(pk, c->out_name[k]);
  }
}

static const msgpack_object *map_get(const msgpack_object *m, const char *key) {
  if (m->type != MSGPACK_OBJECT_MAP) return NULL;
  for (uint32_t i = 0; i < m->via.map.size; i++) {
    const msgpack_object *k = &m->via.map.ptr[i].key;
    if (k->type == MSGPACK_OBJECT_STR && k->via.str.size == strlen(key) &&
        !memcmp(k->via.str.ptr, key, k->via.str.size))
      return &m->via.map.ptr[i].val;
  }
  return NULL;
}

/* One output of the answer into the caller's array. */
static int take_output(const msgpack_object *t, segops_array *o, segops_error *e) {
  const msgpack_object *dt = map_get(t, "dtype"), *sh = map_get(t, "shape"), *data = map_get(t, "data");
  if (!dt || !sh || !data || data->type != MSGPACK_OBJECT_BIN || sh->type != MSGPACK_OBJECT_ARRAY)
    return segops_client_err(e, SEGOPS_E_PROTOCOL, "bad tensor in the HTTP answer");
  o->dtype = dt->via.str.size == 7 && !memcmp(dt->via.str.ptr, "float32", 7) ? SEGOPS_F32 : SEGOPS_F64;
  o->ndim = (int)sh->via.array.size;
  for (int d = 0; d < o->ndim && d < 3; d++) o->shape[d] = sh->via.array.ptr[d].via.i64;
  size_t nb = data->via.bin.size;
  if (!o->data) {
    o->data = malloc(nb ? nb : 1);
  } else if (o->nbytes < nb) {
    return segops_client_err(e, SEGOPS_E_INVALID_ARGUMENT, "output does not fit");
  }
  memcpy(o->data, data->via.bin.ptr, nb);
  o->nbytes = nb;
  return SEGOPS_OK;
}

static int http_error(long status, const char *body, segops_error *e) {
  json_error_t je;
  json_t *j = json_loads(body, 0, &je);
  json_t *err = j ? json_object_get(j, "error") : NULL;
  const char *code = err ? json_string_value(json_object_get(err, "code")) : NULL;
  const char *msg = err ? json_string_value(json_object_get(err, "message")) : NULL;
  int rc = SEGOPS_E_INTERNAL;
#define NH_CODE_(name, val, wire, http, m) \
  if (code && !strcmp(code, wire) && rc == SEGOPS_E_INTERNAL && (http) == status) rc = (val);
  SEGOPS_ERRNO_MAP(NH_CODE_)
#undef NH_CODE_
  if (e) {
    e->code = rc;
    e->http_status = (int)status;
    snprintf(e->name, sizeof e->name, "%s", code ? code : "?");
    snprintf(e->message, sizeof e->message, "%s", msg ? msg : body);
  }
  json_decref(j);
  return rc;
}

int nh_http_call(const char *url, const segops_tcall *call, const char *token, int dtype, segops_error *e) {
  msgpack_sbuffer sb;
  msgpack_sbuffer_init(&sb);
  msgpack_packer pk;
  msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
  pack_call(&pk, call, dtype);
  char path[128];
  snprintf(path, sizeof path, "/v1/%s/%s", call->op, call->pass);
  CURL *h = curl_easy_init();
  curl_easy_setopt(h, CURLOPT_POSTFIELDS, sb.data);
  curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, (long)sb.size);
  struct curl_slist *hdrs = curl_slist_append(NULL, "Content-Type: application/msgpack");
  hdrs = curl_slist_append(hdrs, "Accept: application/msgpack");
  grow g = {NULL, 0};
  long st = perform(h, url, path, token, hdrs, &g);
  curl_easy_cleanup(h);
  msgpack_sbuffer_destroy(&sb);
  int rc = SEGOPS_OK;
  if (st != 200) {
    rc = st < 0 ? segops_client_err(e, SEGOPS_E_CONNECTION, "HTTP failed") : http_error(st, g.p ? g.p : "", e);
  } else {
    msgpack_unpacked up;
    msgpack_unpacked_init(&up);
    size_t off = 0;
    if (msgpack_unpack_next(&up, g.p, g.n, &off) != MSGPACK_UNPACK_SUCCESS) {
      rc = segops_client_err(e, SEGOPS_E_PROTOCOL, "bad msgpack answer");
    } else {
      for (int k = 0; k < call->n_out && rc == SEGOPS_OK; k++) {
        if (!call->out[k]) continue;
        const msgpack_object *t = map_get(&up.data, call->out_name[k]);
        rc = t ? take_output(t, call->out[k], e) : segops_client_err(e, SEGOPS_E_PROTOCOL, "output missing");
      }
    }
    msgpack_unpacked_destroy(&up);
  }
  free(g.p);
  return rc;
}

/* ---- native calls --------------------------------------------------------------------------------------- */

void nh_tcall(segops_tcall *c, int fn, const segops_array *const *in, const segops_array *idx, int64_t s, unsigned want,
              segops_array *out) {
  memset(c, 0, sizeof *c);
  const segops_fn_desc *d = segops_fn((segops_op)(fn / SEGOPS_PASS_COUNT), (segops_pass)(fn % SEGOPS_PASS_COUNT));
  c->fn = fn;
  c->op = segops_op_name(d->op);
  c->pass = segops_pass_name(d->pass);
  c->n_in = d->n_in;
  c->n_out = d->n_out;
  for (int k = 0; k < d->n_in; k++) {
    c->in_name[k] = d->in[k].name;
    c->in[k] = in ? in[k] : NULL;
  }
  c->idx = idx;
  c->num_segments = s;
  c->want = want ? want : (1u << d->n_out) - 1u;
  for (int k = 0; k < d->n_out; k++) {
    c->out_name[k] = d->out[k].name;
    c->out[k] = (c->want >> k) & 1u ? &out[k] : NULL;
  }
}

segops_transport *nh_native(const nh_daemon *d, segops_mem *mem, const char *token, double timeout_s) {
  segops_error e;
  memset(&e, 0, sizeof e);
  segops_transport *t = segops_native_open(d->sock, mem, token, -1, geteuid(), 0, segops_client_now() + timeout_s, &e);
  NH_CHECK(t != NULL, "native open on %s: %s", d->sock, e.message);
  return t;
}

bool nh_good_call(segops_transport *t, segops_error *e) {
  double x[64], out[4] = {0};
  int32_t idx[64];
  double want[4] = {0};
  for (int i = 0; i < 64; i++) {
    x[i] = i * 0.5;
    idx[i] = (i * 7) % 4;
    want[idx[i]] += x[i];
  }
  segops_array ax = {SEGOPS_F64, 1, {64}, x, 0}, ai = {SEGOPS_I32, 1, {64}, idx, 0};
  segops_array o[1] = {{SEGOPS_F64, 0, {0}, out, sizeof out}};
  const segops_array *in[1] = {&ax};
  segops_tcall c;
  nh_tcall(&c, SEGOPS_FN_SEGMENTED_SUM_FORWARD, in, &ai, 4, 0, o);
  int rc = t->vt->call(t, &c, segops_client_now() + 30, e);
  if (rc) return false;
  for (int s = 0; s < 4; s++)
    if (out[s] != want[s]) return false;
  return o[0].ndim == 1 && o[0].shape[0] == 4;
}

/* ---- a raw channel ----------------------------------------------------------------------------------- */
/* The ring's bytes, the doorbell and the futex are written here by hand from proto/segops_ring.h (an
 * independent reading of the contract); only the socket plumbing is the channel's own
 * (proto/segops_chan.h). */

#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>

#include "segops_chan.h"

int nh_memfd(size_t size, bool sealed) {
  int fd = memfd_create("nh", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) return -1;
  if (ftruncate(fd, (off_t)size) != 0 || (size && fallocate(fd, 0, 0, (off_t)size) != 0) ||
      (sealed && fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK) != 0)) {
    close(fd);
    return -1;
  }
  return fd;
}

int nh_send(int sock, const void *msg, size_t len, int fd) { return segops_chan_send(sock, msg, len, fd); }

ssize_t nh_recv(int sock, void *buf, size_t cap, double timeout_s) {
  struct pollfd p = {sock, POLLIN, 0};
  if (poll(&p, 1, (int)(timeout_s * 1e3)) <= 0) return -1;
  return recv(sock, buf, cap, 0);
}

static void nh_head(segops_msg_head *h, uint32_t type, size_t size) {
  h->magic = SEGOPS_MSG_MAGIC;
  h->version = SEGOPS_NATIVE_VERSION;
  h->type = type;
  h->size = (uint32_t)size;
}

/* The reply to a request: 0 for want, else the ERROR's code (message into msg). */
static int nh_reply(int sock, uint32_t want, char *msg) {
  union {
    segops_msg_head h;
    segops_msg_error e;
    char raw[SEGOPS_MSG_MAX];
  } r;
  ssize_t n = nh_recv(sock, &r, sizeof r, 10);
  if (n < (ssize_t)sizeof r.h) {
    if (msg) snprintf(msg, 512, "no reply (%zd)", n);
    return SEGOPS_E_CONNECTION;
  }
  if (r.h.type == SEGOPS_MSG_ERROR && n == (ssize_t)sizeof r.e) {
    if (msg) snprintf(msg, 512, "%s", r.e.message);
    return r.e.code;
  }
  if (r.h.type != want) {
    if (msg) snprintf(msg, 512, "unexpected reply type %u", r.h.type);
    return SEGOPS_E_PROTOCOL;
  }
  return 0;
}

int nh_raw_open(nh_raw *r, const char *sock, const char *token, uint32_t slots, char *msg) {
  memset(r, 0, sizeof *r);
  r->ring_fd = -1;
  r->sock = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  struct sockaddr_un sa = {0};
  sa.sun_family = AF_UNIX;
  snprintf(sa.sun_path, sizeof sa.sun_path, "%s", sock);
  if (connect(r->sock, (struct sockaddr *)&sa, sizeof sa) != 0) {
    if (msg) snprintf(msg, 512, "connect: %s", strerror(errno));
    return SEGOPS_E_CONNECTION;
  }
  segops_msg_hello h;
  memset(&h, 0, sizeof h);
  nh_head(&h.h, SEGOPS_MSG_HELLO, sizeof h);
  if (token) {
    h.token_len = (uint32_t)strlen(token);
    memcpy(h.token, token, h.token_len);
  }
  nh_send(r->sock, &h, sizeof h, -1);
  int rc = nh_reply(r->sock, SEGOPS_MSG_WELCOME, msg);
  if (rc) return rc;
  r->slots = slots;
  r->ring_len = (size_t)SEGOPS_RING_BYTES(slots);
  r->ring_fd = nh_memfd(r->ring_len, true);
  r->ring = mmap(NULL, r->ring_len, PROT_READ | PROT_WRITE, MAP_SHARED, r->ring_fd, 0);
  r->hdr = (segops_ring_header *)(void *)r->ring;
  r->hdr->magic = SEGOPS_RING_MAGIC;
  r->hdr->version = SEGOPS_NATIVE_VERSION;
  r->hdr->slot_count = slots;
  r->hdr->slot_bytes = SEGOPS_RING_SLOT_BYTES;
  r->hdr->header_bytes = SEGOPS_RING_HEADER_BYTES;
  segops_msg_ring m;
  memset(&m, 0, sizeof m);
  nh_head(&m.h, SEGOPS_MSG_RING, sizeof m);
  m.slot_count = slots;
  nh_send(r->sock, &m, sizeof m, r->ring_fd);
  return nh_reply(r->sock, SEGOPS_MSG_OK, msg);
}

int nh_raw_pool(nh_raw *r, int fd, uint64_t size, char *msg) {
  segops_msg_pool m;
  memset(&m, 0, sizeof m);
  nh_head(&m.h, SEGOPS_MSG_POOL, sizeof m);
  m.pool_id = r->pools;
  m.size = size;
  nh_send(r->sock, &m, sizeof m, fd);
  __atomic_fetch_add(&r->hdr->doorbell, 1, __ATOMIC_SEQ_CST);
  syscall(SYS_futex, &r->hdr->doorbell, FUTEX_WAKE, 1, NULL, NULL, 0);
  int rc = nh_reply(r->sock, SEGOPS_MSG_OK, msg);
  if (rc == 0) r->pools++;
  return rc;
}

void nh_raw_close(nh_raw *r) {
  if (r->ring) munmap(r->ring, r->ring_len);
  if (r->ring_fd >= 0) close(r->ring_fd);
  if (r->sock >= 0) close(r->sock);
  memset(r, 0, sizeof *r);
  r->sock = r->ring_fd = -1;
}

segops_ring_slot *nh_raw_slot(nh_raw *r, uint32_t k) {
  return (segops_ring_slot *)(void *)(r->ring + SEGOPS_RING_HEADER_BYTES + (size_t)k * SEGOPS_RING_SLOT_BYTES);
}

void nh_raw_submit(nh_raw *r, uint32_t k, const segops_ring_request *req, uint64_t seq) {
  segops_ring_slot *s = nh_raw_slot(r, k);
  memcpy(&s->req, req, sizeof *req);
  s->seq = seq;
  __atomic_store_n(&s->state, SEGOPS_SLOT_SUBMITTED, __ATOMIC_RELEASE);
  __atomic_fetch_add(&r->hdr->doorbell, 1, __ATOMIC_SEQ_CST);
  syscall(SYS_futex, &r->hdr->doorbell, FUTEX_WAKE, 1, NULL, NULL, 0);
}

bool nh_raw_wait(nh_raw *r, uint32_t k, double timeout_s, segops_ring_answer *ans) {
  segops_ring_slot *s = nh_raw_slot(r, k);
  double until = segops_client_now() + timeout_s;
  while ((__atomic_load_n(&s->state, __ATOMIC_ACQUIRE) & SEGOPS_SLOT_STATE_MASK) != SEGOPS_SLOT_DONE) {
    if (segops_client_now() > until) return false;
    nh_sleep(50e-6);
  }
  if (ans) memcpy(ans, &s->ans, sizeof *ans);
  __atomic_store_n(&s->state, SEGOPS_SLOT_FREE, __ATOMIC_RELEASE);
  return true;
}

segops_ring_request nh_sum_request(int64_t n, int64_t s, uint64_t x_off, uint64_t idx_off, uint64_t out_off) {
  segops_ring_request q;
  memset(&q, 0, sizeof q);
  q.fn = SEGOPS_FN_SEGMENTED_SUM_FORWARD;
  q.num_segments = s;
  q.in[0] = (segops_ring_tensor){SEGOPS_F64, 1, {n, 0, 0}, 0, SEGOPS_TENSOR_PRESENT, x_off, (uint64_t)n * 8, {0}};
  q.idx = (segops_ring_tensor){SEGOPS_I32, 1, {n, 0, 0}, 0, SEGOPS_TENSOR_PRESENT, idx_off, (uint64_t)n * 4, {0}};
  q.out[0] = (segops_ring_tensor){0, 0, {0}, 0, SEGOPS_TENSOR_PRESENT, out_off, (uint64_t)s * 8, {0}};
  return q;
}

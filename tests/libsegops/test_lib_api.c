/* test_lib_api.c: libsegops' API contract: the error and function tables, options and URLs refused
 * at open with clear messages (and no connection made there), bad arguments to calls refused
 * before anything is sent, memory, /v1/info ("local" serves the daemon's op table), the bearer
 * token ($SEGOPS_TOKEN) and $SEGOPS_URL, and a daemon that is not there (an error after the
 * timeout naming it). */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "lib_test.h"

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void tables(void) {
  TL_CHECK(!strcmp(segops_err_name(SEGOPS_E_INVALID_ARGUMENT), "invalid_argument"), "err_name");
  TL_CHECK(segops_err_status(SEGOPS_E_TOO_LARGE) == 413 && segops_err_status(SEGOPS_E_CONNECTION) == 0, "err_status");
  TL_CHECK(!strcmp(segops_strerror(SEGOPS_E_TIMEOUT), "the call's timeout passed"), "strerror");
  TL_CHECK(!strcmp(segops_err_name(-999), "internal") && !strcmp(segops_err_name(SEGOPS_OK), "ok"), "unknown code");
  for (int fn = 0; fn < SEGOPS_FN_COUNT; fn++) {
    const segops_fn_desc *r = tl_row(fn);
    TL_CHECK(segops_fn_lookup(segops_fn_op(fn), segops_fn_pass(fn)) == fn, "lookup of %d", fn);
    TL_CHECK(segops_fn_inputs(fn) == r->n_in && segops_fn_outputs(fn) == r->n_out, "counts of %d", fn);
    for (int k = 0; k < r->n_in; k++) TL_CHECK(!strcmp(segops_fn_input_name(fn, k), r->in[k].name), "input %d", k);
    for (int k = 0; k < r->n_out; k++) TL_CHECK(!strcmp(segops_fn_output_name(fn, k), r->out[k].name), "out %d", k);
    TL_CHECK(!segops_fn_input_name(fn, r->n_in) && !segops_fn_output_name(fn, -1), "names out of range");
  }
  TL_CHECK(segops_fn_lookup("segmented_dot", "double_backward") == SEGOPS_FN_SEGMENTED_DOT_DOUBLE_BACKWARD, "dot");
  TL_CHECK(segops_fn_lookup("segmented_maximum", "forward") == -1 && segops_fn_lookup(NULL, "forward") == -1,
           "unknown");
  TL_CHECK(!segops_fn_op(SEGOPS_FN_COUNT) && segops_fn_inputs(-1) == -1, "ids out of range");
}

/* segops_open refuses url (with opts) with INVALID_ARGUMENT and a message containing want. */
static void open_refused(const char *url, const segops_options *o, const char *want) {
  segops_client *c = (segops_client *)1;
  segops_error e;
  int rc = segops_open(&c, url, o, &e);
  TL_CHECK(rc == SEGOPS_E_INVALID_ARGUMENT && !c && strstr(e.message, want) && !strncmp(e.message, "segops: ", 8),
           "open('%s'): %d '%s' (want '%s')", url, rc, e.message, want);
}

static void opening(void) {
  segops_options o;
  segops_options_init(&o);
  TL_CHECK(o.timeout_s == 60 && o.spin_us == -1 && !o.transport && !o.token, "defaults");
  o.transport = "shm";
  open_refused("http://127.0.0.1:1", &o, "transport must be");
  segops_options_init(&o);
  open_refused("ftp://127.0.0.1:1", NULL, "unsupported URL");
  open_refused(" , ,", NULL, "no URL");
  open_refused("unix:relative/path", NULL, "unix:///absolute/path");
  open_refused("http://", NULL, "is not a URL");
  o.spin_us = 200000;
  open_refused("local", &o, "spin_us must be");
  segops_options_init(&o);
  o.token = "a\r\nX-Evil: 1";
  open_refused("http://127.0.0.1:1", &o, "token must be one line");
  setenv("SEGOPS_CLIENT_SPIN_US", "fast", 1);
  open_refused("local", NULL, "SEGOPS_CLIENT_SPIN_US");
  unsetenv("SEGOPS_CLIENT_SPIN_US");
  char many[65 * 24] = "";
  for (int i = 0; i < 65; i++) snprintf(many + strlen(many), 24, "%shttp://127.0.0.1:%d", i ? "," : "", i + 1);
  open_refused(many, NULL, "at most 64");
  /* Nothing listens there: opening makes no connection, so it succeeds. */
  segops_client *c = NULL;
  segops_error e;
  TL_CHECK(segops_open(&c, " http://127.0.0.1:1 , unix:///nowhere/segops.sock,local ", NULL, &e) == SEGOPS_OK,
           "open of three: %s", e.message);
  segops_close(c);
  segops_close(NULL);
  TL_CHECK(segops_open(NULL, "local", NULL, &e) == SEGOPS_E_INVALID_ARGUMENT, "open(NULL)");
}

/* A call refused before it is sent: INVALID_ARGUMENT naming what is wrong. */
static void refused(int rc, const segops_error *e, const char *want) {
  TL_CHECK(rc == SEGOPS_E_INVALID_ARGUMENT && e->code == rc && strstr(e->message, want) &&
               !strncmp(e->message, "segops: ", 8) && e->http_status == 400,
           "%d '%s' (want '%s')", rc, e->message, want);
}

static void bad_calls(segops_client *c) {
  double x[3] = {1, 2, 3}, small[1];
  int32_t idx[3] = {0, 1, 1};
  segops_array ax = {SEGOPS_F64, 1, {3}, x, 0}, ai = {SEGOPS_I32, 1, {3}, idx, 0};
  segops_array out = {0}, outs[3] = {{0}};
  const segops_array *in[1] = {&ax};
  segops_error e;
  refused(segops_segmented_sum_forward(NULL, &ax, &ai, 2, &out, &e), &e, "client is NULL");
  char beyond[64];
  snprintf(beyond, sizeof beyond, "function %d does not exist", SEGOPS_FN_COUNT);
  refused(segops_run(c, SEGOPS_FN_COUNT, in, &ai, 2, 0, outs, &e), &e, beyond);
  refused(segops_run(c, -1, in, &ai, 2, 0, outs, &e), &e, "does not exist");
  refused(segops_run(c, SEGOPS_FN_SEGMENTED_SUM_FORWARD, in, &ai, 2, 0x2, outs, &e), &e, "asks for output 1");
  refused(segops_run(c, SEGOPS_FN_SEGMENTED_SUM_FORWARD, in, &ai, 2, 0, NULL, &e), &e, "outputs is NULL");
  refused(segops_segmented_sum_forward(c, &ax, &ai, 2, NULL, &e), &e, "no output is asked for");
  segops_array bad = ax;
  bad.dtype = (segops_dtype)9;
  refused(segops_segmented_sum_forward(c, &bad, &ai, 2, &out, &e), &e, "x.dtype (9) is not a segops_dtype");
  bad = ax;
  bad.ndim = 7;
  refused(segops_segmented_sum_forward(c, &bad, &ai, 2, &out, &e), &e, "x.ndim (7) must be 0 to 6");
  bad = ax;
  bad.shape[0] = -3;
  refused(segops_segmented_sum_forward(c, &bad, &ai, 2, &out, &e), &e, "x.shape[0] (-3) must be >= 0");
  bad = ax;
  bad.data = NULL;
  refused(segops_segmented_sum_forward(c, &bad, &ai, 2, &out, &e), &e, "x.data is NULL but x holds 24 bytes");
  bad = ax;
  bad.ndim = 3;
  bad.shape[1] = bad.shape[2] = (int64_t)1 << 40;
  refused(segops_segmented_sum_forward(c, &bad, &ai, 2, &out, &e), &e, "more bytes than memory can hold");
  bad = ai;
  bad.data = NULL;
  refused(segops_segmented_sum_forward(c, &ax, &bad, 2, &out, &e), &e, "idx.data is NULL");
  segops_array tiny = {.data = small, .nbytes = sizeof small};
  refused(segops_segmented_sum_forward(c, &ax, &ai, 2, &tiny, &e), &e,
          "out needs 16 bytes (float64 (2,)) but out.nbytes is 8");
  double g[3], gx[6];
  segops_array ag = {SEGOPS_F64, 1, {2}, g, 0}, a1 = {.data = gx, .nbytes = sizeof gx},
               a2 = {.data = gx + 2, .nbytes = 24};
  refused(segops_segmented_dot_backward(c, &ag, &ax, &ax, &ai, 2, &a1, &a2, &e), &e, "grad_x and grad_y share memory");
  segops_array same = {0};
  refused(segops_segmented_dot_backward(c, &ag, &ax, &ax, &ai, 2, &same, &same, &e), &e, "share memory");
  /* Outputs foretold without a call; refused where the inputs contradict each other. */
  segops_array shapes[3] = {{0}};
  TL_CHECK(segops_output_shapes(SEGOPS_FN_SEGMENTED_SUM_FORWARD, in, &ai, 2, 0, shapes, &e) == SEGOPS_OK &&
               shapes[0].dtype == SEGOPS_F64 && shapes[0].ndim == 1 && shapes[0].shape[0] == 2 &&
               shapes[0].nbytes == 16,
           "output_shapes: %s", e.message);
  float xf[3] = {0};
  segops_array axf = {SEGOPS_F32, 1, {3}, xf, 0};
  const segops_array *mixed[3] = {&ag, &axf, &ax};
  refused(segops_output_shapes(SEGOPS_FN_SEGMENTED_DOT_BACKWARD, mixed, &ai, 2, 0, shapes, &e), &e,
          "the inputs do not determine the outputs");
  /* e may be NULL. */
  TL_CHECK(segops_segmented_sum_forward(c, &bad, &ai, 2, &out, NULL) == SEGOPS_E_INVALID_ARGUMENT, "e NULL");
  TL_CHECK(segops_info(c, NULL, &e) == SEGOPS_E_INVALID_ARGUMENT, "info(NULL)");
  /* Nothing was allocated by refused calls. */
  TL_CHECK(!out.data && !outs[0].data && !same.data, "refused calls allocated outputs");
}

static void memory(segops_client *c) {
  for (size_t n = 1; n < (1u << 20); n = n * 7 + 3) {
    unsigned char *p = segops_alloc(c, n);
    TL_CHECK(p && (uintptr_t)p % 64 == 0, "alloc(%zu)", n);
    if (p) memset(p, 1, n);
    segops_free(c, p);
  }
  segops_free(c, NULL);
}

static json_t *info_of(segops_client *c) {
  char *text = NULL;
  segops_error e;
  int rc = segops_info(c, &text, &e);
  TL_CHECK(rc == SEGOPS_OK && text, "info: %d %s", rc, e.message);
  json_t *j = text ? json_loads(text, 0, NULL) : NULL;
  free(text);
  return j;
}

/* One call that must succeed (sum of [1,2,3] by idx [0,1,1] = [1,5]). */
static int sum_call(segops_client *c, segops_error *e) {
  double x[3] = {1, 2, 3}, r[2] = {0, 0};
  int32_t idx[3] = {0, 1, 1};
  segops_array ax = {SEGOPS_F64, 1, {3}, x, 0}, ai = {SEGOPS_I32, 1, {3}, idx, 0}, out = {.data = r, .nbytes = 16};
  int rc = segops_segmented_sum_forward(c, &ax, &ai, 2, &out, e);
  if (!rc) TL_CHECK(r[0] == 1 && r[1] == 5, "sum: %g %g", r[0], r[1]);
  return rc;
}

/* A call of n float64 (4 MB): more than --max-body-bytes. */
static int big_call(segops_client *c, int64_t n, segops_error *e, double *took) {
  double *x = calloc((size_t)n, sizeof *x);
  int32_t *idx = calloc((size_t)n, sizeof *idx);
  segops_array ax = {SEGOPS_F64, 1, {n}, x, 0}, ai = {SEGOPS_I32, 1, {n}, idx, 0}, out = {0};
  double t0 = now_s();
  int rc = segops_segmented_sum_forward(c, &ax, &ai, 1, &out, e);
  *took = now_s() - t0;
  segops_free(c, out.data);
  free(x);
  free(idx);
  return rc;
}

static void early_answers(segops_client *anon, segops_client *auth) {
  segops_error e;
  double took;
  int rc = big_call(anon, 1 << 19, &e, &took);
  TL_CHECK(rc == SEGOPS_E_UNAUTHENTICATED && took < 5, "a large body without a token: %d after %.2f s '%s'", rc, took,
           e.message);
  rc = big_call(auth, 1 << 19, &e, &took);
  TL_CHECK(rc == SEGOPS_E_TOO_LARGE && e.http_status == 413 && took < 5, "over the body limit: %d after %.2f s '%s'",
           rc, took, e.message);
  TL_CHECK(sum_call(auth, &e) == 0, "a call after the early answers: %s", e.message);
}

static void with_daemon(segops_client *local) {
  char dir[] = "/tmp/segops-lib-api-XXXXXX", tokfile[64];
  TL_CHECK(mkdtemp(dir) != NULL, "mkdtemp");
  snprintf(tokfile, sizeof tokfile, "%s/token", dir);
  const char *token = "lib-api-test-token-0123456789abcdef";
  FILE *f = fopen(tokfile, "w");
  fputs(token, f);
  fclose(f);
  const char *args[] = {"--backend",        "cpu",    "--threads", "1", "--token-file", tokfile,
                        "--max-body-bytes", "200000", NULL};
  tl_daemon d;
  if (!tl_daemon_start(&d, "127.0.0.1:0", args)) {
    TL_CHECK(0, "segopsd did not start");
    return;
  }
  segops_client *anon = NULL, *auth = NULL, *env = NULL;
  segops_options o;
  segops_options_init(&o);
  o.transport = "http";
  o.timeout_s = 10;
  segops_error e;
  unsetenv("SEGOPS_TOKEN");
  TL_CHECK(segops_open(&anon, d.url, &o, &e) == 0, "open: %s", e.message);
  int rc = sum_call(anon, &e);
  TL_CHECK(rc == SEGOPS_E_UNAUTHENTICATED && e.http_status == 401 && !strcmp(e.name, "unauthenticated"),
           "no token: %d %d %s '%s'", rc, e.http_status, e.name, e.message);
  o.token = token;
  TL_CHECK(segops_open(&auth, d.url, &o, &e) == 0 && sum_call(auth, &e) == 0, "token: %s", e.message);
  /* The daemon answers before it has read a large body (no token; over its body limit) and closes:
   * its answer, at once, not a connection failure retried until the timeout. */
  early_answers(anon, auth);
  /* $SEGOPS_URL and $SEGOPS_TOKEN when the caller gives neither. */
  setenv("SEGOPS_URL", d.url, 1);
  setenv("SEGOPS_TOKEN", token, 1);
  TL_CHECK(segops_open(&env, NULL, NULL, &e) == 0 && sum_call(env, &e) == 0, "environment: %s", e.message);
  unsetenv("SEGOPS_URL");
  unsetenv("SEGOPS_TOKEN");
  /* "local" serves the daemon's op table in its /v1/info. */
  json_t *remote = info_of(auth), *mine = info_of(local);
  TL_CHECK(remote && mine && json_equal(json_object_get(remote, "ops"), json_object_get(mine, "ops")),
           "local's op table differs from the daemon's");
  TL_CHECK(mine && !strcmp(json_string_value(json_object_get(mine, "backend")), "cpu"), "local backend");
  json_decref(remote);
  json_decref(mine);
  segops_close(anon);
  segops_close(auth);
  segops_close(env);
  TL_CHECK(tl_daemon_stop(&d), "segopsd did not exit 0");
  unlink(tokfile);
  rmdir(dir);
}

/* Which transport each choice ends with on a daemon that also listens on a unix socket and serves
 * no native channel ("auto" with a native channel: test_lib_bits). */
static void transports(void) {
  char dir[] = "/tmp/segops-lib-tr-XXXXXX", listen[96], url[96];
  TL_CHECK(mkdtemp(dir) != NULL, "mkdtemp");
  snprintf(listen, sizeof listen, "unix:%s/segops.sock", dir);
  snprintf(url, sizeof url, "unix://%s/segops.sock", dir);
  const char *args[] = {"--backend", "cpu", "--threads", "1", "--listen", listen, "--native-socket", "off", NULL};
  tl_daemon d;
  if (!tl_daemon_start(&d, "127.0.0.1:0", args)) {
    TL_CHECK(0, "segopsd did not start");
    return;
  }
  struct {
    const char *url, *transport, *used;
  } cases[] = {{d.url, NULL, "unix"},
               {d.url, "unix", "unix"},
               {d.url, "http", "http"},
               {url, NULL, "unix"},
               {url, "http", "unix"}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    segops_options o;
    segops_options_init(&o);
    o.transport = cases[i].transport;
    segops_client *c = NULL;
    segops_error e;
    int rc = segops_open(&c, cases[i].url, &o, &e) || sum_call(c, &e);
    TL_CHECK(rc == 0 && !strcmp(segops_transport_used(c), cases[i].used), "%s with %s: %d %s, used '%s' (want %s)",
             cases[i].url, cases[i].transport ? cases[i].transport : "auto", rc, e.message, segops_transport_used(c),
             cases[i].used);
    segops_close(c);
  }
  /* Forced native on a daemon that offers none here: a clear error at once, not a wait. */
  segops_options o;
  segops_options_init(&o);
  o.transport = "native";
  segops_client *c = NULL;
  segops_error e;
  double t0 = now_s();
  int rc = segops_open(&c, d.url, &o, &e);
  if (!rc) rc = sum_call(c, &e);
  TL_CHECK(rc == SEGOPS_E_INVALID_ARGUMENT && strstr(e.message, "native") && now_s() - t0 < 5, "native: %d '%s'", rc,
           e.message);
  segops_close(c);
  TL_CHECK(tl_daemon_stop(&d), "segopsd did not exit 0");
  rmdir(dir);
}

/* A client that never reached a daemon (a forgotten daemon, a typo): with the default 60 s timeout
 * the call fails within about a second (2 s here: a loaded CI machine), naming the URL, why, and
 * how to start one. */
static void first_contact_fails(const char *url, const char *why, const char *why2, double wait_s) {
  segops_client *c = NULL;
  segops_options o;
  segops_options_init(&o);
  o.wait_s = wait_s;
  segops_error e;
  TL_CHECK(segops_open(&c, url, &o, &e) == 0, "open %s: %s", url, e.message);
  double t0 = now_s();
  int rc = sum_call(c, &e);
  double took = now_s() - t0;
  TL_CHECK(rc == SEGOPS_E_CONNECTION && strstr(e.message, url) && strstr(e.message, why) &&
               (!why2 || strstr(e.message, why2)) && strstr(e.message, "segopsd") &&
               strstr(e.message, "SEGOPS_WAIT_S") && strstr(e.message, "no segops daemon answered"),
           "%s: %d '%s' (wants '%s')", url, rc, e.message, why);
  if (wait_s > 0)
    TL_CHECK(took > wait_s - 0.3 && took < wait_s + 1.5, "%s: gave up after %.2f s, told to wait %.2g s", url, took,
             wait_s);
  else
    TL_CHECK(took < 2.0, "%s: gave up after %.2f s (never reached a daemon: about 1 s)", url, took);
  segops_close(c);
}

static int log_lines;
static char log_last[1024];
static void on_log(void *user, int level, const char *message) {
  (void)user;
  log_lines++;
  TL_CHECK(level == SEGOPS_LOG_LEVEL_WARNING, "log level %d", level);
  snprintf(log_last, sizeof log_last, "%s", message);
}

/* No daemon: first contact fails fast; wait_s waits; a daemon the client reached is waited for until
 * the timeout, said once on the log after a second, then the error names it and the time spent. */
static void nobody_there(void) {
  first_contact_fails("http://127.0.0.1:1", "connection refused", NULL, 0);
  first_contact_fails("http://segops-test.invalid:8080", "does not resolve", "segops-test.invalid", 0);
  first_contact_fails("unix:///nonexistent/segops.sock", "does not exist", "/nonexistent/segops.sock", 0);
  first_contact_fails("http://127.0.0.1:1", "connection refused", NULL, 2.0);

  tl_daemon d;
  const char *args[] = {"--backend", "cpu", "--threads", "1", NULL};
  if (!tl_daemon_start(&d, "127.0.0.1:0", args)) {
    TL_CHECK(0, "segopsd did not start");
    return;
  }
  segops_client *c = NULL;
  segops_options o;
  segops_options_init(&o);
  o.timeout_s = 2.5;
  o.transport = "http";
  o.log = on_log;
  segops_error e;
  TL_CHECK(segops_open(&c, d.url, &o, &e) == 0, "open: %s", e.message);
  TL_CHECK(sum_call(c, &e) == 0, "reached: %s", e.message);
  TL_CHECK(log_lines == 0, "a call that did not wait logged '%s'", log_last);
  TL_CHECK(tl_daemon_stop(&d), "segopsd did not exit 0");
  double t0 = now_s();
  int rc = sum_call(c, &e);
  double took = now_s() - t0;
  TL_CHECK(rc == SEGOPS_E_CONNECTION && strstr(e.message, d.url) && strstr(e.message, "no daemon took the call"),
           "gone: %d '%s'", rc, e.message);
  TL_CHECK(took > 2.0 && took < 4.5, "gone: gave up after %.2f s with a 2.5 s timeout", took);
  TL_CHECK(log_lines == 1 && strstr(log_last, "waiting for") && strstr(log_last, d.url) && strstr(log_last, "until"),
           "waiting: %d lines, the last '%s'", log_lines, log_last);
  segops_close(c);
}

/* Feature channels: the outputs foretold for (N, *F) inputs up to rank 6, as the daemon answers them
 * (the transports check every answer against this, and the native channel sizes outputs from it). */
static void feature_shapes(void) {
  segops_error e;
  int32_t idx[4] = {0, 1, 1, 0};
  double buf[4 * 2 * 3 * 2] = {0};
  segops_array ai = {SEGOPS_I32, 1, {4}, idx, 0};
  segops_array x23 = {SEGOPS_F32, 3, {4, 2, 3}, buf, 0}, x16 = {SEGOPS_F32, 2, {4, 16}, buf, 0};
  segops_array x6 = {SEGOPS_F64, 6, {4, 1, 2, 1, 3, 2}, buf, 0};
  segops_array ys = {SEGOPS_F32, 1, {2}, buf, 0}, ysf = {SEGOPS_F32, 3, {2, 2, 3}, buf, 0};
  segops_array g23 = {SEGOPS_F32, 3, {4, 2, 3}, buf, 0}, gs23 = {SEGOPS_F32, 3, {2, 2, 3}, buf, 0};
  segops_array sh[3];
  struct {
    int fn;
    const segops_array *in[5];
    int out; /* which output */
    int ndim;
    int64_t shape[6];
  } cases[] = {
      {SEGOPS_FN_SEGMENTED_SUM_FORWARD, {&x23}, 0, 3, {2, 2, 3}},
      {SEGOPS_FN_SEGMENTED_SUM_FORWARD, {&x16}, 0, 2, {2, 16}},
      {SEGOPS_FN_SEGMENTED_SUM_FORWARD, {&x6}, 0, 6, {2, 1, 2, 1, 3, 2}},
      {SEGOPS_FN_SEGMENTED_MEAN_FORWARD, {&x16}, 0, 2, {2, 16}},
      {SEGOPS_FN_SEGMENTED_DOT_FORWARD, {&x23, &x23}, 0, 1, {2}},
      {SEGOPS_FN_SEGMENTED_MUL_FORWARD, {&x23, &ys}, 0, 3, {4, 2, 3}},
      {SEGOPS_FN_SEGMENTED_MUL_BACKWARD, {&g23, &x23, &ys}, 1, 1, {2}},
      {SEGOPS_FN_SEGMENTED_MUL_BACKWARD, {&g23, &x23, &ysf}, 1, 3, {2, 2, 3}},
      {SEGOPS_FN_SEGMENTED_SUM_BACKWARD, {&gs23, NULL}, 0, 3, {4, 2, 3}},
  };
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    memset(sh, 0, sizeof sh);
    int rc = segops_output_shapes(cases[k].fn, cases[k].in, &ai, 2, 1u << cases[k].out, sh, &e);
    const segops_array *o = &sh[cases[k].out];
    size_t count = 1;
    for (int d = 0; d < cases[k].ndim; d++) count *= (size_t)cases[k].shape[d];
    int same = rc == SEGOPS_OK && o->ndim == cases[k].ndim &&
               o->nbytes == count * (cases[k].in[0]->dtype == SEGOPS_F32 ? 4 : 8);
    for (int d = 0; same && d < cases[k].ndim; d++) same = o->shape[d] == cases[k].shape[d];
    TL_CHECK(same, "feature case %zu (%s %s): rc %d ndim %d shape[0..1] %lld %lld: %s", k, segops_fn_op(cases[k].fn),
             segops_fn_pass(cases[k].fn), rc, o->ndim, (long long)o->shape[0], (long long)o->shape[1],
             rc ? e.message : "");
  }
}

int main(void) {
  tables();
  opening();
  feature_shapes();
  segops_client *local = NULL;
  segops_error e;
  TL_CHECK(segops_open(&local, "local", NULL, &e) == 0, "open local: %s", e.message);
  bad_calls(local);
  memory(local);
  TL_CHECK(sum_call(local, &e) == 0 && !strcmp(segops_transport_used(local), "local"), "local: %s", e.message);
  with_daemon(local);
  transports();
  nobody_there();
  segops_close(local);
  return tl_summary("test_lib_api");
}

/* test_server_units.c: unit tests of the daemon's pure helpers: Content-Type and Accept
 * negotiation, bearer-token comparison, and the configuration table (flags, environment, limits,
 * the backends' and the core's rows). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "cuda_settings.h"
#include "http.h"

static int failures;
#define CHECK(cond)                                                            \
  do {                                                                         \
    if (!(cond)) {                                                             \
      fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
      failures++;                                                              \
    }                                                                          \
  } while (0)

static void test_content_type(void) {
  CHECK(segops_http_content_type("application/msgpack") == SEGOPS_ENC_MSGPACK);
  CHECK(segops_http_content_type("Application/X-MsgPack") == SEGOPS_ENC_MSGPACK);
  CHECK(segops_http_content_type("application/vnd.msgpack; v=1") == SEGOPS_ENC_MSGPACK);
  CHECK(segops_http_content_type("application/json") == SEGOPS_ENC_JSON);
  CHECK(segops_http_content_type(" application/json ; charset=UTF-8") == SEGOPS_ENC_JSON);
  CHECK(segops_http_content_type("application/json; charset=\"utf-8\"") == SEGOPS_ENC_JSON);
  CHECK(segops_http_content_type("application/json; charset=latin-1") == -1);
  CHECK(segops_http_content_type("application/jsonx") == -1);
  CHECK(segops_http_content_type("text/plain") == -1);
  CHECK(segops_http_content_type("*/*") == -1);
  CHECK(segops_http_content_type("") == -1);
  CHECK(segops_http_content_type(NULL) == -1);
}

static void test_accept(void) {
  const char *t = NULL;
  CHECK(segops_http_accept(NULL, SEGOPS_ENC_JSON, &t) == SEGOPS_ENC_JSON && !strcmp(t, "application/json"));
  CHECK(segops_http_accept("", SEGOPS_ENC_MSGPACK, &t) == SEGOPS_ENC_MSGPACK && !strcmp(t, "application/msgpack"));
  CHECK(segops_http_accept("*/*", SEGOPS_ENC_MSGPACK, &t) == SEGOPS_ENC_MSGPACK);
  CHECK(segops_http_accept("application/*", SEGOPS_ENC_JSON, &t) == SEGOPS_ENC_JSON);
  CHECK(segops_http_accept("application/json", SEGOPS_ENC_MSGPACK, &t) == SEGOPS_ENC_JSON);
  CHECK(segops_http_accept("application/x-msgpack", SEGOPS_ENC_JSON, &t) == SEGOPS_ENC_MSGPACK &&
        !strcmp(t, "application/x-msgpack"));
  CHECK(segops_http_accept("application/json;q=0.4, application/msgpack;q=0.9", SEGOPS_ENC_JSON, &t) ==
        SEGOPS_ENC_MSGPACK);
  CHECK(segops_http_accept("application/json, application/msgpack", SEGOPS_ENC_MSGPACK, &t) == SEGOPS_ENC_MSGPACK);
  CHECK(segops_http_accept("text/html", SEGOPS_ENC_JSON, &t) == -1);
  CHECK(segops_http_accept("application/json;q=0, */*;q=0.1", SEGOPS_ENC_JSON, &t) == SEGOPS_ENC_MSGPACK);
  CHECK(segops_http_accept("*/*;q=0", SEGOPS_ENC_JSON, &t) == -1);
  CHECK(segops_http_accept("application/json;q=bogus", SEGOPS_ENC_JSON, &t) == -1);
}

static void test_auth(void) {
  CHECK(segops_http_auth_ok(NULL, NULL));
  CHECK(segops_http_auth_ok("anything", NULL));
  CHECK(!segops_http_auth_ok(NULL, "tok"));
  CHECK(segops_http_auth_ok("Bearer tok", "tok"));
  CHECK(segops_http_auth_ok("bearer  tok ", "tok"));
  CHECK(!segops_http_auth_ok("Bearer to", "tok"));
  CHECK(!segops_http_auth_ok("Bearer tokk", "tok"));
  CHECK(!segops_http_auth_ok("Bearer tol", "tok"));
  CHECK(!segops_http_auth_ok("Basic tok", "tok"));
  CHECK(!segops_http_auth_ok("Bearer ", "tok"));
}

static int load(segops_config *c, int argc, char **argv) {
  char err[256] = "";
  int rc = segops_config_load(c, argc, argv, err, sizeof err);
  if (rc == SEGOPS_CONFIG_ERROR) CHECK(err[0] != 0);
  return rc;
}

static void test_config(void) {
  segops_config c;
  char *a0[] = {"segopsd"};
  unsetenv("SEGOPS_LISTEN");
  unsetenv("SEGOPS_MAX_BODY_BYTES");
  CHECK(load(&c, 1, a0) == SEGOPS_CONFIG_OK);
  CHECK(!strcmp(c.listen_host, "127.0.0.1") && c.listen_port == 8080);
  CHECK(c.max_body_bytes == 256LL << 20 && c.max_elements == 1LL << 26 && c.max_segments == c.max_elements);
  CHECK(c.max_connections == 1024 && c.idle_timeout_s == 30 && c.request_timeout_s == 60);
  CHECK(!strcmp(c.backend, "auto") && c.token == NULL);
  segops_config_free(&c);

  char *a1[] = {"segopsd", "--listen", "[::1]:0", "--max-body-bytes=4k", "--devices", "0,2", "--backend", "cpu"};
  CHECK(load(&c, 8, a1) == SEGOPS_CONFIG_OK);
  CHECK(!strcmp(c.listen_host, "::1") && c.listen_port == 0 && c.max_body_bytes == 4096);
  CHECK(c.n_devices == 2 && c.devices[1] == 2 && !strcmp(c.backend, "cpu"));
  segops_config_free(&c);

  /* Several listeners: comma-separated and repeated; the variable replaces the default and the
   * first flag replaces the variable. */
  char *a3[] = {"segopsd",       "--listen", "unix:/tmp/a.sock,127.0.0.1:0", "--listen=unix:///tmp/b.sock",
                "--socket-mode", "600"};
  setenv("SEGOPS_LISTEN", "10.0.0.1:9", 1);
  CHECK(load(&c, 6, a3) == SEGOPS_CONFIG_OK);
  CHECK(c.n_listen == 3 && c.listen[0].is_unix && !strcmp(c.listen[0].path, "/tmp/a.sock"));
  CHECK(!c.listen[1].is_unix && !strcmp(c.listen[1].host, "127.0.0.1") && c.listen[1].port == 0);
  CHECK(c.listen[2].is_unix && !strcmp(c.listen[2].path, "/tmp/b.sock") && c.socket_mode == 0600);
  CHECK(!strcmp(c.listen_host, "127.0.0.1") && c.listen_port == 0);
  segops_config_free(&c);
  /* A non-loopback address needs a token or SEGOPS_ALLOW_UNAUTHENTICATED. */
  CHECK(load(&c, 1, a0) == SEGOPS_CONFIG_ERROR);
  segops_config_free(&c);
  setenv("SEGOPS_ALLOW_UNAUTHENTICATED", "1", 1);
  CHECK(load(&c, 1, a0) == SEGOPS_CONFIG_OK && c.allow_unauthenticated);
  CHECK(c.n_listen == 1 && !strcmp(c.listen[0].host, "10.0.0.1") && c.listen[0].port == 9);
  CHECK(c.socket_mode == 0660 && c.max_shm_bytes == 1LL << 30);
  segops_config_free(&c);
  unsetenv("SEGOPS_ALLOW_UNAUTHENTICATED");
  setenv("SEGOPS_TOKEN", "unit-test-token", 1);
  CHECK(load(&c, 1, a0) == SEGOPS_CONFIG_OK);
  segops_config_free(&c);
  unsetenv("SEGOPS_TOKEN");
  unsetenv("SEGOPS_LISTEN");
  char *a4[] = {"segopsd", "--listen", "unix:rel.sock"};
  CHECK(load(&c, 3, a4) == SEGOPS_CONFIG_ERROR);
  segops_config_free(&c);

  setenv("SEGOPS_MAX_BODY_BYTES", "1M", 1);
  setenv("SEGOPS_TOKEN", " envtoken\n", 1); /* trimmed */
  CHECK(load(&c, 1, a0) == SEGOPS_CONFIG_OK);
  CHECK(c.max_body_bytes == 1 << 20 && c.token && !strcmp(c.token, "envtoken"));
  segops_config_free(&c);
  char *a2[] = {"segopsd", "--max-body-bytes", "2M"};
  CHECK(load(&c, 3, a2) == SEGOPS_CONFIG_OK && c.max_body_bytes == 2 << 20); /* the flag wins */
  segops_config_free(&c);
  unsetenv("SEGOPS_MAX_BODY_BYTES");
  unsetenv("SEGOPS_TOKEN");

  char *bad[][3] = {{"segopsd", "--listen", "nocolon"},
                    {"segopsd", "--listen", "h:70000"},
                    {"segopsd", "--backend", "tpu"},
                    {"segopsd", "--max-body-bytes", "-1"},
                    {"segopsd", "--max-elements", "9999999999"},
                    {"segopsd", "--request-timeout", "0"},
                    {"segopsd", "--log-level", "loud"},
                    {"segopsd", "--nope", "1"},
                    {"segopsd", "--token-file", "/nonexistent/token"}};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    CHECK(load(&c, 3, bad[i]) == SEGOPS_CONFIG_ERROR);
    segops_config_free(&c);
  }
  char *missing[] = {"segopsd", "--listen"};
  CHECK(load(&c, 2, missing) == SEGOPS_CONFIG_ERROR);
  segops_config_free(&c);
}

/* The table's rows beyond the daemon's own: the backends' and the core's values start as their
 * defaults (so a program that never parses gets what segopsd gets), every row prints and parses
 * back, and messages name the variable and the option. */
static void test_table(void) {
  const segops_cuda_conf_t cuda0 = segops_cuda_conf;
  const segops_cpu_conf_t cpu0 = segops_cpu_conf;
  segops_config c;
  char *a0[] = {"segopsd"};
  char err[512] = "";
  CHECK(load(&c, 1, a0) == SEGOPS_CONFIG_OK);
  CHECK(memcmp(&cuda0, &segops_cuda_conf, sizeof cuda0) == 0 && memcmp(&cpu0, &segops_cpu_conf, sizeof cpu0) == 0);
  CHECK(segops_cuda_conf.lanes == 4 && segops_cuda_conf.layout_cache_bytes == -1 && c.max_segments == c.max_elements);
  /* Every row's value as text parses back to the same value. */
  segops_settings_group *const *groups = segops_config_groups();
  int rows = 0;
  for (segops_settings_group *const *g = groups; *g; g++)
    for (size_t k = 0; k < (*g)->n_rows; k++, rows++) {
      const segops_setting *row = &(*g)->rows[k];
      char before[512], after[512];
      segops_settings_text(*g, row, before, sizeof before);
      if (row->flags & SEGOPS_SET_SECRET) continue;
      int rc = segops_settings_apply(*g, row, before, 0, err, sizeof err);
      CHECK(rc == 0);
      if (rc) fprintf(stderr, "--%s '%s': %s\n", row->name, before, err);
      CHECK(strcmp(before, segops_settings_text(*g, row, after, sizeof after)) == 0);
    }
  CHECK(rows >= 30);
  segops_config_free(&c);

  setenv("SEGOPS_CUDA_LANES", "3", 1);
  setenv("SEGOPS_IDX_CACHE_BYTES", "1M", 1);
  char *a1[] = {"segopsd", "--cpu-isa", "baseline", "--log-level=warning", "--max-segments", "7"};
  CHECK(load(&c, 6, a1) == SEGOPS_CONFIG_OK);
  CHECK(segops_cuda_conf.lanes == 3 && segops_cpu_conf.isa == SEGOPS_CPU_ISA_BASELINE && c.log_level == 1);
  CHECK(c.max_segments == 7);
  const segops_setting *idx = segops_settings_find(groups, "idx-cache-bytes", 15, NULL);
  CHECK(idx && segops_settings_int(&segops_idx_cache_settings, idx) == 1 << 20);
  segops_config_free(&c);
  setenv("SEGOPS_CUDA_LANES", "99", 1);
  CHECK(segops_config_load(&c, 1, a0, err, sizeof err) == SEGOPS_CONFIG_ERROR);
  CHECK(strstr(err, "SEGOPS_CUDA_LANES") && strstr(err, "--cuda-lanes") && strstr(err, "1 to 16"));
  segops_config_free(&c);
  unsetenv("SEGOPS_CUDA_LANES");
  unsetenv("SEGOPS_IDX_CACHE_BYTES");
  char *secret[] = {"segopsd", "--token", "abcdefghij"}; /* environment only: never on a command line */
  CHECK(load(&c, 3, secret) == SEGOPS_CONFIG_ERROR);
  segops_config_free(&c);
  CHECK(segops_settings_set(groups, "cuda-wait", "block", err, sizeof err) == 0 &&
        segops_cuda_conf.wait == SEGOPS_CUDA_WAIT_BLOCK);
  CHECK(segops_settings_set(groups, "cuda-wait", "sleepy", err, sizeof err) != 0 && strstr(err, "--cuda-wait"));
  CHECK(segops_settings_set(groups, "no-such-thing", "1", err, sizeof err) != 0);
  CHECK(load(&c, 1, a0) == SEGOPS_CONFIG_OK && segops_cuda_conf.wait == SEGOPS_CUDA_WAIT_AUTO); /* back to defaults */
  segops_config_free(&c);
}

int main(void) {
  test_table();
  test_content_type();
  test_accept();
  test_auth();
  test_config();
  if (failures)
    fprintf(stderr, "%d check(s) failed\n", failures);
  else
    printf("server units: ok\n");
  return failures ? 1 : 0;
}

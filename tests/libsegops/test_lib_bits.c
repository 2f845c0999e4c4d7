/* test_lib_bits.c: every function, both dtypes, both layouts, sorted and unsorted idx (int32 and
 * int64), empty segments and N = 0, through libsegops over HTTP to the real segopsd (CPU backend),
 * over its native channel ("auto" on this host) and in-process ("local"): the same dtype, shape and
 * bytes, whether outputs are allocated by the
 * library or given by the caller (unaligned too), all of them asked for or one. Invalid calls get
 * the daemon's code, status and message, the same ones from "local".
 * With --dump FILE the HTTP calls and their answers are written (a stream of msgpack maps) for
 * test_lib_python.py, which sends the same calls through the Python client. */
#include <msgpack.h>
#include <msgpack/fbuffer.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib_test.h"

typedef struct {
  segops_client *http, *local1, *local2, *autoc;
  msgpack_packer *dump;
  int n_dumped;
} clients;

static bool same_array(const segops_array *a, const segops_array *b) {
  return a->dtype == b->dtype && a->ndim == b->ndim && !memcmp(a->shape, b->shape, sizeof(int64_t) * (size_t)a->ndim) &&
         a->nbytes == b->nbytes && (a->nbytes == 0 || !memcmp(a->data, b->data, a->nbytes));
}

static void pack_str(msgpack_packer *pk, const char *s) {
  msgpack_pack_str(pk, strlen(s));
  msgpack_pack_str_body(pk, s, strlen(s));
}

static void pack_tensor(msgpack_packer *pk, const char *name, const segops_array *a) {
  pack_str(pk, name);
  msgpack_pack_map(pk, 3);
  pack_str(pk, "dtype");
  pack_str(pk, segops_dtype_name(a->dtype));
  pack_str(pk, "shape");
  msgpack_pack_array(pk, (size_t)a->ndim);
  for (int i = 0; i < a->ndim; i++) msgpack_pack_int64(pk, a->shape[i]);
  pack_str(pk, "data");
  size_t nb = tl_nbytes(a);
  msgpack_pack_bin(pk, nb);
  if (nb) msgpack_pack_bin_body(pk, a->data, nb);
}

static void dump_call(msgpack_packer *pk, const tl_call *c, const segops_array *outs) {
  const segops_fn_desc *r = c->row;
  msgpack_pack_map(pk, 5);
  pack_str(pk, "op");
  pack_str(pk, segops_fn_op(c->fn));
  pack_str(pk, "pass");
  pack_str(pk, segops_fn_pass(c->fn));
  int given = 1;
  for (int k = 0; k < r->n_in; k++) given += c->given[k];
  pack_str(pk, "args");
  msgpack_pack_map(pk, (size_t)given);
  for (int k = 0; k < r->n_in; k++)
    if (c->given[k]) pack_tensor(pk, r->in[k].name, &c->in[k]);
  pack_tensor(pk, "idx", &c->idx);
  pack_str(pk, "num_segments");
  msgpack_pack_int64(pk, c->s);
  pack_str(pk, "outputs");
  msgpack_pack_map(pk, (size_t)r->n_out);
  for (int o = 0; o < r->n_out; o++) pack_tensor(pk, r->out[o].name, &outs[o]);
}

static void free_outs(segops_client *cl, segops_array *outs, int n) {
  for (int o = 0; o < n; o++) segops_free(cl, outs[o].data);
}

/* One call on every client; the answers must agree bit for bit. */
static void run_case(clients *cs, tl_call *c, const char *label) {
  const int n_out = c->row->n_out;
  segops_array ref[SEGOPS_MAX_OUTPUTS] = {0}, got[SEGOPS_MAX_OUTPUTS] = {0};
  segops_error e;
  int rc = segops_run(cs->http, c->fn, c->inp, &c->idx, c->s, 0, ref, &e);
  TL_CHECK(rc == SEGOPS_OK, "%s http: %d %s", label, rc, e.message);
  if (rc) return;
  if (cs->dump) {
    dump_call(cs->dump, c, ref);
    cs->n_dumped++;
  }
  /* What segops_output_shapes foretells is what came. */
  segops_array shapes[SEGOPS_MAX_OUTPUTS] = {{0}};
  rc = segops_output_shapes(c->fn, c->inp, &c->idx, c->s, 0, shapes, &e);
  for (int o = 0; o < n_out; o++)
    TL_CHECK(rc == SEGOPS_OK && shapes[o].dtype == ref[o].dtype && shapes[o].ndim == ref[o].ndim &&
                 !memcmp(shapes[o].shape, ref[o].shape, sizeof(int64_t) * (size_t)ref[o].ndim) &&
                 shapes[o].nbytes == ref[o].nbytes && !shapes[o].data,
             "%s: segops_output_shapes of %s: %d %s", label, c->row->out[o].name, rc, rc ? e.message : "differs");
  segops_client *others[3] = {cs->local1, cs->local2, cs->autoc};
  const char *names[3] = {"local (1 thread)", "local (3 threads)", "auto (native)"};
  for (int l = 0; l < 3; l++) {
    /* Caller memory for the first output, misaligned by 8 bytes; the library's for the others. */
    unsigned char *mine = malloc(ref[0].nbytes + 72);
    memset(got, 0, sizeof got);
    got[0].data = mine + 8;
    got[0].nbytes = ref[0].nbytes + 64;
    rc = segops_run(others[l], c->fn, c->inp, &c->idx, c->s, 0, got, &e);
    TL_CHECK(rc == SEGOPS_OK, "%s %s: %d %s", label, names[l], rc, e.message);
    for (int o = 0; o < n_out && !rc; o++) {
      TL_CHECK(same_array(&ref[o], &got[o]), "%s %s: %s differs from HTTP's", label, names[l], c->row->out[o].name);
      if (o > 0) segops_free(others[l], got[o].data);
    }
    TL_CHECK(got[0].data == mine + 8, "%s: the caller's output memory was replaced", label);
    free(mine);
  }
  /* One output at a time (the daemon computes only that one): the same bytes. */
  for (int o = 0; n_out > 1 && o < n_out; o++) {
    segops_array one[SEGOPS_MAX_OUTPUTS] = {0};
    rc = segops_run(cs->http, c->fn, c->inp, &c->idx, c->s, 1u << o, one, &e);
    TL_CHECK(rc == SEGOPS_OK && same_array(&ref[o], &one[o]), "%s http: output %s alone: %d %s", label,
             c->row->out[o].name, rc, rc ? e.message : "different bytes");
    for (int k = 0; k < n_out; k++)
      TL_CHECK(k == o || one[k].data == NULL, "%s: an output not asked for was set", label);
    segops_free(cs->http, one[o].data);
  }
  free_outs(cs->http, ref, n_out);
}

static void all_functions(clients *cs) {
  tl_rng r = {42};
  struct {
    int64_t n, s;
    bool shuffle, idx64;
  } layouts[] = {
      {37, 7, false, false}, {200, 13, true, true}, {0, 0, false, false}, {0, 4, false, false}, {1, 1, true, false}};
  for (int fn = 0; fn < SEGOPS_FN_COUNT; fn++)
    for (int dt = 0; dt < 2; dt++)
      for (int w = 1; w <= 3; w += 2) {
        if (w == 1 && tl_row(fn)->vec3_only) continue;
        for (size_t l = 0; l < sizeof layouts / sizeof layouts[0]; l++) {
          tl_call c;
          tl_call_make(&c, fn, (segops_dtype)dt, w, layouts[l].n, layouts[l].s, layouts[l].shuffle, layouts[l].idx64,
                       &r);
          char label[96];
          snprintf(label, sizeof label, "%s %s %s w%d n%lld", segops_fn_op(fn), segops_fn_pass(fn),
                   dt ? "float64" : "float32", c.width, (long long)c.n);
          run_case(cs, &c, label);
          tl_call_free(&c);
        }
      }
  /* Large enough for the backends' parallel paths (several threads, chunks): still the same bits. */
  for (int fn = 0; fn < SEGOPS_FN_COUNT; fn++) {
    tl_call c;
    tl_call_make(&c, fn, SEGOPS_F64, 3, 40000, 900, fn % 2, false, &r);
    run_case(cs, &c, "large");
    tl_call_free(&c);
  }
}

/* ---- errors: the daemon's code and message, and "local" gives the same ---- */

static void same_error(clients *cs, int fn, const segops_array *const *in, const segops_array *idx, int64_t s,
                       int want_code, const char *want_msg) {
  segops_array outs[SEGOPS_MAX_OUTPUTS] = {0};
  segops_error eh, el;
  int rh = segops_run(cs->http, fn, in, idx, s, 0, outs, &eh);
  int rl = segops_run(cs->local1, fn, in, idx, s, 0, outs, &el);
  TL_CHECK(rh == want_code && eh.code == want_code, "http: code %d, want %d (%s)", rh, want_code, eh.message);
  TL_CHECK(
      rh != SEGOPS_OK && eh.http_status == segops_err_status(want_code) && !strcmp(eh.name, segops_err_name(want_code)),
      "http: status %d name %s for %s", eh.http_status, eh.name, eh.message);
  TL_CHECK(rl == rh && !strcmp(el.message, eh.message), "local says %d '%s', the daemon %d '%s'", rl, el.message, rh,
           eh.message);
  if (want_msg) TL_CHECK(!strcmp(eh.message, want_msg), "message '%s', want '%s'", eh.message, want_msg);
  for (int o = 0; o < SEGOPS_MAX_OUTPUTS; o++) TL_CHECK(!outs[o].data, "an output was left allocated after an error");
}

static void errors(clients *cs) {
  double x[6] = {1, 2, 3, 4, 5, 6}, y[3] = {1, 2, 3};
  int32_t idx[6] = {0, 0, 1, 1, 1, 2}, bad_idx[6] = {0, 0, 1, 1, 1, 7};
  float xf[6] = {0};
  segops_array ax = {SEGOPS_F64, 1, {6}, x, 0}, ay = {SEGOPS_F64, 1, {3}, y, 0};
  segops_array aidx = {SEGOPS_I32, 1, {6}, idx, 0}, abad = {SEGOPS_I32, 1, {6}, bad_idx, 0};
  segops_array axf = {SEGOPS_F32, 1, {6}, xf, 0}, ax2 = {SEGOPS_F64, 2, {3, 2}, x, 0};
  segops_array aidx2d = {SEGOPS_I32, 2, {3, 2}, idx, 0}, aidxf = {SEGOPS_F64, 1, {6}, x, 0};
  const segops_array *mul[2] = {&ax, &ay}, *mixed[2] = {&axf, &ay}, *sum[1] = {&ax}, *sum2[1] = {&ax2};
  const segops_array *none[2] = {NULL, &ay};
  same_error(cs, SEGOPS_FN_SEGMENTED_MUL_FORWARD, mul, &aidx, 4, SEGOPS_E_INVALID_ARGUMENT,
             "segmented_mul: num_segments (4) must equal y.shape[0] (3)");
  same_error(cs, SEGOPS_FN_SEGMENTED_SUM_FORWARD, sum, &abad, 3, SEGOPS_E_INVALID_ARGUMENT,
             "segmented_sum: idx[5] = 7 is out of range [0, num_segments = 3)");
  same_error(cs, SEGOPS_FN_SEGMENTED_SUM_FORWARD, sum, &aidx, -1, SEGOPS_E_INVALID_ARGUMENT, NULL);
  same_error(cs, SEGOPS_FN_SEGMENTED_MUL_FORWARD, mixed, &aidx, 3, SEGOPS_E_INVALID_ARGUMENT, NULL);
  same_error(cs, SEGOPS_FN_SEGMENTED_SUM_FORWARD, sum2, &aidx2d, 3, SEGOPS_E_INVALID_ARGUMENT, NULL);
  same_error(cs, SEGOPS_FN_SEGMENTED_SUM_FORWARD, sum2, &aidx, 3, SEGOPS_E_INVALID_ARGUMENT, NULL);
  same_error(cs, SEGOPS_FN_SEGMENTED_SUM_FORWARD, sum, &aidxf, 3, SEGOPS_E_INVALID_ARGUMENT, NULL);
  same_error(cs, SEGOPS_FN_SEGMENTED_SUM_FORWARD, sum, NULL, 3, SEGOPS_E_INVALID_ARGUMENT,
             "segmented_sum: idx is required");
  same_error(cs, SEGOPS_FN_SEGMENTED_MUL_FORWARD, none, &aidx, 3, SEGOPS_E_INVALID_ARGUMENT, NULL);
  /* Over a limit of the daemon: 413 too_large, its message verbatim. */
  segops_array out = {0};
  segops_error e;
  int rc = segops_segmented_sum_forward(cs->http, &ax, &aidx, (int64_t)1 << 40, &out, &e);
  TL_CHECK(rc == SEGOPS_E_TOO_LARGE && e.http_status == 413 && !strcmp(e.name, "too_large") &&
               !strncmp(e.message, "segmented_sum: num_segments", 27),
           "2^40 segments: %d %d %s '%s'", rc, e.http_status, e.name, e.message);
}

/* "auto" on a daemon on this host: its native channel (the daemon serves one by default). */
static void auto_transport(clients *cs) {
  double x[2] = {1, 2};
  int32_t idx[2] = {0, 0};
  segops_array ax = {SEGOPS_F64, 1, {2}, x, 0}, ai = {SEGOPS_I32, 1, {2}, idx, 0};
  double sum = 0;
  segops_array out = {.data = &sum, .nbytes = sizeof sum};
  segops_error e;
  int rc = segops_segmented_sum_forward(cs->autoc, &ax, &ai, 1, &out, &e);
  TL_CHECK(rc == SEGOPS_OK && sum == 3 && out.ndim == 1 && out.shape[0] == 1, "auto: %d %s", rc, e.message);
  TL_CHECK(!strcmp(segops_transport_used(cs->autoc), "native"), "auto used %s", segops_transport_used(cs->autoc));
  TL_CHECK(!strcmp(segops_transport_used(cs->local1), "local"), "local used %s", segops_transport_used(cs->local1));
}

int main(int argc, char **argv) {
  const char *dump_path = argc == 3 && !strcmp(argv[1], "--dump") ? argv[2] : NULL;
  const char *args[] = {"--backend", "cpu", "--threads", "2", NULL};
  tl_daemon d;
  if (!tl_daemon_start(&d, "127.0.0.1:0", args)) return 1;
  clients cs = {0};
  segops_options oh, ol1, ol2;
  segops_options_init(&oh);
  oh.transport = "http";
  segops_options_init(&ol1);
  ol1.threads = 1;
  segops_options_init(&ol2);
  ol2.threads = 3;
  segops_error e;
  int rc = segops_open(&cs.http, d.url, &oh, &e) || segops_open(&cs.local1, "local", &ol1, &e) ||
           segops_open(&cs.local2, "local", &ol2, &e) || segops_open(&cs.autoc, d.url, NULL, &e);
  TL_CHECK(rc == 0, "open: %s", e.message);
  TL_CHECK(!rc && !strcmp(segops_transport_used(cs.autoc), ""), "transport used before any call");
  FILE *f = NULL;
  msgpack_packer pk;
  if (dump_path && (f = fopen(dump_path, "wb"))) {
    msgpack_packer_init(&pk, f, msgpack_fbuffer_write);
    cs.dump = &pk; /* a stream of calls, one msgpack map each */
  }
  if (!rc) {
    all_functions(&cs);
    errors(&cs);
    auto_transport(&cs);
  }
  if (f) fclose(f);
  /* all_functions: 24 functions x 2 dtypes x 5 layouts x widths 1 and 3, matvec at 3 only (450); 24 more */
  if (dump_path) TL_CHECK(f && cs.n_dumped == 474, "dumped %d calls to %s", cs.n_dumped, dump_path);
  segops_close(cs.http);
  segops_close(cs.local1);
  segops_close(cs.local2);
  segops_close(cs.autoc);
  TL_CHECK(tl_daemon_stop(&d), "segopsd did not exit 0");
  return tl_summary("test_lib_bits");
}

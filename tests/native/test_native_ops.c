/* test_native_ops.c: every one of the 24 functions over the native channel gives the same bytes as
 * over HTTP from the same daemon: both dtypes, both layouts, idx int32 and int64, inputs copied
 * into the pools or already there, outputs allocated, copied out or written in place, omitted
 * optional inputs and a subset of outputs; and a bad call gets the same error code and message. */
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "native_harness.h"

static const int64_t LENS[] = {500, 1, 3, 200, 2, 1, 50, 1, 1, 100, 0, 0}; /* two empty segments at the end */
#define NSEG ((int64_t)(sizeof LENS / sizeof LENS[0]))

typedef struct {
  segops_array a;
  bool pooled;
} arr;

static segops_mem *MEM;

/* A C-contiguous array of dtype and shape, random values, in the pools or on the heap. */
static segops_array make(segops_dtype dt, int ndim, const int64_t *shape, bool pooled, uint64_t *rng) {
  segops_array a = {dt, ndim, {0}, NULL, 0};
  int64_t n = 1;
  for (int d = 0; d < ndim; d++) n *= (a.shape[d] = shape[d]);
  size_t sz = dt == SEGOPS_F32 || dt == SEGOPS_I32 ? 4 : 8;
  a.nbytes = (size_t)n * sz;
  a.data = pooled ? segops_mem_alloc(MEM, a.nbytes) : malloc(a.nbytes ? a.nbytes : 1);
  for (int64_t i = 0; i < n; i++) {
    double v = nh_uniform(rng) * 3;
    if (dt == SEGOPS_F32) ((float *)a.data)[i] = (float)v;
    if (dt == SEGOPS_F64) ((double *)a.data)[i] = v;
  }
  return a;
}

static void drop(segops_array *a, bool pooled) {
  if (pooled)
    segops_mem_release(MEM, a->data);
  else
    free(a->data);
  a->data = NULL;
}

/* idx of the layout, shuffled, as int32 or int64. */
static segops_array make_idx(int64_t n, bool i64, bool pooled, uint64_t *rng) {
  int32_t *v = malloc((size_t)n * 4 + 4);
  int64_t at = 0;
  for (int64_t s = 0; s < NSEG; s++)
    for (int64_t k = 0; k < LENS[s]; k++) v[at++] = (int32_t)s;
  for (int64_t i = n - 1; i > 0; i--) {
    int64_t j = (int64_t)(nh_rand(rng) % (uint64_t)(i + 1));
    int32_t t = v[i];
    v[i] = v[j];
    v[j] = t;
  }
  int64_t shape[1] = {n};
  segops_array a = make(i64 ? SEGOPS_I64 : SEGOPS_I32, 1, shape, pooled, rng);
  for (int64_t i = 0; i < n; i++) {
    if (i64)
      ((int64_t *)a.data)[i] = v[i];
    else
      ((int32_t *)a.data)[i] = v[i];
  }
  free(v);
  return a;
}

static int dims(segops_shape_kind k, int width, int64_t n, int64_t s, int64_t *shape) {
  return segops_shape_dims(k, width, n, s, shape);
}

/* One case: function fn, dtype, width; variant 0 = everything, heap arrays, outputs allocated;
 * 1 = optional inputs omitted, the last output only, idx int64, arrays in the pools, outputs in
 * place; 2 = heap arrays with the caller's own output buffers (copied out). */
static void run_case(segops_transport *t, const char *url, int fn, segops_dtype dt, int width, int variant,
                     uint64_t *rng) {
  const segops_fn_desc *d = segops_fn((segops_op)(fn / 3), (segops_pass)(fn % 3));
  int64_t n = 0;
  for (int64_t s = 0; s < NSEG; s++) n += LENS[s];
  bool pooled = variant == 1;
  segops_array in[SEGOPS_MAX_INPUTS];
  const segops_array *inp[SEGOPS_MAX_INPUTS] = {0};
  for (int k = 0; k < d->n_in; k++) {
    if (variant == 1 && d->in[k].use != SEGOPS_ARG_REQ) continue;
    int64_t shape[SEGOPS_MAX_NDIM];
    int nd = dims(d->in[k].shape, width, n, NSEG, shape);
    in[k] = make(dt, nd, shape, pooled, rng);
    inp[k] = &in[k];
  }
  segops_array idx = make_idx(n, variant == 1, pooled, rng);
  unsigned want = variant == 1 ? 1u << (d->n_out - 1) : 0;
  /* Without a float input the outputs are float64 (the request's default dtype). */
  bool any_in = false;
  for (int k = 0; k < d->n_in; k++) any_in |= inp[k] != NULL;
  segops_dtype odt = any_in ? dt : SEGOPS_F64;
  segops_array nat[SEGOPS_MAX_OUTPUTS], web[SEGOPS_MAX_OUTPUTS];
  memset(nat, 0, sizeof nat);
  memset(web, 0, sizeof web);
  for (int k = 0; k < d->n_out; k++) {
    int64_t shape[SEGOPS_MAX_NDIM];
    int nd = dims(d->out[k].shape, width, n, NSEG, shape);
    if (variant == 1) nat[k] = make(odt, nd, shape, true, rng);  /* in place */
    if (variant == 2) nat[k] = make(odt, nd, shape, false, rng); /* copied out */
    if (variant == 2) nat[k].nbytes += 16;                       /* room to spare is fine */
  }
  segops_tcall cn, ch;
  nh_tcall(&cn, fn, inp, &idx, NSEG, want, nat);
  nh_tcall(&ch, fn, inp, &idx, NSEG, want, web);
  segops_error e1, e2;
  int r1 = t->vt->call(t, &cn, segops_client_now() + 30, &e1);
  int r2 = nh_http_call(url, &ch, NULL, -1, &e2);
  char what[160];
  snprintf(what, sizeof what, "%s/%s %s width %d variant %d", cn.op, cn.pass, dt == SEGOPS_F32 ? "float32" : "float64",
           width, variant);
  NH_CHECK(r1 == SEGOPS_OK, "%s: native: %s", what, e1.message);
  NH_CHECK(r2 == SEGOPS_OK, "%s: HTTP: %s", what, e2.message);
  for (int k = 0; r1 == SEGOPS_OK && r2 == SEGOPS_OK && k < d->n_out; k++) {
    if (!cn.out[k]) continue;
    NH_CHECK(nat[k].ndim == web[k].ndim && !memcmp(nat[k].shape, web[k].shape, sizeof nat[k].shape),
             "%s: %s: shapes differ", what, d->out[k].name);
    NH_CHECK(nat[k].dtype == web[k].dtype && nat[k].nbytes == web[k].nbytes, "%s: %s: %zu bytes native, %zu HTTP", what,
             d->out[k].name, nat[k].nbytes, web[k].nbytes);
    NH_CHECK(nat[k].nbytes == web[k].nbytes && !memcmp(nat[k].data, web[k].data, web[k].nbytes),
             "%s: %s: the bytes differ", what, d->out[k].name);
  }
  for (int k = 0; k < d->n_out; k++) {
    if (variant == 0 && nat[k].data) segops_mem_release(MEM, nat[k].data); /* allocated by the transport */
    if (variant == 1) drop(&nat[k], true);
    if (variant == 2) drop(&nat[k], false);
    free(web[k].data);
  }
  for (int k = 0; k < d->n_in; k++)
    if (inp[k]) drop(&in[k], pooled);
  drop(&idx, pooled);
}

/* A bad call: native and HTTP give the same code and message. */
static void same_error(segops_transport *t, const char *url, const char *what, int fn, const segops_array *const *in,
                       const segops_array *idx, int64_t s) {
  segops_array o1[3], o2[3];
  memset(o1, 0, sizeof o1);
  memset(o2, 0, sizeof o2);
  segops_tcall c1, c2;
  nh_tcall(&c1, fn, in, idx, s, 0, o1);
  nh_tcall(&c2, fn, in, idx, s, 0, o2);
  segops_error e1, e2;
  int r1 = t->vt->call(t, &c1, segops_client_now() + 30, &e1);
  int r2 = nh_http_call(url, &c2, NULL, -1, &e2);
  NH_CHECK(r1 != SEGOPS_OK && r1 == r2, "%s: native %d, HTTP %d", what, r1, r2);
  if (r1 && r2) {
    NH_CHECK(!strcmp(e1.message, e2.message), "%s: messages differ:\n  native: %s\n  HTTP:   %s", what, e1.message,
             e2.message);
    NH_CHECK(!strcmp(e1.name, e2.name), "%s: codes differ: %s, %s", what, e1.name, e2.name);
  }
}

static void errors(segops_transport *t, const char *url) {
  double x[4] = {1, 2, 3, 4}, m3[6] = {0};
  int32_t bad[4] = {0, 1, 5, 0}, good[4] = {0, 1, 1, 0};
  segops_array ax = {SEGOPS_F64, 1, {4}, x, 0}, ai = {SEGOPS_I32, 1, {4}, bad, 0}, ag = {SEGOPS_I32, 1, {4}, good, 0};
  segops_array ay = {SEGOPS_F64, 1, {3}, x, 0}, xf = {SEGOPS_F32, 1, {4}, x, 0}, v3 = {SEGOPS_F64, 2, {2, 3}, m3, 0};
  const segops_array *in1[1] = {&ax};
  same_error(t, url, "idx out of range", SEGOPS_FN_SEGMENTED_SUM_FORWARD, in1, &ai, 2);
  same_error(t, url, "negative num_segments", SEGOPS_FN_SEGMENTED_SUM_FORWARD, in1, &ag, -1);
  const segops_array *mul[2] = {&ax, &ay};
  same_error(t, url, "y.shape[0] != S", SEGOPS_FN_SEGMENTED_MUL_FORWARD, mul, &ag, 2);
  const segops_array *dot[2] = {&ax, &xf};
  same_error(t, url, "mixed dtypes", SEGOPS_FN_SEGMENTED_DOT_FORWARD, dot, &ag, 2);
  segops_array x2 = {SEGOPS_F64, 2, {4, 1}, x, 0};
  const segops_array *dot2[2] = {&ax, &x2};
  same_error(t, url, "trailing shapes of x and y differ", SEGOPS_FN_SEGMENTED_DOT_FORWARD, dot2, &ag, 2);
  const segops_array *none[1] = {NULL};
  same_error(t, url, "x missing", SEGOPS_FN_SEGMENTED_SUM_FORWARD, none, &ag, 2);
  const segops_array *vv[2] = {&v3, &ax};
  same_error(t, url, "m missing its shape", SEGOPS_FN_SEGMENTED_MATVEC_FORWARD, vv, &ag, 2);
}

/* N = 0: zero-filled outputs of the right shapes, and the empty call itself. */
static void empty(segops_transport *t, const char *url) {
  segops_array ax = {SEGOPS_F64, 1, {0}, NULL, 0}, ai = {SEGOPS_I32, 1, {0}, NULL, 0};
  const segops_array *in[1] = {&ax};
  for (int64_t s = 0; s <= 5; s += 5) {
    segops_array o1[1], o2[1];
    memset(o1, 0, sizeof o1);
    memset(o2, 0, sizeof o2);
    segops_tcall c1, c2;
    nh_tcall(&c1, SEGOPS_FN_SEGMENTED_SUM_FORWARD, in, &ai, s, 0, o1);
    nh_tcall(&c2, SEGOPS_FN_SEGMENTED_SUM_FORWARD, in, &ai, s, 0, o2);
    segops_error e1, e2;
    int r1 = t->vt->call(t, &c1, segops_client_now() + 30, &e1);
    int r2 = nh_http_call(url, &c2, NULL, -1, &e2);
    NH_CHECK(r1 == SEGOPS_OK && r2 == SEGOPS_OK, "N = 0, S = %" PRId64 ": %s / %s", s, e1.message, e2.message);
    NH_CHECK(o1[0].ndim == 1 && o1[0].shape[0] == s && o1[0].nbytes == (size_t)s * 8, "N = 0: shape");
    NH_CHECK(o1[0].nbytes == o2[0].nbytes && !memcmp(o1[0].data, o2[0].data, o1[0].nbytes), "N = 0: bytes");
    segops_mem_release(MEM, o1[0].data);
    free(o2[0].data);
  }
}

int main(void) {
  char dir[160];
  nh_tempdir(dir, sizeof dir);
  nh_daemon d;
  if (nh_daemon_start(&d, dir, false, NULL, NULL) != 0) return nh_exit("native_ops");
  MEM = segops_mem_new();
  NH_CHECK(MEM != NULL, "no memfds here");
  segops_transport *t = nh_native(&d, MEM, NULL, 10);
  uint64_t rng = 42;
  int cases = 0;
  for (int fn = 0; t && fn < SEGOPS_FN_COUNT; fn++) {
    const segops_fn_desc *fd = segops_fn((segops_op)(fn / 3), (segops_pass)(fn % 3));
    for (int dt = SEGOPS_F32; dt <= SEGOPS_F64; dt++)
      for (int width = fd->vec3_only ? 3 : 1; width <= 3; width += 2)
        for (int variant = 0; variant < 3; variant++, cases++)
          run_case(t, d.url, fn, (segops_dtype)dt, width, variant, &rng);
  }
  if (t) {
    errors(t, d.url);
    empty(t, d.url);
    t->vt->close(t);
  }
  printf("%d cases compared\n", cases);
  segops_mem_free_all(MEM);
  nh_daemon_stop(&d, SIGTERM);
  nh_rmtree(dir);
  return nh_exit("native_ops");
}

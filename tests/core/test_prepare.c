/* test_prepare.c: validation and shape inference of core/prepare.c, one case per rule of proto/API.md, Validation
 * that prepare owns. Each refusal must carry the expected code and a message naming the op and
 * the argument; valid requests of every table row must prepare with the right output shapes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "errors.h"
#include "hash.h"
#include "idx_cache.h"
#include "prepare.h"
#include "test_util.h"

static const segops_limits LIM = {.max_elements = 1 << 20, .max_segments = 1 << 20};

/* Storage big enough for any tensor of these tests; contents zero (idx 0 is always in range). */
static _Alignas(64) unsigned char zeros[1 << 16];

static segops_tensor tensor(segops_dtype dt, int ndim, int64_t d0, int64_t d1, int64_t d2) {
  segops_tensor t = {.dtype = dt, .ndim = ndim, .shape = {d0, d1, d2}, .data = zeros};
  uint64_t c = 1; /* unsigned: the overflow case wraps here on purpose, prepare must catch it */
  for (int k = 0; k < ndim; k++) c *= (uint64_t)t.shape[k];
  t.nbytes = (size_t)c * segops_dtype_size(dt);
  return t;
}

static void add_arg(segops_request *r, const char *name, segops_tensor t) {
  r->args[r->nargs].name = name;
  r->args[r->nargs].name_len = strlen(name);
  r->args[r->nargs].t = t;
  r->nargs++;
}

static segops_tensor *arg(segops_request *r, const char *name) {
  for (int k = 0; k < r->nargs; k++)
    if (strcmp(r->args[k].name, name) == 0) return &r->args[k].t;
  return NULL;
}

static void drop_arg(segops_request *r, const char *name) {
  for (int k = 0; k < r->nargs; k++)
    if (strcmp(r->args[k].name, name) == 0) {
      r->args[k] = r->args[--r->nargs];
      return;
    }
}

/* segmented_mul forward, x (5,3) float64, y (4,), idx (5,) int32, num_segments 4: valid. */
static segops_request mul_request(void) {
  segops_request r = {.op = SEGOPS_OP_MUL, .pass = SEGOPS_PASS_FORWARD, .ns_kind = SEGOPS_NS_INT, .ns_value = 4};
  add_arg(&r, "x", tensor(SEGOPS_F64, 2, 5, 3, 0));
  add_arg(&r, "y", tensor(SEGOPS_F64, 1, 4, 0, 0));
  add_arg(&r, "idx", tensor(SEGOPS_I32, 1, 5, 0, 0));
  return r;
}

/* Prepares r and checks the code and that the message names the op and every word in `names`
 * (a NULL-terminated list). */
static void expect_error(const char *what, const segops_request *r, int code, const char *const *names) {
  segops_prepared p;
  char err[512] = "";
  int rc = segops_prepare(r, &LIM, &p, err, sizeof err);
  TU_CHECK(rc == code, "%s: code %d (%s), expected %d", what, rc, err, code);
  const char *op = segops_op_name(r->op);
  TU_CHECK(strncmp(err, op, strlen(op)) == 0, "%s: message '%s' does not start with the op name %s", what, err, op);
  for (int k = 0; names[k]; k++)
    TU_CHECK(strstr(err, names[k]) != NULL, "%s: message '%s' does not name '%s'", what, err, names[k]);
  TU_CHECK(p.idx_buf == NULL && p.out_buf == NULL, "%s: refused request still owns memory", what);
  segops_prepared_free(&p);
}
#define NAMES(...) ((const char *const[]){__VA_ARGS__, NULL})

static void test_rules(void) {
  segops_request r;
  int32_t idx_vals[5];

  r = mul_request();
  add_arg(&r, "z", tensor(SEGOPS_F64, 1, 5, 0, 0));
  expect_error("unknown argument", &r, SEGOPS_E_INVALID_ARGUMENT, NAMES("'z'", "unknown argument"));

  r = mul_request();
  add_arg(&r, "x", tensor(SEGOPS_F64, 2, 5, 3, 0));
  expect_error("duplicate argument", &r, SEGOPS_E_INVALID_ARGUMENT, NAMES("'x'", "more than once"));

  r = mul_request();
  drop_arg(&r, "y");
  expect_error("missing required argument", &r, SEGOPS_E_INVALID_ARGUMENT, NAMES("y", "required"));

  r = mul_request();
  drop_arg(&r, "idx");
  expect_error("missing idx", &r, SEGOPS_E_INVALID_ARGUMENT, NAMES("idx", "required"));

  r = mul_request();
  *arg(&r, "idx") = tensor(SEGOPS_I32, 2, 5, 1, 0);
  expect_error("idx not 1-D", &r, SEGOPS_E_INVALID_ARGUMENT, NAMES("idx", "1-D"));

  r = mul_request();
  *arg(&r, "idx") = tensor(SEGOPS_F32, 1, 5, 0, 0);
  expect_error("idx not integer", &r, SEGOPS_E_INVALID_ARGUMENT, NAMES("idx", "int32 or int64", "float32"));

  int32_t bad[5] = {0, 1, 4, 0, 0};
  r = mul_request();
  arg(&r, "idx")->data = bad;
  expect_error("idx out of range", &r, SEGOPS_E_INVALID_ARGUMENT, NAMES("idx[2] = 4", "out of range", "num_segments"));

  int32_t neg[5] = {0, 0, 0, -1, 1};
  r = mul_request();
  arg(&r, "idx")->data = neg;
  expect_error("idx negative", &r, SEGOPS_E_INVALID_ARGUMENT, NAMES("idx[3] = -1", "out of range"));

  int64_t big64[5] = {0, 1, (int64_t)1 << 32, 2, 3}; /* would wrap to 0 if narrowed unchecked */
  r = mul_request();
  arg(&r, "idx")->dtype = SEGOPS_I64;
  arg(&r, "idx")->data = big64;
  arg(&r, "idx")->nbytes = sizeof big64;
  expect_error("int64 idx out of int32 range", &r, SEGOPS_E_INVALID_ARGUMENT, NAMES("idx[2] = 4294967296"));

  r = mul_request();
  *arg(&r, "x") = tensor(SEGOPS_I32, 2, 5, 3, 0);
  expect_error("float dtype wrong", &r, SEGOPS_E_INVALID_ARGUMENT, NAMES("x", "float32 or float64", "int32"));

  r = mul_request();
  *arg(&r, "y") = tensor(SEGOPS_F32, 1, 4, 0, 0);
  expect_error("mixed dtypes", &r, SEGOPS_E_INVALID_ARGUMENT, NAMES("y", "float32", "x", "float64"));

  r = mul_request();
  *arg(&r, "x") = tensor(SEGOPS_F64, 0, 0, 0, 0);
  expect_error("x of rank 0", &r, SEGOPS_E_INVALID_ARGUMENT, NAMES("x", "(N,*F)", "()"));

  r = mul_request();
  *arg(&r, "y") = tensor(SEGOPS_F64, 2, 4, 2, 0);
  expect_error("y neither (S,) nor (S,*F)", &r, SEGOPS_E_INVALID_ARGUMENT,
               NAMES("y", "(S,) or (S,*F)", "x (5,3)", "(4,2)"));

  r = mul_request();
  *arg(&r, "x") = tensor(SEGOPS_F64, 2, 6, 3, 0);
  expect_error("leading N", &r, SEGOPS_E_INVALID_ARGUMENT, NAMES("x.shape[0] (6)", "idx.shape[0] (5)"));

  r = mul_request();
  *arg(&r, "y") = tensor(SEGOPS_F64, 1, 3, 0, 0);
  expect_error("y.shape[0] != S", &r, SEGOPS_E_INVALID_ARGUMENT, NAMES("y.shape[0] (3)", "num_segments (4)"));
  {
    segops_prepared p;
    char err[512] = "";
    segops_prepare(&r, &LIM, &p, err, sizeof err);
    TU_CHECK(strcmp(err, "segmented_mul: num_segments (4) must equal y.shape[0] (3)") == 0,
             "API.md example message: got '%s'", err);
    segops_prepared_free(&p);
  }

  r = mul_request(); /* y (S,*F) is valid; gg_y must then be (S,*F) too */
  segops_request md = {
      .op = SEGOPS_OP_MUL, .pass = SEGOPS_PASS_DOUBLE_BACKWARD, .ns_kind = SEGOPS_NS_INT, .ns_value = 4};
  add_arg(&md, "gg_y", tensor(SEGOPS_F64, 1, 4, 0, 0));
  add_arg(&md, "g_out", tensor(SEGOPS_F64, 2, 5, 3, 0));
  add_arg(&md, "x", tensor(SEGOPS_F64, 2, 5, 3, 0));
  add_arg(&md, "y", tensor(SEGOPS_F64, 2, 4, 3, 0));
  add_arg(&md, "idx", tensor(SEGOPS_I32, 1, 5, 0, 0));
  expect_error("gg_y (S,) with y (S,*F)", &md, SEGOPS_E_INVALID_ARGUMENT, NAMES("gg_y", "y", "(S,*F)"));

  segops_request mv = {.op = SEGOPS_OP_MATVEC, .pass = SEGOPS_PASS_FORWARD, .ns_kind = SEGOPS_NS_INT, .ns_value = 2};
  add_arg(&mv, "v", tensor(SEGOPS_F32, 2, 5, 3, 0));
  add_arg(&mv, "m", tensor(SEGOPS_F32, 3, 3, 3, 3));
  add_arg(&mv, "idx", tensor(SEGOPS_I32, 1, 5, 0, 0));
  expect_error("m.shape[0] != S", &mv, SEGOPS_E_INVALID_ARGUMENT, NAMES("m.shape[0] (3)", "num_segments (2)"));
  *arg(&mv, "m") = tensor(SEGOPS_F32, 3, 2, 3, 2);
  expect_error("m not (S,3,3)", &mv, SEGOPS_E_INVALID_ARGUMENT, NAMES("m", "(S,3,3)"));
  *arg(&mv, "m") = tensor(SEGOPS_F32, 3, 2, 3, 3);
  *arg(&mv, "v") = tensor(SEGOPS_F32, 1, 5, 0, 0);
  expect_error("matvec v not (N,3)", &mv, SEGOPS_E_INVALID_ARGUMENT, NAMES("v", "(N,3)"));

  segops_request dot = {.op = SEGOPS_OP_DOT, .pass = SEGOPS_PASS_FORWARD, .ns_kind = SEGOPS_NS_INT, .ns_value = 2};
  add_arg(&dot, "x", tensor(SEGOPS_F64, 2, 5, 3, 0));
  add_arg(&dot, "y", tensor(SEGOPS_F64, 1, 5, 0, 0));
  add_arg(&dot, "idx", tensor(SEGOPS_I32, 1, 5, 0, 0));
  expect_error("trailing shapes differ (x (5,3), y (5,))", &dot, SEGOPS_E_INVALID_ARGUMENT,
               NAMES("x (5,3)", "y (5,)", "differ"));
  *arg(&dot, "y") = tensor(SEGOPS_F64, 2, 5, 4, 0);
  expect_error("trailing shapes differ (x (5,3), y (5,4))", &dot, SEGOPS_E_INVALID_ARGUMENT,
               NAMES("x (5,3)", "y (5,4)", "differ"));
  *arg(&dot, "y") = tensor(SEGOPS_F64, 3, 5, 3, 1);
  expect_error("trailing shapes differ (x (5,3), y (5,3,1))", &dot, SEGOPS_E_INVALID_ARGUMENT,
               NAMES("x (5,3)", "y (5,3,1)"));
  segops_request sb = {.op = SEGOPS_OP_SUM, .pass = SEGOPS_PASS_BACKWARD, .ns_kind = SEGOPS_NS_INT, .ns_value = 2};
  add_arg(&sb, "g_out", tensor(SEGOPS_F64, 2, 2, 4, 0));
  add_arg(&sb, "x", tensor(SEGOPS_F64, 2, 5, 3, 0)); /* unread, still validated */
  add_arg(&sb, "idx", tensor(SEGOPS_I32, 1, 5, 0, 0));
  expect_error("g_out (S,4) with x (N,3)", &sb, SEGOPS_E_INVALID_ARGUMENT, NAMES("g_out (2,4)", "x (5,3)"));

  r = mul_request();
  r.ns_kind = SEGOPS_NS_ABSENT;
  expect_error("num_segments missing", &r, SEGOPS_E_INVALID_ARGUMENT, NAMES("num_segments", "required"));
  r = mul_request();
  r.ns_kind = SEGOPS_NS_NOT_INT;
  expect_error("num_segments not an integer", &r, SEGOPS_E_INVALID_ARGUMENT, NAMES("num_segments", "integer"));
  r = mul_request();
  r.ns_value = -1;
  expect_error("num_segments negative", &r, SEGOPS_E_INVALID_ARGUMENT, NAMES("num_segments (-1)", ">= 0"));
  r = mul_request();
  r.ns_value = LIM.max_segments + 1;
  expect_error("num_segments over the limit", &r, SEGOPS_E_TOO_LARGE, NAMES("num_segments", "limit"));
  r = mul_request();
  r.ns_overflow = true;
  expect_error("num_segments beyond int64", &r, SEGOPS_E_TOO_LARGE, NAMES("num_segments", "limit"));

  r = mul_request();
  arg(&r, "x")->nbytes -= 8;
  expect_error("data length mismatch", &r, SEGOPS_E_INVALID_ARGUMENT, NAMES("x data has 112 bytes", "needs 120"));

  r = mul_request();
  *arg(&r, "x") = tensor(SEGOPS_F64, 2, (int64_t)1 << 62, 3, 0); /* 3 * 2^62 overflows int64 */
  expect_error("shape overflow", &r, SEGOPS_E_TOO_LARGE, NAMES("x", "limit"));
  r = mul_request();
  *arg(&r, "x") = tensor(SEGOPS_F64, 2, 5, 3, 0);
  arg(&r, "x")->shape[0] = LIM.max_elements; /* within int64, over the element limit */
  expect_error("elements over the limit", &r, SEGOPS_E_TOO_LARGE, NAMES("x", "limit"));
  r = mul_request();
  *arg(&r, "x") = tensor(SEGOPS_F64, 3, 0, (int64_t)1 << 40, (int64_t)1 << 40); /* no elements, rows of 2^80 */
  expect_error("row size overflow with N = 0", &r, SEGOPS_E_TOO_LARGE, NAMES("a row of x", "limit"));
  r = mul_request();
  arg(&r, "x")->shape[1] = -3;
  expect_error("negative dimension", &r, SEGOPS_E_INVALID_ARGUMENT, NAMES("x.shape[1] (-3)"));

  r = mul_request();
  r.has_outputs = true;
  r.n_outputs = 1;
  r.outputs[0].name = "grad_q";
  r.outputs[0].len = 6;
  expect_error("unknown output", &r, SEGOPS_E_INVALID_ARGUMENT, NAMES("'grad_q'", "unknown output"));
  r.n_outputs = 0;
  expect_error("empty outputs list", &r, SEGOPS_E_INVALID_ARGUMENT, NAMES("outputs"));

  segops_request bad_fn = mul_request();
  bad_fn.pass = (segops_pass)7;
  {
    segops_prepared p;
    char err[256];
    TU_CHECK(segops_prepare(&bad_fn, &LIM, &p, err, sizeof err) == SEGOPS_E_NOT_FOUND, "unknown pass accepted");
  }
  (void)idx_vals;
}

/* Valid requests: int64 idx narrowed, unaligned int32 idx realigned, sortedness, omitted
 * cotangents, output subsets, and every row of the table with inferred output shapes. */
static void test_valid(void) {
  segops_prepared p;
  char err[512] = "";

  /* Every float input optional and none given: accepted, in the request's dtype (float64 by
   * default), scalar layout. */
  static const segops_op ALL_OPTIONAL[] = {SEGOPS_OP_SUM, SEGOPS_OP_MEAN};
  for (int k = 0; k < 2; k++) {
    segops_op op = ALL_OPTIONAL[k];
    for (int dt = -1; dt <= SEGOPS_F64; dt++) {
      segops_request sd = {.op = op,
                           .pass = SEGOPS_PASS_DOUBLE_BACKWARD,
                           .ns_kind = SEGOPS_NS_INT,
                           .ns_value = 2,
                           .has_dtype = dt >= 0,
                           .dtype = dt >= 0 ? (segops_dtype)dt : SEGOPS_F32};
      add_arg(&sd, "idx", tensor(SEGOPS_I32, 1, 5, 0, 0));
      int rc = segops_prepare(&sd, &LIM, &p, err, sizeof err);
      TU_CHECK(rc == SEGOPS_OK, "double backward with idx alone: %s", err);
      if (rc != SEGOPS_OK) continue;
      TU_CHECK(p.call.dtype == (dt >= 0 ? (segops_dtype)dt : SEGOPS_F64) && p.call.width == 1,
               "double backward with idx alone: dtype %d width %lld", (int)p.call.dtype, (long long)p.call.width);
      segops_prepared_free(&p);
    }
  }

  int64_t i64[5] = {0, 3, 1, 3, 2};
  segops_request r = mul_request();
  arg(&r, "idx")->dtype = SEGOPS_I64;
  arg(&r, "idx")->data = i64;
  arg(&r, "idx")->nbytes = sizeof i64;
  int rc = segops_prepare(&r, &LIM, &p, err, sizeof err);
  TU_CHECK(rc == SEGOPS_OK, "int64 idx: %s", err);
  if (rc == SEGOPS_OK) {
    TU_CHECK(p.idx_buf != NULL && (uintptr_t)p.call.idx % 4 == 0, "int64 idx not copied to aligned int32");
    for (int i = 0; i < 5; i++) TU_CHECK(p.call.idx[i] == (int32_t)i64[i], "int64 idx[%d] narrowed wrong", i);
    TU_CHECK(!p.call.idx_sorted, "unsorted idx reported sorted");
    TU_CHECK(p.call.width == 3 && p.call.n == 5 && p.call.s == 4 && p.call.dtype == SEGOPS_F64, "call fields");
    TU_CHECK(p.out_ndim[0] == 2 && p.out_shape[0][0] == 5 && p.out_shape[0][1] == 3 && p.out_nbytes[0] == 120,
             "mul forward output shape");
    TU_CHECK(p.call.out[0] != NULL && (uintptr_t)p.call.out[0] % 64 == 0, "output not 64-byte aligned");
    segops_prepared_free(&p);
  }

  static _Alignas(8) unsigned char raw[32];
  int32_t vals[5] = {0, 0, 1, 2, 3};
  memcpy(raw + 1, vals, sizeof vals);
  r = mul_request();
  arg(&r, "idx")->data = raw + 1;
  rc = segops_prepare(&r, &LIM, &p, err, sizeof err);
  TU_CHECK(rc == SEGOPS_OK, "unaligned idx: %s", err);
  if (rc == SEGOPS_OK) {
    TU_CHECK((uintptr_t)p.call.idx % 4 == 0 && p.call.idx[4] == 3, "unaligned int32 idx not realigned");
    TU_CHECK(p.call.idx_sorted, "sorted idx reported unsorted");
    segops_prepared_free(&p);
  }

  /* mul double backward without cotangents, asking only for grad_y. */
  segops_request d = {
      .op = SEGOPS_OP_MUL, .pass = SEGOPS_PASS_DOUBLE_BACKWARD, .ns_kind = SEGOPS_NS_INT, .ns_value = 4};
  add_arg(&d, "g_out", tensor(SEGOPS_F32, 1, 5, 0, 0));
  add_arg(&d, "x", tensor(SEGOPS_F32, 1, 5, 0, 0));
  add_arg(&d, "y", tensor(SEGOPS_F32, 1, 4, 0, 0));
  add_arg(&d, "idx", tensor(SEGOPS_I32, 1, 5, 0, 0));
  d.has_outputs = true;
  d.n_outputs = 1;
  d.outputs[0].name = "grad_y";
  d.outputs[0].len = 6;
  rc = segops_prepare(&d, &LIM, &p, err, sizeof err);
  TU_CHECK(rc == SEGOPS_OK, "omitted cotangents: %s", err);
  if (rc == SEGOPS_OK) {
    TU_CHECK(p.call.in[0] == NULL && p.call.in[1] == NULL && p.call.in[2] != NULL, "omitted cotangents not NULL");
    TU_CHECK(!p.requested[0] && !p.requested[1] && p.requested[2], "outputs subset");
    TU_CHECK(p.call.out[0] == NULL && p.call.out[1] == NULL && p.call.out[2] != NULL, "unrequested outputs not NULL");
    TU_CHECK(p.call.width == 1 && p.call.dtype == SEGOPS_F32, "width/dtype of scalar float32 call");
    segops_prepared_free(&p);
  }

  /* Feature shapes: (N,*F) in, (S,*F) / (N,*F) out, w = prod(F) (0 too); mul's y (S,*F). */
  {
    const struct {
      segops_op op;
      segops_pass pass;
      int nd;
      int64_t d1, d2;
      int64_t w;
      const char *y; /* mul: "s" for y (S,), "f" for y (S,*F) */
    } cases[] = {{SEGOPS_OP_SUM, SEGOPS_PASS_FORWARD, 3, 2, 3, 6, NULL},
                 {SEGOPS_OP_SUM, SEGOPS_PASS_FORWARD, 2, 1, 0, 1, NULL},
                 {SEGOPS_OP_MEAN, SEGOPS_PASS_FORWARD, 2, 0, 0, 0, NULL},
                 {SEGOPS_OP_RMS_NORM, SEGOPS_PASS_FORWARD, 1, 0, 0, 1, NULL},
                 {SEGOPS_OP_RMS_NORM, SEGOPS_PASS_FORWARD, 3, 4, 3, 12, NULL},
                 {SEGOPS_OP_DOT, SEGOPS_PASS_FORWARD, 3, 2, 3, 6, NULL},
                 {SEGOPS_OP_MUL, SEGOPS_PASS_FORWARD, 3, 2, 3, 6, "s"},
                 {SEGOPS_OP_MUL, SEGOPS_PASS_FORWARD, 3, 2, 3, 6, "f"},
                 {SEGOPS_OP_MUL, SEGOPS_PASS_BACKWARD, 2, 16, 0, 16, "f"}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
      const segops_fn_desc *fn = segops_fn(cases[c].op, cases[c].pass);
      segops_request q = {.op = cases[c].op, .pass = cases[c].pass, .ns_kind = SEGOPS_NS_INT, .ns_value = 4};
      const int nd = cases[c].nd;
      for (int k = 0; k < fn->n_in; k++) {
        const segops_shape_kind kind = fn->in[k].shape;
        if (kind == SEGOPS_SH_ELEM)
          add_arg(&q, fn->in[k].name, tensor(SEGOPS_F64, nd, 5, cases[c].d1, cases[c].d2));
        else if (kind == SEGOPS_SH_SEG || (kind == SEGOPS_SH_SEG1F && cases[c].y[0] == 'f'))
          add_arg(&q, fn->in[k].name, tensor(SEGOPS_F64, nd, 4, cases[c].d1, cases[c].d2));
        else
          add_arg(&q, fn->in[k].name, tensor(SEGOPS_F64, 1, 4, 0, 0));
      }
      add_arg(&q, "idx", tensor(SEGOPS_I32, 1, 5, 0, 0));
      rc = segops_prepare(&q, &LIM, &p, err, sizeof err);
      TU_CHECK(rc == SEGOPS_OK, "feature case %zu (%s/%s): refused: %s", c, segops_op_name(fn->op),
               segops_pass_name(fn->pass), err);
      if (rc != SEGOPS_OK) continue;
      TU_CHECK(p.call.width == cases[c].w && p.call.nf == nd - 1, "feature case %zu: width %lld nf %d", c,
               (long long)p.call.width, p.call.nf);
      TU_CHECK(p.call.y_wide == (cases[c].y && cases[c].y[0] == 'f'), "feature case %zu: y_wide %d", c, p.call.y_wide);
      for (int o = 0; o < fn->n_out; o++) {
        const segops_shape_kind kind = fn->out[o].shape;
        const bool feat = kind == SEGOPS_SH_ELEM || kind == SEGOPS_SH_SEG || (kind == SEGOPS_SH_SEG1F && p.call.y_wide);
        const int64_t lead = kind == SEGOPS_SH_ELEM ? 5 : 4;
        const int64_t want[3] = {lead, cases[c].d1, cases[c].d2};
        const int want_nd = feat ? nd : 1;
        bool same = p.out_ndim[o] == want_nd;
        for (int i = 0; same && i < want_nd; i++) same = p.out_shape[o][i] == want[i];
        TU_CHECK(same, "feature case %zu: %s has rank %d, shape[0] %lld", c, fn->out[o].name, p.out_ndim[o],
                 (long long)p.out_shape[o][0]);
        TU_CHECK((int64_t)p.out_nbytes[o] == (feat ? lead * cases[c].w : lead) * 8, "feature case %zu: %s bytes %zu", c,
                 fn->out[o].name, p.out_nbytes[o]);
      }
      segops_prepared_free(&p);
    }
  }

  /* Every row, both widths where allowed, N=5, S=4: all inputs given; output shapes inferred. */
  for (int op = 0; op < SEGOPS_OP_COUNT; op++)
    for (int pass = 0; pass < SEGOPS_PASS_COUNT; pass++) {
      const segops_fn_desc *fn = segops_fn((segops_op)op, (segops_pass)pass);
      for (int w = fn->vec3_only ? 3 : 1; w <= 3; w += 2) {
        segops_request q = {.op = (segops_op)op, .pass = (segops_pass)pass, .ns_kind = SEGOPS_NS_INT, .ns_value = 4};
        for (int k = 0; k < fn->n_in; k++) {
          int64_t sh[SEGOPS_MAX_NDIM] = {0, 0, 0};
          int nd = segops_shape_dims(fn->in[k].shape, w, 5, 4, sh);
          add_arg(&q, fn->in[k].name, tensor(SEGOPS_F64, nd, sh[0], sh[1], sh[2]));
        }
        add_arg(&q, "idx", tensor(SEGOPS_I32, 1, 5, 0, 0));
        rc = segops_prepare(&q, &LIM, &p, err, sizeof err);
        TU_CHECK(rc == SEGOPS_OK, "%s/%s w=%d: valid request refused: %s", segops_op_name(fn->op),
                 segops_pass_name(fn->pass), w, err);
        if (rc != SEGOPS_OK) continue;
        TU_CHECK(p.call.width == w && p.call.fn == fn, "%s/%s w=%d: width inferred %lld", segops_op_name(fn->op),
                 segops_pass_name(fn->pass), w, (long long)p.call.width);
        for (int o = 0; o < fn->n_out; o++) {
          int64_t want = segops_shape_count(fn->out[o].shape, w, 5, 4) * 8;
          TU_CHECK(p.requested[o] && (int64_t)p.out_nbytes[o] == want, "%s/%s w=%d: %s has %zu bytes, want %lld",
                   segops_op_name(fn->op), segops_pass_name(fn->pass), w, fn->out[o].name, p.out_nbytes[o],
                   (long long)want);
        }
        segops_prepared_free(&p);
      }
    }
  segops_prepared_free(NULL);
}

/* A long int32 idx, checked block by block: the first bad element is named wherever it lies (past
 * the first block, with a later one after it), a decrease at a block boundary or inside the last
 * partial block makes it unsorted, and an idx in shared memory is checked and used as a copy. */
static void test_long_idx(void) {
  enum { N = 3 * 4096 + 7, S = 1000 };
  static int32_t v[N];
  static double x[N];
  segops_prepared p;
  char err[512];
  for (int i = 0; i < N; i++) v[i] = (int32_t)((int64_t)i * S / N);
  segops_request r = {.op = SEGOPS_OP_SUM, .pass = SEGOPS_PASS_FORWARD, .ns_kind = SEGOPS_NS_INT, .ns_value = S};
  add_arg(&r, "x", (segops_tensor){.dtype = SEGOPS_F64, .ndim = 1, .shape = {N}, .data = x, .nbytes = sizeof x});
  add_arg(&r, "idx", (segops_tensor){.dtype = SEGOPS_I32, .ndim = 1, .shape = {N}, .data = v, .nbytes = sizeof v});
  int rc = segops_prepare(&r, &LIM, &p, err, sizeof err);
  TU_CHECK(rc == SEGOPS_OK && p.call.idx_sorted && p.call.idx == v, "long sorted idx in place: %s", err);
  if (rc == SEGOPS_OK) segops_prepared_free(&p);
  static const int at[] = {4096, 2 * 4096 - 1, 3 * 4096 + 3};
  for (int k = 0; k < 3; k++) { /* a decrease at a boundary, inside a block, in the partial tail */
    int32_t keep = v[at[k]];
    v[at[k]] = v[at[k] - 1] - 1; /* v[at - 1] >= 1 past the first block */
    rc = segops_prepare(&r, &LIM, &p, err, sizeof err);
    TU_CHECK(rc == SEGOPS_OK && !p.call.idx_sorted, "decrease at %d not seen: %s", at[k], err);
    if (rc == SEGOPS_OK) segops_prepared_free(&p);
    v[at[k]] = keep;
    for (int i = 0; i < N; i++) v[i] = (int32_t)((int64_t)i * S / N);
  }
  v[5000] = S;
  v[9000] = -3;
  expect_error("first bad idx past the first block", &r, SEGOPS_E_INVALID_ARGUMENT,
               NAMES("idx[5000] = 1000", "out of range"));
  v[5000] = 7;
  expect_error("negative idx in the third block", &r, SEGOPS_E_INVALID_ARGUMENT, NAMES("idx[9000] = -3"));
  v[9000] = (int32_t)((int64_t)9000 * S / N);
  v[5000] = (int32_t)((int64_t)5000 * S / N);
  arg(&r, "idx")->shared = true;
  rc = segops_prepare(&r, &LIM, &p, err, sizeof err);
  TU_CHECK(rc == SEGOPS_OK && p.call.idx != v && p.idx_buf != NULL && memcmp(p.call.idx, v, sizeof v) == 0,
           "shared idx not checked as a copy: %s", err);
  if (rc == SEGOPS_OK) segops_prepared_free(&p);
}

/* The same for an int64 idx, narrowed while checked: values, sortedness, the first bad element
 * (one that narrowing would wrap into range included). */
static void test_long_idx64(void) {
  enum { N = 3 * 4096 + 7, S = 1000 };
  static int64_t v[N];
  static double x[N];
  segops_prepared p;
  char err[512];
  for (int i = 0; i < N; i++) v[i] = (int64_t)i * S / N;
  segops_request r = {.op = SEGOPS_OP_SUM, .pass = SEGOPS_PASS_FORWARD, .ns_kind = SEGOPS_NS_INT, .ns_value = S};
  add_arg(&r, "x", (segops_tensor){.dtype = SEGOPS_F64, .ndim = 1, .shape = {N}, .data = x, .nbytes = sizeof x});
  add_arg(&r, "idx", (segops_tensor){.dtype = SEGOPS_I64, .ndim = 1, .shape = {N}, .data = v, .nbytes = sizeof v});
  int rc = segops_prepare(&r, &LIM, &p, err, sizeof err);
  int same = rc == SEGOPS_OK;
  for (int i = 0; same && i < N; i++) same = p.call.idx[i] == v[i];
  TU_CHECK(rc == SEGOPS_OK && p.call.idx_sorted && same, "long sorted int64 idx narrowed: %s", err);
  if (rc == SEGOPS_OK) segops_prepared_free(&p);
  v[2 * 4096 + 1] = 0; /* a decrease inside the third block */
  rc = segops_prepare(&r, &LIM, &p, err, sizeof err);
  TU_CHECK(rc == SEGOPS_OK && !p.call.idx_sorted, "int64 decrease not seen: %s", err);
  if (rc == SEGOPS_OK) segops_prepared_free(&p);
  v[2 * 4096 + 1] = (int64_t)(2 * 4096 + 1) * S / N;
  v[6000] = ((int64_t)1 << 32) + 5; /* narrows to 5 */
  v[9000] = -3;
  expect_error("int64 idx that would wrap, past the first block", &r, SEGOPS_E_INVALID_ARGUMENT,
               NAMES("idx[6000] = 4294967301", "out of range"));
  v[6000] = (int64_t)6000 * S / N;
  expect_error("negative int64 idx in the third block", &r, SEGOPS_E_INVALID_ARGUMENT, NAMES("idx[9000] = -3"));
}

/* The validated-idx cache: an int32 idx from a region, seen again with the same bytes, N and S,
 * is served from the daemon's own validated copy (no copy, no check); any other bytes or S are
 * copied and checked as usual, and a copy stays valid while a request holds it. */
static void test_idx_cache(void) {
  enum { N = 20000, S = 1000 };
  static int32_t v[N];
  static double x[N];
  segops_prepared p1, p2, p3;
  char err[512];
  segops_idx_cache_set_cap((size_t)64 << 20);
  for (int i = 0; i < N; i++) v[i] = (int32_t)((int64_t)i * S / N);
  segops_request r = {.op = SEGOPS_OP_SUM, .pass = SEGOPS_PASS_FORWARD, .ns_kind = SEGOPS_NS_INT, .ns_value = S};
  add_arg(&r, "x", (segops_tensor){.dtype = SEGOPS_F64, .ndim = 1, .shape = {N}, .data = x, .nbytes = sizeof x});
  add_arg(&r, "idx", (segops_tensor){.dtype = SEGOPS_I32, .ndim = 1, .shape = {N}, .data = v, .nbytes = sizeof v});
  arg(&r, "idx")->shared = true;
  segops_idx_cache_stats_t a, b;
  segops_idx_cache_stats(&a);
  int rc = segops_prepare(&r, &LIM, &p1, err, sizeof err);
  TU_CHECK(rc == SEGOPS_OK && p1.idx_hold && !p1.idx_buf && p1.call.idx != v && p1.call.idx_sorted &&
               p1.call.idx_hashed && memcmp(p1.call.idx, v, sizeof v) == 0,
           "first shared idx not validated into the cache: %s", err);
  rc = segops_prepare(&r, &LIM, &p2, err, sizeof err);
  TU_CHECK(rc == SEGOPS_OK && p2.idx_hold == p1.idx_hold && p2.call.idx == p1.call.idx && p2.call.idx_sorted &&
               p2.call.idx_hash[0] == p1.call.idx_hash[0] && p2.call.idx_hash[1] == p1.call.idx_hash[1],
           "the same idx again did not use the cached copy: %s", err);
  segops_idx_cache_stats(&b);
  TU_CHECK(b.hits == a.hits + 1 && b.misses == a.misses + 1 && b.bytes >= sizeof v,
           "cache counters: %llu hits, %llu misses", (unsigned long long)(b.hits - a.hits),
           (unsigned long long)(b.misses - a.misses));
  /* Other bytes: checked as usual, never served another idx's copy. */
  v[5000] = S;
  expect_error("out-of-range value after a cached idx", &r, SEGOPS_E_INVALID_ARGUMENT, NAMES("idx[5000] = 1000"));
  v[5000] = (int32_t)((int64_t)5000 * S / N);
  r.ns_value = S - 1; /* the same bytes with another S: its largest value is out of range now */
  expect_error("cached idx with a smaller num_segments", &r, SEGOPS_E_INVALID_ARGUMENT,
               NAMES("out of range", "num_segments = 999"));
  r.ns_value = S;
  v[10] = 999; /* valid, no longer sorted: a new entry */
  rc = segops_prepare(&r, &LIM, &p3, err, sizeof err);
  TU_CHECK(rc == SEGOPS_OK && p3.idx_hold && p3.idx_hold != p1.idx_hold && !p3.call.idx_sorted &&
               memcmp(p3.call.idx, v, sizeof v) == 0,
           "a changed idx was not validated anew: %s", err);
  /* Held copies outlive their entries (every entry dropped here: cap 0). */
  segops_prepared_free(&p1);
  segops_idx_cache_set_cap(0);
  v[10] = (int32_t)((int64_t)10 * S / N);
  TU_CHECK(memcmp(p2.call.idx, v, sizeof v) == 0 && p3.call.idx[10] == 999, "a held copy changed or went away");
  segops_prepared_free(&p2);
  segops_prepared_free(&p3);
  /* int64 idx (what torch sends): narrowed and checked once, its int64 bytes then recognised. */
  {
    static int64_t w[N];
    for (int i = 0; i < N; i++) w[i] = (int64_t)i * S / N;
    segops_request r64 = {.op = SEGOPS_OP_SUM, .pass = SEGOPS_PASS_FORWARD, .ns_kind = SEGOPS_NS_INT, .ns_value = S};
    add_arg(&r64, "x", (segops_tensor){.dtype = SEGOPS_F64, .ndim = 1, .shape = {N}, .data = x, .nbytes = sizeof x});
    add_arg(&r64, "idx", (segops_tensor){.dtype = SEGOPS_I64, .ndim = 1, .shape = {N}, .data = w, .nbytes = sizeof w});
    arg(&r64, "idx")->shared = true;
    segops_idx_cache_set_cap((size_t)64 << 20);
    rc = segops_prepare(&r64, &LIM, &p1, err, sizeof err);
    TU_CHECK(rc == SEGOPS_OK && p1.idx_hold && p1.call.idx_sorted, "int64 idx into the cache: %s", err);
    rc = segops_prepare(&r64, &LIM, &p2, err, sizeof err);
    TU_CHECK(rc == SEGOPS_OK && p2.idx_hold == p1.idx_hold, "the same int64 idx again missed the cache: %s", err);
    bool same = rc == SEGOPS_OK;
    for (int i = 0; same && i < N; i++) same = p2.call.idx[i] == w[i];
    TU_CHECK(same, "int64 idx served with other values");
    if (rc == SEGOPS_OK) segops_prepared_free(&p2);
    segops_prepared_free(&p1);
    w[7] = ((int64_t)1 << 32) + w[7]; /* the same int32 values once narrowed: refused, not a hit */
    expect_error("int64 idx that narrows to a cached one", &r64, SEGOPS_E_INVALID_ARGUMENT, NAMES("idx[7]"));
    /* The widened hash is the hash of the int64 bytes (negative values sign-extended). */
    for (int64_t m = 0; m < 12; m++) {
      int32_t narrow[12];
      int64_t wide[12];
      for (int64_t i = 0; i < m; i++) wide[i] = narrow[i] = (int32_t)(i % 3 == 2 ? -7 * i : 1000 * i + 1);
      uint64_t a2[2], b2[2];
      segops_hash_idx_widened(narrow, m, a2);
      segops_hash_idx(wide, (size_t)m * 8, b2);
      TU_CHECK(a2[0] == b2[0] && a2[1] == b2[1], "widened hash of %d values differs", (int)m);
    }
  }
  /* Off: copied and checked, as without the cache. */
  segops_idx_cache_set_cap(0);
  rc = segops_prepare(&r, &LIM, &p1, err, sizeof err);
  TU_CHECK(rc == SEGOPS_OK && !p1.idx_hold && p1.idx_buf && !p1.call.idx_hashed, "cache off: %s", err);
  if (rc == SEGOPS_OK) segops_prepared_free(&p1);
  segops_idx_cache_set_cap((size_t)256 << 20);
}

int main(void) {
  test_rules();
  test_valid();
  test_long_idx();
  test_long_idx64();
  test_idx_cache();
  return tu_summary("prepare");
}

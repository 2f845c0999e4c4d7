/* test_codec_json.c: the JSON request decoder: both tensor forms, the top-level dtype, integer
 * idx, number ranges, proto/API.md's curl example, and every malformed, duplicated or over-limit body. */
#include <stdint.h>
#include <stdlib.h>

#include "codec_test.h"

static const segops_limits LIM = {.max_elements = 1 << 24, .max_segments = 1 << 24};

static int dec_op(const char *s, segops_op op, segops_pass pass, const segops_codec_limits *lim, segops_decoded *d,
                  char *err) {
  /* An exact-size heap copy: ASan sees any read past the end of the body. */
  size_t n = strlen(s);
  char *copy = malloc(n ? n : 1);
  memcpy(copy, s, n);
  int rc = segops_decode_json(copy, n, op, pass, lim, d, err, 512);
  free(copy); /* JSON decoding materialises everything: the body may go at once */
  if (rc) CHECK(d->owned == NULL && d->req.nargs == 0);
  return rc;
}

static int dec(const char *s, segops_decoded *d, char *err) {
  return dec_op(s, SEGOPS_OP_SUM, SEGOPS_PASS_FORWARD, NULL, d, err);
}

static int dec_prep_op(const char *s, segops_op op, segops_pass pass, char *err) {
  segops_decoded d;
  segops_prepared p;
  int rc = dec_op(s, op, pass, NULL, &d, err);
  if (rc) return rc;
  rc = segops_prepare(&d.req, &LIM, &p, err, 512);
  segops_prepared_free(&p);
  segops_decoded_free(&d);
  return rc;
}

static int dec_prep(const char *s, char *err) { return dec_prep_op(s, SEGOPS_OP_SUM, SEGOPS_PASS_FORWARD, err); }

static const segops_tensor *arg(const segops_decoded *d, const char *name) {
  for (int i = 0; i < d->req.nargs; i++)
    if (d->req.args[i].name_len == strlen(name) && !memcmp(d->req.args[i].name, name, strlen(name)))
      return &d->req.args[i].t;
  return NULL;
}

static void test_spec_example(void) {
  char err[512];
  segops_decoded d;
  int rc = dec("{\"x\":[1,2,3,4,5,6],\"idx\":[0,0,1,1,1,2],\"num_segments\":3}", &d, err);
  CHECK(rc == 0);
  if (rc) return;
  const segops_tensor *x = arg(&d, "x"), *idx = arg(&d, "idx");
  CHECK(x && x->dtype == SEGOPS_F64 && x->ndim == 1 && x->shape[0] == 6 && x->nbytes == 48);
  CHECK(idx && idx->dtype == SEGOPS_I32 && idx->ndim == 1 && idx->shape[0] == 6 && idx->nbytes == 24);
  CHECK(d.req.ns_kind == SEGOPS_NS_INT && d.req.ns_value == 3);
  CHECK(x && (uintptr_t)x->data % 64 == 0);
  for (int i = 0; x && i < 6; i++) CHECK(((const double *)x->data)[i] == i + 1);
  segops_prepared p;
  CHECK(segops_prepare(&d.req, &LIM, &p, err, 512) == 0);
  CHECK(p.out_ndim[0] == 1 && p.out_shape[0][0] == 3 && p.call.dtype == SEGOPS_F64 && p.call.width == 1);
  CHECK(p.call.idx == idx->data); /* aligned int32 idx is used in place */
  segops_prepared_free(&p);
  segops_decoded_free(&d);
}

static void test_forms(void) {
  char err[512];
  segops_decoded d;
  /* Bare vec3 list at float32 via the top-level dtype; idx beyond int32 becomes int64. */
  int rc = dec("{\"dtype\":\"float32\",\"x\":[[1,2,3],[4.5,5,6]],\"idx\":[0,4294967296],\"num_segments\":1}", &d, err);
  CHECK(rc == 0);
  if (!rc) {
    const segops_tensor *x = arg(&d, "x"), *idx = arg(&d, "idx");
    CHECK(x->dtype == SEGOPS_F32 && x->ndim == 2 && x->shape[0] == 2 && x->shape[1] == 3 && x->nbytes == 24);
    CHECK(((const float *)x->data)[3] == 4.5f && ((const float *)x->data)[5] == 6.0f);
    CHECK(idx->dtype == SEGOPS_I64 && ((const int64_t *)idx->data)[1] == 4294967296LL);
    segops_decoded_free(&d);
  }
  /* Map form: data flat, dtype per tensor; ints and reals in float data. */
  rc =
      dec("{\"x\":{\"dtype\":\"float32\",\"shape\":[2,3],\"data\":[1,2.5,3,4,5,6]},"
          "\"idx\":{\"dtype\":\"int64\",\"shape\":[2],\"data\":[0,1]},\"num_segments\":2}",
          &d, err);
  CHECK(rc == 0);
  if (!rc) {
    const segops_tensor *x = arg(&d, "x"), *idx = arg(&d, "idx");
    CHECK(x->dtype == SEGOPS_F32 && x->ndim == 2 && x->shape[1] == 3 && x->nbytes == 24);
    CHECK(((const float *)x->data)[1] == 2.5f);
    CHECK(idx->dtype == SEGOPS_I64 && idx->nbytes == 16 && ((const int64_t *)idx->data)[1] == 1);
    CHECK((uintptr_t)x->data % 64 == 0 && (uintptr_t)idx->data % 64 == 0);
    segops_prepared p;
    CHECK(segops_prepare(&d.req, &LIM, &p, err, 512) == 0 && p.call.width == 3 && p.call.dtype == SEGOPS_F32);
    segops_prepared_free(&p);
    segops_decoded_free(&d);
  }
  /* Matrices as bare lists (S,3,3), empty lists, outputs. */
  CHECK(dec_prep_op("{\"v\":[[1,0,0]],\"m\":[[[1,2,0],[0,1,0],[0,0,1]]],\"idx\":[0],\"num_segments\":1}",
                    SEGOPS_OP_MATVEC, SEGOPS_PASS_FORWARD, err) == 0);
  CHECK(dec("{\"x\":[],\"idx\":[],\"num_segments\":0}", &d, err) == 0 && arg(&d, "x")->shape[0] == 0 &&
        arg(&d, "x")->nbytes == 0 && arg(&d, "idx")->dtype == SEGOPS_I32);
  segops_decoded_free(&d);
  CHECK(dec_prep("{\"x\":[],\"idx\":[],\"num_segments\":5}", err) == 0);
  CHECK(dec("{\"x\":[[]],\"idx\":[0],\"num_segments\":1}", &d, err) == 0 && arg(&d, "x")->ndim == 2 &&
        arg(&d, "x")->shape[1] == 0);
  segops_decoded_free(&d);
  CHECK(dec("{\"x\":[1],\"idx\":[0],\"num_segments\":1,\"outputs\":[\"out\"],\"dtype\":\"float64\"}", &d, err) == 0 &&
        d.req.has_outputs && d.req.n_outputs == 1 && d.req.outputs[0].len == 3 &&
        !memcmp(d.req.outputs[0].name, "out", 3));
  segops_decoded_free(&d);
  /* Double backward with every input, mixed forms. */
  CHECK(dec_prep_op("{\"gg_x\":[1,2],\"gg_y\":{\"dtype\":\"float64\",\"shape\":[1],\"data\":[3]},\"g_out\":[1,1],"
                    "\"x\":[1,2],\"y\":[2],\"idx\":[0,0],\"num_segments\":1}",
                    SEGOPS_OP_MUL, SEGOPS_PASS_DOUBLE_BACKWARD, err) == 0);
  /* Number extremes: int64 idx data, float64 bounds, -0.0. */
  CHECK(dec("{\"x\":[1.7976931348623157e308,-0.0,5e-324],\"idx\":[0,0,0],\"num_segments\":1}", &d, err) == 0);
  if (d.owned) {
    const double *xd = arg(&d, "x")->data;
    CHECK(xd[0] == 1.7976931348623157e308 && xd[1] == 0 && xd[2] > 0);
    segops_decoded_free(&d);
  }
}

static void test_errors(void) {
  char err[512];
  segops_decoded d;
  CHECK_ERR(dec("", &d, err), SEGOPS_E_MALFORMED_BODY, err, "body is not valid JSON (empty body)");
  CHECK_ERR(dec("{\"x\":[1,2", &d, err), SEGOPS_E_MALFORMED_BODY, err, "body is not valid JSON");
  CHECK_ERR(dec("{\"x\":[1],\"idx\":[0],\"num_segments\":1} x", &d, err), SEGOPS_E_MALFORMED_BODY, err,
            "body is not valid JSON");
  CHECK_ERR(dec("{\"x\":[1],\"idx\":[0],\"num_segments\":1}{}", &d, err), SEGOPS_E_MALFORMED_BODY, err,
            "body is not valid JSON");
  CHECK_ERR(dec("[1,2]", &d, err), SEGOPS_E_MALFORMED_BODY, err, "segmented_sum: body must be a map of argument names");
  CHECK_ERR(dec("{\"x\":[1],\"x\":[2]}", &d, err), SEGOPS_E_INVALID_ARGUMENT, err, "key 'x' is given more than once");
  CHECK_ERR(dec("{\"x\":{\"dtype\":\"float64\",\"dtype\":\"float64\"}}", &d, err), SEGOPS_E_INVALID_ARGUMENT, err,
            "key 'dtype' is given more than once");
  CHECK_ERR(dec("{\"x\":\"abc\"}", &d, err), SEGOPS_E_MALFORMED_BODY, err, "x must be a tensor");
  CHECK_ERR(dec("{\"foo\":\"abc\"}", &d, err), SEGOPS_E_INVALID_ARGUMENT, err, "unknown argument 'foo' for forward");
  CHECK_ERR(dec_prep("{\"foo\":[1],\"x\":[1],\"idx\":[0],\"num_segments\":1}", err), SEGOPS_E_INVALID_ARGUMENT, err,
            "unknown argument 'foo'");
  CHECK_ERR(dec("{\"x\":[[1,2],[3]]}", &d, err), SEGOPS_E_INVALID_ARGUMENT, err, "x is not a rectangular nested list");
  CHECK_ERR(dec("{\"x\":[1,[2]]}", &d, err), SEGOPS_E_INVALID_ARGUMENT, err, "x is not a rectangular nested list");
  CHECK_ERR(dec("{\"x\":[[[[[[[1]]]]]]]}", &d, err), SEGOPS_E_INVALID_ARGUMENT, err,
            "segmented_sum: x has more than 6 dimensions; at most 6 are allowed");
  CHECK_ERR(dec("{\"x\":[1,\"2\"]}", &d, err), SEGOPS_E_MALFORMED_BODY, err, "x[1] must be a number");
  CHECK_ERR(dec("{\"x\":[[1,2],[3,null]]}", &d, err), SEGOPS_E_MALFORMED_BODY, err, "x[1][1] must be a number");
  CHECK_ERR(dec("{\"x\":[1,true]}", &d, err), SEGOPS_E_MALFORMED_BODY, err, "x[1] must be a number");
  CHECK_ERR(dec("{\"idx\":[0,1.5]}", &d, err), SEGOPS_E_INVALID_ARGUMENT, err, "idx[1] (1.5) must be an integer");
  CHECK_ERR(dec("{\"idx\":[0,1.0]}", &d, err), SEGOPS_E_INVALID_ARGUMENT, err, "idx[1] (1) must be an integer");
  CHECK_ERR(dec("{\"idx\":{\"dtype\":\"int32\",\"shape\":[2],\"data\":[0,2.5]}}", &d, err), SEGOPS_E_INVALID_ARGUMENT,
            err, "idx.data[1] (2.5) must be an integer");
  CHECK_ERR(dec("{\"idx\":{\"dtype\":\"int32\",\"shape\":[1],\"data\":[2147483648]}}", &d, err),
            SEGOPS_E_INVALID_ARGUMENT, err, "idx.data[0] (2147483648) is out of int32 range");
  CHECK_ERR(dec("{\"dtype\":\"float32\",\"x\":[1,1e39]}", &d, err), SEGOPS_E_INVALID_ARGUMENT, err,
            "x[1] (9.9999999999999994e+38) is out of float32 range");
  CHECK_ERR(dec("{\"x\":{\"dtype\":\"float32\",\"shape\":[1],\"data\":[-1e300]}}", &d, err), SEGOPS_E_INVALID_ARGUMENT,
            err, "x.data[0] (-1.0000000000000001e+300) is out of float32 range");
  CHECK_ERR(dec("{\"x\":{\"dtype\":3,\"shape\":[1],\"data\":[1]}}", &d, err), SEGOPS_E_MALFORMED_BODY, err,
            "x.dtype must be a string");
  CHECK_ERR(dec("{\"x\":{\"dtype\":\"float16\",\"shape\":[1],\"data\":[1]}}", &d, err), SEGOPS_E_INVALID_ARGUMENT, err,
            "x: unknown dtype 'float16' (expected float32 or float64)");
  CHECK_ERR(dec("{\"x\":{\"dtype\":\"float64\",\"shape\":[1.0],\"data\":[1]}}", &d, err), SEGOPS_E_MALFORMED_BODY, err,
            "x.shape must be a list of non-negative integers");
  CHECK_ERR(dec("{\"x\":{\"dtype\":\"float64\",\"shape\":3,\"data\":[1]}}", &d, err), SEGOPS_E_MALFORMED_BODY, err,
            "x.shape must be a list of non-negative integers");
  CHECK_ERR(dec("{\"x\":{\"dtype\":\"float64\",\"shape\":[1,1,1,1,1,1,1],\"data\":[1]}}", &d, err),
            SEGOPS_E_INVALID_ARGUMENT, err, "segmented_sum: x has 7 dimensions; at most 6 are allowed");
  CHECK_ERR(dec("{\"x\":{\"dtype\":\"float64\",\"shape\":[1],\"data\":[[1]]}}", &d, err), SEGOPS_E_MALFORMED_BODY, err,
            "x.data must be a flat list of numbers");
  CHECK_ERR(dec("{\"x\":{\"dtype\":\"float64\",\"shape\":[1],\"data\":\"AAAA\"}}", &d, err), SEGOPS_E_MALFORMED_BODY,
            err, "x.data must be a flat list of numbers");
  CHECK_ERR(dec("{\"x\":{\"dtype\":\"float64\",\"shape\":[1]}}", &d, err), SEGOPS_E_MALFORMED_BODY, err,
            "x is missing \"data\"");
  CHECK_ERR(dec("{\"x\":{\"dtype\":\"float64\",\"shape\":[1],\"data\":[1],\"order\":\"C\"}}", &d, err),
            SEGOPS_E_MALFORMED_BODY, err, "x has unknown key 'order'");
  CHECK_ERR(
      dec_prep("{\"x\":{\"dtype\":\"float64\",\"shape\":[3],\"data\":[1,2]},\"idx\":[0,0,0],\"num_segments\":1}", err),
      SEGOPS_E_INVALID_ARGUMENT, err, "x data has 16 bytes but shape (3,) x float64 needs 24");
  CHECK_ERR(dec_prep("{\"x\":{\"dtype\":\"float64\",\"shape\":[-1],\"data\":[]},\"idx\":[],\"num_segments\":1}", err),
            SEGOPS_E_INVALID_ARGUMENT, err, "x.shape[0] (-1) must be >= 0");
  CHECK_ERR(dec("{\"dtype\":\"float16\",\"x\":[1]}", &d, err), SEGOPS_E_INVALID_ARGUMENT, err,
            "dtype: unknown dtype 'float16' (expected float32 or float64)");
  CHECK_ERR(dec("{\"dtype\":\"int32\",\"x\":[1]}", &d, err), SEGOPS_E_INVALID_ARGUMENT, err,
            "dtype must be float32 or float64");
  CHECK_ERR(dec("{\"dtype\":64,\"x\":[1]}", &d, err), SEGOPS_E_MALFORMED_BODY, err, "dtype must be a string");
  CHECK_ERR(dec("{\"outputs\":\"out\"}", &d, err), SEGOPS_E_MALFORMED_BODY, err,
            "outputs must be a list of output names");
  CHECK_ERR(dec("{\"outputs\":[1]}", &d, err), SEGOPS_E_MALFORMED_BODY, err, "outputs must be a list of output names");
  CHECK_ERR(dec("{\"outputs\":[\"a\",\"a\",\"a\",\"a\",\"a\",\"a\",\"a\"]}", &d, err), SEGOPS_E_INVALID_ARGUMENT, err,
            "outputs lists 7 names");
  CHECK_ERR(dec_prep("{\"x\":[1],\"idx\":[0],\"num_segments\":1.0}", err), SEGOPS_E_INVALID_ARGUMENT, err,
            "num_segments must be an integer");
  CHECK_ERR(dec_prep("{\"x\":[1],\"idx\":[0],\"num_segments\":\"1\"}", err), SEGOPS_E_INVALID_ARGUMENT, err,
            "num_segments must be an integer");
  CHECK_ERR(dec_prep("{\"x\":[1],\"idx\":[0],\"num_segments\":-1}", err), SEGOPS_E_INVALID_ARGUMENT, err,
            "num_segments (-1) must be >= 0");
  CHECK_ERR(dec_prep("{\"x\":[1],\"idx\":[0],\"num_segments\":1099511627776}", err), SEGOPS_E_TOO_LARGE, err,
            "num_segments (1099511627776) exceeds the limit");
  CHECK_ERR(dec("{\"num_segments\":99999999999999999999999}", &d, err), SEGOPS_E_MALFORMED_BODY, err,
            "body is not valid JSON");
  CHECK_ERR(dec("{\"x\\u0000y\":[1]}", &d, err), SEGOPS_E_MALFORMED_BODY, err, "body is not valid JSON");
  /* 17 tensors. */
  char many[1024] = "{";
  for (int i = 0; i <= SEGOPS_MAX_REQ_ARGS; i++)
    snprintf(many + strlen(many), sizeof many - strlen(many), "%s\"a%d\":[1]", i ? "," : "", i);
  strcat(many, "}");
  CHECK_ERR(dec(many, &d, err), SEGOPS_E_INVALID_ARGUMENT, err, "too many arguments (more than 16");
  /* Error messages never echo raw bytes. */
  CHECK_ERR(dec("{\"\\u00e9\\u0001\":3}", &d, err), SEGOPS_E_INVALID_ARGUMENT, err,
            "unknown argument '\\xc3\\xa9\\x01'");
}

static void test_every_prefix(void) {
  const char *body = "{\"x\":{\"dtype\":\"float32\",\"shape\":[2],\"data\":[1.5,2]},\"idx\":[0,1],\"num_segments\":2}";
  char err[512], prefix[256];
  segops_decoded d;
  for (size_t n = 0; n < strlen(body); n++) {
    memcpy(prefix, body, n);
    prefix[n] = 0;
    int rc = dec(prefix, &d, err);
    if (rc != SEGOPS_E_MALFORMED_BODY || !strstr(err, "body is not valid JSON")) {
      fprintf(stderr, "prefix %zu: %s: %s\n", n, segops_err_code(rc), err);
      g_failures++;
    }
  }
  CHECK(dec(body, &d, err) == 0);
  segops_decoded_free(&d);
}

static void test_limits(void) {
  char err[512];
  segops_decoded d;
  segops_codec_limits lim = {.max_depth = 3, .max_items = 100};
  /* Body map, list, row: 3 levels. */
  CHECK(dec_op("{\"x\":[[1,2,3]],\"idx\":[0],\"num_segments\":1}", SEGOPS_OP_SUM, SEGOPS_PASS_FORWARD, &lim, &d, err) ==
        0);
  segops_decoded_free(&d);
  CHECK_ERR(dec_op("{\"m\":[[[1,2,3]]]}", SEGOPS_OP_SUM, SEGOPS_PASS_FORWARD, &lim, &d, err), SEGOPS_E_MALFORMED_BODY,
            err, "nested too deeply (more than 3 levels");
  /* Brackets inside strings do not count. */
  CHECK(dec_op("{\"[[[[[\":[1]}", SEGOPS_OP_SUM, SEGOPS_PASS_FORWARD, &lim, &d, err) == 0);
  segops_decoded_free(&d);
  /* 3 pairs + 3 + 1 = 7 items. */
  lim.max_items = 6;
  CHECK_ERR(dec_op("{\"x\":[1,2,3],\"idx\":[0],\"num_segments\":1}", SEGOPS_OP_SUM, SEGOPS_PASS_FORWARD, &lim, &d, err),
            SEGOPS_E_TOO_LARGE, err, "more than 6 array/map items");
  lim.max_items = 7;
  CHECK(dec_op("{\"x\":[1,2,3],\"idx\":[0],\"num_segments\":1}", SEGOPS_OP_SUM, SEGOPS_PASS_FORWARD, &lim, &d, err) ==
        0);
  segops_decoded_free(&d);
  /* Default depth limit (16) well below jansson's own cap. */
  char deep[200] = "{\"x\":";
  for (int i = 0; i < 40; i++) strcat(deep, "[");
  CHECK_ERR(dec(deep, &d, err), SEGOPS_E_MALFORMED_BODY, err, "nested too deeply");
}

/* A bare nested list of `shape` (rank nd) holding 1, 2, 3, ... in row-major order. */
static size_t nested(char *buf, size_t at, const int64_t *shape, int nd, int level, int *next) {
  if (level == nd) return at + (size_t)sprintf(buf + at, "%d", (*next)++);
  buf[at++] = '[';
  for (int64_t i = 0; i < shape[level]; i++) {
    if (i) buf[at++] = ',';
    at = nested(buf, at, shape, nd, level + 1, next);
  }
  buf[at++] = ']';
  buf[at] = 0;
  return at;
}

/* Feature channels: (N, *F) up to rank 6 in both tensor forms, rank 7 refused by name. */
static void test_ranks(void) {
  char err[512], body[4096];
  segops_decoded d;
  const int64_t shapes[3][6] = {{2, 3, 1, 2}, {2, 1, 2, 1, 3}, {3, 1, 2, 1, 1, 2}};
  for (int k = 0; k < 3; k++) {
    int nd = 4 + k, next = 1;
    size_t at = (size_t)sprintf(body, "{\"dtype\":\"float32\",\"x\":");
    at = nested(body, at, shapes[k], nd, 0, &next);
    sprintf(body + at, ",\"idx\":[0,1%s],\"num_segments\":2}", shapes[k][0] == 3 ? ",1" : "");
    int rc = dec(body, &d, err);
    CHECK(rc == 0);
    if (rc) continue;
    const segops_tensor *x = arg(&d, "x");
    CHECK(x->dtype == SEGOPS_F32 && x->ndim == nd && x->nbytes == (size_t)(next - 1) * 4);
    for (int i = 0; i < nd; i++) CHECK(x->shape[i] == shapes[k][i]);
    for (int i = 0; i < next - 1; i++) CHECK(((const float *)x->data)[i] == (float)(i + 1));
    segops_decoded_free(&d);
  }
  /* The map form at rank 6: flat data, the shape as given. */
  int rc =
      dec("{\"x\":{\"dtype\":\"float64\",\"shape\":[2,1,1,1,1,3],\"data\":[1,2,3,4,5,6]},\"idx\":[0,1],"
          "\"num_segments\":2}",
          &d, err);
  CHECK(rc == 0);
  if (!rc) {
    const segops_tensor *x = arg(&d, "x");
    CHECK(x->ndim == 6 && x->shape[0] == 2 && x->shape[5] == 3 && x->nbytes == 48 && ((const double *)x->data)[5] == 6);
    segops_decoded_free(&d);
  }
  /* Rank 7: refused in either form, naming the argument and the limit; a ragged rank-6 list too. */
  CHECK_ERR(dec("{\"x\":[[[[[[[1,2]]]]]]],\"idx\":[0],\"num_segments\":1}", &d, err), SEGOPS_E_INVALID_ARGUMENT, err,
            "segmented_sum: x has more than 6 dimensions; at most 6 are allowed");
  CHECK_ERR(dec("{\"x\":{\"dtype\":\"float32\",\"shape\":[1,1,1,1,1,1,2],\"data\":[1,2]}}", &d, err),
            SEGOPS_E_INVALID_ARGUMENT, err, "segmented_sum: x has 7 dimensions; at most 6 are allowed");
  CHECK_ERR(dec("{\"x\":[[[[[[1,2]]]]],[[[[[3]]]]]]}", &d, err), SEGOPS_E_INVALID_ARGUMENT, err,
            "x is not a rectangular nested list");
}

int main(void) {
  test_spec_example();
  test_forms();
  test_errors();
  test_every_prefix();
  test_limits();
  test_ranks();
  return test_result("test_codec_json");
}

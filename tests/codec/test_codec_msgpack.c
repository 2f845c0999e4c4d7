/* test_codec_msgpack.c: the msgpack request decoder: good bodies, in-place (unaligned) payloads,
 * num_segments kinds, and every malformed, truncated, too deep, too large or mistyped body. */
#include <stdint.h>
#include <stdlib.h>

#include "codec_test.h"

static const segops_limits LIM = {.max_elements = 1 << 24, .max_segments = 1 << 24};
static const double X6[6] = {1, 2, 3, 4, 5, 6};
static const int32_t IDX6[6] = {0, 0, 1, 1, 1, 2};
static const long long SH6[1] = {6};

typedef struct {
  msgpack_sbuffer sb;
  msgpack_packer pk;
} body_t;

static void body_init(body_t *b) {
  msgpack_sbuffer_init(&b->sb);
  msgpack_packer_init(&b->pk, &b->sb, msgpack_sbuffer_write);
}

/* {"x": f64 (6,), "idx": i32 (6,), "num_segments": 3}: proto/API.md's curl example in msgpack. */
static void body_sum(body_t *b) {
  body_init(b);
  msgpack_pack_map(&b->pk, 3);
  pk_tensor(&b->pk, "x", "float64", 1, SH6, X6, sizeof X6);
  pk_tensor(&b->pk, "idx", "int32", 1, SH6, IDX6, sizeof IDX6);
  pk_str(&b->pk, "num_segments");
  msgpack_pack_int(&b->pk, 3);
}

static int dec(const void *body, size_t len, segops_decoded *d, char *err) {
  return segops_decode_msgpack(body, len, SEGOPS_OP_SUM, SEGOPS_PASS_FORWARD, NULL, d, err, 512);
}

/* Decodes then prepares; returns the first error. */
static int dec_prep(const void *body, size_t len, segops_op op, segops_pass pass, char *err) {
  segops_decoded d;
  segops_prepared p;
  int rc = segops_decode_msgpack(body, len, op, pass, NULL, &d, err, 512);
  if (rc) {
    CHECK(d.owned == NULL && d.req.nargs == 0);
    return rc;
  }
  rc = segops_prepare(&d.req, &LIM, &p, err, 512);
  segops_prepared_free(&p);
  segops_decoded_free(&d);
  return rc;
}

static void test_good_and_unaligned(void) {
  body_t b;
  body_sum(&b);
  char err[512];
  int misaligned_seen = 0;
  /* The same body at every offset mod 8: payloads are read in place, whatever their alignment. */
  char *buf = malloc(b.sb.size + 8);
  for (int shift = 0; shift < 8; shift++) {
    char *body = buf + shift;
    memcpy(body, b.sb.data, b.sb.size);
    segops_decoded d;
    int rc = dec(body, b.sb.size, &d, err);
    CHECK(rc == 0);
    if (rc) {
      fprintf(stderr, "%s\n", err);
      continue;
    }
    CHECK(d.owned == NULL);
    CHECK(d.req.nargs == 2);
    CHECK(d.req.ns_kind == SEGOPS_NS_INT && d.req.ns_value == 3 && !d.req.ns_overflow);
    const segops_tensor *x = &d.req.args[0].t;
    CHECK(d.req.args[0].name_len == 1 && d.req.args[0].name[0] == 'x');
    CHECK(x->dtype == SEGOPS_F64 && x->ndim == 1 && x->shape[0] == 6 && x->nbytes == 48);
    CHECK((const char *)x->data > body && (const char *)x->data + 48 <= body + b.sb.size); /* in place */
    if ((uintptr_t)x->data % 8) misaligned_seen++;
    segops_prepared p;
    rc = segops_prepare(&d.req, &LIM, &p, err, sizeof err);
    CHECK(rc == 0);
    if (!rc) {
      CHECK(p.call.in[0] == x->data);
      CHECK((uintptr_t)p.call.idx % 4 == 0);
      double sums[3] = {0, 0, 0};
      for (int i = 0; i < 6; i++) {
        double v;
        memcpy(&v, (const char *)p.call.in[0] + i * 8, 8);
        CHECK(p.call.idx[i] == IDX6[i]);
        sums[p.call.idx[i]] += v;
      }
      CHECK(sums[0] == 3 && sums[1] == 12 && sums[2] == 6);
      CHECK(p.out_ndim[0] == 1 && p.out_shape[0][0] == 3);
    }
    segops_prepared_free(&p);
    segops_decoded_free(&d);
  }
  CHECK(misaligned_seen >= 4);
  free(buf);
  msgpack_sbuffer_destroy(&b.sb);
}

static void test_truncated_and_trailing(void) {
  body_t b;
  body_sum(&b);
  char err[512];
  segops_decoded d;
  /* Every strict prefix is truncated. */
  for (size_t n = 0; n < b.sb.size; n++) {
    char *copy = malloc(n ? n : 1); /* exact size: ASan sees any read past the end */
    memcpy(copy, b.sb.data, n);
    int rc = dec(copy, n, &d, err);
    if (rc != SEGOPS_E_MALFORMED_BODY || !strstr(err, "truncated")) {
      fprintf(stderr, "prefix %zu: %s\n", n, err);
      g_failures++;
    }
    CHECK(d.owned == NULL && d.req.nargs == 0);
    free(copy);
  }
  CHECK_ERR(dec("", 0, &d, err), SEGOPS_E_MALFORMED_BODY, err, "body is not valid msgpack (truncated at byte 0)");
  char *more = malloc(b.sb.size + 1);
  memcpy(more, b.sb.data, b.sb.size);
  more[b.sb.size] = 0x00;
  CHECK_ERR(dec(more, b.sb.size + 1, &d, err), SEGOPS_E_MALFORMED_BODY, err, "1 trailing bytes");
  free(more);
  CHECK_ERR(dec("\xc1", 1, &d, err), SEGOPS_E_MALFORMED_BODY, err, "is not a type");
  /* An array32 header claiming 2^32-1 items with 3 bytes left. */
  CHECK_ERR(dec("\x81\xa1x\xdd\xff\xff\xff\xff\x01\x02\x03", 11, &d, err), SEGOPS_E_MALFORMED_BODY, err,
            "claims 4294967295 items");
  CHECK_ERR(dec("\xdf\x7f\xff\xff\xff", 5, &d, err), SEGOPS_E_MALFORMED_BODY, err, "claims 2147483647 items");
  /* A bin32 claiming 4 GiB. */
  CHECK_ERR(dec("\x81\xa1x\xc6\xff\xff\xff\xff\x00", 9, &d, err), SEGOPS_E_MALFORMED_BODY, err, "truncated");
  msgpack_sbuffer_destroy(&b.sb);
}

static void test_limits(void) {
  char err[512];
  segops_decoded d;
  /* 40 nested arrays. */
  char deep[64];
  deep[0] = (char)0x81, deep[1] = (char)0xa1, deep[2] = 'x';
  for (int i = 0; i < 40; i++) deep[3 + i] = (char)0x91;
  deep[43] = 0;
  CHECK_ERR(dec(deep, 44, &d, err), SEGOPS_E_MALFORMED_BODY, err, "nested too deeply");
  segops_codec_limits lim = {.max_depth = 3, .max_items = 100};
  /* Depth 3 is allowed (body map, tensor map, shape list); 4 is not. */
  body_t b;
  body_sum(&b);
  CHECK(segops_decode_msgpack(b.sb.data, b.sb.size, SEGOPS_OP_SUM, SEGOPS_PASS_FORWARD, &lim, &d, err, 512) == 0);
  segops_decoded_free(&d);
  lim.max_depth = 2;
  CHECK_ERR(segops_decode_msgpack(b.sb.data, b.sb.size, SEGOPS_OP_SUM, SEGOPS_PASS_FORWARD, &lim, &d, err, 512),
            SEGOPS_E_MALFORMED_BODY, err, "more than 2 levels");
  lim.max_depth = 8;
  lim.max_items = 8; /* the body has 3 + 3 + 1 + 3 + 1 = 11 items */
  CHECK_ERR(segops_decode_msgpack(b.sb.data, b.sb.size, SEGOPS_OP_SUM, SEGOPS_PASS_FORWARD, &lim, &d, err, 512),
            SEGOPS_E_TOO_LARGE, err, "more than 8 array/map items");
  lim.max_items = 11;
  CHECK(segops_decode_msgpack(b.sb.data, b.sb.size, SEGOPS_OP_SUM, SEGOPS_PASS_FORWARD, &lim, &d, err, 512) == 0);
  segops_decoded_free(&d);
  msgpack_sbuffer_destroy(&b.sb);
  /* A larger limit is capped at msgpack-c's own stack depth (32): 32 levels are parsed, 33 are
   * refused by the pre-scan, not by msgpack-c. */
  lim.max_depth = 100;
  lim.max_items = 1000;
  for (int depth = 32; depth <= 33; depth++) {
    char nest[64];
    int n = 0;
    nest[n++] = (char)0x81, nest[n++] = (char)0xa1, nest[n++] = 'x';
    for (int i = 0; i < depth - 1; i++) nest[n++] = (char)0x91;
    nest[n++] = 0;
    int rc = segops_decode_msgpack(nest, (size_t)n, SEGOPS_OP_SUM, SEGOPS_PASS_FORWARD, &lim, &d, err, 512);
    if (depth == 32)
      CHECK_ERR(rc, SEGOPS_E_MALFORMED_BODY, err, "x must be a tensor map");
    else
      CHECK_ERR(rc, SEGOPS_E_MALFORMED_BODY, err, "nested too deeply (more than 32 levels");
  }
}

/* Builds {"x": <custom value via fn>, "idx": ..., "num_segments": 3} and expects an error. */
typedef void (*pack_fn)(msgpack_packer *pk);
static int dec_with(pack_fn f, char *err) {
  body_t b;
  body_init(&b);
  msgpack_pack_map(&b.pk, 3);
  f(&b.pk);
  pk_tensor(&b.pk, "idx", "int32", 1, SH6, IDX6, sizeof IDX6);
  pk_str(&b.pk, "num_segments");
  msgpack_pack_int(&b.pk, 3);
  int rc = dec_prep(b.sb.data, b.sb.size, SEGOPS_OP_SUM, SEGOPS_PASS_FORWARD, err);
  msgpack_sbuffer_destroy(&b.sb);
  return rc;
}

static void x_not_map(msgpack_packer *pk) { pk_str(pk, "x"), msgpack_pack_array(pk, 0); }
static void x_dtype_int(msgpack_packer *pk) {
  pk_str(pk, "x"), msgpack_pack_map(pk, 3), pk_str(pk, "dtype"), msgpack_pack_int(pk, 1);
  pk_str(pk, "shape"), msgpack_pack_array(pk, 0), pk_str(pk, "data"), msgpack_pack_bin(pk, 0);
}
static void x_float16(msgpack_packer *pk) {
  pk_str(pk, "x"), msgpack_pack_map(pk, 3), pk_str(pk, "dtype"), pk_str(pk, "float16");
  pk_str(pk, "shape"), msgpack_pack_array(pk, 0), pk_str(pk, "data"), msgpack_pack_bin(pk, 0);
}
static void x_shape_float(msgpack_packer *pk) {
  pk_str(pk, "x"), msgpack_pack_map(pk, 3), pk_str(pk, "dtype"), pk_str(pk, "float64");
  pk_str(pk, "shape"), msgpack_pack_array(pk, 1), msgpack_pack_double(pk, 6.0);
  pk_str(pk, "data"), msgpack_pack_bin(pk, 0);
}
static void x_shape_str(msgpack_packer *pk) {
  pk_str(pk, "x"), msgpack_pack_map(pk, 3), pk_str(pk, "dtype"), pk_str(pk, "float64");
  pk_str(pk, "shape"), pk_str(pk, "6"), pk_str(pk, "data"), msgpack_pack_bin(pk, 0);
}
static void x_shape_huge(msgpack_packer *pk) {
  pk_str(pk, "x"), msgpack_pack_map(pk, 3), pk_str(pk, "dtype"), pk_str(pk, "float64");
  pk_str(pk, "shape"), msgpack_pack_array(pk, 1), msgpack_pack_uint64(pk, UINT64_MAX);
  pk_str(pk, "data"), msgpack_pack_bin(pk, 0);
}
static void x_shape_neg(msgpack_packer *pk) {
  long long sh[1] = {-6};
  pk_tensor(pk, "x", "float64", 1, sh, X6, 0);
}
static void x_7d(msgpack_packer *pk) {
  long long sh[7] = {6, 1, 1, 1, 1, 1, 1};
  pk_tensor(pk, "x", "float64", 7, sh, X6, sizeof X6);
}
static void x_data_str(msgpack_packer *pk) {
  pk_str(pk, "x"), msgpack_pack_map(pk, 3), pk_str(pk, "dtype"), pk_str(pk, "float64");
  pk_str(pk, "shape"), msgpack_pack_array(pk, 0), pk_str(pk, "data"), pk_str(pk, "abc");
}
static void x_no_data(msgpack_packer *pk) {
  pk_str(pk, "x"), msgpack_pack_map(pk, 2), pk_str(pk, "dtype"), pk_str(pk, "float64");
  pk_str(pk, "shape"), msgpack_pack_array(pk, 0);
}
static void x_extra_key(msgpack_packer *pk) {
  pk_str(pk, "x"), msgpack_pack_map(pk, 4), pk_str(pk, "dtype"), pk_str(pk, "float64");
  pk_str(pk, "shape"), msgpack_pack_array(pk, 0), pk_str(pk, "data"), msgpack_pack_bin(pk, 0);
  pk_str(pk, "strides"), msgpack_pack_nil(pk);
}
static void x_dup_key(msgpack_packer *pk) {
  pk_str(pk, "x"), msgpack_pack_map(pk, 4), pk_str(pk, "dtype"), pk_str(pk, "float64");
  pk_str(pk, "shape"), msgpack_pack_array(pk, 0), pk_str(pk, "shape"), msgpack_pack_array(pk, 0);
  pk_str(pk, "data"), msgpack_pack_bin(pk, 0);
}
static void x_short_data(msgpack_packer *pk) { pk_tensor(pk, "x", "float64", 1, SH6, X6, 40); }
static void foo_int(msgpack_packer *pk) { pk_str(pk, "foo"), msgpack_pack_int(pk, 3); }
static void foo_tensor(msgpack_packer *pk) { pk_tensor(pk, "foo", "float64", 1, SH6, X6, sizeof X6); }

static void test_tensor_errors(void) {
  char err[512];
  CHECK_ERR(dec_with(x_not_map, err), SEGOPS_E_MALFORMED_BODY, err, "segmented_sum: x must be a tensor map");
  CHECK_ERR(dec_with(x_dtype_int, err), SEGOPS_E_MALFORMED_BODY, err, "segmented_sum: x.dtype must be a string");
  CHECK_ERR(dec_with(x_float16, err), SEGOPS_E_INVALID_ARGUMENT, err,
            "x: unknown dtype 'float16' (expected float32 or float64)");
  CHECK_ERR(dec_with(x_shape_float, err), SEGOPS_E_MALFORMED_BODY, err,
            "segmented_sum: x.shape must be a list of non-negative integers");
  CHECK_ERR(dec_with(x_shape_str, err), SEGOPS_E_MALFORMED_BODY, err,
            "x.shape must be a list of non-negative integers");
  CHECK_ERR(dec_with(x_shape_huge, err), SEGOPS_E_TOO_LARGE, err, "x.shape[0] is too large");
  CHECK_ERR(dec_with(x_shape_neg, err), SEGOPS_E_INVALID_ARGUMENT, err, "x.shape[0] (-6) must be >= 0");
  CHECK_ERR(dec_with(x_7d, err), SEGOPS_E_INVALID_ARGUMENT, err,
            "segmented_sum: x has 7 dimensions; at most 6 are allowed");
  CHECK_ERR(dec_with(x_data_str, err), SEGOPS_E_MALFORMED_BODY, err, "x.data must be binary");
  CHECK_ERR(dec_with(x_no_data, err), SEGOPS_E_MALFORMED_BODY, err, "x is missing \"data\"");
  CHECK_ERR(dec_with(x_extra_key, err), SEGOPS_E_MALFORMED_BODY, err, "x has unknown key 'strides'");
  CHECK_ERR(dec_with(x_dup_key, err), SEGOPS_E_MALFORMED_BODY, err, "x has key 'shape' more than once");
  CHECK_ERR(dec_with(x_short_data, err), SEGOPS_E_INVALID_ARGUMENT, err, "x data has 40 bytes but shape (6,)");
  CHECK_ERR(dec_with(foo_int, err), SEGOPS_E_INVALID_ARGUMENT, err, "unknown argument 'foo' for forward");
  CHECK_ERR(dec_with(foo_tensor, err), SEGOPS_E_INVALID_ARGUMENT, err, "unknown argument 'foo'");
}

static void test_body_shape_errors(void) {
  char err[512];
  segops_decoded d;
  CHECK_ERR(dec("\x93\x01\x02\x03", 4, &d, err), SEGOPS_E_MALFORMED_BODY, err,
            "segmented_sum: body must be a map of argument names");
  CHECK_ERR(dec("\x81\x01\x02", 3, &d, err), SEGOPS_E_MALFORMED_BODY, err, "key 0 is not a string");
  CHECK_ERR(dec("\xa3"
                "abc",
                4, &d, err),
            SEGOPS_E_MALFORMED_BODY, err, "body must be a map");
  /* A key with raw bytes is echoed only as printable text. */
  CHECK_ERR(dec("\x81\xa3\x01\xff\x00\x03", 6, &d, err), SEGOPS_E_INVALID_ARGUMENT, err,
            "unknown argument '\\x01\\xff\\x00'");

  /* More tensors than SEGOPS_MAX_REQ_ARGS. */
  body_t b;
  body_init(&b);
  msgpack_pack_map(&b.pk, SEGOPS_MAX_REQ_ARGS + 1);
  for (int i = 0; i <= SEGOPS_MAX_REQ_ARGS; i++) pk_tensor(&b.pk, "x", "float64", 1, SH6, X6, sizeof X6);
  CHECK_ERR(dec(b.sb.data, b.sb.size, &d, err), SEGOPS_E_INVALID_ARGUMENT, err, "too many arguments (more than 16");
  msgpack_sbuffer_destroy(&b.sb);

  /* A repeated tensor name reaches prepare, which names it. */
  body_init(&b);
  msgpack_pack_map(&b.pk, 4);
  pk_tensor(&b.pk, "x", "float64", 1, SH6, X6, sizeof X6);
  pk_tensor(&b.pk, "x", "float64", 1, SH6, X6, sizeof X6);
  pk_tensor(&b.pk, "idx", "int32", 1, SH6, IDX6, sizeof IDX6);
  pk_str(&b.pk, "num_segments"), msgpack_pack_int(&b.pk, 3);
  CHECK(dec(b.sb.data, b.sb.size, &d, err) == 0 && d.req.nargs == 3);
  segops_decoded_free(&d);
  CHECK_ERR(dec_prep(b.sb.data, b.sb.size, SEGOPS_OP_SUM, SEGOPS_PASS_FORWARD, err), SEGOPS_E_INVALID_ARGUMENT, err,
            "argument 'x' is given more than once");
  msgpack_sbuffer_destroy(&b.sb);
}

/* Body with proto/API.md's curl example plus extra top-level entries packed by f. */
static int dec_top(int extra, pack_fn f, segops_decoded *d, char *err) {
  body_t b;
  body_init(&b);
  msgpack_pack_map(&b.pk, 2 + extra);
  pk_tensor(&b.pk, "x", "float64", 1, SH6, X6, sizeof X6);
  pk_tensor(&b.pk, "idx", "int32", 1, SH6, IDX6, sizeof IDX6);
  f(&b.pk);
  /* The body is copied so that it outlives the sbuffer for the caller's checks. */
  static char keep[4096];
  memcpy(keep, b.sb.data, b.sb.size);
  int rc = dec(keep, b.sb.size, d, err);
  msgpack_sbuffer_destroy(&b.sb);
  return rc;
}

static void ns_neg(msgpack_packer *pk) { pk_str(pk, "num_segments"), msgpack_pack_int(pk, -2); }
static void ns_float(msgpack_packer *pk) { pk_str(pk, "num_segments"), msgpack_pack_double(pk, 3.0); }
static void ns_str(msgpack_packer *pk) { pk_str(pk, "num_segments"), pk_str(pk, "3"); }
static void ns_u64max(msgpack_packer *pk) { pk_str(pk, "num_segments"), msgpack_pack_uint64(pk, UINT64_MAX); }
static void ns_2p40(msgpack_packer *pk) { pk_str(pk, "num_segments"), msgpack_pack_int64(pk, (int64_t)1 << 40); }
static void ns_twice(msgpack_packer *pk) { ns_neg(pk), pk_str(pk, "num_segments"), msgpack_pack_int(pk, 3); }
static void ns_and_dtype(msgpack_packer *pk) {
  pk_str(pk, "num_segments"), msgpack_pack_int(pk, 3), pk_str(pk, "dtype"), msgpack_pack_int(pk, 7);
}
static void ns_outputs(msgpack_packer *pk) {
  pk_str(pk, "num_segments"), msgpack_pack_int(pk, 3), pk_str(pk, "outputs"), msgpack_pack_array(pk, 1);
  pk_str(pk, "out");
}
static void ns_outputs_bad(msgpack_packer *pk) {
  pk_str(pk, "num_segments"), msgpack_pack_int(pk, 3), pk_str(pk, "outputs"), msgpack_pack_array(pk, 1);
  msgpack_pack_int(pk, 1);
}
static void ns_outputs_many(msgpack_packer *pk) {
  pk_str(pk, "num_segments"), msgpack_pack_int(pk, 3), pk_str(pk, "outputs"), msgpack_pack_array(pk, 7);
  for (int i = 0; i < 7; i++) pk_str(pk, "out");
}
static void ns_outputs_unknown(msgpack_packer *pk) {
  pk_str(pk, "num_segments"), msgpack_pack_int(pk, 3), pk_str(pk, "outputs"), msgpack_pack_array(pk, 1);
  pk_str(pk, "grad_x");
}

static void test_top_keys(void) {
  char err[512];
  segops_decoded d;
  segops_prepared p;
  CHECK(dec_top(1, ns_neg, &d, err) == 0 && d.req.ns_kind == SEGOPS_NS_INT && d.req.ns_value == -2);
  CHECK_ERR(segops_prepare(&d.req, &LIM, &p, err, 512), SEGOPS_E_INVALID_ARGUMENT, err,
            "num_segments (-2) must be >= 0");
  CHECK(dec_top(1, ns_float, &d, err) == 0 && d.req.ns_kind == SEGOPS_NS_NOT_INT);
  CHECK_ERR(segops_prepare(&d.req, &LIM, &p, err, 512), SEGOPS_E_INVALID_ARGUMENT, err,
            "num_segments must be an integer");
  CHECK(dec_top(1, ns_str, &d, err) == 0 && d.req.ns_kind == SEGOPS_NS_NOT_INT);
  CHECK(dec_top(1, ns_u64max, &d, err) == 0 && d.req.ns_kind == SEGOPS_NS_INT && d.req.ns_overflow);
  CHECK_ERR(segops_prepare(&d.req, &LIM, &p, err, 512), SEGOPS_E_TOO_LARGE, err, "num_segments exceeds the limit");
  CHECK(dec_top(1, ns_2p40, &d, err) == 0 && d.req.ns_value == (int64_t)1 << 40);
  CHECK_ERR(segops_prepare(&d.req, &LIM, &p, err, 512), SEGOPS_E_TOO_LARGE, err,
            "num_segments (1099511627776) exceeds");
  CHECK_ERR(dec_top(2, ns_twice, &d, err), SEGOPS_E_INVALID_ARGUMENT, err, "num_segments is given more than once");
  CHECK(dec_top(2, ns_and_dtype, &d, err) == 0 && d.req.ns_value == 3 && !d.req.has_outputs);
  CHECK(dec_top(2, ns_outputs, &d, err) == 0 && d.req.has_outputs && d.req.n_outputs == 1 &&
        d.req.outputs[0].len == 3 && !memcmp(d.req.outputs[0].name, "out", 3));
  CHECK(segops_prepare(&d.req, &LIM, &p, err, 512) == 0 && p.requested[0]);
  segops_prepared_free(&p);
  CHECK_ERR(dec_top(2, ns_outputs_bad, &d, err), SEGOPS_E_MALFORMED_BODY, err,
            "outputs must be a list of output names");
  CHECK_ERR(dec_top(2, ns_outputs_many, &d, err), SEGOPS_E_INVALID_ARGUMENT, err, "outputs lists 7 names");
  CHECK(dec_top(2, ns_outputs_unknown, &d, err) == 0);
  CHECK_ERR(segops_prepare(&d.req, &LIM, &p, err, 512), SEGOPS_E_INVALID_ARGUMENT, err, "unknown output 'grad_x'");
}

static void test_bad_op(void) {
  char err[512];
  segops_decoded d;
  CHECK(segops_decode_msgpack("\x80", 1, (segops_op)99, SEGOPS_PASS_FORWARD, NULL, &d, err, 512) == SEGOPS_E_NOT_FOUND);
  segops_decoded_free(NULL);
  segops_decoded z = {0};
  segops_decoded_free(&z);
}

/* Feature channels: x of rank 4, 5 and 6 decodes with its shape as sent and its bytes in place. */
static void test_ranks(void) {
  char err[512];
  const long long shapes[3][6] = {{3, 1, 2, 1}, {1, 2, 1, 3, 1}, {2, 1, 1, 3, 1, 1}};
  const double x6[6] = {1, 2, 3, 4, 5, 6};
  for (int k = 0; k < 3; k++) {
    int nd = 4 + k;
    body_t b;
    body_init(&b);
    msgpack_pack_map(&b.pk, 3);
    pk_tensor(&b.pk, "x", "float64", nd, shapes[k], x6, sizeof x6);
    long long sn[1] = {shapes[k][0]};
    pk_tensor(&b.pk, "idx", "int32", 1, sn, IDX6, (size_t)sn[0] * 4);
    pk_str(&b.pk, "num_segments");
    msgpack_pack_int(&b.pk, 3);
    segops_decoded d;
    int rc = dec(b.sb.data, b.sb.size, &d, err);
    CHECK(rc == 0);
    if (!rc) {
      const segops_tensor *x = NULL;
      for (int i = 0; i < d.req.nargs; i++)
        if (d.req.args[i].name_len == 1 && d.req.args[i].name[0] == 'x') x = &d.req.args[i].t;
      CHECK(x && x->ndim == nd && x->nbytes == sizeof x6 && !memcmp(x->data, x6, sizeof x6));
      for (int i = 0; x && i < nd; i++) CHECK(x->shape[i] == shapes[k][i]);
      segops_decoded_free(&d);
    }
    msgpack_sbuffer_destroy(&b.sb);
  }
}

int main(void) {
  test_good_and_unaligned();
  test_truncated_and_trailing();
  test_limits();
  test_tensor_errors();
  test_body_shape_errors();
  test_top_keys();
  test_bad_op();
  test_ranks();
  return test_result("test_codec_msgpack");
}

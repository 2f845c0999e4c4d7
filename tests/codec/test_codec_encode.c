/* test_codec_encode.c: response encoders. JSON text exactly as proto/API.md prints it (17/9 digits,
 * ".0", non-finite tokens) and read back by jansson; msgpack read back by msgpack-c, with the
 * payloads referenced, not copied. */
#include <jansson.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#include "codec_test.h"

static char *flatten(const segops_encoded *e) {
  char *s = malloc(e->total + 1), *p = s;
  size_t sum = 0;
  for (int i = 0; i < e->iovcnt; i++) {
    memcpy(p, e->iov[i].iov_base, e->iov[i].iov_len);
    p += e->iov[i].iov_len;
    sum += e->iov[i].iov_len;
  }
  CHECK(sum == e->total);
  *p = 0;
  return s;
}

static char *json_of(const segops_out_tensor *o, int n) {
  segops_encoded e;
  CHECK(segops_encode_json(o, n, &e) == 0);
  CHECK(e.iovcnt == 1);
  char *s = flatten(&e);
  segops_encoded_free(&e);
  return s;
}

static segops_out_tensor vec(const char *name, segops_dtype dt, const void *data, int64_t n) {
  segops_out_tensor o = {.name = name, .dtype = dt, .ndim = 1, .shape = {n}, .data = data};
  o.nbytes = (size_t)n * segops_dtype_size(dt);
  return o;
}

static void check_json(const segops_out_tensor *o, int n, const char *want) {
  char *got = json_of(o, n);
  if (strcmp(got, want)) {
    fprintf(stderr, "JSON mismatch:\n got: %s\nwant: %s\n", got, want);
    g_failures++;
  }
  free(got);
}

/* The rule of proto/API.md (Response), written independently of the encoder: printf's %.17g/%.9g, then ".0"
 * when the text has neither '.' nor an exponent. */
static void ref_number(char *buf, double v, int digits) {
  if (isnan(v)) {
    strcpy(buf, "NaN");
  } else if (isinf(v)) {
    strcpy(buf, v < 0 ? "-Infinity" : "Infinity");
  } else {
    snprintf(buf, 40, digits == 17 ? "%.17g" : "%.9g", v);
    if (!strchr(buf, '.') && !strchr(buf, 'e')) strcat(buf, ".0");
  }
}

static uint64_t rng = 0x9e3779b97f4a7c15ULL;
static uint64_t next(void) {
  rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
  return rng;
}

static void test_json_format(void) {
  const double spec[3] = {3, 12, 6};
  segops_out_tensor o = vec("out", SEGOPS_F64, spec, 3);
  check_json(&o, 1, "{\"out\":{\"dtype\":\"float64\",\"shape\":[3],\"data\":[3.0,12.0,6.0]}}");

  const double d[] = {0.1, 1e16, 1e17, -0.0, 123.5, NAN, INFINITY, -INFINITY, 5e-324, -2.5e-308, 9007199254740993.0};
  o = vec("grad_x", SEGOPS_F64, d, 11);
  check_json(&o, 1,
             "{\"grad_x\":{\"dtype\":\"float64\",\"shape\":[11],\"data\":[0.10000000000000001,10000000000000000.0,"
             "1e+17,-0.0,123.5,NaN,Infinity,-Infinity,4.9406564584124654e-324,-2.4999999999999998e-308,"
             "9007199254740992.0]}}");
  const float f[] = {0.1f, 16777216.0f, 1e9f, 3.0f, -1.5f, 3.4028235e38f, 1e-45f, -0.0f};
  o = vec("out", SEGOPS_F32, f, 8);
  check_json(&o, 1,
             "{\"out\":{\"dtype\":\"float32\",\"shape\":[8],\"data\":[0.100000001,16777216.0,1e+09,3.0,-1.5,"
             "3.40282347e+38,1.40129846e-45,-0.0]}}");

  /* Several outputs, shapes, an empty one, integer dtypes. */
  const double m[9] = {1, 2, 0, 0, 1, 0, 0, 0, 1};
  const int32_t i32[2] = {-2147483647 - 1, 7};
  const int64_t i64[1] = {INT64_MIN};
  segops_out_tensor os[4] = {
      {.name = "grad_g_out", .dtype = SEGOPS_F64, .ndim = 3, .shape = {1, 3, 3}, .data = m, .nbytes = sizeof m},
      {.name = "grad_v", .dtype = SEGOPS_F64, .ndim = 2, .shape = {0, 3}, .data = m, .nbytes = 0},
      vec("a", SEGOPS_I32, i32, 2),
      vec("b", SEGOPS_I64, i64, 1)};
  check_json(os, 4,
             "{\"grad_g_out\":{\"dtype\":\"float64\",\"shape\":[1,3,3],\"data\":[1.0,2.0,0.0,0.0,1.0,0.0,0.0,0.0,1.0]},"
             "\"grad_v\":{\"dtype\":\"float64\",\"shape\":[0,3],\"data\":[]},"
             "\"a\":{\"dtype\":\"int32\",\"shape\":[2],\"data\":[-2147483648,7]},"
             "\"b\":{\"dtype\":\"int64\",\"shape\":[1],\"data\":[-9223372036854775808]}}");
  check_json(NULL, 0, "{}");
  /* Feature channels: the shape as it is, up to rank 6; the data flat. */
  const float r5[6] = {1, 2, 3, 4, 5, 6};
  segops_out_tensor o5[2] = {
      {.name = "out", .dtype = SEGOPS_F32, .ndim = 5, .shape = {1, 2, 1, 3, 1}, .data = r5, .nbytes = sizeof r5},
      {.name = "grad_y", .dtype = SEGOPS_F64, .ndim = 6, .shape = {0, 2, 3, 4, 5, 6}, .data = m, .nbytes = 0}};
  check_json(o5, 2,
             "{\"out\":{\"dtype\":\"float32\",\"shape\":[1,2,1,3,1],\"data\":[1.0,2.0,3.0,4.0,5.0,6.0]},"
             "\"grad_y\":{\"dtype\":\"float64\",\"shape\":[0,2,3,4,5,6],\"data\":[]}}");

  /* Random bit patterns (every exponent, NaNs, infinities, subnormals) and random integers:
   * the encoder must print exactly what the rule prints. */
  enum { R = 150000 };
  double *rd = malloc(R * sizeof *rd);
  float *rf = malloc(R * sizeof *rf);
  for (int i = 0; i < R; i++) {
    uint64_t b = next();
    if (i % 3 == 0) {
      rd[i] = (double)(int64_t)(b >> (11 + b % 50)) * ((b & 1) ? -1 : 1);
      rf[i] = (float)rd[i];
    } else if (i % 3 == 1) {
      /* Where values live in practice (1e-21 .. 1e19), near powers of ten, and exact ties
       * (k * 2^-j with 18 significant digits ending in 5). */
      double mant = (double)(b >> 11) / 9007199254740992.0;
      double v = mant * pow(10.0, (double)((int)(b % 41) - 21));
      switch (b % 7) {
        case 0:
          v = nextafter(pow(10.0, (double)((int)(b % 41) - 21)), (b & 8) ? 0.0 : INFINITY);
          break;
        case 1:
          v = ldexp((double)(2 * (b % 4096) + 1), -(int)(20 + b % 40));
          break;
        default:
          break;
      }
      rd[i] = (b & 16) ? -v : v;
      rf[i] = (float)rd[i];
    } else {
      memcpy(&rd[i], &b, 8);
      uint32_t b32 = (uint32_t)b;
      memcpy(&rf[i], &b32, 4);
    }
  }
  o = vec("r", SEGOPS_F64, rd, R);
  char *got = json_of(&o, 1);
  segops_out_tensor of = vec("r", SEGOPS_F32, rf, R);
  char *gotf = json_of(&of, 1);
  char *p = strstr(got, "[") ? strstr(got, "\"data\":[") + 8 : got, *pf = strstr(gotf, "\"data\":[") + 8;
  int bad = 0;
  for (int i = 0; i < R && bad < 5; i++) {
    char want[48];
    ref_number(want, rd[i], 17);
    size_t n = strlen(want);
    if (strncmp(p, want, n) || (p[n] != ',' && p[n] != ']'))
      bad++, fprintf(stderr, "f64 %d: want %s at %.30s\n", i, want, p);
    p += n + 1;
    ref_number(want, (double)rf[i], 9);
    n = strlen(want);
    if (strncmp(pf, want, n) || (pf[n] != ',' && pf[n] != ']'))
      bad++, fprintf(stderr, "f32 %d: want %s at %.30s\n", i, want, pf);
    pf += n + 1;
  }
  CHECK(bad == 0);

  /* Read back by jansson (finite values only: jansson has no NaN tokens) and compared bit for bit. */
  for (int i = 0; i < R; i++)
    if (!isfinite(rd[i])) rd[i] = (double)i;
  free(got);
  got = json_of(&o, 1);
  json_error_t je;
  json_t *root = json_loads(got, 0, &je);
  CHECK(root != NULL);
  json_t *data = json_object_get(json_object_get(root, "r"), "data");
  CHECK(json_array_size(data) == R);
  int mism = 0;
  for (size_t i = 0; i < json_array_size(data); i++) {
    json_t *e = json_array_get(data, i);
    double v = json_is_real(e) ? json_real_value(e) : (double)json_integer_value(e);
    if (memcmp(&v, &rd[i], 8) && !(v == 0 && rd[i] == 0)) mism++;
  }
  CHECK(mism == 0);
  json_t *want_shape = json_pack("[i]", R);
  CHECK(json_equal(json_object_get(json_object_get(root, "r"), "shape"), want_shape) == 1);
  json_decref(want_shape);
  json_decref(root);
  free(got);
  free(gotf);

  /* Speed, for the record (not asserted): 1M float64 values. */
  enum { B = 1 << 20 };
  double *big = malloc(B * sizeof *big);
  for (int i = 0; i < B; i++) big[i] = (double)(next() >> 11) / 9007199254740992.0;
  o = vec("out", SEGOPS_F64, big, B);
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  segops_encoded e;
  CHECK(segops_encode_json(&o, 1, &e) == 0);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  printf("encode_json: %d float64 values in %.1f ms (%zu bytes)\n", B,
         (t1.tv_sec - t0.tv_sec) * 1e3 + (t1.tv_nsec - t0.tv_nsec) / 1e6, e.total);
  segops_encoded_free(&e);
  free(big);
  free(rd);
  free(rf);
}

static void test_msgpack(void) {
  double a[6] = {1, 2, 3, 4, 5, 6.5};
  float b[2] = {0.5f, -1};
  segops_out_tensor os[3] = {
      {.name = "grad_x", .dtype = SEGOPS_F64, .ndim = 6, .shape = {2, 1, 3, 1, 1, 1}, .data = a, .nbytes = sizeof a},
      {.name = "grad_y", .dtype = SEGOPS_F32, .ndim = 4, .shape = {2, 1, 1, 1}, .data = b, .nbytes = sizeof b},
      {.name = "empty", .dtype = SEGOPS_F64, .ndim = 1, .shape = {0}, .data = a, .nbytes = 0}};
  segops_encoded e;
  CHECK(segops_encode_msgpack(os, 3, &e) == 0);
  /* Payloads are referenced in place. */
  int refs = 0;
  for (int i = 0; i < e.iovcnt; i++) refs += e.iov[i].iov_base == (void *)a || e.iov[i].iov_base == (void *)b;
  CHECK(refs == 2);
  char *s = flatten(&e);
  msgpack_zone z;
  msgpack_zone_init(&z, 1024);
  msgpack_object obj;
  size_t off = 0;
  CHECK(msgpack_unpack(s, e.total, &off, &z, &obj) == MSGPACK_UNPACK_SUCCESS && off == e.total);
  CHECK(obj.type == MSGPACK_OBJECT_MAP && obj.via.map.size == 3);
  for (uint32_t i = 0; i < obj.via.map.size && i < 3; i++) {
    msgpack_object_kv *kv = &obj.via.map.ptr[i];
    CHECK(kv->key.type == MSGPACK_OBJECT_STR && kv->key.via.str.size == strlen(os[i].name) &&
          !memcmp(kv->key.via.str.ptr, os[i].name, kv->key.via.str.size));
    CHECK(kv->val.type == MSGPACK_OBJECT_MAP && kv->val.via.map.size == 3);
    if (kv->val.type != MSGPACK_OBJECT_MAP || kv->val.via.map.size != 3) continue;
    msgpack_object_kv *t = kv->val.via.map.ptr;
    const char *dt = segops_dtype_name(os[i].dtype);
    CHECK(t[0].key.via.str.size == 5 && !memcmp(t[0].key.via.str.ptr, "dtype", 5));
    CHECK(t[0].val.type == MSGPACK_OBJECT_STR && t[0].val.via.str.size == strlen(dt) &&
          !memcmp(t[0].val.via.str.ptr, dt, strlen(dt)));
    CHECK(t[1].val.type == MSGPACK_OBJECT_ARRAY && (int)t[1].val.via.array.size == os[i].ndim);
    for (int d = 0; d < os[i].ndim && t[1].val.type == MSGPACK_OBJECT_ARRAY; d++)
      CHECK(t[1].val.via.array.ptr[d].via.u64 == (uint64_t)os[i].shape[d]);
    CHECK(t[2].val.type == MSGPACK_OBJECT_BIN && t[2].val.via.bin.size == os[i].nbytes &&
          !memcmp(t[2].val.via.bin.ptr, os[i].data, os[i].nbytes));
  }
  msgpack_zone_destroy(&z);
  free(s);
  segops_encoded_free(&e);
  segops_encoded_free(&e); /* idempotent */
  segops_encoded_free(NULL);
  /* Large payloads: no copy, header + payload pieces only. */
  size_t nbig = 1 << 20;
  double *big = calloc(nbig, 8);
  segops_out_tensor ob = {
      .name = "out", .dtype = SEGOPS_F64, .ndim = 1, .shape = {(int64_t)nbig}, .data = big, .nbytes = nbig * 8};
  CHECK(segops_encode_msgpack(&ob, 1, &e) == 0);
  CHECK(e.iovcnt == 2 && e.iov[1].iov_base == big && e.iov[1].iov_len == nbig * 8 && e.iov[0].iov_len < 64);
  segops_encoded_free(&e);
  free(big);
  CHECK(segops_encode_msgpack(NULL, 0, &e) == 0 && e.total == 1 && ((unsigned char *)e.iov[0].iov_base)[0] == 0x80);
  segops_encoded_free(&e);
}

int main(void) {
  test_json_format();
  test_msgpack();
  return test_result("test_codec_encode");
}

/* codec_json_enc.c: JSON response encoder: one buffer sized up front, numbers formatted by hand
 * where that is exact (integral values) and by "%.17g"/"%.9g" otherwise. */
#include <inttypes.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codec_internal.h"
#include "errors.h"

/* Widest text one number can take, comma included: "-2.2250738585072014e-308," for float64,
 * "-1.17549435e-38," for float32, "-9223372036854775808," for int64, "-Infinity,". */
static size_t max_chars(segops_dtype dt) {
  switch (dt) {
    case SEGOPS_F64: return 26;
    case SEGOPS_F32: return 18;
    case SEGOPS_I32: return 12;
    default: return 21;
  }
}

static char *put_u64(char *p, uint64_t v) {
  char tmp[20];
  int n = 0;
  do {
    tmp[n++] = (char)('0' + v % 10);
    v /= 10;
  } while (v);
  while (n) *p++ = tmp[--n];
  return p;
}

static char *put_i64(char *p, int64_t v) {
  if (v < 0) {
    *p++ = '-';
    return put_u64(p, (uint64_t)0 - (uint64_t)v);
  }
  return put_u64(p, (uint64_t)v);
}

/* JSON has no NaN or infinities; segops writes the tokens Python's json module reads and
 * writes (NaN, Infinity, -Infinity). Strict parsers refuse them: use msgpack to be safe. */
static char *put_float(char *p, double v, int digits) {
  if (isnan(v)) return memcpy(p, "NaN", 3), p + 3;
  if (isinf(v)) {
    if (v < 0) *p++ = '-';
    return memcpy(p, "Infinity", 8), p + 8;
  }
  /* An integral value below 10^digits prints in %g as its plain digits: write them directly. */
  double lim = digits == 17 ? 1e17 : 1e9;
  if (fabs(v) < lim && v == trunc(v)) {
    if (signbit(v)) *p++ = '-';
    p = put_u64(p, (uint64_t)fabs(v));
    return memcpy(p, ".0", 2), p + 2;
  }
  int n = snprintf(p, 32, digits == 17 ? "%.17g" : "%.9g", v);
  bool has_point = memchr(p, '.', (size_t)n) || memchr(p, 'e', (size_t)n);
  p += n;
  if (!has_point) memcpy(p, ".0", 2), p += 2;
  return p;
}

/* Output names come from the op table, but escape anyway so the body is always valid JSON. */
static char *put_str(char *p, const char *s) {
  *p++ = '"';
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\') {
      *p++ = '\\';
      *p++ = (char)c;
    } else if (c < 0x20) {
      p += sprintf(p, "\\u%04x", c);
    } else {
      *p++ = (char)c;
    }
  }
  *p++ = '"';
  return p;
}

static char *put_lit(char *p, const char *s) {
  size_t n = strlen(s);
  memcpy(p, s, n);
  return p + n;
}

int segops_encode_json(const segops_out_tensor *outs, int n, segops_encoded *enc) {
  memset(enc, 0, sizeof *enc);
  if (n < 0) return SEGOPS_E_INTERNAL;
  size_t cap = 8 + sizeof(struct iovec);
  for (int i = 0; i < n; i++) {
    size_t isz = segops_dtype_size(outs[i].dtype);
    if (!isz) return SEGOPS_E_INTERNAL;
    size_t count = outs[i].nbytes / isz;
    size_t mc = max_chars(outs[i].dtype);
    if (count > (SIZE_MAX / 2) / mc) return SEGOPS_E_NOMEM;
    cap += strlen(outs[i].name) * 6 + 96 + SEGOPS_MAX_NDIM * 21 + count * mc;
  }
  char *block = malloc(cap);
  if (!block) return SEGOPS_E_NOMEM;
  struct iovec *iov = (struct iovec *)(void *)block;
  char *start = block + sizeof(struct iovec), *p = start;
  *p++ = '{';
  for (int i = 0; i < n; i++) {
    const segops_out_tensor *o = &outs[i];
    if (i) *p++ = ',';
    p = put_str(p, o->name);
    p = put_lit(p, ":{\"dtype\":");
    p = put_str(p, segops_dtype_name(o->dtype));
    p = put_lit(p, ",\"shape\":[");
    for (int d = 0; d < o->ndim; d++) {
      if (d) *p++ = ',';
      p = put_i64(p, o->shape[d]);
    }
    p = put_lit(p, "],\"data\":[");
    size_t count = o->nbytes / segops_dtype_size(o->dtype);
    const unsigned char *src = o->data;
    for (size_t k = 0; k < count; k++) {
      if (k) *p++ = ',';
      switch (o->dtype) { /* memcpy loads: callers may hand any alignment */
        case SEGOPS_F64: {
          double v;
          memcpy(&v, src + k * 8, 8);
          p = put_float(p, v, 17);
          break;
        }
        case SEGOPS_F32: {
          float v;
          memcpy(&v, src + k * 4, 4);
          p = put_float(p, (double)v, 9);
          break;
        }
        case SEGOPS_I32: {
          int32_t v;
          memcpy(&v, src + k * 4, 4);
          p = put_i64(p, v);
          break;
        }
        default: {
          int64_t v;
          memcpy(&v, src + k * 8, 8);
          p = put_i64(p, v);
          break;
        }
      }
    }
    p = put_lit(p, "]}");
  }
  *p++ = '}';
  iov->iov_base = start;
  iov->iov_len = (size_t)(p - start);
  enc->iov = iov;
  enc->iovcnt = 1;
  enc->total = iov->iov_len;
  enc->owned = block;
  return SEGOPS_OK;
}

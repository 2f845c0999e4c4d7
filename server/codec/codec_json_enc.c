/* codec_json_enc.c: JSON response encoder: one buffer sized up front, numbers formatted by hand
 * with exact integer arithmetic (the text printf's "%.17g"/"%.9g" gives), printf only far from 1. */
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
    case SEGOPS_F64:
      return 26;
    case SEGOPS_F32:
      return 18;
    case SEGOPS_I32:
      return 12;
    default:
      return 21;
  }
}

char *segops_put_u64(char *p, uint64_t v) {
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
    return segops_put_u64(p, (uint64_t)0 - (uint64_t)v);
  }
  return segops_put_u64(p, (uint64_t)v);
}

/* 5^0 .. 5^27: every one fits in 64 bits, and m * 5^k (m < 2^53) in 128. */
static const uint64_t POW5[28] = {1ULL,
                                  5ULL,
                                  25ULL,
                                  125ULL,
                                  625ULL,
                                  3125ULL,
                                  15625ULL,
                                  78125ULL,
                                  390625ULL,
                                  1953125ULL,
                                  9765625ULL,
                                  48828125ULL,
                                  244140625ULL,
                                  1220703125ULL,
                                  6103515625ULL,
                                  30517578125ULL,
                                  152587890625ULL,
                                  762939453125ULL,
                                  3814697265625ULL,
                                  19073486328125ULL,
                                  95367431640625ULL,
                                  476837158203125ULL,
                                  2384185791015625ULL,
                                  11920928955078125ULL,
                                  59604644775390625ULL,
                                  298023223876953125ULL,
                                  1490116119384765625ULL,
                                  7450580596923828125ULL};

/* |v| * 10^k for k in [0, 27], exactly: v = m * 2^e, so v * 10^k = (m * 5^k) * 2^(e+k), an exact
 * 128-bit product and a shift. Gives the integer part (floor) and the value rounded to nearest
 * with ties to even (as printf rounds). False when the result does not fit. */
static bool scale10(double a, int k, uint64_t *floor_out, uint64_t *round_out) {
  int ex;
  double f = frexp(a, &ex); /* a = f * 2^ex, f in [0.5, 1) */
  uint64_t m = (uint64_t)ldexp(f, 53);
  int s = ex - 53 + k;
  unsigned __int128 n = (unsigned __int128)m * POW5[k], q;
  if (s >= 0) {
    if (s > 60 || (n >> (127 - s)) != 0) return false;
    q = n << s;
    if (q >> 64) return false;
    *floor_out = *round_out = (uint64_t)q;
    return true;
  }
  int sh = -s;
  if (sh >= 127) return false;
  q = n >> sh;
  if (q >> 64) return false;
  unsigned __int128 rem = n - (q << sh), half = (unsigned __int128)1 << (sh - 1);
  *floor_out = (uint64_t)q;
  *round_out = (uint64_t)q + (rem > half || (rem == half && (q & 1)));
  return true;
}

/* printf's "%.<digits>g" of a finite, nonzero, non-integral v, without printf: exact for
 * |v| in [10^(digits-28), 10^digits); returns NULL outside that range (the caller falls back). */
static char *put_g(char *p, double v, int digits) {
  const uint64_t hi = digits == 17 ? 100000000000000000ULL : 1000000000ULL; /* 10^digits */
  const uint64_t lo = hi / 10;
  double a = fabs(v);
  int e10 = (int)floor(log10(a));
  uint64_t t, d = 0;
  int tries;
  for (tries = 0; tries < 3; tries++) { /* log10 may be one off near powers of ten */
    int k = digits - 1 - e10;
    if (k < 0 || k > 27 || !scale10(a, k, &t, &d)) return NULL;
    if (t < lo)
      e10--;
    else if (t >= hi)
      e10++;
    else
      break;
  }
  if (tries == 3) return NULL;
  if (d == hi) d = lo, e10++; /* rounding carried into a new digit */
  char ds[17];
  for (int i = digits - 1; i >= 0; i--) ds[i] = (char)('0' + d % 10), d /= 10;
  int nd = digits;
  while (nd > 1 && ds[nd - 1] == '0') nd--; /* %g drops trailing zeros */
  if (v < 0) *p++ = '-';
  if (e10 < -4 || e10 >= digits) {
    *p++ = ds[0];
    if (nd > 1) {
      *p++ = '.';
      memcpy(p, ds + 1, (size_t)nd - 1), p += nd - 1;
    }
    *p++ = 'e';
    *p++ = e10 < 0 ? '-' : '+';
    int x = e10 < 0 ? -e10 : e10;
    if (x >= 100) *p++ = (char)('0' + x / 100);
    *p++ = (char)('0' + x / 10 % 10);
    *p++ = (char)('0' + x % 10);
  } else if (e10 >= 0) {
    memcpy(p, ds, (size_t)e10 + 1), p += e10 + 1;
    *p++ = '.';
    if (nd > e10 + 1)
      memcpy(p, ds + e10 + 1, (size_t)(nd - e10 - 1)), p += nd - e10 - 1;
    else
      *p++ = '0'; /* integral after rounding: proto/API.md's ".0" */
  } else {
    *p++ = '0';
    *p++ = '.';
    for (int i = 0; i < -e10 - 1; i++) *p++ = '0';
    memcpy(p, ds, (size_t)nd), p += nd;
  }
  return p;
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
    p = segops_put_u64(p, (uint64_t)fabs(v));
    return memcpy(p, ".0", 2), p + 2;
  }
  char *q = put_g(p, v, digits);
  if (q) return q;
  /* Far from 1 (|v| >= 1e17 or tiny): printf, then ".0" if it printed neither '.' nor 'e'. */
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

char *segops_codec_json_numbers(char *p, const segops_out_tensor *o) {
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
  return p;
}

size_t segops_codec_json_numbers_max(const segops_out_tensor *o) {
  size_t isz = segops_dtype_size(o->dtype);
  size_t count = isz ? o->nbytes / isz : 0, mc = max_chars(o->dtype);
  return count > (SIZE_MAX / 4) / mc ? SIZE_MAX : count * mc;
}

char *segops_codec_json_str(char *p, const char *s) { return put_str(p, s); }
char *segops_codec_json_i64(char *p, int64_t v) { return put_i64(p, v); }

int segops_encode_json(const segops_out_tensor *outs, int n, segops_encoded *enc) {
  memset(enc, 0, sizeof *enc);
  if (n < 0) return SEGOPS_E_INTERNAL;
  size_t cap = 8 + sizeof(struct iovec);
  for (int i = 0; i < n; i++) {
    if (!segops_dtype_size(outs[i].dtype)) return SEGOPS_E_INTERNAL;
    size_t nm = outs[i].shm_region ? strlen(outs[i].shm_region) * 6 + 96 /* {"region","offset","byte_size"} */
                                   : segops_codec_json_numbers_max(&outs[i]);
    if (nm > SIZE_MAX / 4) return SEGOPS_E_NOMEM;
    cap += strlen(outs[i].name) * 6 + 96 + SEGOPS_MAX_NDIM * 21 + nm;
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
    p = segops_put_lit(p, ":{\"dtype\":");
    p = put_str(p, segops_dtype_name(o->dtype));
    p = segops_put_lit(p, ",\"shape\":[");
    for (int d = 0; d < o->ndim; d++) {
      if (d) *p++ = ',';
      p = put_i64(p, o->shape[d]);
    }
    if (o->shm_region) {
      p = segops_put_lit(p, "],\"shm\":{\"region\":");
      p = put_str(p, o->shm_region);
      p = segops_put_lit(p, ",\"offset\":");
      p = segops_put_u64(p, o->shm_offset);
      p = segops_put_lit(p, ",\"byte_size\":");
      p = segops_put_u64(p, (uint64_t)o->nbytes);
      p = segops_put_lit(p, "}}");
      continue;
    }
    p = segops_put_lit(p, "],\"data\":[");
    p = segops_codec_json_numbers(p, o);
    p = segops_put_lit(p, "]}");
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

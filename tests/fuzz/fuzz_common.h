/* fuzz_common.h: what the libFuzzer targets share: picking (op, pass) from the first input byte,
 * and the small limits that let the fuzzer reach every limit check quickly. */
#ifndef SEGOPS_FUZZ_COMMON_H
#define SEGOPS_FUZZ_COMMON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "codec.h"
#include "errors.h"

/* First byte b: function (b & 0x7f) % 18, i.e. op = fn / 3, pass = fn % 3; bit 7 picks the
 * codec where a target takes both (0 msgpack, 1 JSON). */
static inline void fuzz_pick(uint8_t b, segops_op *op, segops_pass *pass) {
  int fn = (b & 0x7f) % (SEGOPS_OP_COUNT * SEGOPS_PASS_COUNT);
  *op = (segops_op)(fn / SEGOPS_PASS_COUNT);
  *pass = (segops_pass)(fn % SEGOPS_PASS_COUNT);
}

static const segops_codec_limits FUZZ_CODEC_LIMITS = {.max_depth = 8, .max_items = 1 << 16};
static const segops_limits FUZZ_LIMITS = {.max_elements = 1 << 16, .max_segments = 1 << 12};

/* A finding the sanitizers would not see: a broken invariant of a successful decode. */
#define FUZZ_ASSERT(c)          \
  do {                          \
    if (!(c)) __builtin_trap(); \
  } while (0)

/* Invariants of every successful decode: counts in range, tensors sized and readable. */
static inline void fuzz_check_decoded(const segops_decoded *d, const char *err) {
  (void)err;
  FUZZ_ASSERT(d->req.nargs >= 0 && d->req.nargs <= SEGOPS_MAX_REQ_ARGS);
  FUZZ_ASSERT(d->req.n_outputs >= 0 && d->req.n_outputs <= SEGOPS_MAX_OUTPUTS * 2);
  volatile unsigned char sink = 0;
  for (int i = 0; i < d->req.nargs; i++) {
    const segops_named_tensor *a = &d->req.args[i];
    FUZZ_ASSERT(a->t.ndim >= 0 && a->t.ndim <= SEGOPS_MAX_NDIM);
    FUZZ_ASSERT((unsigned)a->t.dtype < SEGOPS_DTYPE_COUNT);
    FUZZ_ASSERT(a->name_len == 0 || a->name != NULL);
    for (size_t k = 0; k < a->name_len; k++) sink ^= (unsigned char)a->name[k];
    if (a->shm_region) { /* a reference, unresolved: no data yet; sized by its shape when that is */
      FUZZ_ASSERT(a->t.data == NULL && a->t.nbytes == 0);
      uint64_t bytes = segops_dtype_size(a->t.dtype);
      for (int d = 0; d < a->t.ndim; d++) bytes *= (uint64_t)a->t.shape[d];
      FUZZ_ASSERT(!a->shm_sized || a->shm_bytes == bytes);
      continue;
    }
    /* Touch the first and last payload bytes: ASan reports any out-of-bounds view. */
    if (a->t.nbytes)
      sink ^= ((const unsigned char *)a->t.data)[0] ^ ((const unsigned char *)a->t.data)[a->t.nbytes - 1];
  }
  for (int j = 0; j < d->req.n_outputs; j++)
    for (size_t k = 0; k < d->req.outputs[j].len; k++) sink ^= (unsigned char)d->req.outputs[j].name[k];
  (void)sink;
}

typedef int (*fuzz_decode_fn)(const char *body, size_t len, segops_op op, segops_pass pass,
                              const segops_codec_limits *lim, segops_decoded *out, char *err, size_t errlen);

/* One decoder on one input: byte 0 picks (op, pass) and, with bit 7, the default limits; the rest
 * is the body, copied to an exact-size buffer so that ASan catches any read past it. A decoder
 * whose tensors may point into the body (msgpack) keeps it until the request is freed; one that
 * must not (JSON materialises every number) loses it right after decoding, so that a pointer
 * left into it is a use after free. */
static inline int fuzz_decoder(const uint8_t *data, size_t size, fuzz_decode_fn decode, bool tensors_borrow_body) {
  if (size < 1) return 0;
  segops_op op;
  segops_pass pass;
  fuzz_pick(data[0], &op, &pass);
  size_t n = size - 1;
  char *body = malloc(n ? n : 1);
  memcpy(body, data + 1, n);
  segops_decoded d;
  char err[256];
  const segops_codec_limits *lim = (data[0] & 0x80) ? NULL : &FUZZ_CODEC_LIMITS;
  int rc = decode(body, n, op, pass, lim, &d, err, sizeof err);
  if (!tensors_borrow_body) free(body);
  if (rc == 0)
    fuzz_check_decoded(&d, err);
  else
    FUZZ_ASSERT(d.owned == NULL && d.req.nargs == 0 && err[0] != 0);
  segops_decoded_free(&d);
  if (tensors_borrow_body) free(body);
  return 0;
}

#endif

/* codec.h: request decoding (msgpack, JSON) into a segops_request, and response encoding.
 * The decoders do not copy msgpack tensor payloads: tensor data points into the body. */
#ifndef SEGOPS_CODEC_H
#define SEGOPS_CODEC_H

#include <stddef.h>
#include <string.h>
#include <sys/uio.h>

#include "prepare.h"

typedef struct {
  int max_depth;    /* maximum nesting depth of the body (maps/arrays) */
  size_t max_items; /* maximum total count of array/map items in one body */
} segops_codec_limits;

/* A decoded request. req's names and tensor data borrow from the body (msgpack) or from
 * storage owned here (JSON numbers are materialised); free with segops_decoded_free. */
typedef struct {
  segops_request req;
  void *owned; /* storage the request owns (materialised numbers, copied names), or NULL */
} segops_decoded;

/* Decode a body for function (op, pass). The body must outlive *out.
 * Errors: SEGOPS_E_MALFORMED_BODY (not msgpack/JSON, truncated, too deep, wrong value types
 * for a key: e.g. a tensor that is not a map, a shape that is not a list of ints),
 * SEGOPS_E_TOO_LARGE (over limits), SEGOPS_E_INVALID_ARGUMENT (e.g. unknown dtype name,
 * more than SEGOPS_MAX_NDIM dimensions, too many arguments), with a message naming op and argument.
 * On error *out owns nothing. */
int segops_decode_msgpack(const char *body, size_t len, segops_op op, segops_pass pass, const segops_codec_limits *lim,
                          segops_decoded *out, char *err, size_t errlen);
int segops_decode_json(const char *body, size_t len, segops_op op, segops_pass pass, const segops_codec_limits *lim,
                       segops_decoded *out, char *err, size_t errlen);
void segops_decoded_free(segops_decoded *d); /* accepts NULL and a zeroed struct */

/* One output tensor to encode; data borrowed (64-byte aligned host memory). */
typedef struct {
  const char *name;
  segops_dtype dtype;
  int ndim;
  int64_t shape[SEGOPS_MAX_NDIM];
  const void *data;
  size_t nbytes;
  const char *shm_region; /* non-NULL: the output is in this shared-memory region (no data sent) */
  uint64_t shm_offset;
} segops_out_tensor;

/* An encoded response body as a list of pieces. Pieces either point into `owned` (headers,
 * small text) or borrow the output tensors' data (msgpack: payloads are not copied), so the
 * outputs must outlive the response. total = sum of iov lengths. */
typedef struct {
  struct iovec *iov;
  int iovcnt;
  size_t total;
  size_t json_len; /* OIP: bytes of the JSON header in front of the binary data */
  void *owned;
} segops_encoded;

/* Encodes {name: {"dtype","shape","data"}} maps ({"dtype","shape","shm": {"region","offset",
 * "byte_size"}} for an output written into a shared-memory region). msgpack: data as bin (no payload copy).
 * JSON: data as a flat list; float64 printed with 17 significant digits, float32 with 9,
 * integral values with a trailing ".0" (as in proto/API.md's curl example). Returns 0 or SEGOPS_E_NOMEM. */
int segops_encode_msgpack(const segops_out_tensor *outs, int n, segops_encoded *enc);
int segops_encode_json(const segops_out_tensor *outs, int n, segops_encoded *enc);
void segops_encoded_free(segops_encoded *enc); /* accepts NULL and a zeroed struct */

/* Writers into a buffer the caller sized: each returns the end of what it wrote (no terminator).
 * segops_put_u64: v in decimal (at most 20 characters); segops_put_lit: the string s. */
char *segops_put_u64(char *p, uint64_t v);
static inline char *segops_put_lit(char *p, const char *s) {
  const size_t n = strlen(s);
  memcpy(p, s, n);
  return p + n;
}

#endif

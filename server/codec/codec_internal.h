/* codec_internal.h: helpers the decoders (msgpack, JSON, the OIP) and the record check share; not public. */
#ifndef SEGOPS_CODEC_INTERNAL_H
#define SEGOPS_CODEC_INTERNAL_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "codec.h"
#include "codec_record.h"

/* Defaults used when the caller passes NULL limits or a zero field. */
#define SEGOPS_CODEC_DEFAULT_DEPTH 16
#define SEGOPS_CODEC_DEFAULT_ITEMS ((size_t)1 << 26)
/* msgpack-c's own parser refuses nesting deeper than its embedded stack (32 levels). */
#define SEGOPS_CODEC_MSGPACK_MAX_DEPTH 32

typedef enum {
  SEGOPS_KEY_TENSOR,
  SEGOPS_KEY_NUM_SEGMENTS,
  SEGOPS_KEY_DTYPE,
  SEGOPS_KEY_OUTPUTS,
  SEGOPS_KEY_OUTPUTS_SHM
} segops_codec_key;

/* Effective limits: lim's values, with defaults for NULL or zero fields. */
segops_codec_limits segops_codec_limits_eff(const segops_codec_limits *lim);
/* Empties *out (owning nothing) for function (op, pass): what a decoder returns on entry and on error. */
void segops_codec_reset(segops_decoded *out, segops_op op, segops_pass pass);

/* Classifies a top-level key of a request body. */
segops_codec_key segops_codec_key_kind(const char *s, size_t len);

/* True when name is idx or an input of the function (op, pass). */
bool segops_codec_arg_known(segops_op op, segops_pass pass, const char *name, size_t len);
/* A tensor refused (rc != 0) under a name the function does not take: reported as that unknown
 * argument ("unknown argument 'q' for forward"), the error a reader can act on. Else rc, unchanged. */
int segops_codec_unknown_arg(int rc, segops_op op, segops_pass pass, const char *name, size_t len, char *err,
                             size_t errlen);
/* The decoders' capacity bounds, one message each: an "outputs" (or, shm, "outputs_shm") list of n
 * entries, more than SEGOPS_MAX_OUTPUTS * 2; a body with more than SEGOPS_MAX_REQ_ARGS tensors. */
int segops_codec_too_many_outputs(segops_op op, bool shm, size_t n, char *err, size_t errlen);
int segops_codec_too_many_args(segops_op op, char *err, size_t errlen);

/* nbytes (at least 1) of 64-byte-aligned storage that d owns until segops_decoded_free; NULL when out of memory. */
void *segops_decoded_alloc(segops_decoded *d, size_t nbytes);

/* Copies at most 48 bytes of wire text into dst with bytes outside 0x20..0x7e as \xNN and backslashes
 * doubled (quotes kept: the JSON error body escapes them), appending "..." when cut,
 * so that a message shows every byte of a name and never carries a raw control byte. dst needs
 * 4 bytes per input byte to hold the worst case. Returns dst. */
const char *segops_codec_printable(char *dst, size_t dstlen, const char *s, size_t len);

/* Formats "<op>: <message>" into err and returns code. */
int segops_codec_fail(int code, char *err, size_t errlen, segops_op op, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

/* Parses a dtype name; on failure writes "<op>: <arg>.dtype: unknown dtype '...' (expected ...)"
 * and returns SEGOPS_E_INVALID_ARGUMENT. arg is a printable argument name. */
int segops_codec_dtype(segops_op op, const char *arg, const char *s, size_t len, segops_dtype *dt, char *err,
                       size_t errlen);

/* JSON pieces shared by the v1 and OIP encoders (codec_json_enc.c): a tensor's numbers,
 * comma-separated (17 significant digits for float64, 9 for float32), at most
 * segops_codec_json_numbers_max bytes; an escaped string in quotes (at most 6x + 2 bytes); an
 * integer. Each returns the end of what it wrote. */
char *segops_codec_json_numbers(char *p, const segops_out_tensor *o);
size_t segops_codec_json_numbers_max(const segops_out_tensor *o);
char *segops_codec_json_str(char *p, const char *s);
char *segops_codec_json_i64(char *p, int64_t v);

/* The JSON decoders' shared pieces (codec_json.c): the depth/item pre-scan of the raw bytes, the
 * message for a body jansson refused, and the visitor of a (nested) list's numbers in row-major order
 * (segops_numbers_visit, codec_record.h; list is a json_t array). */
int segops_codec_json_prescan(const char *b, size_t len, const segops_codec_limits *lim, segops_op op, char *err,
                              size_t errlen);
int segops_codec_json_syntax_error(const json_error_t *je, size_t len, segops_op op, char *err, size_t errlen);
int segops_codec_json_numbers_visit(const void *list, segops_number_fn f, void *cls);

/* Rounds n up to a multiple of 64; false on overflow. */
bool segops_codec_align64(size_t n, size_t *out);

#endif

/* codec_common.c: what the decoders share: limits, key kinds, messages, the decoded request's storage. */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codec_internal.h"
#include "errors.h"

/* v1 (msgpack and JSON) names dtypes as the op table does; the native channel names none (its
 * dtypes are numbers), so its words only ever appear in messages. */
const segops_wire_words segops_wire_v1 = {segops_dtype_name, "", "dtype"};
const segops_wire_words segops_wire_native = {segops_dtype_name, "", "dtype"};

segops_codec_limits segops_codec_limits_eff(const segops_codec_limits *lim) {
  segops_codec_limits l = {SEGOPS_CODEC_DEFAULT_DEPTH, SEGOPS_CODEC_DEFAULT_ITEMS};
  if (lim && lim->max_depth > 0) l.max_depth = lim->max_depth;
  if (lim && lim->max_items > 0) l.max_items = lim->max_items;
  return l;
}

static bool eq(const char *s, size_t len, const char *lit) { return strlen(lit) == len && memcmp(s, lit, len) == 0; }

void segops_codec_reset(segops_decoded *out, segops_op op, segops_pass pass) {
  memset(out, 0, sizeof *out);
  out->req.op = op;
  out->req.pass = pass;
}

segops_codec_key segops_codec_key_kind(const char *s, size_t len) {
  if (eq(s, len, "num_segments")) return SEGOPS_KEY_NUM_SEGMENTS;
  if (eq(s, len, "dtype")) return SEGOPS_KEY_DTYPE;
  if (eq(s, len, "outputs")) return SEGOPS_KEY_OUTPUTS;
  if (eq(s, len, "outputs_shm")) return SEGOPS_KEY_OUTPUTS_SHM;
  return SEGOPS_KEY_TENSOR;
}

bool segops_codec_arg_known(segops_op op, segops_pass pass, const char *name, size_t len) {
  const segops_fn_desc *fn = segops_fn(op, pass);
  if (eq(name, len, "idx")) return true;
  for (int k = 0; fn && k < fn->n_in; k++)
    if (eq(name, len, fn->in[k].name)) return true;
  return false;
}

int segops_codec_unknown_arg(int rc, segops_op op, segops_pass pass, const char *name, size_t len, char *err,
                             size_t errlen) {
  /* num_segments is a tensor on the OIP, whose own rules name it */
  if (!rc || segops_codec_arg_known(op, pass, name, len) || eq(name, len, "num_segments")) return rc;
  char an[200];
  return segops_codec_fail(SEGOPS_E_INVALID_ARGUMENT, err, errlen, op, "unknown argument '%s' for %s",
                           segops_codec_printable(an, sizeof an, name, len), segops_pass_name(pass));
}

int segops_codec_too_many_outputs(segops_op op, bool shm, size_t n, char *err, size_t errlen) {
  return segops_codec_fail(SEGOPS_E_INVALID_ARGUMENT, err, errlen, op, "%s lists %zu %s; at most %d are allowed",
                           shm ? "outputs_shm" : "outputs", n, shm ? "outputs" : "names", SEGOPS_MAX_OUTPUTS * 2);
}

int segops_codec_too_many_args(segops_op op, char *err, size_t errlen) {
  return segops_codec_fail(SEGOPS_E_INVALID_ARGUMENT, err, errlen, op, "too many arguments (more than %d tensors)",
                           SEGOPS_MAX_REQ_ARGS);
}

const char *segops_codec_printable(char *dst, size_t dstlen, const char *s, size_t len) {
  size_t o = 0, cap = 48;
  if (dstlen == 0) return dst;
  /* Control bytes (NUL included) are written as \xNN and a backslash as \\, so the text shows
   * every byte of a hostile name (bytes over 0x7e too); quotes stay, the JSON body escapes them. */
  for (size_t i = 0; i < len && i < cap && o + 5 < dstlen; i++) {
    unsigned char c = (unsigned char)s[i];
    if (c < 0x20 || c >= 0x7f)
      o += (size_t)snprintf(dst + o, dstlen - o, "\\x%02x", c);
    else if (c == '\\')
      dst[o++] = '\\', dst[o++] = '\\';
    else
      dst[o++] = (char)c;
  }
  if (len > cap)
    for (int k = 0; k < 3 && o + 1 < dstlen; k++) dst[o++] = '.';
  dst[o] = 0;
  return dst;
}

int segops_codec_fail(int code, char *err, size_t errlen, segops_op op, const char *fmt, ...) {
  if (err && errlen > 0) {
    int n = snprintf(err, errlen, "%s: ", segops_op_name(op));
    if (n >= 0 && (size_t)n < errlen) {
      va_list ap;
      va_start(ap, fmt);
      vsnprintf(err + n, errlen - (size_t)n, fmt, ap);
      va_end(ap);
    }
  }
  return code;
}

int segops_codec_dtype(segops_op op, const char *arg, const char *s, size_t len, segops_dtype *dt, char *err,
                       size_t errlen) {
  int d = segops_dtype_parse(s, len);
  if (d < 0) {
    /* Name what this argument may be: idx is an integer tensor, every other tensor (and the
     * body's own "dtype") a float one. */
    char buf[200];
    const bool integer = !strcmp(arg, "idx") || !strcmp(arg, "num_segments");
    return segops_codec_fail(SEGOPS_E_INVALID_ARGUMENT, err, errlen, op, "%s: unknown dtype '%s' (expected %s)", arg,
                             segops_codec_printable(buf, sizeof buf, s, len),
                             integer ? "int32 or int64" : "float32 or float64");
  }
  *dt = (segops_dtype)d;
  return SEGOPS_OK;
}

bool segops_codec_align64(size_t n, size_t *out) {
  if (n > SIZE_MAX - 63) return false;
  *out = (n + 63) & ~(size_t)63;
  return true;
}

/* The decoded request's storage is a chain of blocks, each behind a 64-byte header whose first
 * word points to the block allocated before it. */
void *segops_decoded_alloc(segops_decoded *d, size_t nbytes) {
  if (nbytes > SIZE_MAX - 64) return NULL;
  char *b = segops_aligned_alloc(64 + nbytes);
  if (!b) return NULL;
  memcpy(b, &d->owned, sizeof d->owned);
  d->owned = b;
  return b + 64;
}

void segops_decoded_free(segops_decoded *d) {
  if (!d) return;
  while (d->owned) {
    void *next;
    memcpy(&next, d->owned, sizeof next);
    free(d->owned);
    d->owned = next;
  }
}

void segops_encoded_free(segops_encoded *enc) {
  if (!enc) return;
  free(enc->owned);
  enc->owned = NULL;
  enc->iov = NULL;
  enc->iovcnt = 0;
  enc->total = 0;
}

/* codec_msgpack.c: msgpack request decoder (tensor payloads read in place) and response encoder
 * (tensor payloads referenced by iovecs, never copied). The decoder only tokenizes: its tensors
 * become records that codec_record.c checks. */
#include <msgpack.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codec_internal.h"
#include "errors.h"

/* ---- bounds pre-scan ----------------------------------------------------------------------
 * msgpack-c allocates an array/map's element storage as soon as it reads the header, so a
 * 5-byte header claiming 2^32 elements would make it allocate ~100 GB before noticing the body
 * is short. This walk reads headers only (payloads are skipped, not touched) and refuses bodies
 * that are truncated, nest too deeply, hold too many items, claim more elements than bytes
 * remain, or carry bytes after the value. Only then does msgpack-c build the object tree. */

enum { MP_SCALAR, MP_RAW, MP_ARRAY, MP_MAP, MP_EXT, MP_UNUSED };

/* What a value's first byte says: its kind, the bytes of a length field that follows (raw: payload
 * bytes, ext: payload bytes less its type byte, array/map: entries), fixed payload bytes to skip,
 * and the entries of a fixarray/fixmap. */
typedef struct {
  int kind;
  int lenbytes;
  uint64_t skip;
  uint64_t count;
} mp_head;

/* The first bytes 0xc0 to 0xdf, by kind, length-field bytes and fixed payload bytes. */
static const struct {
  unsigned char kind, lenbytes, skip;
} HEAD_C0[32] = {
    [0x00] = {MP_SCALAR, 0, 0},  [0x01] = {MP_UNUSED, 0, 0}, [0x02] = {MP_SCALAR, 0, 0}, [0x03] = {MP_SCALAR, 0, 0},
    [0x04] = {MP_RAW, 1, 0},     [0x05] = {MP_RAW, 2, 0},    [0x06] = {MP_RAW, 4, 0},    [0x07] = {MP_EXT, 1, 0},
    [0x08] = {MP_EXT, 2, 0},     [0x09] = {MP_EXT, 4, 0},    [0x0a] = {MP_SCALAR, 0, 4}, [0x0b] = {MP_SCALAR, 0, 8},
    [0x0c] = {MP_SCALAR, 0, 1},  [0x0d] = {MP_SCALAR, 0, 2}, [0x0e] = {MP_SCALAR, 0, 4}, [0x0f] = {MP_SCALAR, 0, 8},
    [0x10] = {MP_SCALAR, 0, 1},  [0x11] = {MP_SCALAR, 0, 2}, [0x12] = {MP_SCALAR, 0, 4}, [0x13] = {MP_SCALAR, 0, 8},
    [0x14] = {MP_SCALAR, 0, 2},  [0x15] = {MP_SCALAR, 0, 3}, [0x16] = {MP_SCALAR, 0, 5}, [0x17] = {MP_SCALAR, 0, 9},
    [0x18] = {MP_SCALAR, 0, 17}, [0x19] = {MP_RAW, 1, 0},    [0x1a] = {MP_RAW, 2, 0},    [0x1b] = {MP_RAW, 4, 0},
    [0x1c] = {MP_ARRAY, 2, 0},   [0x1d] = {MP_ARRAY, 4, 0},  [0x1e] = {MP_MAP, 2, 0},    [0x1f] = {MP_MAP, 4, 0},
};

static mp_head head_of(unsigned c) {
  if (c <= 0x7f || c >= 0xe0) return (mp_head){MP_SCALAR, 0, 0, 0}; /* fixint */
  if (c <= 0x8f) return (mp_head){MP_MAP, 0, 0, c & 0x0f};
  if (c <= 0x9f) return (mp_head){MP_ARRAY, 0, 0, c & 0x0f};
  if (c <= 0xbf) return (mp_head){MP_SCALAR, 0, c & 0x1f, 0}; /* fixstr */
  return (mp_head){HEAD_C0[c - 0xc0].kind, HEAD_C0[c - 0xc0].lenbytes, HEAD_C0[c - 0xc0].skip, 0};
}

static uint64_t be(const unsigned char *p, int n) {
  uint64_t v = 0;
  for (int i = 0; i < n; i++) v = (v << 8) | p[i];
  return v;
}

/* Reads the value at *pos: its head and length field, skipping its payload. *h tells a container's entries. */
static int scan_value(const unsigned char *b, size_t len, size_t *pos, mp_head *h, segops_op op, char *err,
                      size_t errlen) {
  const size_t start = *pos;
  if (start >= len)
    return segops_codec_fail(SEGOPS_E_MALFORMED_BODY, err, errlen, op,
                             "body is not valid msgpack (truncated at byte %zu)", start);
  *h = head_of(b[(*pos)++]);
  if (h->kind == MP_UNUSED)
    return segops_codec_fail(SEGOPS_E_MALFORMED_BODY, err, errlen, op,
                             "body is not valid msgpack (byte 0x%02x at byte %zu is not a type)", b[start], start);
  if (h->lenbytes) {
    if ((size_t)h->lenbytes > len - *pos)
      return segops_codec_fail(SEGOPS_E_MALFORMED_BODY, err, errlen, op,
                               "body is not valid msgpack (truncated at byte %zu)", len);
    uint64_t v = be(b + *pos, h->lenbytes);
    *pos += (size_t)h->lenbytes;
    if (h->kind == MP_RAW)
      h->skip = v;
    else if (h->kind == MP_EXT)
      h->skip = v + 1; /* type byte */
    else
      h->count = v;
  }
  if (h->skip > len - *pos)
    return segops_codec_fail(SEGOPS_E_MALFORMED_BODY, err, errlen, op,
                             "body is not valid msgpack (truncated at byte %zu: a value at byte %zu needs %llu "
                             "more bytes)",
                             len, start, (unsigned long long)h->skip);
  *pos += (size_t)h->skip;
  return SEGOPS_OK;
}

/* The walk's state: values still to read per open level. */
typedef struct {
  uint64_t remaining[SEGOPS_CODEC_MSGPACK_MAX_DEPTH + 1];
  int depth, max_depth;
  uint64_t items;
} mp_walk;

/* Opens the array or map h that began at byte start, its entries following at pos. */
static int open_container(mp_walk *w, const mp_head *h, size_t start, size_t pos, size_t len,
                          const segops_codec_limits *lim, segops_op op, char *err, size_t errlen) {
  uint64_t values = h->kind == MP_MAP ? 2 * h->count : h->count;
  if (values > len - pos) /* every value takes at least one byte */
    return segops_codec_fail(SEGOPS_E_MALFORMED_BODY, err, errlen, op,
                             "body is not valid msgpack (truncated: the %s at byte %zu claims %llu items but only "
                             "%zu bytes remain)",
                             h->kind == MP_MAP ? "map" : "array", start, (unsigned long long)h->count, len - pos);
  if (w->depth + 1 > w->max_depth)
    return segops_codec_fail(SEGOPS_E_MALFORMED_BODY, err, errlen, op,
                             "body is nested too deeply (more than %d levels at byte %zu)", w->max_depth, start);
  w->items += h->count;
  if (w->items > lim->max_items)
    return segops_codec_fail(SEGOPS_E_TOO_LARGE, err, errlen, op,
                             "body has more than %zu array/map items (the limit, --max-body-items)", lim->max_items);
  w->remaining[++w->depth] = values;
  return SEGOPS_OK;
}

static int scan(const unsigned char *b, size_t len, const segops_codec_limits *lim, segops_op op, char *err,
                size_t errlen) {
  mp_walk w = {.depth = 0, .items = 0};
  w.max_depth = lim->max_depth < SEGOPS_CODEC_MSGPACK_MAX_DEPTH ? lim->max_depth : SEGOPS_CODEC_MSGPACK_MAX_DEPTH;
  w.remaining[0] = 1;
  size_t pos = 0;
  while (w.depth >= 0) {
    if (w.remaining[w.depth] == 0) {
      w.depth--;
      continue;
    }
    w.remaining[w.depth]--;
    const size_t start = pos;
    mp_head h = {MP_SCALAR, 0, 0, 0};
    int rc = scan_value(b, len, &pos, &h, op, err, errlen);
    if (!rc && (h.kind == MP_ARRAY || h.kind == MP_MAP))
      rc = open_container(&w, &h, start, pos, len, lim, op, err, errlen);
    if (rc) return rc;
  }
  if (pos != len)
    return segops_codec_fail(SEGOPS_E_MALFORMED_BODY, err, errlen, op,
                             "body is not valid msgpack (%zu trailing bytes after the value, at byte %zu)", len - pos,
                             pos);
  return SEGOPS_OK;
}

/* ---- object tree -> records -------------------------------------------------------------- */

static bool is_str(const msgpack_object *o, const char *lit) {
  return o->type == MSGPACK_OBJECT_STR && o->via.str.size == strlen(lit) &&
         memcmp(o->via.str.ptr, lit, o->via.str.size) == 0;
}

/* A shared-memory reference {"region": str, "offset": uint} (offset optional, default 0). */
static int shm_ref_from(const msgpack_object *v, const char *an, segops_op op, const char **region, size_t *region_len,
                        uint64_t *offset, char *err, size_t errlen) {
  if (v->type != MSGPACK_OBJECT_MAP)
    return segops_codec_fail(SEGOPS_E_MALFORMED_BODY, err, errlen, op,
                             "%s must be a map {\"region\": name, \"offset\": bytes}", an);
  *region = NULL;
  *offset = 0;
  bool seen_off = false;
  for (uint32_t i = 0; i < v->via.map.size; i++) {
    const msgpack_object *k = &v->via.map.ptr[i].key, *e = &v->via.map.ptr[i].val;
    if (is_str(k, "region") && !*region && e->type == MSGPACK_OBJECT_STR) {
      *region = e->via.str.ptr;
      *region_len = e->via.str.size;
    } else if (is_str(k, "offset") && !seen_off && e->type == MSGPACK_OBJECT_POSITIVE_INTEGER) {
      *offset = e->via.u64;
      seen_off = true;
    } else {
      return segops_codec_fail(SEGOPS_E_MALFORMED_BODY, err, errlen, op,
                               "%s must be a map {\"region\": name, \"offset\": bytes} (a string and a "
                               "non-negative integer, each once)",
                               an);
    }
  }
  if (!*region) return segops_codec_fail(SEGOPS_E_MALFORMED_BODY, err, errlen, op, "%s is missing \"region\"", an);
  return SEGOPS_OK;
}

/* A tensor map's values by key: dtype, shape, data, shm (each at most once, nothing else). */
typedef struct {
  const msgpack_object *dtype, *shape, *data, *shm;
} tensor_keys;

static int keys_of(const msgpack_object *v, const char *an, segops_op op, tensor_keys *tk, char *err, size_t errlen) {
  *tk = (tensor_keys){0};
  for (uint32_t i = 0; i < v->via.map.size; i++) {
    const msgpack_object *k = &v->via.map.ptr[i].key;
    const msgpack_object **slot = is_str(k, "dtype")   ? &tk->dtype
                                  : is_str(k, "shape") ? &tk->shape
                                  : is_str(k, "data")  ? &tk->data
                                  : is_str(k, "shm")   ? &tk->shm
                                                       : NULL;
    if (!slot) {
      char kb[200];
      if (k->type != MSGPACK_OBJECT_STR)
        return segops_codec_fail(SEGOPS_E_MALFORMED_BODY, err, errlen, op, "%s has a key that is not a string", an);
      return segops_codec_fail(SEGOPS_E_MALFORMED_BODY, err, errlen, op,
                               "%s has unknown key '%s' (expected dtype, shape, data or shm)", an,
                               segops_codec_printable(kb, sizeof kb, k->via.str.ptr, k->via.str.size));
    }
    if (*slot)
      return segops_codec_fail(SEGOPS_E_MALFORMED_BODY, err, errlen, op, "%s has key '%.*s' more than once", an,
                               (int)k->via.str.size, k->via.str.ptr);
    *slot = &v->via.map.ptr[i].val;
  }
  return SEGOPS_OK;
}

/* The shape list: non-negative integers as far as the wire goes (negatives are left for prepare
 * to refuse by value, more than SEGOPS_MAX_NDIM entries for the record check). */
static int shape_from(const msgpack_object *shape, const char *an, segops_op op, segops_tensor_record *r, char *err,
                      size_t errlen) {
  if (shape->type != MSGPACK_OBJECT_ARRAY)
    return segops_codec_fail(SEGOPS_E_MALFORMED_BODY, err, errlen, op,
                             "%s.shape must be a list of non-negative integers", an);
  r->ndim = shape->via.array.size;
  for (size_t d = 0; d < r->ndim && r->ndim <= SEGOPS_MAX_NDIM; d++) {
    const msgpack_object *e = &shape->via.array.ptr[d];
    if (e->type == MSGPACK_OBJECT_POSITIVE_INTEGER) {
      if (e->via.u64 > (uint64_t)INT64_MAX)
        return segops_codec_fail(SEGOPS_E_TOO_LARGE, err, errlen, op, "%s.shape[%zu] is too large", an, d);
      r->shape[d] = (int64_t)e->via.u64;
    } else if (e->type == MSGPACK_OBJECT_NEGATIVE_INTEGER) {
      r->shape[d] = e->via.i64;
    } else {
      return segops_codec_fail(SEGOPS_E_MALFORMED_BODY, err, errlen, op,
                               "%s.shape must be a list of non-negative integers", an);
    }
  }
  return SEGOPS_OK;
}

/* A record from {"dtype": str, "shape": [ints], "data": bin} or, by reference,
 * {"dtype", "shape", "shm": {"region", "offset"}}. */
static int record_from(const msgpack_object *v, const char *an, segops_op op, segops_tensor_record *r, char *err,
                       size_t errlen) {
  if (v->type != MSGPACK_OBJECT_MAP)
    return segops_codec_fail(SEGOPS_E_MALFORMED_BODY, err, errlen, op,
                             "%s must be a tensor map {\"dtype\", \"shape\", \"data\"}", an);
  tensor_keys tk;
  int rc = keys_of(v, an, op, &tk, err, errlen);
  if (rc) return rc;
  if (tk.data && tk.shm)
    return segops_codec_fail(SEGOPS_E_MALFORMED_BODY, err, errlen, op,
                             "%s has both \"data\" and \"shm\" (a tensor is inline or by reference)", an);
  if (!tk.dtype || !tk.shape || !(tk.data || tk.shm))
    return segops_codec_fail(SEGOPS_E_MALFORMED_BODY, err, errlen, op,
                             "%s is missing \"%s\" (a tensor is a map "
                             "{\"dtype\", \"shape\", \"data\"})",
                             an,
                             !tk.dtype   ? "dtype"
                             : !tk.shape ? "shape"
                                         : "data");
  if (tk.dtype->type != MSGPACK_OBJECT_STR)
    return segops_codec_fail(SEGOPS_E_MALFORMED_BODY, err, errlen, op, "%s.dtype must be a string", an);
  r->dtype_text = tk.dtype->via.str.ptr;
  r->dtype_len = tk.dtype->via.str.size;
  rc = shape_from(tk.shape, an, op, r, err, errlen);
  if (rc) return rc;
  if (tk.shm) {
    char label[224];
    snprintf(label, sizeof label, "%s.shm", an);
    r->src = SEGOPS_REC_SHM;
    return shm_ref_from(tk.shm, label, op, &r->region, &r->region_len, &r->offset, err, errlen);
  }
  if (tk.data->type != MSGPACK_OBJECT_BIN)
    return segops_codec_fail(SEGOPS_E_MALFORMED_BODY, err, errlen, op, "%s.data must be binary (msgpack bin)", an);
  r->src = SEGOPS_REC_BYTES;
  r->bytes = tk.data->via.bin.ptr;
  r->nbytes = tk.data->via.bin.size;
  return SEGOPS_OK;
}

static int outputs_from(const msgpack_object *v, segops_op op, segops_request *req, char *err, size_t errlen) {
  if (req->has_outputs)
    return segops_codec_fail(SEGOPS_E_INVALID_ARGUMENT, err, errlen, op, "outputs is given more than once");
  if (v->type != MSGPACK_OBJECT_ARRAY)
    return segops_codec_fail(SEGOPS_E_MALFORMED_BODY, err, errlen, op, "outputs must be a list of output names");
  if (v->via.array.size > SEGOPS_MAX_OUTPUTS * 2)
    return segops_codec_too_many_outputs(op, false, v->via.array.size, err, errlen);
  req->has_outputs = true;
  req->n_outputs = (int)v->via.array.size;
  for (uint32_t i = 0; i < v->via.array.size; i++) {
    const msgpack_object *e = &v->via.array.ptr[i];
    if (e->type != MSGPACK_OBJECT_STR)
      return segops_codec_fail(SEGOPS_E_MALFORMED_BODY, err, errlen, op, "outputs must be a list of output names");
    req->outputs[i].name = e->via.str.ptr;
    req->outputs[i].len = e->via.str.size;
  }
  return SEGOPS_OK;
}

/* "outputs_shm": {output name: {"region", "offset"}}. */
static int outputs_shm_from(const msgpack_object *v, segops_op op, segops_request *req, char *err, size_t errlen) {
  if (req->n_outputs_shm)
    return segops_codec_fail(SEGOPS_E_INVALID_ARGUMENT, err, errlen, op, "outputs_shm is given more than once");
  if (v->type != MSGPACK_OBJECT_MAP)
    return segops_codec_fail(SEGOPS_E_MALFORMED_BODY, err, errlen, op,
                             "outputs_shm must be a map {output name: {\"region\", \"offset\"}}");
  if (v->via.map.size > SEGOPS_MAX_OUTPUTS * 2)
    return segops_codec_too_many_outputs(op, true, v->via.map.size, err, errlen);
  for (uint32_t i = 0; i < v->via.map.size; i++) {
    const msgpack_object *k = &v->via.map.ptr[i].key;
    if (k->type != MSGPACK_OBJECT_STR)
      return segops_codec_fail(SEGOPS_E_MALFORMED_BODY, err, errlen, op,
                               "outputs_shm must be a map {output name: {\"region\", \"offset\"}}");
    segops_output_shm *o = &req->outputs_shm[req->n_outputs_shm];
    char an[200];
    segops_codec_printable(an, sizeof an, k->via.str.ptr, k->via.str.size);
    char full[224];
    snprintf(full, sizeof full, "outputs_shm.%s", an);
    int rc = shm_ref_from(&v->via.map.ptr[i].val, full, op, &o->region, &o->region_len, &o->offset, err, errlen);
    if (rc) return rc;
    o->name = k->via.str.ptr;
    o->len = k->via.str.size;
    req->n_outputs_shm++;
  }
  return SEGOPS_OK;
}

/* num_segments: an integer (ns_value, or ns_overflow beyond int64), or anything else (not one). */
static int num_segments_from(const msgpack_object *v, segops_op op, segops_request *req, char *err, size_t errlen) {
  if (req->ns_kind != SEGOPS_NS_ABSENT)
    return segops_codec_fail(SEGOPS_E_INVALID_ARGUMENT, err, errlen, op, "num_segments is given more than once");
  req->ns_kind = SEGOPS_NS_INT;
  if (v->type == MSGPACK_OBJECT_POSITIVE_INTEGER) {
    if (v->via.u64 > (uint64_t)INT64_MAX)
      req->ns_overflow = true;
    else
      req->ns_value = (int64_t)v->via.u64;
  } else if (v->type == MSGPACK_OBJECT_NEGATIVE_INTEGER) {
    req->ns_value = v->via.i64;
  } else {
    req->ns_kind = SEGOPS_NS_NOT_INT;
  }
  return SEGOPS_OK;
}

/* A tensor-valued key: its record (duplicates are kept: prepare reports them by name). */
static int tensor_from(const msgpack_object *k, const msgpack_object *v, segops_op op, segops_pass pass,
                       segops_records *rs, char *err, size_t errlen) {
  if (rs->n >= SEGOPS_MAX_REQ_ARGS) return segops_codec_too_many_args(op, err, errlen);
  segops_tensor_record *r = &rs->rec[rs->n];
  memset(r, 0, sizeof *r);
  r->name = k->via.str.ptr;
  r->name_len = k->via.str.size;
  char an[200];
  segops_codec_printable(an, sizeof an, r->name, r->name_len);
  int rc = record_from(v, an, op, r, err, errlen);
  if (rc) return segops_codec_unknown_arg(rc, op, pass, r->name, r->name_len, err, errlen);
  rs->n++;
  return SEGOPS_OK;
}

static int request_from(const msgpack_object *root, segops_op op, segops_pass pass, segops_request *req,
                        segops_records *rs, char *err, size_t errlen) {
  if (root->type != MSGPACK_OBJECT_MAP)
    return segops_codec_fail(SEGOPS_E_MALFORMED_BODY, err, errlen, op, "body must be a map of argument names");
  bool seen_dtype = false;
  for (uint32_t i = 0; i < root->via.map.size; i++) {
    const msgpack_object *k = &root->via.map.ptr[i].key, *v = &root->via.map.ptr[i].val;
    if (k->type != MSGPACK_OBJECT_STR)
      return segops_codec_fail(SEGOPS_E_MALFORMED_BODY, err, errlen, op,
                               "body must be a map of argument names (key %u is not a string)", i);
    int rc = SEGOPS_OK;
    switch (segops_codec_key_kind(k->via.str.ptr, k->via.str.size)) {
      case SEGOPS_KEY_NUM_SEGMENTS:
        rc = num_segments_from(v, op, req, err, errlen);
        break;
      case SEGOPS_KEY_DTYPE: /* tensors carry their own dtype in msgpack: accepted, ignored */
        if (seen_dtype)
          return segops_codec_fail(SEGOPS_E_INVALID_ARGUMENT, err, errlen, op, "dtype is given more than once");
        seen_dtype = true;
        break;
      case SEGOPS_KEY_OUTPUTS_SHM:
        rc = outputs_shm_from(v, op, req, err, errlen);
        break;
      case SEGOPS_KEY_OUTPUTS:
        rc = outputs_from(v, op, req, err, errlen);
        break;
      case SEGOPS_KEY_TENSOR:
        rc = tensor_from(k, v, op, pass, rs, err, errlen);
        break;
    }
    if (rc) return rc;
  }
  return SEGOPS_OK;
}

int segops_decode_msgpack(const char *body, size_t len, segops_op op, segops_pass pass, const segops_codec_limits *lim,
                          segops_decoded *out, char *err, size_t errlen) {
  segops_codec_reset(out, op, pass);
  if (!segops_fn(op, pass)) return segops_errf(SEGOPS_E_NOT_FOUND, err, errlen, "unknown op or pass");
  segops_codec_limits l = segops_codec_limits_eff(lim);
  int rc = scan((const unsigned char *)(body ? body : ""), body ? len : 0, &l, op, err, errlen);
  if (rc) return rc;

  msgpack_zone zone;
  if (!msgpack_zone_init(&zone, 2048))
    return segops_codec_fail(SEGOPS_E_NOMEM, err, errlen, op, "out of memory decoding the body");
  msgpack_object root;
  size_t off = 0;
  msgpack_unpack_return ur = msgpack_unpack(body, len, &off, &zone, &root);
  segops_records rs;
  rs.n = 0;
  rs.dtype_text = NULL;
  if (ur == MSGPACK_UNPACK_NOMEM_ERROR) {
    rc = segops_codec_fail(SEGOPS_E_NOMEM, err, errlen, op, "out of memory decoding the body");
  } else if (ur != MSGPACK_UNPACK_SUCCESS || off != len) {
    rc = segops_codec_fail(SEGOPS_E_MALFORMED_BODY, err, errlen, op, "body is not valid msgpack (at byte %zu)", off);
  } else {
    rc = request_from(&root, op, pass, &out->req, &rs, err, errlen);
  }
  /* Names, strings and bin payloads in the tree point into body, so the tree can go now. */
  msgpack_zone_destroy(&zone);
  if (!rc) rc = segops_records_finish(SEGOPS_WIRE_V1, &rs, false, out, err, errlen);
  if (rc) {
    segops_decoded_free(out);
    segops_codec_reset(out, op, pass);
  }
  return rc;
}

/* ---- encoder ------------------------------------------------------------------------------ */

/* Header bytes go into a block allocated up front; a bin payload ends the current header
 * piece and is referenced by its own iovec. */
typedef struct {
  char *buf;
  size_t pos, cap, piece;
  struct iovec *iov;
  int iovcnt;
  bool overflow;
} enc_state;

static int enc_write(void *data, const char *b, size_t n) {
  enc_state *s = data;
  if (n > s->cap - s->pos) {
    s->overflow = true;
    return -1;
  }
  memcpy(s->buf + s->pos, b, n);
  s->pos += n;
  return 0;
}

static void enc_cut(enc_state *s) {
  if (s->pos > s->piece) {
    s->iov[s->iovcnt].iov_base = s->buf + s->piece;
    s->iov[s->iovcnt].iov_len = s->pos - s->piece;
    s->iovcnt++;
  }
  s->piece = s->pos;
}

int segops_encode_msgpack(const segops_out_tensor *outs, int n, segops_encoded *enc) {
  memset(enc, 0, sizeof *enc);
  if (n < 0) return SEGOPS_E_INTERNAL;
  size_t cap = 8;
  for (int i = 0; i < n; i++)
    cap += strlen(outs[i].name) + 128 + (outs[i].shm_region ? strlen(outs[i].shm_region) + 64 : 0);
  size_t iovbytes = ((size_t)n * 2 + 1) * sizeof(struct iovec);
  char *block = malloc(iovbytes + cap);
  if (!block) return SEGOPS_E_NOMEM;
  enc_state s = {.buf = block + iovbytes, .cap = cap, .iov = (struct iovec *)(void *)block};
  msgpack_packer pk;
  msgpack_packer_init(&pk, &s, enc_write);
  msgpack_pack_map(&pk, (size_t)n);
  for (int i = 0; i < n; i++) {
    const segops_out_tensor *o = &outs[i];
    const char *dt = segops_dtype_name(o->dtype);
    size_t nl = strlen(o->name);
    msgpack_pack_str(&pk, nl);
    msgpack_pack_str_body(&pk, o->name, nl);
    msgpack_pack_map(&pk, 3);
    msgpack_pack_str(&pk, 5);
    msgpack_pack_str_body(&pk, "dtype", 5);
    msgpack_pack_str(&pk, strlen(dt));
    msgpack_pack_str_body(&pk, dt, strlen(dt));
    msgpack_pack_str(&pk, 5);
    msgpack_pack_str_body(&pk, "shape", 5);
    msgpack_pack_array(&pk, (size_t)o->ndim);
    for (int d = 0; d < o->ndim; d++) msgpack_pack_int64(&pk, o->shape[d]);
    if (o->shm_region) { /* in a region: {"region","offset","byte_size"}, no payload */
      size_t rl = strlen(o->shm_region);
      msgpack_pack_str(&pk, 3);
      msgpack_pack_str_body(&pk, "shm", 3);
      msgpack_pack_map(&pk, 3);
      msgpack_pack_str(&pk, 6);
      msgpack_pack_str_body(&pk, "region", 6);
      msgpack_pack_str(&pk, rl);
      msgpack_pack_str_body(&pk, o->shm_region, rl);
      msgpack_pack_str(&pk, 6);
      msgpack_pack_str_body(&pk, "offset", 6);
      msgpack_pack_uint64(&pk, o->shm_offset);
      msgpack_pack_str(&pk, 9);
      msgpack_pack_str_body(&pk, "byte_size", 9);
      msgpack_pack_uint64(&pk, (uint64_t)o->nbytes);
      continue;
    }
    msgpack_pack_str(&pk, 4);
    msgpack_pack_str_body(&pk, "data", 4);
    msgpack_pack_bin(&pk, o->nbytes);
    enc_cut(&s);
    if (o->nbytes) {
      s.iov[s.iovcnt].iov_base = (void *)o->data; /* borrowed: the outputs outlive the response */
      s.iov[s.iovcnt].iov_len = o->nbytes;
      s.iovcnt++;
    }
  }
  enc_cut(&s);
  if (s.overflow) { /* cannot happen with the bound above; never emit a torn body */
    free(block);
    return SEGOPS_E_INTERNAL;
  }
  enc->iov = s.iov;
  enc->iovcnt = s.iovcnt;
  enc->owned = block;
  for (int i = 0; i < s.iovcnt; i++) enc->total += s.iov[i].iov_len;
  return SEGOPS_OK;
}

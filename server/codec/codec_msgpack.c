/* codec_msgpack.c: msgpack request decoder (tensor payloads read in place) and response encoder
 * (tensor payloads referenced by iovecs, never copied). */
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

static uint64_t be(const unsigned char *p, int n) {
  uint64_t v = 0;
  for (int i = 0; i < n; i++) v = (v << 8) | p[i];
  return v;
}

static int scan(const unsigned char *b, size_t len, const segops_codec_limits *lim, segops_op op, char *err,
                size_t errlen) {
  uint64_t remaining[SEGOPS_CODEC_MSGPACK_MAX_DEPTH + 1]; /* values still to read per open level */
  int depth = 0;
  int max_depth = lim->max_depth < SEGOPS_CODEC_MSGPACK_MAX_DEPTH ? lim->max_depth : SEGOPS_CODEC_MSGPACK_MAX_DEPTH;
  uint64_t items = 0;
  size_t pos = 0;
  remaining[0] = 1;
  while (depth >= 0) {
    if (remaining[depth] == 0) {
      depth--;
      continue;
    }
    remaining[depth]--;
    if (pos >= len)
      return segops_codec_fail(SEGOPS_E_MALFORMED_BODY, err, errlen, op,
                               "body is not valid msgpack (truncated at byte %zu)", pos);
    size_t start = pos;
    unsigned c = b[pos++];
    int lenbytes = 0;  /* size of a length field that follows */
    uint64_t skip = 0; /* fixed payload bytes to skip */
    int kind = 0;      /* 0 scalar, 1 raw with length, 2 array, 3 map, 4 ext with length */
    uint64_t count = 0;
    if (c <= 0x7f || c >= 0xe0 || c == 0xc0 || c == 0xc2 || c == 0xc3) {
      /* fixint, nil, bool */
    } else if (c <= 0x8f) {
      kind = 3, count = c & 0x0f;
    } else if (c <= 0x9f) {
      kind = 2, count = c & 0x0f;
    } else if (c <= 0xbf) {
      skip = c & 0x1f;
    } else {
      switch (c) {
        case 0xc4:
        case 0xd9:
          kind = 1, lenbytes = 1;
          break;
        case 0xc5:
        case 0xda:
          kind = 1, lenbytes = 2;
          break;
        case 0xc6:
        case 0xdb:
          kind = 1, lenbytes = 4;
          break;
        case 0xc7:
          kind = 4, lenbytes = 1;
          break;
        case 0xc8:
          kind = 4, lenbytes = 2;
          break;
        case 0xc9:
          kind = 4, lenbytes = 4;
          break;
        case 0xca:
          skip = 4;
          break;
        case 0xcb:
          skip = 8;
          break;
        case 0xcc:
        case 0xd0:
          skip = 1;
          break;
        case 0xcd:
        case 0xd1:
          skip = 2;
          break;
        case 0xce:
        case 0xd2:
          skip = 4;
          break;
        case 0xcf:
        case 0xd3:
          skip = 8;
          break;
        case 0xd4:
          skip = 2;
          break;
        case 0xd5:
          skip = 3;
          break;
        case 0xd6:
          skip = 5;
          break;
        case 0xd7:
          skip = 9;
          break;
        case 0xd8:
          skip = 17;
          break;
        case 0xdc:
          kind = 2, lenbytes = 2;
          break;
        case 0xdd:
          kind = 2, lenbytes = 4;
          break;
        case 0xde:
          kind = 3, lenbytes = 2;
          break;
        case 0xdf:
          kind = 3, lenbytes = 4;
          break;
        default: /* 0xc1 is never used */
          return segops_codec_fail(SEGOPS_E_MALFORMED_BODY, err, errlen, op,
                                   "body is not valid msgpack (byte 0x%02x at byte %zu is not a type)", c, start);
      }
    }
    if (lenbytes) {
      if ((size_t)lenbytes > len - pos)
        return segops_codec_fail(SEGOPS_E_MALFORMED_BODY, err, errlen, op,
                                 "body is not valid msgpack (truncated at byte %zu)", len);
      uint64_t v = be(b + pos, lenbytes);
      pos += (size_t)lenbytes;
      if (kind == 1)
        skip = v;
      else if (kind == 4)
        skip = v + 1; /* type byte */
      else
        count = v;
    }
    if (skip > len - pos)
      return segops_codec_fail(SEGOPS_E_MALFORMED_BODY, err, errlen, op,
                               "body is not valid msgpack (truncated at byte %zu: a value at byte %zu needs %llu "
                               "more bytes)",
                               len, start, (unsigned long long)skip);
    pos += (size_t)skip;
    if (kind == 2 || kind == 3) {
      uint64_t values = kind == 3 ? 2 * count : count;
      if (values > len - pos) /* every value takes at least one byte */
        return segops_codec_fail(SEGOPS_E_MALFORMED_BODY, err, errlen, op,
                                 "body is not valid msgpack (truncated: the %s at byte %zu claims %llu items but only "
                                 "%zu bytes remain)",
                                 kind == 3 ? "map" : "array", start, (unsigned long long)count, len - pos);
      if (depth + 1 > max_depth)
        return segops_codec_fail(SEGOPS_E_MALFORMED_BODY, err, errlen, op,
                                 "body is nested too deeply (more than %d levels at byte %zu)", max_depth, start);
      items += count;
      if (items > lim->max_items)
        return segops_codec_fail(SEGOPS_E_TOO_LARGE, err, errlen, op,
                                 "body has more than %zu array/map items (the limit, --max-body-items)",
                                 lim->max_items);
      remaining[++depth] = values;
    }
  }
  if (pos != len)
    return segops_codec_fail(SEGOPS_E_MALFORMED_BODY, err, errlen, op,
                             "body is not valid msgpack (%zu trailing bytes after the value, at byte %zu)", len - pos,
                             pos);
  return SEGOPS_OK;
}

/* ---- object tree -> request -------------------------------------------------------------- */

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

/* Fills one tensor from {"dtype": str, "shape": [ints], "data": bin} or, by reference,
 * {"dtype", "shape", "shm": {"region", "offset"}}. */
static int tensor_from(const msgpack_object *v, const char *an, segops_op op, segops_named_tensor *nt, char *err,
                       size_t errlen) {
  segops_tensor *t = &nt->t;
  if (v->type != MSGPACK_OBJECT_MAP)
    return segops_codec_fail(SEGOPS_E_MALFORMED_BODY, err, errlen, op,
                             "%s must be a tensor map {\"dtype\", \"shape\", \"data\"}", an);
  const msgpack_object *dtype = NULL, *shape = NULL, *data = NULL, *shm = NULL;
  for (uint32_t i = 0; i < v->via.map.size; i++) {
    const msgpack_object *k = &v->via.map.ptr[i].key;
    const msgpack_object **slot = is_str(k, "dtype")   ? &dtype
                                  : is_str(k, "shape") ? &shape
                                  : is_str(k, "data")  ? &data
                                  : is_str(k, "shm")   ? &shm
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
  if (data && shm)
    return segops_codec_fail(SEGOPS_E_MALFORMED_BODY, err, errlen, op,
                             "%s has both \"data\" and \"shm\" (a tensor is inline or by reference)", an);
  if (shm && !data) data = shm;
  if (!dtype || !shape || !data)
    return segops_codec_fail(SEGOPS_E_MALFORMED_BODY, err, errlen, op,
                             "%s is missing \"%s\" (a tensor is a map "
                             "{\"dtype\", \"shape\", \"data\"})",
                             an,
                             !dtype   ? "dtype"
                             : !shape ? "shape"
                                      : "data");
  if (dtype->type != MSGPACK_OBJECT_STR)
    return segops_codec_fail(SEGOPS_E_MALFORMED_BODY, err, errlen, op, "%s.dtype must be a string", an);
  int rc = segops_codec_dtype(op, an, dtype->via.str.ptr, dtype->via.str.size, &t->dtype, err, errlen);
  if (rc) return rc;
  if (shape->type != MSGPACK_OBJECT_ARRAY)
    return segops_codec_fail(SEGOPS_E_MALFORMED_BODY, err, errlen, op,
                             "%s.shape must be a list of non-negative integers", an);
  if (shape->via.array.size > SEGOPS_MAX_NDIM)
    return segops_codec_fail(SEGOPS_E_INVALID_ARGUMENT, err, errlen, op, "%s has %u dimensions; at most %d are allowed",
                             an, shape->via.array.size, SEGOPS_MAX_NDIM);
  t->ndim = (int)shape->via.array.size;
  for (int d = 0; d < t->ndim; d++) {
    const msgpack_object *e = &shape->via.array.ptr[d];
    if (e->type == MSGPACK_OBJECT_POSITIVE_INTEGER) {
      if (e->via.u64 > (uint64_t)INT64_MAX)
        return segops_codec_fail(SEGOPS_E_TOO_LARGE, err, errlen, op, "%s.shape[%d] is too large", an, d);
      t->shape[d] = (int64_t)e->via.u64;
    } else if (e->type == MSGPACK_OBJECT_NEGATIVE_INTEGER) {
      t->shape[d] = e->via.i64; /* refused by prepare with the value in its message */
    } else {
      return segops_codec_fail(SEGOPS_E_MALFORMED_BODY, err, errlen, op,
                               "%s.shape must be a list of non-negative integers", an);
    }
  }
  if (shm) {
    t->data = NULL;
    t->nbytes = 0;
    char label[224];
    snprintf(label, sizeof label, "%s.shm", an);
    return shm_ref_from(shm, label, op, &nt->shm_region, &nt->shm_region_len, &nt->shm_offset, err, errlen);
  }
  if (data->type != MSGPACK_OBJECT_BIN)
    return segops_codec_fail(SEGOPS_E_MALFORMED_BODY, err, errlen, op, "%s.data must be binary (msgpack bin)", an);
  t->data = data->via.bin.ptr;
  t->nbytes = data->via.bin.size;
  return SEGOPS_OK;
}

static int outputs_from(const msgpack_object *v, segops_op op, segops_request *req, char *err, size_t errlen) {
  if (v->type != MSGPACK_OBJECT_ARRAY)
    return segops_codec_fail(SEGOPS_E_MALFORMED_BODY, err, errlen, op, "outputs must be a list of output names");
  if (v->via.array.size > SEGOPS_MAX_OUTPUTS * 2)
    return segops_codec_fail(SEGOPS_E_INVALID_ARGUMENT, err, errlen, op,
                             "outputs lists %u names; at most %d are allowed", v->via.array.size,
                             SEGOPS_MAX_OUTPUTS * 2);
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
  if (v->type != MSGPACK_OBJECT_MAP)
    return segops_codec_fail(SEGOPS_E_MALFORMED_BODY, err, errlen, op,
                             "outputs_shm must be a map {output name: {\"region\", \"offset\"}}");
  if (v->via.map.size > SEGOPS_MAX_OUTPUTS * 2)
    return segops_codec_fail(SEGOPS_E_INVALID_ARGUMENT, err, errlen, op,
                             "outputs_shm lists %u outputs; at most %d are allowed", v->via.map.size,
                             SEGOPS_MAX_OUTPUTS * 2);
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

static int request_from(const msgpack_object *root, segops_op op, segops_pass pass, segops_request *req, char *err,
                        size_t errlen) {
  if (root->type != MSGPACK_OBJECT_MAP)
    return segops_codec_fail(SEGOPS_E_MALFORMED_BODY, err, errlen, op, "body must be a map of argument names");
  bool seen_dtype = false;
  for (uint32_t i = 0; i < root->via.map.size; i++) {
    const msgpack_object *k = &root->via.map.ptr[i].key, *v = &root->via.map.ptr[i].val;
    if (k->type != MSGPACK_OBJECT_STR)
      return segops_codec_fail(SEGOPS_E_MALFORMED_BODY, err, errlen, op,
                               "body must be a map of argument names (key %u is not a string)", i);
    const char *name = k->via.str.ptr;
    size_t nlen = k->via.str.size;
    char an[200];
    segops_codec_printable(an, sizeof an, name, nlen);
    int rc = SEGOPS_OK;
    switch (segops_codec_key_kind(name, nlen)) {
      case SEGOPS_KEY_NUM_SEGMENTS:
        if (req->ns_kind != SEGOPS_NS_ABSENT)
          return segops_codec_fail(SEGOPS_E_INVALID_ARGUMENT, err, errlen, op, "num_segments is given more than once");
        if (v->type == MSGPACK_OBJECT_POSITIVE_INTEGER) {
          req->ns_kind = SEGOPS_NS_INT;
          if (v->via.u64 > (uint64_t)INT64_MAX)
            req->ns_overflow = true;
          else
            req->ns_value = (int64_t)v->via.u64;
        } else if (v->type == MSGPACK_OBJECT_NEGATIVE_INTEGER) {
          req->ns_kind = SEGOPS_NS_INT;
          req->ns_value = v->via.i64;
        } else {
          req->ns_kind = SEGOPS_NS_NOT_INT;
        }
        break;
      case SEGOPS_KEY_DTYPE: /* tensors carry their own dtype in msgpack: accepted, ignored */
        if (seen_dtype)
          return segops_codec_fail(SEGOPS_E_INVALID_ARGUMENT, err, errlen, op, "dtype is given more than once");
        seen_dtype = true;
        break;
      case SEGOPS_KEY_OUTPUTS_SHM:
        if (req->n_outputs_shm)
          return segops_codec_fail(SEGOPS_E_INVALID_ARGUMENT, err, errlen, op, "outputs_shm is given more than once");
        rc = outputs_shm_from(v, op, req, err, errlen);
        break;
      case SEGOPS_KEY_OUTPUTS:
        if (req->has_outputs)
          return segops_codec_fail(SEGOPS_E_INVALID_ARGUMENT, err, errlen, op, "outputs is given more than once");
        rc = outputs_from(v, op, req, err, errlen);
        break;
      case SEGOPS_KEY_TENSOR:
        if (req->nargs >= SEGOPS_MAX_REQ_ARGS)
          return segops_codec_fail(SEGOPS_E_INVALID_ARGUMENT, err, errlen, op,
                                   "too many arguments (more than %d tensors)", SEGOPS_MAX_REQ_ARGS);
        segops_named_tensor *nt = &req->args[req->nargs];
        rc = tensor_from(v, an, op, nt, err, errlen);
        if (rc && !segops_codec_arg_known(op, pass, name, nlen))
          return segops_codec_fail(SEGOPS_E_INVALID_ARGUMENT, err, errlen, op, "unknown argument '%s' for %s", an,
                                   segops_pass_name(pass));
        nt->name = name;
        nt->name_len = nlen;
        req->nargs++; /* duplicates are kept: prepare reports them by name */
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
  if (ur == MSGPACK_UNPACK_NOMEM_ERROR) {
    rc = segops_codec_fail(SEGOPS_E_NOMEM, err, errlen, op, "out of memory decoding the body");
  } else if (ur != MSGPACK_UNPACK_SUCCESS || off != len) {
    rc = segops_codec_fail(SEGOPS_E_MALFORMED_BODY, err, errlen, op, "body is not valid msgpack (at byte %zu)", off);
  } else {
    /* Names, strings and bin payloads in the tree point into body, so the tree can go now. */
    rc = request_from(&root, op, pass, &out->req, err, errlen);
  }
  msgpack_zone_destroy(&zone);
  if (rc) segops_codec_reset(out, op, pass);
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

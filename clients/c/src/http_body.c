/* http_body.c: the HTTP transport's bodies (http_body.h): requests packed with msgpack-c's packer,
 * answers read by a small bounds-checked msgpack reader (an answer has one fixed form, and every
 * length it declares is checked against the bytes that are there before anything is used), error
 * bodies parsed with jansson. */
#include "http_body.h"

#include <jansson.h>
#include <msgpack.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops.h"

/* ---- buffers ---- */

bool segops_buf_reserve(segops_buf *b, size_t n) {
  if (b->cap - b->len >= n) return true;
  size_t cap = b->cap ? b->cap : 4096;
  while (cap - b->len < n) {
    if (cap > SIZE_MAX / 2) return false;
    cap *= 2;
  }
  char *p = realloc(b->p, cap);
  if (!p) return false;
  b->p = p;
  b->cap = cap;
  return true;
}

void segops_buf_free(segops_buf *b) {
  free(b->p);
  memset(b, 0, sizeof *b);
}

/* ---- requests ---- */

static int buf_write(void *data, const char *p, size_t n) {
  segops_buf *b = data;
  if (!segops_buf_reserve(b, n)) return -1;
  memcpy(b->p + b->len, p, n);
  b->len += n;
  return 0;
}

static int pack_str(msgpack_packer *pk, const char *s) {
  size_t n = strlen(s);
  return msgpack_pack_str(pk, n) || msgpack_pack_str_body(pk, s, n);
}

static int pack_tensor(msgpack_packer *pk, const char *name, const segops_array *a, size_t nbytes) {
  int bad = pack_str(pk, name) || msgpack_pack_map(pk, 3) || pack_str(pk, "dtype") ||
            pack_str(pk, segops_dtype_name(a->dtype)) || pack_str(pk, "shape") ||
            msgpack_pack_array(pk, (size_t)a->ndim);
  for (int i = 0; i < a->ndim && !bad; i++) bad = msgpack_pack_int64(pk, a->shape[i]);
  bad = bad || pack_str(pk, "data") || msgpack_pack_bin(pk, nbytes);
  if (!bad && nbytes) bad = msgpack_pack_bin_body(pk, a->data, nbytes);
  return bad;
}

int segops_body_encode(const segops_tcall *tc, segops_buf *b, segops_error *e) {
  b->len = 0;
  size_t total = 512 + tc->idx_nbytes;
  int n_keys = 1 + (tc->idx != NULL) + (tc->want != (1u << tc->n_out) - 1);
  for (int k = 0; k < tc->n_in; k++) {
    total += tc->in_nbytes[k];
    n_keys += tc->in[k] != NULL;
  }
  if (!segops_buf_reserve(b, total))
    return segops_client_err(e, SEGOPS_E_NOMEM, "%s %s: out of memory for a request of %zu bytes", tc->op, tc->pass,
                             total);
  msgpack_packer pk;
  msgpack_packer_init(&pk, b, buf_write);
  int bad = msgpack_pack_map(&pk, (size_t)n_keys);
  for (int k = 0; k < tc->n_in && !bad; k++)
    if (tc->in[k]) bad = pack_tensor(&pk, tc->in_name[k], tc->in[k], tc->in_nbytes[k]);
  if (!bad && tc->idx) bad = pack_tensor(&pk, "idx", tc->idx, tc->idx_nbytes);
  bad = bad || pack_str(&pk, "num_segments") || msgpack_pack_int64(&pk, tc->num_segments);
  if (!bad && tc->want != (1u << tc->n_out) - 1) {
    bad = pack_str(&pk, "outputs") || msgpack_pack_array(&pk, (size_t)__builtin_popcount(tc->want));
    for (int o = 0; o < tc->n_out && !bad; o++)
      if ((tc->want >> o) & 1u) bad = pack_str(&pk, tc->out_name[o]);
  }
  if (bad) return segops_client_err(e, SEGOPS_E_NOMEM, "%s %s: out of memory for the request", tc->op, tc->pass);
  return SEGOPS_OK;
}

size_t segops_body_answer_cap(const segops_tcall *tc) {
  if (!tc->expect_known) return SEGOPS_ERROR_BODY_CAP; /* the daemon must refuse it: no outputs */
  size_t cap = 16;
  for (int o = 0; o < tc->n_out; o++)
    if ((tc->want >> o) & 1u) cap += tc->out_nbytes[o] + 128 + strlen(tc->out_name[o]);
  return cap;
}

/* ---- answers: a bounds-checked reader of the few msgpack forms an answer uses ---- */

typedef struct {
  const uint8_t *p, *end;
} reader;

static bool take(reader *r, size_t n, const uint8_t **out) {
  if ((size_t)(r->end - r->p) < n) return false;
  *out = r->p;
  r->p += n;
  return true;
}

static bool read_be(reader *r, int n, uint64_t *v) {
  const uint8_t *b;
  if (!take(r, (size_t)n, &b)) return false;
  *v = 0;
  for (int i = 0; i < n; i++) *v = (*v << 8) | b[i];
  return true;
}

/* A header of the family: fix (mask/base of a fix form) or one of three sized forms (0 = none). */
static bool read_len(reader *r, uint8_t fix_base, uint8_t fix_mask, const uint8_t sized[3], uint64_t *len) {
  const uint8_t *t;
  if (!take(r, 1, &t)) return false;
  if (fix_mask && (*t & ~fix_mask) == fix_base) {
    *len = *t & fix_mask;
    return true;
  }
  for (int i = 0; i < 3; i++)
    if (sized[i] && *t == sized[i]) return read_be(r, 1 << i, len);
  return false;
}

static bool read_map(reader *r, uint64_t *n) { return read_len(r, 0x80, 0x0f, (const uint8_t[3]){0, 0xde, 0xdf}, n); }
static bool read_array(reader *r, uint64_t *n) { return read_len(r, 0x90, 0x0f, (const uint8_t[3]){0, 0xdc, 0xdd}, n); }

static bool read_bytes(reader *r, bool bin, const uint8_t **p, uint64_t *n) {
  bool ok = bin ? read_len(r, 0, 0, (const uint8_t[3]){0xc4, 0xc5, 0xc6}, n)
                : read_len(r, 0xa0, 0x1f, (const uint8_t[3]){0xd9, 0xda, 0xdb}, n);
  return ok && take(r, (size_t)*n, p);
}

static bool str_is(const uint8_t *p, uint64_t n, const char *s) { return strlen(s) == n && !memcmp(p, s, n); }

/* A non-negative integer (any msgpack integer form). */
static bool read_uint(reader *r, uint64_t *v) {
  const uint8_t *t;
  if (!take(r, 1, &t)) return false;
  if (*t <= 0x7f) {
    *v = *t;
    return true;
  }
  if (*t >= 0xcc && *t <= 0xcf) return read_be(r, 1 << (*t - 0xcc), v);
  if (*t >= 0xd0 && *t <= 0xd3) { /* signed: the sign bit must be clear */
    int n = 1 << (*t - 0xd0);
    return read_be(r, n, v) && (*v >> (8 * n - 1)) == 0;
  }
  return false;
}

typedef struct {
  const uint8_t *data;
  bool seen;
} answer_out;

/* One tensor {"dtype", "shape", "data"} for output o; NULL, or what is wrong with it. */
static const char *read_tensor(reader *r, const segops_tcall *tc, int o, answer_out *got) {
  uint64_t n;
  if (!read_map(r, &n) || n != 3) return "is not a map of dtype, shape and data";
  bool have[3] = {false, false, false};
  for (uint64_t i = 0; i < n; i++) {
    const uint8_t *k, *v;
    uint64_t kn, vn;
    if (!read_bytes(r, false, &k, &kn)) return "has a key that is not a string";
    if (str_is(k, kn, "dtype") && !have[0]) {
      have[0] = true;
      if (!read_bytes(r, false, &v, &vn) || !str_is(v, vn, segops_dtype_name(tc->out_dtype)))
        return "has another dtype";
    } else if (str_is(k, kn, "shape") && !have[1]) {
      have[1] = true;
      if (!read_array(r, &vn) || vn != (uint64_t)tc->out_ndim[o]) return "has another number of dimensions";
      for (uint64_t d = 0; d < vn; d++) {
        uint64_t dim;
        if (!read_uint(r, &dim) || dim != (uint64_t)tc->out_shape[o][d]) return "has another shape";
      }
    } else if (str_is(k, kn, "data") && !have[2]) {
      have[2] = true;
      if (!read_bytes(r, true, &got->data, &vn) || vn != tc->out_nbytes[o]) return "has data of another length";
    } else {
      return "has an unknown or repeated key";
    }
  }
  return NULL;
}

/* Output k's bytes into the caller's array (allocated when its data is NULL). */
static int place_outputs(const segops_tcall *tc, const answer_out *got, segops_error *e) {
  bool made[SEGOPS_MAX_OUTPUTS] = {false};
  for (int o = 0; o < tc->n_out; o++) {
    segops_array *a = tc->out[o];
    if (!a || a->data) continue;
    a->data = segops_client_alloc(NULL, tc->out_nbytes[o]);
    made[o] = a->data != NULL;
    if (made[o]) continue;
    for (int k = 0; k < o; k++)
      if (made[k]) {
        free(tc->out[k]->data);
        tc->out[k]->data = NULL;
      }
    return segops_client_err(e, SEGOPS_E_NOMEM, "%s %s: out of memory for %s (%zu bytes)", tc->op, tc->pass,
                             tc->out_name[o], tc->out_nbytes[o]);
  }
  for (int o = 0; o < tc->n_out; o++) {
    segops_array *a = tc->out[o];
    if (!a) continue;
    if (tc->out_nbytes[o]) memcpy(a->data, got[o].data, tc->out_nbytes[o]);
    a->dtype = tc->out_dtype;
    a->ndim = tc->out_ndim[o];
    memcpy(a->shape, tc->out_shape[o], sizeof a->shape);
    a->nbytes = tc->out_nbytes[o];
  }
  return SEGOPS_OK;
}

int segops_body_decode_answer(const segops_tcall *tc, const uint8_t *body, size_t len, const char *where,
                              segops_error *e) {
  if (!tc->expect_known)
    return segops_client_err(e, SEGOPS_E_PROTOCOL, "%s: answered 200 to a call it must refuse", where);
  reader r = {body, body + len};
  answer_out got[SEGOPS_MAX_OUTPUTS] = {{0}};
  uint64_t n;
  if (!read_map(&r, &n)) return segops_client_err(e, SEGOPS_E_PROTOCOL, "%s: the answer is not a msgpack map", where);
  for (uint64_t i = 0; i < n; i++) {
    const uint8_t *k;
    uint64_t kn;
    if (!read_bytes(&r, false, &k, &kn))
      return segops_client_err(e, SEGOPS_E_PROTOCOL, "%s: the answer has a key that is not a string", where);
    int o = 0;
    while (o < tc->n_out && !(tc->out[o] && str_is(k, kn, tc->out_name[o]))) o++;
    if (o == tc->n_out || got[o].seen)
      return segops_client_err(e, SEGOPS_E_PROTOCOL, "%s: the answer has an output '%.*s' that was not asked for",
                               where, (int)(kn > 64 ? 64 : kn), (const char *)k);
    got[o].seen = true;
    const char *why = read_tensor(&r, tc, o, &got[o]);
    if (why)
      return segops_client_err(e, SEGOPS_E_PROTOCOL, "%s: the answer's %s %s (or is cut short)", where, tc->out_name[o],
                               why);
  }
  if (r.p != r.end)
    return segops_client_err(e, SEGOPS_E_PROTOCOL, "%s: %zu bytes after the answer", where, (size_t)(r.end - r.p));
  for (int o = 0; o < tc->n_out; o++)
    if (tc->out[o] && !got[o].seen)
      return segops_client_err(e, SEGOPS_E_PROTOCOL, "%s: the answer lacks output %s", where, tc->out_name[o]);
  return place_outputs(tc, got, e);
}

/* ---- errors ---- */

/* SEGOPS_E_* of a wire code (the first row that has it), else of the HTTP status. */
static int code_of(const char *wire, int status) {
#define SEGOPS_BY_WIRE_(name, val, w, http, msg) \
  if (wire && !strcmp(wire, (w))) return (val);
  SEGOPS_ERRNO_MAP(SEGOPS_BY_WIRE_)
#undef SEGOPS_BY_WIRE_
#define SEGOPS_BY_STATUS_(name, val, w, http, msg) \
  if ((http) && status == (http)) return (val);
  SEGOPS_ERRNO_MAP(SEGOPS_BY_STATUS_)
#undef SEGOPS_BY_STATUS_
  if (status == 502) return SEGOPS_E_UNAVAILABLE; /* a proxy in front of a daemon that is gone */
  return status >= 500 ? SEGOPS_E_INTERNAL : SEGOPS_E_PROTOCOL;
}

int segops_body_error(int status, const char *body, size_t len, double retry_after_s, const char *where,
                      segops_error *e) {
  json_error_t jerr;
  json_t *root = len ? json_loadb(body, len, 0, &jerr) : NULL;
  json_t *err = json_object_get(root, "error");
  const char *wire = json_string_value(json_object_get(err, "code"));
  const char *msg = json_is_string(err) ? json_string_value(err) : json_string_value(json_object_get(err, "message"));
  int code = code_of(wire, status);
  if (e) {
    if (msg) {
      e->code = code;
      snprintf(e->message, sizeof e->message, "%s", msg);
    } else {
      int shown = 0; /* what a non-segops server said, printable part only */
      while ((size_t)shown < len && shown < 200 && body[shown] >= ' ' && body[shown] < 127) shown++;
      segops_client_err(e, code, "%s: HTTP %d: %.*s", where, status, shown, body);
    }
    e->http_status = status;
    snprintf(e->name, sizeof e->name, "%s", wire ? wire : segops_err_name(code));
    e->retry_after_s = retry_after_s;
  }
  json_decref(root);
  return code;
}

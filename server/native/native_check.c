/* native_check.c: the native channel's descriptor check (see native_check.h). */
#include "native_check.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "codec_record.h"
#include "errors.h"

_Static_assert(SEGOPS_FN_SEGMENTED_MATVEC_DOUBLE_BACKWARD ==
                   SEGOPS_OP_MATVEC * SEGOPS_PASS_COUNT + SEGOPS_PASS_DOUBLE_BACKWARD,
               "function ids are op * 3 + pass in the op table's order");
_Static_assert(SEGOPS_FN_COUNT == SEGOPS_OP_COUNT * SEGOPS_PASS_COUNT, "24 functions");
_Static_assert(SEGOPS_MAX_INPUTS == 5 && SEGOPS_MAX_OUTPUTS == 3 && SEGOPS_MAX_NDIM == 6,
               "the ring's arrays are sized for these (proto/segops_ring.h)");

/* "segmented_sum/forward: " or "native channel: " before the function is known. */
static void prefix(char *buf, size_t len, int fn) {
  if (fn < 0)
    snprintf(buf, len, "native channel");
  else
    snprintf(buf, len, "%s", segops_op_name((segops_op)(fn / SEGOPS_PASS_COUNT)));
}

/* Bytes [off, off + n) of pool `pool` lie inside it: 64-bit and overflow-safe. */
static int check_range(const char *who, const char *name, const segops_ring_tensor *t, uint32_t npools,
                       const segops_native_view *views, char *err, size_t errlen) {
  if (t->pool >= npools)
    return segops_errf(SEGOPS_E_INVALID_ARGUMENT, err, errlen,
                       "%s: %s names pool %" PRIu32 ", but this channel has handed over %" PRIu32 " pool%s", who, name,
                       t->pool, npools, npools == 1 ? "" : "s");
  uint64_t size = views[t->pool].size;
  if (t->offset > size || t->nbytes > size - t->offset)
    return segops_errf(SEGOPS_E_INVALID_ARGUMENT, err, errlen,
                       "%s: %s: bytes [%" PRIu64 ", +%" PRIu64 ") are outside pool %" PRIu32 " (%" PRIu64 " bytes)",
                       who, name, t->offset, t->nbytes, t->pool, size);
  return SEGOPS_OK;
}

/* One input (or idx) from the copy into the request: its bytes in its pool, then its dtype and rank
 * checked as every wire's tensors are (codec_record.h). */
static int take_input(const char *who, const segops_fn_desc *fn, const char *name, const segops_ring_tensor *t,
                      uint32_t npools, const segops_native_view *views, segops_request *req, segops_native_range *range,
                      char *err, size_t errlen) {
  if (t->flags & ~SEGOPS_TENSOR_PRESENT)
    return segops_errf(SEGOPS_E_INVALID_ARGUMENT, err, errlen, "%s: %s has unknown flags 0x%" PRIx32, who, name,
                       t->flags);
  if (!(t->flags & SEGOPS_TENSOR_PRESENT)) return SEGOPS_OK;
  int rc = check_range(who, name, t, npools, views, err, errlen);
  if (rc) return rc;
  if (req->nargs >= SEGOPS_MAX_REQ_ARGS) return segops_errf(SEGOPS_E_INTERNAL, err, errlen, "%s: too many inputs", who);
  segops_tensor_record r = {
      .name = name,
      .name_len = strlen(name),
      .dtype_code = t->dtype,
      .ndim = t->ndim,
      .src = SEGOPS_REC_BYTES,
      .bytes = views[t->pool].base + t->offset,
      .nbytes = (size_t)t->nbytes,
      .shared = true}; /* the client may rewrite it at any time: prepare copies idx as it checks it */
  for (uint32_t d = 0; d < t->ndim && d < SEGOPS_MAX_NDIM; d++) r.shape[d] = t->shape[d];
  const segops_record_ctx c = {SEGOPS_WIRE_NATIVE, fn->op, fn->pass, SEGOPS_F64, NULL};
  rc = segops_record_check(&c, &r, &req->args[req->nargs], err, errlen);
  if (rc) return rc;
  req->nargs++;
  *range = (segops_native_range){true, t->pool, t->offset, t->nbytes};
  return SEGOPS_OK;
}

/* The function id, the output mask and the request-level fields. */
static int check_head(const segops_ring_request *r, segops_native_checked *c, char *err, size_t errlen) {
  if (r->fn >= SEGOPS_FN_COUNT)
    return segops_errf(SEGOPS_E_INVALID_ARGUMENT, err, errlen,
                       "native channel: function id %" PRIu32 " is not one of the %d functions (0 to %d)", r->fn,
                       SEGOPS_FN_COUNT, SEGOPS_FN_COUNT - 1);
  c->fn = (int)r->fn;
  const segops_fn_desc *fn =
      segops_fn((segops_op)(r->fn / SEGOPS_PASS_COUNT), (segops_pass)(r->fn % SEGOPS_PASS_COUNT));
  const char *op = segops_op_name(fn->op);
  if (r->want >> fn->n_out)
    return segops_errf(SEGOPS_E_INVALID_ARGUMENT, err, errlen,
                       "%s: %s has %d output%s; the output mask 0x%" PRIx32 " asks for more", op,
                       segops_pass_name(fn->pass), fn->n_out, fn->n_out == 1 ? "" : "s", r->want);
  if (r->flags & ~SEGOPS_REQ_DTYPE)
    return segops_errf(SEGOPS_E_INVALID_ARGUMENT, err, errlen, "%s: the request has unknown flags 0x%" PRIx32, op,
                       r->flags);
  segops_dtype dt;
  if (r->flags & SEGOPS_REQ_DTYPE) {
    int rc = segops_record_call_dtype(SEGOPS_WIRE_NATIVE, fn->op, NULL, 0, r->dtype, &dt, err, errlen);
    if (rc) return rc;
  }
  for (int k = fn->n_in; k < SEGOPS_MAX_INPUTS; k++)
    if (r->in[k].flags)
      return segops_errf(SEGOPS_E_INVALID_ARGUMENT, err, errlen, "%s: input %d is given, but %s %s has %d input%s", op,
                         k, op, segops_pass_name(fn->pass), fn->n_in, fn->n_in == 1 ? "" : "s");
  for (int k = fn->n_out; k < SEGOPS_MAX_OUTPUTS; k++)
    if (r->out[k].flags)
      return segops_errf(SEGOPS_E_INVALID_ARGUMENT, err, errlen, "%s: output %d has a place, but %s %s has %d output%s",
                         op, k, op, segops_pass_name(fn->pass), fn->n_out, fn->n_out == 1 ? "" : "s");
  return SEGOPS_OK;
}

/* The requested outputs' places: present, in bounds. The rest of the rules need the sizes
 * prepare computes (segops_native_place_outputs). */
static int take_outputs(const segops_ring_request *r, const segops_fn_desc *fn, const segops_native_view *views,
                        uint32_t npools, segops_native_checked *c, char *err, size_t errlen) {
  const char *op = segops_op_name(fn->op);
  unsigned want = r->want ? r->want : (1u << fn->n_out) - 1u;
  segops_request *req = &c->req;
  req->has_outputs = true;
  req->outputs_placed = true; /* segops_native_place_outputs points them into the pools */
  for (int k = 0; k < fn->n_out; k++) {
    const segops_ring_tensor *t = &r->out[k];
    if (!((want >> k) & 1u)) {
      if (t->flags)
        return segops_errf(SEGOPS_E_INVALID_ARGUMENT, err, errlen,
                           "%s: output %s has a place but is not asked for (mask 0x%x)", op, fn->out[k].name, want);
      continue;
    }
    if (t->flags != SEGOPS_TENSOR_PRESENT)
      return segops_errf(SEGOPS_E_INVALID_ARGUMENT, err, errlen, "%s: output %s is asked for but has no place", op,
                         fn->out[k].name);
    int rc = check_range(op, fn->out[k].name, t, npools, views, err, errlen);
    if (rc) return rc;
    c->out[k] = (segops_native_range){true, t->pool, t->offset, t->nbytes};
    req->outputs[req->n_outputs].name = fn->out[k].name;
    req->outputs[req->n_outputs].len = strlen(fn->out[k].name);
    req->n_outputs++;
  }
  return SEGOPS_OK;
}

int segops_native_check(const segops_ring_request *r, const segops_native_view *views, uint32_t npools,
                        segops_native_checked *c, char *err, size_t errlen) {
  memset(c, 0, sizeof *c);
  c->fn = -1;
  int rc = check_head(r, c, err, errlen);
  if (rc) return rc;
  const segops_fn_desc *fn =
      segops_fn((segops_op)(c->fn / SEGOPS_PASS_COUNT), (segops_pass)(c->fn % SEGOPS_PASS_COUNT));
  char who[64];
  prefix(who, sizeof who, c->fn);
  segops_request *req = &c->req;
  req->op = fn->op;
  req->pass = fn->pass;
  for (int k = 0; k < fn->n_in; k++) {
    rc = take_input(who, fn, fn->in[k].name, &r->in[k], npools, views, req, &c->in[k], err, errlen);
    if (rc) return rc;
  }
  rc = take_input(who, fn, "idx", &r->idx, npools, views, req, &c->in[SEGOPS_MAX_INPUTS], err, errlen);
  if (rc) return rc;
  req->ns_kind = SEGOPS_NS_INT;
  req->ns_value = r->num_segments;
  req->has_dtype = (r->flags & SEGOPS_REQ_DTYPE) != 0;
  req->dtype = req->has_dtype ? (segops_dtype)r->dtype : SEGOPS_F64;
  rc = take_outputs(r, fn, views, npools, c, err, errlen);
  if (rc) return rc;
  /* A bound the client cannot wait past; whole microseconds, capped at a day (the daemon's own
   * --request-timeout applies as well). */
  uint64_t us = r->timeout_us < 86400ull * 1000000ull ? r->timeout_us : 86400ull * 1000000ull;
  c->timeout_s = (double)us * 1e-6;
  return SEGOPS_OK;
}

static bool ranges_meet(const segops_native_range *a, uint64_t an, const segops_native_range *b, uint64_t bn) {
  return a->present && b->present && a->pool == b->pool && an && bn && a->offset < b->offset + bn &&
         b->offset < a->offset + an;
}

int segops_native_place_outputs(const segops_native_checked *c, const segops_native_view *views, uint32_t npools,
                                segops_prepared *p, char *err, size_t errlen) {
  const segops_fn_desc *fn = p->call.fn;
  const char *op = segops_op_name(fn->op);
  static const char *const IN_IDX = "idx";
  for (int k = 0; k < fn->n_out; k++) {
    if (!p->requested[k]) continue;
    const segops_native_range *o = &c->out[k];
    uint64_t need = p->out_nbytes[k];
    if (!o->present || o->pool >= npools) /* cannot happen after segops_native_check */
      return segops_errf(SEGOPS_E_INVALID_ARGUMENT, err, errlen, "%s: output %s has no place", op, fn->out[k].name);
    if (need > o->nbytes)
      return segops_errf(SEGOPS_E_INVALID_ARGUMENT, err, errlen,
                         "%s: output %s needs %" PRIu64 " bytes, but its place holds %" PRIu64, op, fn->out[k].name,
                         need, o->nbytes);
    if (need == 0) continue; /* nothing is written */
    if (o->offset % 64u || (uintptr_t)views[o->pool].base % 64u)
      return segops_errf(SEGOPS_E_INVALID_ARGUMENT, err, errlen,
                         "%s: output %s's place (pool %" PRIu32 ", offset %" PRIu64 ") is not 64-byte aligned", op,
                         fn->out[k].name, o->pool, o->offset);
    for (int j = 0; j <= SEGOPS_MAX_INPUTS; j++)
      if (ranges_meet(o, need, &c->in[j], c->in[j].nbytes))
        return segops_errf(SEGOPS_E_INVALID_ARGUMENT, err, errlen, "%s: output %s's place overlaps input %s", op,
                           fn->out[k].name, j < fn->n_in ? fn->in[j].name : IN_IDX);
    for (int m = 0; m < k; m++)
      if (p->requested[m] && ranges_meet(o, need, &c->out[m], p->out_nbytes[m]))
        return segops_errf(SEGOPS_E_INVALID_ARGUMENT, err, errlen, "%s: outputs %s and %s overlap", op, fn->out[m].name,
                           fn->out[k].name);
  }
  /* Every requested output gets its place, an empty one too (nothing is written there): a NULL
   * output means "not requested" to a backend. */
  for (int k = 0; k < fn->n_out; k++)
    if (p->requested[k]) p->call.out[k] = views[c->out[k].pool].base + c->out[k].offset;
  return SEGOPS_OK;
}

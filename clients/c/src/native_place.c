/* native_place.c: where a native call's tensors lie for the daemon (native_client.h): an input in
 * a pool where the caller's memory is one (no copy), else copied into pool memory; an output in the
 * caller's memory where it lies in a pool clear of the inputs, else in pool memory copied out
 * after the answer, or allocated for a caller who gave none; and the answer's shapes checked
 * against the places before any byte is taken. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "native_client.h"

static void *tmp_alloc(native_t *t, placed *pl, size_t n) {
  void *p = segops_mem_alloc(t->mem, n ? n : 1);
  if (p) pl->tmp[pl->ntmp++] = p;
  return p;
}

void segops_nc_placed_free(native_t *t, placed *pl) {
  for (int i = 0; i < pl->ntmp; i++) segops_mem_release(t->mem, pl->tmp[i]);
  pl->ntmp = 0;
}

/* prod(shape) * itemsize of an array, or -1 when the shape is negative or overflows. */
static int64_t array_bytes(const segops_array *a) {
  static const int64_t SZ[SEGOPS_DTYPE_COUNT] = {4, 8, 4, 8};
  int64_t n = SZ[a->dtype];
  for (int d = 0; d < a->ndim; d++)
    if (a->shape[d] < 0 || __builtin_mul_overflow(n, a->shape[d], &n)) return -1;
  return n;
}

/* One input into the pools: where it lies, or a copy there. */
static int place_input(native_t *t, placed *pl, const char *op, const char *name, const segops_array *a,
                       segops_ring_tensor *d, segops_error *e) {
  memset(d, 0, sizeof *d);
  if (!a) return SEGOPS_OK;
  if ((unsigned)a->dtype >= SEGOPS_DTYPE_COUNT)
    return segops_client_err(e, SEGOPS_E_INVALID_ARGUMENT,
                             "%s: %s has dtype %d, which is none of float32, float64, int32, int64", op, name,
                             (int)a->dtype);
  if (a->ndim < 0 || a->ndim > SEGOPS_MAX_NDIM)
    return segops_client_err(e, SEGOPS_E_INVALID_ARGUMENT, "%s: %s has %d dimensions; at most %d are allowed", op, name,
                             a->ndim, SEGOPS_MAX_NDIM);
  d->flags = SEGOPS_TENSOR_PRESENT;
  d->dtype = (uint32_t)a->dtype;
  d->ndim = (uint32_t)a->ndim;
  for (int k = 0; k < a->ndim; k++) d->shape[k] = a->shape[k];
  int64_t nb = array_bytes(a);
  if (nb < 0) nb = 0; /* the daemon refuses the shape by its own rule */
  d->nbytes = (uint64_t)nb;
  if (nb > 0 && !a->data) return segops_client_err(e, SEGOPS_E_INVALID_ARGUMENT, "%s: %s has no data", op, name);
  if (nb > 0 && segops_mem_locate(t->mem, a->data, (size_t)nb, &d->pool, &d->offset)) return SEGOPS_OK;
  if (nb == 0 && segops_mem_pool_count(t->mem) > 0) return SEGOPS_OK; /* no bytes: pool 0, offset 0 */
  void *p = tmp_alloc(t, pl, (size_t)nb);
  if (!p || !segops_mem_locate(t->mem, p, (size_t)nb, &d->pool, &d->offset))
    return segops_client_err(e, SEGOPS_E_NOMEM, "%s: no shared memory left for %s (%" PRId64 " bytes)", op, name, nb);
  if (nb) memcpy(p, a->data, (size_t)nb);
  return SEGOPS_OK;
}

/* The bytes output k will have: the answer the call should get, as call_check.c predicts it from
 * the op table and the inputs' shapes (0 when the inputs do not say: the daemon then refuses the
 * call by its own rules before any output matters). */
static uint64_t output_bytes(const segops_tcall *call, int k) {
  if (call->expect_known) return (uint64_t)call->out_nbytes[k];
  segops_tcall c = *call; /* assembled without segops_call_build */
  segops_call_expect(&c);
  return c.expect_known ? (uint64_t)c.out_nbytes[k] : 0;
}

/* True when [off, off + n) of pool overlaps an input's bytes. */
static bool meets_input(const segops_ring_request *r, uint32_t pool, uint64_t off, uint64_t n) {
  for (int j = 0; j <= SEGOPS_MAX_INPUTS; j++) {
    const segops_ring_tensor *d = j < SEGOPS_MAX_INPUTS ? &r->in[j] : &r->idx;
    if ((d->flags & SEGOPS_TENSOR_PRESENT) && d->pool == pool && n && d->nbytes && off < d->offset + d->nbytes &&
        d->offset < off + n)
      return true;
  }
  return false;
}

/* One requested output: in the caller's memory when it lies in a pool (aligned, clear of the
 * inputs), else in pool memory copied out afterwards, or allocated for the caller. */
static int place_output(native_t *t, placed *pl, const segops_tcall *call, int k, segops_error *e) {
  segops_array *o = call->out[k];
  segops_ring_tensor *d = &pl->req.out[k];
  uint64_t need = output_bytes(call, k);
  pl->out_need[k] = need;
  d->flags = SEGOPS_TENSOR_PRESENT;
  if (o->data) {
    if (((uintptr_t)o->data & 63u) == 0 && segops_mem_locate(t->mem, o->data, o->nbytes, &d->pool, &d->offset) &&
        !meets_input(&pl->req, d->pool, d->offset, o->nbytes)) {
      d->nbytes = o->nbytes;
      pl->out_place[k] = o->data;
      return SEGOPS_OK;
    }
    d->nbytes = o->nbytes < need ? o->nbytes : need; /* a short buffer is refused by the daemon's rule */
    if (need == 0 && segops_mem_pool_count(t->mem) > 0) return SEGOPS_OK; /* nothing is written */
    void *p = tmp_alloc(t, pl, (size_t)need);
    if (!p || !segops_mem_locate(t->mem, p, (size_t)need, &d->pool, &d->offset))
      return segops_client_err(e, SEGOPS_E_NOMEM, "%s: no shared memory left for output %s", call->op,
                               call->out_name[k]);
    pl->out_place[k] = p;
    pl->out_copy[k] = true;
    return SEGOPS_OK;
  }
  void *p = segops_client_alloc(t->mem, (size_t)need);
  if (!p || !segops_mem_locate(t->mem, p, (size_t)need, &d->pool, &d->offset)) {
    if (p) free(p); /* heap memory: the pools could not grow */
    return segops_client_err(e, SEGOPS_E_NOMEM, "%s: no shared memory left for output %s", call->op, call->out_name[k]);
  }
  d->nbytes = need;
  pl->out_place[k] = p;
  pl->out_alloc[k] = true;
  return SEGOPS_OK;
}

int segops_nc_place_call(native_t *t, placed *pl, const segops_tcall *call, segops_error *e) {
  segops_ring_request *r = &pl->req;
  r->fn = (uint32_t)call->fn;
  r->want = call->want;
  r->num_segments = call->num_segments;
  int rc = SEGOPS_OK;
  for (int j = 0; j < call->n_in && rc == SEGOPS_OK; j++)
    rc = place_input(t, pl, call->op, call->in_name[j], call->in[j], &r->in[j], e);
  if (rc == SEGOPS_OK) rc = place_input(t, pl, call->op, "idx", call->idx, &r->idx, e);
  if (rc == SEGOPS_OK && !call->idx) r->idx.flags = 0; /* idx is required: the daemon says so */
  /* SEGOPS_REQ_DTYPE (JSON's top-level "dtype") is not sent: a call without a float input answers
   * float64, as over HTTP with msgpack bodies and in "local" (proto/native.md, The ring). */
  for (int k = 0; k < call->n_out && rc == SEGOPS_OK; k++)
    if (call->out[k]) rc = place_output(t, pl, call, k, e);
  return rc;
}

/* The answer of a successful call into the caller's arrays (copies out where needed). */
int segops_nc_take_outputs(const segops_tcall *call, placed *pl, const segops_ring_answer *a, segops_error *e) {
  for (int k = 0; k < call->n_out; k++) {
    segops_array *o = call->out[k];
    if (!o) continue;
    const segops_ring_shape *sh = &a->out[k];
    segops_array got = {(segops_dtype)sh->dtype, (int)sh->ndim, {0}, NULL, 0};
    if (sh->dtype > SEGOPS_F64 || sh->ndim > SEGOPS_MAX_NDIM)
      return segops_client_err(e, SEGOPS_E_PROTOCOL, "%s: the daemon's answer for %s has a bad shape", call->op,
                               call->out_name[k]);
    for (uint32_t d = 0; d < sh->ndim; d++) got.shape[d] = sh->shape[d];
    int64_t nb = array_bytes(&got);
    if (nb < 0 || (uint64_t)nb != pl->out_need[k] || (uint64_t)nb > pl->req.out[k].nbytes)
      return segops_client_err(e, SEGOPS_E_PROTOCOL, "%s: the daemon's answer for %s does not fit its place", call->op,
                               call->out_name[k]);
    if (pl->out_copy[k] && nb) memcpy(o->data, pl->out_place[k], (size_t)nb);
    if (pl->out_alloc[k]) {
      o->data = pl->out_place[k];
      pl->out_alloc[k] = false; /* the caller's now */
    }
    o->dtype = got.dtype;
    o->ndim = got.ndim;
    memcpy(o->shape, got.shape, sizeof o->shape);
    o->nbytes = (size_t)nb;
  }
  return SEGOPS_OK;
}

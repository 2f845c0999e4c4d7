/* fuzz_prepare.c: libFuzzer target for decode + segops_prepare (validation and shape inference).
 * Byte 0 picks op and pass (low 7 bits) and the codec (bit 7: JSON). A prepared call is checked
 * against its contract, and its outputs are encoded both ways. */
#include <stdlib.h>
#include <string.h>

#include "fuzz_common.h"
#include "prepare.h"

static void check_prepared(const segops_prepared *p) {
  const segops_call *c = &p->call;
  FUZZ_ASSERT(c->fn != NULL);
  FUZZ_ASSERT(c->dtype == SEGOPS_F32 || c->dtype == SEGOPS_F64);
  FUZZ_ASSERT(c->width >= 0 && c->width <= FUZZ_LIMITS.max_elements); /* prod(F) */
  FUZZ_ASSERT(c->nf >= 0 && c->nf < SEGOPS_MAX_NDIM);
  FUZZ_ASSERT(c->n >= 0 && c->n <= FUZZ_LIMITS.max_elements && c->s >= 0 && c->s <= FUZZ_LIMITS.max_segments);
  FUZZ_ASSERT(((uintptr_t)c->idx & 3) == 0 || c->n == 0);
  bool sorted = true;
  for (int64_t i = 0; i < c->n; i++) {
    FUZZ_ASSERT(c->idx[i] >= 0 && c->idx[i] < c->s);
    if (i && c->idx[i] < c->idx[i - 1]) sorted = false;
  }
  FUZZ_ASSERT(sorted == c->idx_sorted);
  size_t isz = segops_dtype_size(c->dtype);
  volatile unsigned char sink = 0;
  for (int k = 0; k < c->fn->n_in; k++) {
    if (!c->in[k]) {
      FUZZ_ASSERT(c->fn->in[k].use != SEGOPS_ARG_REQ);
      continue;
    }
    size_t nb = (size_t)segops_call_count(c, c->fn->in[k].shape) * isz;
    if (nb) sink ^= ((const unsigned char *)c->in[k])[0] ^ ((const unsigned char *)c->in[k])[nb - 1];
  }
  (void)sink;
  segops_out_tensor outs[SEGOPS_MAX_OUTPUTS];
  int n = 0;
  for (int o = 0; o < c->fn->n_out; o++) {
    size_t nb = (size_t)segops_call_count(c, c->fn->out[o].shape) * isz;
    FUZZ_ASSERT(nb == p->out_nbytes[o]);
    if (!p->requested[o]) {
      FUZZ_ASSERT(c->out[o] == NULL);
      continue;
    }
    FUZZ_ASSERT(c->out[o] != NULL && ((uintptr_t)c->out[o] & 63) == 0);
    memset(c->out[o], 0, nb); /* writes the whole block: ASan checks its size */
    outs[n] = (segops_out_tensor){
        .name = c->fn->out[o].name, .dtype = c->dtype, .ndim = p->out_ndim[o], .data = c->out[o], .nbytes = nb};
    memcpy(outs[n].shape, p->out_shape[o], sizeof outs[n].shape);
    n++;
  }
  segops_encoded e;
  if (segops_encode_json(outs, n, &e) == 0) segops_encoded_free(&e);
  if (segops_encode_msgpack(outs, n, &e) == 0) segops_encoded_free(&e);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  segops_op op;
  segops_pass pass;
  fuzz_pick(data[0], &op, &pass);
  bool json = data[0] & 0x80;
  size_t n = size - 1;
  char *body = malloc(n ? n : 1);
  memcpy(body, data + 1, n);
  segops_decoded d;
  char err[256];
  int rc = json ? segops_decode_json(body, n, op, pass, &FUZZ_CODEC_LIMITS, &d, err, sizeof err)
                : segops_decode_msgpack(body, n, op, pass, &FUZZ_CODEC_LIMITS, &d, err, sizeof err);
  if (rc == 0) {
    segops_prepared p;
    rc = segops_prepare(&d.req, &FUZZ_LIMITS, &p, err, sizeof err);
    if (rc == 0)
      check_prepared(&p);
    else
      FUZZ_ASSERT(p.out_buf == NULL && p.idx_buf == NULL && err[0] != 0);
    segops_prepared_free(&p);
  }
  segops_decoded_free(&d);
  free(body);
  return 0;
}

/* oip_encode.c: the Open Inference Protocol's infer response: one JSON header (numbers written
 * by the v1 JSON encoder's formatter, so JSON answers carry the same digits), followed by the data
 * of the binary outputs, each an iovec piece borrowed from the output buffer (no payload copy).
 * An output written to shared memory carries its region's parameters and no data. */
#include <stdlib.h>
#include <string.h>

#include "codec_internal.h"
#include "errors.h"
#include "oip.h"

int segops_encode_oip(segops_op op, segops_pass pass, const char *id, const segops_out_tensor *outs,
                      const bool *out_binary, int n, segops_encoded *enc) {
  memset(enc, 0, sizeof *enc);
  if (n < 0 || n > SEGOPS_MAX_OUTPUTS) return SEGOPS_E_INTERNAL;
  char model[SEGOPS_OIP_MODEL_NAME_MAX];
  segops_oip_model_name(op, pass, model);
  size_t cap = 128 + strlen(model) + (id ? strlen(id) * 6 : 0);
  int niov = 1;
  for (int i = 0; i < n; i++) {
    cap += strlen(outs[i].name) * 6 + 160 + SEGOPS_MAX_NDIM * 21;
    if (outs[i].shm_region) {
      cap += strlen(outs[i].shm_region) * 6 + 128;
      continue;
    }
    if (out_binary[i]) {
      niov++;
      continue;
    }
    size_t nm = segops_codec_json_numbers_max(&outs[i]);
    if (nm > SIZE_MAX / 4 - cap) return SEGOPS_E_NOMEM;
    cap += nm;
  }
  size_t iov_bytes = sizeof(struct iovec) * (size_t)niov;
  char *block = malloc(iov_bytes + cap);
  if (!block) return SEGOPS_E_NOMEM;
  struct iovec *iov = (struct iovec *)(void *)block;
  char *start = block + iov_bytes, *p = start;
  p = segops_put_lit(p, "{\"model_name\":");
  p = segops_codec_json_str(p, model);
  p = segops_put_lit(p, ",\"model_version\":\"1\"");
  if (id) {
    p = segops_put_lit(p, ",\"id\":");
    p = segops_codec_json_str(p, id);
  }
  p = segops_put_lit(p, ",\"outputs\":[");
  int k = 1;
  size_t total = 0;
  for (int i = 0; i < n; i++) {
    const segops_out_tensor *o = &outs[i];
    if (i) *p++ = ',';
    p = segops_put_lit(p, "{\"name\":");
    p = segops_codec_json_str(p, o->name);
    p = segops_put_lit(p, ",\"datatype\":");
    p = segops_codec_json_str(p, segops_oip_datatype(o->dtype));
    p = segops_put_lit(p, ",\"shape\":[");
    for (int d = 0; d < o->ndim; d++) {
      if (d) *p++ = ',';
      p = segops_codec_json_i64(p, o->shape[d]);
    }
    if (o->shm_region) { /* in a region: its parameters, no data */
      p = segops_put_lit(p, "],\"parameters\":{\"shared_memory_region\":");
      p = segops_codec_json_str(p, o->shm_region);
      p = segops_put_lit(p, ",\"shared_memory_offset\":");
      p = segops_codec_json_i64(p, (int64_t)o->shm_offset);
      p = segops_put_lit(p, ",\"shared_memory_byte_size\":");
      p = segops_codec_json_i64(p, (int64_t)o->nbytes);
      p = segops_put_lit(p, "}}");
    } else if (out_binary[i]) {
      p = segops_put_lit(p, "],\"parameters\":{\"binary_data_size\":");
      p = segops_codec_json_i64(p, (int64_t)o->nbytes);
      p = segops_put_lit(p, "}}");
      iov[k].iov_base = (void *)o->data;
      iov[k].iov_len = o->nbytes;
      total += o->nbytes;
      k++;
    } else {
      p = segops_put_lit(p, "],\"data\":[");
      p = segops_codec_json_numbers(p, o);
      p = segops_put_lit(p, "]}");
    }
  }
  p = segops_put_lit(p, "]}");
  iov[0].iov_base = start;
  iov[0].iov_len = (size_t)(p - start);
  enc->iov = iov;
  enc->iovcnt = niov;
  enc->json_len = iov[0].iov_len;
  enc->total = total + enc->json_len;
  enc->owned = block;
  return SEGOPS_OK;
}

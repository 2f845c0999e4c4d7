/* codec_json.c: JSON request decoder and response encoder (placeholder until implemented). */
#include <stdlib.h>

#include "codec.h"
#include "errors.h"

int segops_decode_json(const char *body, size_t len, segops_op op, segops_pass pass, const segops_codec_limits *lim,
                       segops_decoded *out, char *err, size_t errlen) {
  (void)body, (void)len, (void)op, (void)pass, (void)lim, (void)out;
  return segops_errf(SEGOPS_E_INTERNAL, err, errlen, "JSON decoder not implemented");
}

int segops_encode_json(const segops_out_tensor *outs, int n, segops_encoded *enc) {
  (void)outs, (void)n, (void)enc;
  return SEGOPS_E_INTERNAL;
}

void segops_decoded_free(segops_decoded *d) {
  if (d) free(d->owned);
}

void segops_encoded_free(segops_encoded *enc) {
  if (enc) free(enc->owned);
}

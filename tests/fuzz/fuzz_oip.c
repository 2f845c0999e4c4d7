/* fuzz_oip.c: libFuzzer target for the Open Inference Protocol infer decoder (JSON header plus
 * binary tensor data). Byte 0 picks op and pass (and, with bit 7, the default limits); bytes 1-2
 * (little-endian) are the Inference-Header-Content-Length (0: the whole body is JSON); the rest
 * is the body. Binary tensors borrow the body, so it is kept until the request is freed. */
#include "oip.h"
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 3) return 0;
  segops_op op;
  segops_pass pass;
  fuzz_pick(data[0], &op, &pass);
  size_t n = size - 3;
  char *body = malloc(n ? n : 1);
  memcpy(body, data + 3, n);
  segops_oip_opts opts;
  memset(&opts, 0xa5, sizeof opts); /* the decoder must set every field it reports */
  opts.header_len = (size_t)data[1] | (size_t)data[2] << 8;
  segops_decoded d;
  char err[256];
  const segops_codec_limits *lim = (data[0] & 0x80) ? NULL : &FUZZ_CODEC_LIMITS;
  int rc = segops_decode_oip(body, n, op, pass, lim, &d, &opts, err, sizeof err);
  if (rc == 0) {
    fuzz_check_decoded(&d, err);
    FUZZ_ASSERT(!opts.has_id || memchr(opts.id, 0, sizeof opts.id));
  } else {
    FUZZ_ASSERT(d.owned == NULL && d.req.nargs == 0 && err[0] != 0);
  }
  segops_decoded_free(&d);
  free(body);
  return 0;
}

/* fuzz_oip.c: libFuzzer target for the Open Inference Protocol infer decoder (JSON header plus
 * binary tensor data). Byte 0 picks op and pass (and, with bit 7, the default limits); bytes 1-2
 * (little-endian) are the Inference-Header-Content-Length (0: the whole body is JSON); the rest
 * is the body. Binary tensors borrow the body, so it is kept until the request is freed. The
 * body's first bytes (up to a NUL, at most 24) are also read as an Inference-Header-Content-Length
 * header's text: accepted only as a plain count of digits from 1 to the limit. A decoded input's
 * JSON data was flat or nested as its shape (ragged lists are refused): its count is checked by
 * fuzz_check_decoded. */
#include "fuzz_common.h"
#include "oip.h"

static void header_length(const uint8_t *p, size_t n) {
  char text[25];
  size_t k = 0;
  while (k < n && k < 24 && p[k]) text[k] = (char)p[k], k++;
  text[k] = 0;
  size_t v = 0;
  if (segops_oip_header_length(text, 1 << 20, &v) != 0) return;
  FUZZ_ASSERT(k >= 1 && v >= 1 && v <= (1 << 20));
  size_t again = 0;
  for (size_t i = 0; i < k; i++) {
    FUZZ_ASSERT(text[i] >= '0' && text[i] <= '9');
    again = again * 10 + (size_t)(text[i] - '0');
  }
  FUZZ_ASSERT(again == v);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 3) return 0;
  header_length(data + 3, size - 3);
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

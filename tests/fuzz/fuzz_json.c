/* fuzz_json.c: libFuzzer target for the JSON request decoder (byte 0 picks op and pass). */
#include <stdlib.h>
#include <string.h>

#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  segops_op op;
  segops_pass pass;
  fuzz_pick(data[0], &op, &pass);
  size_t n = size - 1;
  char *body = malloc(n ? n : 1);
  memcpy(body, data + 1, n);
  segops_decoded d;
  char err[256];
  const segops_codec_limits *lim = (data[0] & 0x80) ? NULL : &FUZZ_CODEC_LIMITS;
  int rc = segops_decode_json(body, n, op, pass, lim, &d, err, sizeof err);
  free(body); /* JSON tensors are materialised: nothing may point into the body */
  if (rc == 0)
    fuzz_check_decoded(&d, err);
  else
    FUZZ_ASSERT(d.owned == NULL && d.req.nargs == 0 && err[0] != 0);
  segops_decoded_free(&d);
  return 0;
}

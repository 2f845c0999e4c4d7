/* fuzz_json.c: libFuzzer target for the JSON request decoder (byte 0 picks op and pass). */
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  return fuzz_decoder(data, size, segops_decode_json, false);
}

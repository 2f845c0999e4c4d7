/* test_cuda_probe.c: the CUDA backend's constructor: a clear NULL without a GPU (no crash), and
 * with one: devices, info, readiness, and a clear refusal of a device that does not exist. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_test_util.h"

int main(void) {
  char err[256] = "";
  segops_backend *b = segops_cuda_backend_new(NULL, 0, NULL, err, sizeof err);
  if (!b) {
    if (strlen(err) < 10 || !strstr(err, "GPU")) {
      fprintf(stderr, "FAIL: NULL backend without a clear message: '%s'\n", err);
      return 1;
    }
    const char *req = getenv("SEGOPS_REQUIRE_CUDA");
    if (req && strcmp(req, "1") == 0) {
      fprintf(stderr, "FAIL: SEGOPS_REQUIRE_CUDA=1 but: %s\n", err);
      return 1;
    }
    printf("SKIP: no GPU; the constructor said: %s\n", err);
    return SKIP_CODE;
  }
  int fails = 0;
  if (strcmp(b->name, "cuda") != 0 || b->n_devices < 1) fails++, fprintf(stderr, "FAIL: name/n_devices\n");
  if (!b->ready(b->ctx)) fails++, fprintf(stderr, "FAIL: not ready after creation\n");
  const int n_all = b->n_devices; /* workers over every GPU */
  for (int d = 0; d < b->n_devices; d++) {
    segops_device_info info;
    if (b->device_info(b->ctx, d, &info) != SEGOPS_OK || !info.name[0] || info.memory_total == 0)
      fails++, fprintf(stderr, "FAIL: device_info %d\n", d);
    else
      printf("device %d: %s, %.1f GiB, %.2f GiB used\n", d, info.name, info.memory_total / 1073741824.0,
             info.memory_used / 1073741824.0);
  }
  segops_backend_free(b);
  int bogus = 999;
  err[0] = 0;
  int code = SEGOPS_OK;
  b = segops_cuda_backend_new(&bogus, 1, &code, err, sizeof err);
  if (b || !strstr(err, "999")) fails++, fprintf(stderr, "FAIL: device 999 not refused clearly ('%s')\n", err);
  if (code != SEGOPS_E_INVALID_ARGUMENT) fails++, fprintf(stderr, "FAIL: device 999: code %d, not invalid argument\n", code);
  segops_backend_free(b);
  int zero = 0;
  b = segops_cuda_backend_new(&zero, 1, NULL, err, sizeof err);
  /* One GPU's workers: the same number for each GPU, so they divide the all-GPU count. */
  if (!b || b->n_devices < 1 || n_all % b->n_devices != 0)
    fails++, fprintf(stderr, "FAIL: explicit device 0 (%s)\n", err);
  segops_backend_free(b);
  segops_backend_free(NULL);
  printf("%s\n", fails ? "FAILED" : "OK");
  return fails ? 1 : 0;
}

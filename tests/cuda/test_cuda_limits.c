/* test_cuda_limits.c: launch limits: S > 65535, one segment of 10^6 elements, and an input past
 * 2^31 bytes (when the device and host have the memory), against the float64 reference. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cuda_test_util.h"

static int run_check(segops_backend *b, ct_call *tc, const char *label) {
  char err[256] = "";
  int rc = b->run(b->ctx, 0, &tc->call, err, sizeof err);
  if (rc != SEGOPS_OK) {
    printf("FAIL %s: %s/%s run returned %d: %s\n", label, segops_op_name(tc->call.fn->op),
           segops_pass_name(tc->call.fn->pass), rc, err);
    return 1;
  }
  return ct_check(tc, label, NULL) ? 1 : 0;
}

int main(void) {
  segops_backend *b = ct_backend_or_skip("cuda_limits");
  int fails = 0, runs = 0;
  for (int op = 0; op < SEGOPS_OP_COUNT; op++)
    for (int pass = 0; pass < SEGOPS_PASS_COUNT; pass++)
      for (int dt = 0; dt < 2; dt++) {
        const segops_fn_desc *fn = segops_fn((segops_op)op, (segops_pass)pass);
        ct_call tc;
        /* many segments: grid sizes past 65535 in every kernel */
        ct_make(&tc, fn, (segops_dtype)dt, 3, 1000000, 200000, dt ? CT_UNSORTED : CT_SORTED, 0xff,
                (1u << fn->n_out) - 1, 11 + op);
        fails += run_check(b, &tc, "S=200000");
        runs++;
        ct_free(&tc);
        /* one segment of 10^6 elements: many chunks combined */
        ct_make(&tc, fn, (segops_dtype)dt, 3, 1000000, 1, dt ? CT_SORTED : CT_UNSORTED, 0xff, (1u << fn->n_out) - 1,
                21 + op);
        fails += run_check(b, &tc, "one segment of 1e6");
        runs++;
        ct_free(&tc);
      }
  /* Past 2^31 bytes: 190e6 float32 vec3 rows = 2.28 GB of x. */
  segops_device_info info;
  b->device_info(b->ctx, 0, &info);
  long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGE_SIZE);
  double host_gb = (double)pages * (double)psz / 1e9;
  if (info.memory_total > ((size_t)16 << 30) && host_gb > 24) {
    const segops_fn_desc *fn = segops_fn(SEGOPS_OP_SUM, SEGOPS_PASS_FORWARD);
    ct_call tc;
    int64_t n = 190000000;
    if (ct_make(&tc, fn, SEGOPS_F32, 3, n, 1000, CT_SORTED, 0xff, 1, 99) == 0) {
      fails += run_check(b, &tc, "x past 2^31 bytes");
      runs++;
      printf("ran a request with x of %.2f GB\n", (double)n * 12 / 1e9);
    } else {
      printf("SKIPPED the 2^31-byte case: host allocation failed\n");
    }
    ct_free(&tc);
  } else {
    printf("SKIPPED the 2^31-byte case: device %.1f GB, host %.1f GB\n", info.memory_total / 1e9, host_gb);
  }
  if (!b->ready(b->ctx)) fails++, printf("FAIL: backend not ready\n");
  printf("cuda limits: %d runs, %d failures\n", runs, fails);
  segops_backend_free(b);
  return fails ? 1 : 0;
}

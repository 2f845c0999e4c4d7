/* test_cuda_oom.c: a request bigger than the device's memory fails with RESOURCE_EXHAUSTED for
 * that request only: the backend stays ready and the next request gives right results. The huge
 * inputs are reserved address space (MAP_NORESERVE), never touched unless the backend reads them. */
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

#include "cuda_test_util.h"

int main(void) {
  segops_backend *b = ct_backend_or_skip("cuda_oom");
  segops_device_info info;
  b->device_info(b->ctx, 0, &info);
  int fails = 0;
  /* float64 vec3 rows: 24 bytes each plus 4 of idx; ask for 1.2x the device's memory. */
  int64_t n = (int64_t)((double)info.memory_total * 1.2 / 28.0);
  size_t xbytes = (size_t)n * 24, ibytes = (size_t)n * 4;
  void *x = mmap(NULL, xbytes, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  void *idx = mmap(NULL, ibytes, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (x == MAP_FAILED || idx == MAP_FAILED) {
    printf("SKIP: cannot reserve %.0f GB of address space\n", (xbytes + ibytes) / 1e9);
    segops_backend_free(b);
    return SKIP_CODE;
  }
  double out[3];
  segops_call c;
  memset(&c, 0, sizeof c);
  c.fn = segops_fn(SEGOPS_OP_SUM, SEGOPS_PASS_FORWARD);
  c.dtype = SEGOPS_F64;
  c.width = 3;
  c.n = n;
  c.s = 1;
  c.idx = idx; /* zero pages: every element in segment 0 */
  c.idx_sorted = true;
  c.in[0] = x;
  c.out[0] = out;
  char err[256] = "";
  int rc = b->run(b->ctx, 0, &c, err, sizeof err);
  printf("huge request (%.0f GB): rc %d (%s): %s\n", (xbytes + ibytes) / 1e9, rc, segops_err_code(rc), err);
  if (rc != SEGOPS_E_RESOURCE_EXHAUSTED) fails++, printf("FAIL: expected RESOURCE_EXHAUSTED\n");
  if (!b->ready(b->ctx)) fails++, printf("FAIL: not ready after an out-of-memory request\n");
  munmap(x, xbytes);
  munmap(idx, ibytes);
  /* the next requests work */
  for (int op = 0; op < SEGOPS_OP_COUNT; op++) {
    const segops_fn_desc *fn = segops_fn((segops_op)op, SEGOPS_PASS_BACKWARD);
    ct_call tc;
    ct_make(&tc, fn, SEGOPS_F32, 3, 100000, 1000, CT_UNSORTED, 0xff, (1u << fn->n_out) - 1, 3);
    rc = b->run(b->ctx, 0, &tc.call, err, sizeof err);
    if (rc != SEGOPS_OK)
      fails++, printf("FAIL: request after OOM: %d %s\n", rc, err);
    else if (ct_check(&tc, "after OOM", NULL))
      fails++;
    ct_free(&tc);
  }
  printf("cuda oom: %d failures\n", fails);
  segops_backend_free(b);
  return fails ? 1 : 0;
}

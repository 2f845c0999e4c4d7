/* test_cuda_conformance.c: every function, dtype and layout on the GPU against a float64 reference
 * (SPEC §3), with omitted cotangents, subsets of outputs, empty segments, N = 0, S = 0, one segment
 * longer than a chunk, unaligned inputs and NaN-poisoned outputs (every element must be written). */
#include <stdio.h>
#include <stdlib.h>

#include "cuda_test_util.h"

int main(void) {
  segops_backend *b = tu_backend_or_skip("cuda_conformance");
  static const struct {
    int64_t n, s;
  } sizes[] = {{1000, 37}, {0, 5}, {0, 0}, {1, 1}, {7000, 3}, {3000, 2000}};
  static const tu_layout layouts[] = {TU_SORTED, TU_UNSORTED, TU_EMPTY_SEGS, TU_ONE_SEG};
  /* SEGOPS_CUDA_TEST_QUICK=1 (for runs under compute-sanitizer): one variant per case. */
  const char *quick_env = getenv("SEGOPS_CUDA_TEST_QUICK");
  const int quick = quick_env && quick_env[0] == '1';
  int fails = 0, runs = 0;
  double worst[2] = {0, 0};
  uint64_t seed = 1;
  for (int op = 0; op < SEGOPS_OP_COUNT; op++)
    for (int pass = 0; pass < SEGOPS_PASS_COUNT; pass++) {
      const segops_fn_desc *fn = segops_fn((segops_op)op, (segops_pass)pass);
      for (int dt = 0; dt < 2; dt++)
        for (int width = 1; width <= 3; width += 2) {
          if (fn->vec3_only && width == 1) continue;
          for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++)
            for (size_t li = 0; li < sizeof layouts / sizeof *layouts; li++) {
              int64_t n = sizes[si].n, s = sizes[si].s;
              if (s == 0 && li > 0) continue;
              /* variants: everything; no cotangents; only the first output; only the last */
              unsigned all_out = (1u << fn->n_out) - 1;
              unsigned variants[4][2] = {{0xffu, all_out}, {0u, all_out}, {0xffu, 1u}, {0xffu, 1u << (fn->n_out - 1)}};
              for (int v = 0; v < (quick ? 1 : 4); v++) {
                tu_call tc;
                if (tu_make(&tc, fn, (segops_dtype)dt, width, n, s, layouts[li], variants[v][0], variants[v][1],
                            seed++) != 0) {
                  fprintf(stderr, "host allocation failed\n");
                  return 1;
                }
                char err[256] = "", label[160];
                snprintf(label, sizeof label, "w=%d n=%lld s=%lld layout=%zu variant=%d", width, (long long)n,
                         (long long)s, li, v);
                int rc = b->run(b->ctx, 0, &tc.call, err, sizeof err);
                runs++;
                if (rc != SEGOPS_OK) {
                  printf("FAIL %s: %s/%s: run returned %d: %s\n", label, segops_op_name(fn->op),
                         segops_pass_name(fn->pass), rc, err);
                  fails++;
                } else {
                  fails += tu_check(&tc, label, &worst[dt]) ? 1 : 0;
                }
                tu_free(&tc);
              }
            }
        }
    }
  if (!b->ready(b->ctx)) fails++, printf("FAIL: backend not ready after the suite\n");
  printf("cuda conformance: %d runs, %d failures; worst relative error float32 %.3g, float64 %.3g\n", runs, fails,
         worst[0], worst[1]);
  segops_backend_free(b);
  return fails ? 1 : 0;
}

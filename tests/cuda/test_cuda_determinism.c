/* test_cuda_determinism.c: the same request gives the same bits on repeated runs, and the same
 * bits alone as inside a batch (concatenated between other requests, idx offset), whether the
 * batch's idx is sorted or not. Every function, both dtypes; chunked long segments of each chunk
 * length up to 1024, and the one-launch shapes of small calls against the separate kernels of
 * large ones (and against the two launches of the segment and tile roles past 2^22 elements, and
 * the staged float64 gathers past SEGOPS_STAGE_MIN_N elements against the unstaged ones); rows of
 * a run-time width (40, 2 and 0 values) through the same comparisons. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_test_util.h"

static int64_t row_elems(segops_shape_kind k, int64_t w, bool y_wide) {
  switch (k) {
    case SEGOPS_SH_ELEM:
    case SEGOPS_SH_SEG:
      return w;
    case SEGOPS_SH_ELEM3:
      return 3;
    case SEGOPS_SH_SEG1:
      return 1;
    case SEGOPS_SH_SEG1F: /* mul's y: (S,) or (S,*F) */
      return y_wide ? w : 1;
    default:
      return 9;
  }
}
static int per_elem(segops_shape_kind k) { return k == SEGOPS_SH_ELEM || k == SEGOPS_SH_ELEM3; }

/* Concatenates parts (same function, dtype, width, given inputs and outputs) into one call. */
static int concat(ct_call *out, ct_call *parts[], int np) {
  const segops_call *c0 = &parts[0]->call;
  const segops_fn_desc *fn = c0->fn;
  size_t isz = segops_dtype_size(c0->dtype);
  int64_t n = 0, s = 0;
  for (int p = 0; p < np; p++) n += parts[p]->call.n, s += parts[p]->call.s;
  memset(out, 0, sizeof *out);
  out->idx = malloc((size_t)n * 4 + 4);
  int64_t at = 0, sb = 0;
  for (int p = 0; p < np; p++) {
    for (int64_t i = 0; i < parts[p]->call.n; i++) out->idx[at++] = (int32_t)(parts[p]->idx[i] + sb);
    sb += parts[p]->call.s;
  }
  segops_call *c = &out->call;
  *c = *c0;
  c->n = n;
  c->s = s;
  c->idx = out->idx;
  c->idx_sorted = true;
  for (int64_t i = 1; i < n; i++)
    if (out->idx[i] < out->idx[i - 1]) c->idx_sorted = false;
  for (int k = 0; k < fn->n_in; k++) {
    c->in[k] = NULL;
    if (!c0->in[k]) continue;
    int64_t re = row_elems(fn->in[k].shape, c0->width, c0->y_wide);
    char *buf = malloc((size_t)(per_elem(fn->in[k].shape) ? n : s) * re * isz + 8);
    size_t off = 0;
    for (int p = 0; p < np; p++) {
      size_t len = (size_t)(per_elem(fn->in[k].shape) ? parts[p]->call.n : parts[p]->call.s) * re * isz;
      memcpy(buf + off, parts[p]->call.in[k], len);
      off += len;
    }
    out->in_alloc[k] = buf;
    c->in[k] = buf;
  }
  for (int k = 0; k < fn->n_out; k++) {
    c->out[k] = NULL;
    if (!c0->out[k]) continue;
    out->out_bytes[k] = (size_t)segops_call_count(c, fn->out[k].shape) * isz;
    out->out[k] = malloc(out->out_bytes[k] + 64);
    c->out[k] = out->out[k];
  }
  ct_poison(out);
  return 0;
}

/* One request A (segments of the given sizes, sorted and shuffled), every function and dtype, rows
 * of w values (matvec only at w = 3; mul at w != 3 with y (S,) and y (S,*F)):
 * repeated runs, and alone vs between neighbours B (5000 elements) and C (c_n elements).
 * sorted_nb 0: B is unsorted next to the sorted A, so every batch goes through the sort
 * permutation; 1: B and C are sorted with short segments (16 elements on average), so the batch
 * of the sorted A is sorted and its segments are as long as A's longest. */
static int check_case(segops_backend *b, const char *name, const int *sizes_a, int64_t sa, int64_t c_n, int sorted_nb,
                      int64_t w, int *checks_out) {
  int64_t na = 0;
  for (int64_t g = 0; g < sa; g++) na += sizes_a[g];
  int32_t *idx_sorted = malloc((size_t)na * 4), *idx_shuffled = malloc((size_t)na * 4);
  int64_t at = 0;
  for (int64_t g = 0; g < sa; g++)
    for (int k = 0; k < sizes_a[g]; k++) idx_sorted[at++] = (int32_t)g;
  memcpy(idx_shuffled, idx_sorted, (size_t)na * 4);
  uint64_t st = 42;
  for (int64_t i = na - 1; i > 0; i--) {
    int64_t j = (int64_t)(ct_rand(&st) % (uint64_t)(i + 1));
    int32_t t = idx_shuffled[i];
    idx_shuffled[i] = idx_shuffled[j];
    idx_shuffled[j] = t;
  }
  int fails = 0, checks = 0;
  char err[256];
  for (int op = 0; op < SEGOPS_OP_COUNT; op++)
    for (int pass = 0; pass < SEGOPS_PASS_COUNT; pass++)
      for (int dt = 0; dt < 2; dt++)
        for (int sy = 0; sy < 4; sy++) {
          const int shuffled = sy & 1;
          const bool y_wide = sy >> 1;
          const segops_fn_desc *fn = segops_fn((segops_op)op, (segops_pass)pass);
          if ((fn->vec3_only && w != 3) || (y_wide && (op != SEGOPS_OP_MUL || w == 3))) continue;
          unsigned all_out = (1u << fn->n_out) - 1;
          ct_call a, bb, cc, cat;
          ct_make_idx_wide(&a, fn, (segops_dtype)dt, w, y_wide, na, sa, shuffled ? idx_shuffled : idx_sorted, 0xff,
                           all_out, 100 + op * 7 + pass);
          /* neighbours: the sorted A goes next to an unsorted B (unless sorted_nb), the shuffled one
           * next to sorted ones */
          ct_call tmp;
          ct_make(&tmp, fn, (segops_dtype)dt, 1, 5000, 300, shuffled || sorted_nb ? CT_SORTED : CT_UNSORTED, 0xff,
                  all_out, 7);
          ct_make_idx_wide(&bb, fn, (segops_dtype)dt, w, y_wide, 5000, 300, tmp.idx, 0xff, all_out, 7);
          ct_free(&tmp);
          ct_make(&tmp, fn, (segops_dtype)dt, 1, c_n, c_n / (sorted_nb ? 16 : 60) + 1, CT_SORTED, 0xff, all_out, 8);
          ct_make_idx_wide(&cc, fn, (segops_dtype)dt, w, y_wide, c_n, c_n / (sorted_nb ? 16 : 60) + 1, tmp.idx, 0xff,
                           all_out, 8);
          ct_free(&tmp);
          int rc = b->run(b->ctx, 0, &a.call, err, sizeof err);
          if (rc != SEGOPS_OK || ct_check(&a, "alone", NULL)) {
            printf("FAIL %s %s/%s: run alone: %d %s\n", name, segops_op_name(fn->op), segops_pass_name(fn->pass), rc,
                   rc ? err : "(values)");
            fails++;
          }
          void *first[SEGOPS_MAX_OUTPUTS] = {0};
          for (int k = 0; k < fn->n_out; k++) {
            first[k] = malloc(a.out_bytes[k] + 1);
            memcpy(first[k], a.out[k], a.out_bytes[k]);
          }
          for (int rep = 0; rep < 3; rep++) {
            ct_poison(&a);
            b->run(b->ctx, 0, &a.call, err, sizeof err);
            for (int k = 0; k < fn->n_out; k++, checks++)
              if (memcmp(first[k], a.out[k], a.out_bytes[k]) != 0) {
                printf("FAIL %s %s/%s %s: repeat %d output %s differs in bits\n", name, segops_op_name(fn->op),
                       segops_pass_name(fn->pass), segops_dtype_name((segops_dtype)dt), rep, fn->out[k].name);
                fails++;
              }
          }
          ct_call *parts[3] = {&bb, &a, &cc};
          concat(&cat, parts, 3);
          rc = b->run(b->ctx, 0, &cat.call, err, sizeof err);
          if (rc != SEGOPS_OK) {
            printf("FAIL %s batched run: %d %s\n", name, rc, err);
            fails++;
          }
          size_t isz = segops_dtype_size((segops_dtype)dt);
          for (int k = 0; k < fn->n_out; k++, checks++) {
            int64_t re = row_elems(fn->out[k].shape, w, y_wide);
            size_t off = (size_t)(per_elem(fn->out[k].shape) ? bb.call.n : bb.call.s) * re * isz;
            if (memcmp(first[k], (char *)cat.out[k] + off, a.out_bytes[k]) != 0) {
              printf("FAIL %s %s/%s %s (%s A): output %s alone differs from batched\n", name, segops_op_name(fn->op),
                     segops_pass_name(fn->pass), segops_dtype_name((segops_dtype)dt), shuffled ? "unsorted" : "sorted",
                     fn->out[k].name);
              fails++;
            }
          }
          for (int k = 0; k < fn->n_out; k++) free(first[k]);
          ct_free(&a);
          ct_free(&bb);
          ct_free(&cc);
          ct_free(&cat);
        }
  printf("cuda determinism, %s: %d bitwise checks, %d failures\n", name, checks, fails);
  free(idx_sorted);
  free(idx_shuffled);
  *checks_out += checks;
  return fails;
}

int main(void) {
  segops_backend *b = ct_backend_or_skip("cuda_determinism");
  int checks = 0, fails = 0;
  /* A: a long segment (several chunks of 256), empty ones, short ones. */
  static const int long_a[] = {3, 9000, 0, 40, 1, 100, 0, 33, 2047, 2049, 7};
  fails += check_case(b, "chunks of 256", long_a, sizeof long_a / sizeof *long_a, 3000, 0, 3, &checks);
  /* Segments past 2^16 and 2^18 elements: chunks of 512 and 1024. */
  static const int longer_a[] = {5, 70001, 0, 12, 300007, 64, 1};
  fails += check_case(b, "chunks of 512 and 1024", longer_a, sizeof longer_a / sizeof *longer_a, 3000, 0, 3, &checks);
  /* Short segments only (at most 64: no tile role; alone, the post pass runs inside the segment
   * kernel and a mixed function's gather in the same launch) next to a neighbour that takes the
   * batch past 2^20 elements (past SEGOPS_CUDA_FUSE_N), where every function runs as separate kernels. */
  static const int short_a[] = {3, 0, 17, 64, 1, 40, 33, 0, 8, 64, 63, 2, 29, 5, 31, 50};
  fails += check_case(b, "one launch vs separate kernels", short_a, sizeof short_a / sizeof *short_a,
                      ((int64_t)1 << 20) + 4096, 0, 3, &checks);
  /* The same in a sorted batch of short segments past SEGOPS_CUDA_IE_N: the post pass inside the
   * segment kernel, and the element outputs of mixed functions from the segment walks (IE). */
  fails += check_case(b, "one launch vs inline outputs, sorted", short_a, sizeof short_a / sizeof *short_a,
                      ((int64_t)1 << 20) + 4096, 1, 3, &checks);
  /* Long segments alone (one launch) against a batch past 2^22 elements (SEGOPS_CUDA_SPLIT_N);
   * this batch goes through the permutation, so both roles share one launch. */
  fails += check_case(b, "one launch vs the split roles", longer_a, sizeof longer_a / sizeof *longer_a,
                      ((int64_t)1 << 22) + 4096, 0, 3, &checks);
  /* The same in a sorted batch: the split's two launches (with IE in both, for the functions that
   * use it), which a batch through the permutation never reaches. */
  fails += check_case(b, "one launch vs the split roles, sorted", longer_a, sizeof longer_a / sizeof *longer_a,
                      ((int64_t)1 << 22) + 4096, 1, 3, &checks);
  /* Rows of a run-time width (neither 1 nor 3): per-column and whole-row reductions over long
   * segments, empty ones and short ones, sorted and not; w = 0 (no values, dot and rms_norm still
   * write their (S,) outputs). */
  fails += check_case(b, "rows of 40 values", long_a, sizeof long_a / sizeof *long_a, 3000, 0, 40, &checks);
  fails += check_case(b, "rows of 2 values, sorted neighbours", short_a, sizeof short_a / sizeof *short_a, 3000, 1, 2,
                      &checks);
  fails += check_case(b, "rows of no values", short_a, sizeof short_a / sizeof *short_a, 300, 0, 0, &checks);
  printf("cuda determinism: %d bitwise checks, %d failures\n", checks, fails);
  segops_backend_free(b);
  return fails ? 1 : 0;
}

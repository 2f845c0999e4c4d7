/* test_cuda_determinism.c: the same request gives the same bits on repeated runs, and the same
 * bits alone as inside a batch (concatenated between other requests, idx offset), whether the
 * batch's idx is sorted or not. Every function, both dtypes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_test_util.h"

static int64_t row_elems(segops_shape_kind k, int w) {
  switch (k) {
    case SEGOPS_SH_ELEM:
    case SEGOPS_SH_SEG:
      return w;
    case SEGOPS_SH_ELEM3:
      return 3;
    case SEGOPS_SH_SEG1:
      return 1;
    default:
      return 9;
  }
}
static int per_elem(segops_shape_kind k) { return k == SEGOPS_SH_ELEM || k == SEGOPS_SH_ELEM3; }

/* Concatenates parts (same function, dtype, width, given inputs and outputs) into one call. */
static int concat(tu_call *out, tu_call *parts[], int np) {
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
    int64_t re = row_elems(fn->in[k].shape, c0->width);
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
    out->out_bytes[k] = (size_t)segops_shape_count(fn->out[k].shape, c0->width, n, s) * isz;
    out->out[k] = malloc(out->out_bytes[k] + 64);
    c->out[k] = out->out[k];
  }
  tu_poison(out);
  return 0;
}

int main(void) {
  segops_backend *b = tu_backend_or_skip("cuda_determinism");
  /* Request A: a long segment (several chunks), empty ones, short ones. */
  static const int sizes_a[] = {3, 9000, 0, 40, 1, 100, 0, 33, 2047, 2049, 7};
  const int64_t sa = sizeof sizes_a / sizeof *sizes_a;
  int64_t na = 0;
  for (int64_t g = 0; g < sa; g++) na += sizes_a[g];
  int32_t *idx_sorted = malloc((size_t)na * 4), *idx_shuffled = malloc((size_t)na * 4);
  int64_t at = 0;
  for (int64_t g = 0; g < sa; g++)
    for (int k = 0; k < sizes_a[g]; k++) idx_sorted[at++] = (int32_t)g;
  memcpy(idx_shuffled, idx_sorted, (size_t)na * 4);
  uint64_t st = 42;
  for (int64_t i = na - 1; i > 0; i--) {
    int64_t j = (int64_t)(tu_rand(&st) % (uint64_t)(i + 1));
    int32_t t = idx_shuffled[i];
    idx_shuffled[i] = idx_shuffled[j];
    idx_shuffled[j] = t;
  }
  int fails = 0, checks = 0;
  char err[256];
  for (int op = 0; op < SEGOPS_OP_COUNT; op++)
    for (int pass = 0; pass < SEGOPS_PASS_COUNT; pass++)
      for (int dt = 0; dt < 2; dt++)
        for (int shuffled = 0; shuffled < 2; shuffled++) {
          const segops_fn_desc *fn = segops_fn((segops_op)op, (segops_pass)pass);
          int w = 3;
          unsigned all_out = (1u << fn->n_out) - 1;
          tu_call a, bb, cc, cat;
          tu_make_idx(&a, fn, (segops_dtype)dt, w, na, sa, shuffled ? idx_shuffled : idx_sorted, 0xff, all_out,
                      100 + op * 7 + pass);
          /* neighbours: the sorted A goes next to an unsorted B, the shuffled one next to sorted ones */
          tu_make(&bb, fn, (segops_dtype)dt, w, 5000, 300, shuffled ? TU_SORTED : TU_UNSORTED, 0xff, all_out, 7);
          tu_make(&cc, fn, (segops_dtype)dt, w, 3000, 50, TU_SORTED, 0xff, all_out, 8);
          int rc = b->run(b->ctx, 0, &a.call, err, sizeof err);
          if (rc != SEGOPS_OK || tu_check(&a, "alone", NULL)) {
            printf("FAIL %s/%s: run alone: %d %s\n", segops_op_name(fn->op),
                   segops_pass_name(fn->pass), rc, rc ? err : "(values)");
            fails++;
          }
          void *first[SEGOPS_MAX_OUTPUTS] = {0};
          for (int k = 0; k < fn->n_out; k++) {
            first[k] = malloc(a.out_bytes[k] + 1);
            memcpy(first[k], a.out[k], a.out_bytes[k]);
          }
          for (int rep = 0; rep < 3; rep++) {
            tu_poison(&a);
            b->run(b->ctx, 0, &a.call, err, sizeof err);
            for (int k = 0; k < fn->n_out; k++, checks++)
              if (memcmp(first[k], a.out[k], a.out_bytes[k]) != 0) {
                printf("FAIL %s/%s %s: repeat %d output %s differs in bits\n", segops_op_name(fn->op),
                       segops_pass_name(fn->pass), segops_dtype_name((segops_dtype)dt), rep,
                       fn->out[k].name);
                fails++;
              }
          }
          tu_call *parts[3] = {&bb, &a, &cc};
          concat(&cat, parts, 3);
          rc = b->run(b->ctx, 0, &cat.call, err, sizeof err);
          if (rc != SEGOPS_OK) {
            printf("FAIL batched run: %d %s\n", rc, err);
            fails++;
          }
          size_t isz = segops_dtype_size((segops_dtype)dt);
          for (int k = 0; k < fn->n_out; k++, checks++) {
            int64_t re = row_elems(fn->out[k].shape, w);
            size_t off = (size_t)(per_elem(fn->out[k].shape) ? bb.call.n : bb.call.s) * re * isz;
            if (memcmp(first[k], (char *)cat.out[k] + off, a.out_bytes[k]) != 0) {
              printf("FAIL %s/%s %s (%s A): output %s alone differs from batched\n", segops_op_name(fn->op),
                     segops_pass_name(fn->pass), segops_dtype_name((segops_dtype)dt),
                     shuffled ? "unsorted" : "sorted", fn->out[k].name);
              fails++;
            }
          }
          for (int k = 0; k < fn->n_out; k++) free(first[k]);
          tu_free(&a);
          tu_free(&bb);
          tu_free(&cc);
          tu_free(&cat);
        }
  printf("cuda determinism: %d bitwise checks, %d failures\n", checks, fails);
  free(idx_sorted);
  free(idx_shuffled);
  segops_backend_free(b);
  return fails ? 1 : 0;
}

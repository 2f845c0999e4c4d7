/* test_cuda_layout_cache.c: the layout cache changes no bit of any result. Every function, both
 * dtypes, sorted and unsorted idx with a long segment: a cache miss, a hit, a backend without
 * the cache (--layout-cache-bytes 0) and one with a cap smaller than the layout give the
 * same bits, and pass the reference check. The counters move as they should; more distinct idx
 * than the cache has slots evict and stay under the cap. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_test_util.h"

/* A backend created with --layout-cache-bytes cap (set through the configuration table). */
static segops_backend *with_cap(const char *cap) {
  segops_settings_group *const groups[] = {&segops_cuda_settings, NULL};
  char err[256];
  if (segops_settings_set(groups, "layout-cache-bytes", cap, err, sizeof err)) {
    printf("FAIL: %s\n", err);
    exit(1);
  }
  return ct_backend_or_skip("cuda_layout_cache");
}

static segops_cache_stats stats(segops_backend *b) {
  segops_cache_stats s;
  memset(&s, 0, sizeof s);
  if (!b->cache_stats || b->cache_stats(b->ctx, 0, &s) != SEGOPS_OK) printf("FAIL: no cache stats\n");
  return s;
}

int main(void) {
  segops_backend *cached = with_cap("auto"), *off = with_cap("0"), *tiny = with_cap("16k");
  static const int sizes[] = {5, 3000, 0, 17, 1, 1025, 64, 0, 2};
  const int64_t s = sizeof sizes / sizeof *sizes;
  int64_t n = 0;
  for (int64_t g = 0; g < s; g++) n += sizes[g];
  int32_t *idx[2] = {malloc((size_t)n * 4), malloc((size_t)n * 4)};
  int64_t at = 0;
  for (int64_t g = 0; g < s; g++)
    for (int k = 0; k < sizes[g]; k++) idx[0][at++] = (int32_t)g;
  memcpy(idx[1], idx[0], (size_t)n * 4);
  uint64_t st = 9;
  for (int64_t i = n - 1; i > 0; i--) {
    int64_t j = (int64_t)(ct_rand(&st) % (uint64_t)(i + 1));
    int32_t t = idx[1][i];
    idx[1][i] = idx[1][j];
    idx[1][j] = t;
  }
  int fails = 0, checks = 0;
  char err[256];
  for (int op = 0; op < SEGOPS_OP_COUNT; op++)
    for (int pass = 0; pass < SEGOPS_PASS_COUNT; pass++)
      for (int dt = 0; dt < 2; dt++)
        for (int u = 0; u < 2; u++) {
          const segops_fn_desc *fn = segops_fn((segops_op)op, (segops_pass)pass);
          ct_call c;
          ct_make_idx(&c, fn, (segops_dtype)dt, 3, n, s, idx[u], 0xff, (1u << fn->n_out) - 1, 31 + op * 3 + pass);
          void *first[SEGOPS_MAX_OUTPUTS] = {0};
          segops_backend *order[4] = {cached, cached, off, tiny};
          for (int r = 0; r < 4; r++) {
            ct_poison(&c);
            int rc = order[r]->run(order[r]->ctx, 0, &c.call, err, sizeof err);
            if (rc != SEGOPS_OK || ct_check(&c, "layout cache", NULL)) {
              printf("FAIL %s/%s run %d: %d %s\n", segops_op_name(fn->op), segops_pass_name(fn->pass), r, rc,
                     rc ? err : "(values)");
              fails++;
            }
            for (int k = 0; k < fn->n_out; k++) {
              if (r == 0) {
                first[k] = malloc(c.out_bytes[k] + 1);
                memcpy(first[k], c.out[k], c.out_bytes[k]);
                continue;
              }
              checks++;
              if (memcmp(first[k], c.out[k], c.out_bytes[k]) != 0) {
                printf("FAIL %s/%s %s %s: output %s of run %d differs in bits from the first\n", segops_op_name(fn->op),
                       segops_pass_name(fn->pass), segops_dtype_name((segops_dtype)dt), u ? "unsorted" : "sorted",
                       fn->out[k].name, r);
                fails++;
              }
            }
          }
          for (int k = 0; k < fn->n_out; k++) free(first[k]);
          ct_free(&c);
        }
  segops_cache_stats a = stats(cached), o = stats(off), t = stats(tiny);
  printf("cached: %zu bytes, %llu hits, %llu misses; off: %zu bytes, %llu hits; 16k cap: %zu bytes\n", a.bytes, a.hits,
         a.misses, o.bytes, o.hits, t.bytes);
  if (a.hits == 0 || a.misses == 0 || a.bytes == 0 || a.bytes > a.cap) {
    printf("FAIL: the cache did not hit, miss and hold a layout within its cap\n");
    fails++;
  }
  /* One layout per idx, whatever the function: sorted and unsorted A make two misses at most per
   * distinct idx seen (here exactly 2). */
  if (a.misses != 2) {
    printf("FAIL: %llu misses for 2 distinct idx\n", a.misses);
    fails++;
  }
  if (o.bytes != 0 || o.hits != 0 || t.bytes > t.cap) {
    printf("FAIL: the cache held memory while off or past its cap\n");
    fails++;
  }
  /* The cache also holds idx's device copy: an idx that differs from a cached one in a single
   * value (same N, S and sortedness) is copied anew, for a reducing function and a gather, and
   * the first one still hits afterwards. */
  {
    int32_t *moved = malloc((size_t)n * 4);
    memcpy(moved, idx[0], (size_t)n * 4);
    moved[sizes[0]] = 0; /* the first element of segment 1 joins segment 0: still sorted */
    const int32_t *order[3] = {moved, idx[0], moved};
    segops_cache_stats before = stats(cached);
    for (int r = 0; r < 3; r++)
      for (int pass = 0; pass < 2; pass++) {
        const segops_fn_desc *fn = segops_fn(SEGOPS_OP_SUM, (segops_pass)pass);
        ct_call c;
        ct_make_idx(&c, fn, SEGOPS_F64, 3, n, s, order[r], 0xff, 1, 700 + r * 2 + pass);
        ct_poison(&c);
        int rc = cached->run(cached->ctx, 0, &c.call, err, sizeof err);
        if (rc != SEGOPS_OK || ct_check(&c, "idx copy", NULL)) {
          printf("FAIL: sum %s with %s idx after a cached one: %d %s\n", segops_pass_name(fn->pass),
                 r == 1 ? "the first" : "a changed", rc, rc ? err : "(values)");
          fails++;
        }
        ct_free(&c);
      }
    segops_cache_stats after = stats(cached);
    if (after.misses != before.misses + 1 || after.hits != before.hits + 5) {
      printf("FAIL: a changed idx then the first: %llu misses, %llu hits (want 1 and 5)\n",
             after.misses - before.misses, after.hits - before.hits);
      fails++;
    }
    free(moved);
  }
  /* More distinct idx than slots: eviction keeps it under the cap; results still right. */
  for (int v = 0; v < 40; v++) {
    const segops_fn_desc *fn = segops_fn(SEGOPS_OP_SUM, SEGOPS_PASS_FORWARD);
    ct_call c;
    ct_make(&c, fn, SEGOPS_F64, 1, 4000 + v, 100 + v, v % 2 ? CT_UNSORTED : CT_SORTED, 0xff, 1, 500 + v);
    int rc = cached->run(cached->ctx, 0, &c.call, err, sizeof err);
    if (rc != SEGOPS_OK || ct_check(&c, "eviction", NULL)) fails++;
    ct_free(&c);
  }
  a = stats(cached);
  if (a.bytes > a.cap || a.misses < 40) {
    printf("FAIL: after 40 distinct idx: %zu bytes (cap %zu), %llu misses\n", a.bytes, a.cap, a.misses);
    fails++;
  }
  printf("cuda layout cache: %d bitwise checks, %d failures\n", checks, fails);
  free(idx[0]);
  free(idx[1]);
  segops_backend_free(cached);
  segops_backend_free(off);
  segops_backend_free(tiny);
  return fails ? 1 : 0;
}

/* test_util.c: helpers shared by the core tests (see test_util.h). */
#include "test_util.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define GUARD 64
#define GUARD_BYTE 0xA5

long tu_checks, tu_failures;

void tu_fail(const char *fmt, ...) {
  tu_failures++;
  if (tu_failures > 50) return;
  va_list ap;
  va_start(ap, fmt);
  fputs("FAIL: ", stderr);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
}

int tu_summary(const char *name) {
  printf("%s: %ld checks, %ld failures\n", name, tu_checks, tu_failures);
  return tu_failures == 0 && tu_checks > 0 ? 0 : 1;
}

uint64_t tu_next(tu_rng *r) {
  uint64_t z = (r->s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

double tu_uniform(tu_rng *r, double lo, double hi) {
  return lo + (hi - lo) * ((double)(tu_next(r) >> 11) * (1.0 / 9007199254740992.0));
}

int64_t tu_below(tu_rng *r, int64_t n) { return n > 0 ? (int64_t)(tu_next(r) % (uint64_t)n) : 0; }

bool tu_is_sorted(const int32_t *idx, int64_t n) {
  for (int64_t i = 1; i < n; i++)
    if (idx[i] < idx[i - 1]) return false;
  return true;
}

static void finish_layout(tu_layout *l) {
  int64_t *cnt = calloc((size_t)l->s + 1, sizeof *cnt);
  l->max_count = 0;
  for (int64_t i = 0; i < l->n; i++)
    if (++cnt[l->idx[i]] > l->max_count) l->max_count = cnt[l->idx[i]];
  free(cnt);
  l->sorted = tu_is_sorted(l->idx, l->n);
}

tu_layout tu_layout_from_lengths(const char *name, const int64_t *lens, int64_t s, tu_rng *shuffle) {
  tu_layout l = {.s = s};
  snprintf(l.name, sizeof l.name, "%s%s", name, shuffle ? " (shuffled)" : "");
  for (int64_t k = 0; k < s; k++) l.n += lens[k];
  l.idx = malloc((size_t)(l.n ? l.n : 1) * sizeof(int32_t));
  int64_t i = 0;
  for (int64_t k = 0; k < s; k++)
    for (int64_t j = 0; j < lens[k]; j++) l.idx[i++] = (int32_t)k;
  if (shuffle)
    for (int64_t a = l.n - 1; a > 0; a--) {
      int64_t b = tu_below(shuffle, a + 1);
      int32_t t = l.idx[a];
      l.idx[a] = l.idx[b];
      l.idx[b] = t;
    }
  finish_layout(&l);
  return l;
}

tu_layout tu_layout_random(const char *name, int64_t n, int64_t s, tu_rng *r) {
  tu_layout l = {.n = n, .s = s};
  snprintf(l.name, sizeof l.name, "%s", name);
  l.idx = malloc((size_t)(n ? n : 1) * sizeof(int32_t));
  for (int64_t i = 0; i < n; i++) l.idx[i] = (int32_t)tu_below(r, s);
  finish_layout(&l);
  return l;
}

void tu_layout_free(tu_layout *l) {
  free(l->idx);
  l->idx = NULL;
}

double tu_get(segops_dtype dt, const void *p, int64_t k) {
  if (dt == SEGOPS_F32) {
    float f;
    memcpy(&f, (const char *)p + 4 * k, 4);
    return f;
  }
  double d;
  memcpy(&d, (const char *)p + 8 * k, 8);
  return d;
}

double tu_round(segops_dtype dt, double v) { return dt == SEGOPS_F32 ? (double)(float)v : v; }

tu_buf tu_input(segops_dtype dt, const double *vals, int64_t count, size_t skew) {
  size_t isz = segops_dtype_size(dt);
  tu_buf b = {.nbytes = (size_t)count * isz};
  b.base = malloc(b.nbytes + skew + 16);
  b.data = b.base + skew;
  for (int64_t k = 0; k < count; k++) {
    if (dt == SEGOPS_F32) {
      float f = (float)vals[k];
      memcpy((char *)b.data + 4 * k, &f, 4);
    } else {
      memcpy((char *)b.data + 8 * k, &vals[k], 8);
    }
  }
  return b;
}

tu_buf tu_output(segops_dtype dt, int64_t count) {
  tu_buf b = {.nbytes = (size_t)count * segops_dtype_size(dt)};
  size_t body = (b.nbytes + 63) & ~(size_t)63;
  b.base = aligned_alloc(64, body + 2 * GUARD);
  b.data = b.base + GUARD;
  memset(b.base, GUARD_BYTE, body + 2 * GUARD);
  memset(b.data, 0xFF, b.nbytes); /* all-ones: a NaN in float32 and float64 */
  return b;
}

bool tu_guards_ok(const tu_buf *b) {
  size_t body = (b->nbytes + 63) & ~(size_t)63;
  for (size_t k = 0; k < GUARD; k++)
    if (b->base[k] != GUARD_BYTE) return false;
  /* Everything after the data, up to the end of the trailing guard. */
  for (size_t k = GUARD + b->nbytes; k < body + 2 * GUARD; k++)
    if (b->base[k] != GUARD_BYTE) return false;
  return true;
}

void tu_buf_free(tu_buf *b) {
  free(b->base);
  b->base = NULL;
  b->data = NULL;
}

double tu_relerr(double got, double ref) {
  if (isnan(got) || isnan(ref)) return INFINITY;
  double d = fabs(got - ref), m = fabs(ref) > 1.0 ? fabs(ref) : 1.0;
  return d / m;
}

double tu_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

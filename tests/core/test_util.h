/* test_util.h: helpers shared by the core tests: random numbers, layouts, guarded buffers,
 * typed conversions and failure reporting. */
#ifndef SEGOPS_TEST_UTIL_H
#define SEGOPS_TEST_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ops.h"

/* ---- Reporting: every check counts; failures print and make main return 1. ---- */
extern long tu_checks, tu_failures;
/* Records a failed check with a printf-style message (first 50 failures are printed). */
void tu_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
#define TU_CHECK(cond, ...)            \
  do {                                 \
    tu_checks++;                       \
    if (!(cond)) tu_fail(__VA_ARGS__); \
  } while (0)
/* Prints "name: checks, failures" and returns the process exit status (0 or 1). */
int tu_summary(const char *name);

/* ---- Random numbers (splitmix64: fixed seeds, same cases on every run). ---- */
typedef struct {
  uint64_t s;
} tu_rng;
uint64_t tu_next(tu_rng *r);
double tu_uniform(tu_rng *r, double lo, double hi);
int64_t tu_below(tu_rng *r, int64_t n);

/* ---- Layouts: idx from segment lengths, optionally shuffled. ---- */
typedef struct {
  char name[96];
  int64_t n, s;
  int32_t *idx; /* owned, n entries (at least 1 allocated) */
  bool sorted;
  int64_t max_count; /* largest segment */
} tu_layout;
/* idx = lens[0] zeros, lens[1] ones, ...; shuffled with a random permutation when rng != NULL. */
tu_layout tu_layout_from_lengths(const char *name, const int64_t *lens, int64_t s, tu_rng *shuffle);
/* n elements in s segments, each element's segment drawn at random (unsorted). */
tu_layout tu_layout_random(const char *name, int64_t n, int64_t s, tu_rng *r);
void tu_layout_free(tu_layout *l);
bool tu_is_sorted(const int32_t *idx, int64_t n);

/* ---- Typed buffers ----
 * An input buffer holds count values of dtype at an address misaligned by `skew` bytes.
 * An output buffer holds count values, 64-byte aligned, between guard zones, pre-filled with a
 * NaN pattern so an element left unwritten is seen. */
typedef struct {
  unsigned char *base;
  void *data;
  size_t nbytes;
} tu_buf;
tu_buf tu_input(segops_dtype dt, const double *vals, int64_t count, size_t skew);
tu_buf tu_output(segops_dtype dt, int64_t count);
/* True when both guard zones of an output are intact. */
bool tu_guards_ok(const tu_buf *b);
void tu_buf_free(tu_buf *b);
/* Reads element k of a typed buffer as double. */
double tu_get(segops_dtype dt, const void *p, int64_t k);
/* Rounds a double to what dtype can hold (float32 rounding, or unchanged). */
double tu_round(segops_dtype dt, double v);

/* Monotonic clock in seconds, for progress lines. */
double tu_seconds(void);

/* Relative error of got against ref, relative to max(|ref|, 1) (proto/API.md, Tolerances). NaN counts as huge. */
double tu_relerr(double got, double ref);

#endif

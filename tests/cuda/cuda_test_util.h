/* cuda_test_util.h: shared helpers of the CUDA tests (determinism, limits, out of memory): backend
 * or skip, random calls, and the comparison of proto/API.md, Tolerances against the tests' one float64 reference
 * (tests/core/ref.c). Conformance is tests/core/conformance.c --backend cuda. Prefix ct_ (tests/core/test_util.h
 * has tu_). */
#ifndef SEGOPS_CUDA_TEST_UTIL_H
#define SEGOPS_CUDA_TEST_UTIL_H

#include <stdbool.h>
#include <stdint.h>

#include "backend.h"
#include "errors.h"
#include "ops.h"

#define SKIP_CODE 77

/* The CUDA backend on all devices, or exits: 77 (skip) without a GPU, 1 when
 * SEGOPS_REQUIRE_CUDA=1 demands one. Owned by the caller (segops_backend_free). */
segops_backend *ct_backend_or_skip(const char *test);

/* A call with owned buffers: inputs (unaligned copies, one byte off 64-byte alignment, to
 * exercise unaligned reads), idx, outputs (poisoned with NaN). */
typedef struct {
  segops_call call;
  void *in_alloc[SEGOPS_MAX_INPUTS];
  int32_t *idx;
  void *out[SEGOPS_MAX_OUTPUTS];
  size_t out_bytes[SEGOPS_MAX_OUTPUTS];
} ct_call;

typedef enum { CT_SORTED, CT_UNSORTED, CT_EMPTY_SEGS, CT_ONE_SEG } ct_layout;

/* Random call of fn; cotan_mask bit k clear: input k omitted when it is a cotangent; unread
 * inputs are always given. out_mask bit k clear: output k not requested. */
int ct_make(ct_call *tc, const segops_fn_desc *fn, segops_dtype dt, int width, int64_t n, int64_t s, ct_layout layout,
            unsigned cotan_mask, unsigned out_mask, uint64_t seed);
/* Like ct_make but with the caller's idx (copied); values drawn from seed. */
int ct_make_idx(ct_call *tc, const segops_fn_desc *fn, segops_dtype dt, int width, int64_t n, int64_t s,
                const int32_t *idx, unsigned cotan_mask, unsigned out_mask, uint64_t seed);
/* The same with rows of any width and, for mul, y (S,*F) (y_wide) or (S,). */
int ct_make_idx_wide(ct_call *tc, const segops_fn_desc *fn, segops_dtype dt, int64_t width, bool y_wide, int64_t n,
                     int64_t s, const int32_t *idx, unsigned cotan_mask, unsigned out_mask, uint64_t seed);
void ct_free(ct_call *tc);
/* Poisons every requested output with NaN bytes. */
void ct_poison(ct_call *tc);

/* float64 reference of the call (ref_run): ref[k] (malloc'd, count elements) for every output. */
void ct_reference(const segops_call *c, double *ref_out[SEGOPS_MAX_OUTPUTS]);
/* Compares outputs with the reference by proto/API.md, Tolerances; prints the first failure with label.
 * Returns the number of failing outputs (0 = pass). */
int ct_check(const ct_call *tc, const char *label, double *max_err_out);

uint64_t ct_rand(uint64_t *st);
double ct_uniform(uint64_t *st); /* in [-1, 1) */

#endif

/* ref.h: a plain float64 reference of the 24 functions of proto/API.md (Formulas), for the tests only.
 * Written from the formulas of proto/API.md as straightforward loops; it shares no code with any backend. */
#ifndef SEGOPS_TEST_REF_H
#define SEGOPS_TEST_REF_H

#include <stdbool.h>
#include <stdint.h>

#include "ops.h"

/* Computes every output of function (op, pass) with width w. in[k] follows the table row's
 * inputs (NULL reads as zeros); out[k] must hold segops_shape_count(...) doubles for each of
 * the row's outputs (all are written). */
void ref_run(segops_op op, segops_pass pass, int64_t w, int64_t n, int64_t s, const int32_t *idx,
             const double *const in[SEGOPS_MAX_INPUTS], double *const out[SEGOPS_MAX_OUTPUTS]);
/* The same with mul's y (gg_y, grad_y) of shape (S,*F) (y_wide: w values per segment, element-wise)
 * instead of (S,). */
void ref_run_y(segops_op op, segops_pass pass, int64_t w, bool y_wide, int64_t n, int64_t s, const int32_t *idx,
               const double *const in[SEGOPS_MAX_INPUTS], double *const out[SEGOPS_MAX_OUTPUTS]);

#endif

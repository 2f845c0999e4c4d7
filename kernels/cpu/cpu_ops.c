/* cpu_ops.c: instantiates the CPU functions of cpu_ops_impl.h for float32 and float64 and lists
 * their tasks by ops.def's SEGOPS_FN rows. */
#include <math.h>
#include <string.h>

#include "cpu_internal.h"
#include "cpu_phases.h"
#include "segops_rowmath.h"

#define T float
#define SFX f32
#include "cpu_ops_impl.h"
#undef T
#undef SFX

#define T double
#define SFX f64
#include "cpu_ops_impl.h"
#undef T
#undef SFX

const segops_cpu_fn segops_cpu_fns[2][SEGOPS_OP_COUNT][SEGOPS_PASS_COUNT] = {
#define SEGOPS_FN(o, p, name) \
  [0][SEGOPS_OP_##o][SEGOPS_PASS_##p] = {name##_walk_f32, name##_reduce_f32, name##_elems_f32},
#include "ops.def"
#undef SEGOPS_FN
#define SEGOPS_FN(o, p, name) \
  [1][SEGOPS_OP_##o][SEGOPS_PASS_##p] = {name##_walk_f64, name##_reduce_f64, name##_elems_f64},
#include "ops.def"
#undef SEGOPS_FN
};

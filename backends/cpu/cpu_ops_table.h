/* cpu_ops_table.h: the CPU functions of cpu_ops_impl.h for float32 and float64, and the table of
 * their tasks by ops.def's SEGOPS_FN rows, named SEGOPS_CPU_TABLE. Included once by each file
 * that compiles the functions for one instruction set (cpu_ops.c, cpu_ops_avx2.c): the source is
 * the same, only the compiler's target differs, so every table computes the same bits. */
#ifndef SEGOPS_CPU_TABLE
#error "define SEGOPS_CPU_TABLE before including cpu_ops_table.h"
#endif
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

const segops_cpu_fn SEGOPS_CPU_TABLE[2][SEGOPS_OP_COUNT][SEGOPS_PASS_COUNT] = {
#define SEGOPS_FN(o, p, name, ...) \
  [0][SEGOPS_OP_##o][SEGOPS_PASS_##p] = {name##_walk_f32, name##_reduce_f32, name##_elems_f32},
#include "ops.def"
#undef SEGOPS_FN
#define SEGOPS_FN(o, p, name, ...) \
  [1][SEGOPS_OP_##o][SEGOPS_PASS_##p] = {name##_walk_f64, name##_reduce_f64, name##_elems_f64},
#include "ops.def"
#undef SEGOPS_FN
};

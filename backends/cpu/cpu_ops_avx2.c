/* cpu_ops_avx2.c: the same CPU functions as cpu_ops.c, compiled for x86-64-v3 (AVX2, FMA, ...:
 * backends/cpu/CMakeLists.txt) with floating-point contraction off, so the compiler may use wider
 * vectors for the same operations in the same order but never fuses a multiply and an add: the
 * bits equal cpu_ops.c's. Run only where the CPU has those instructions (segops_cpu_pick_fns). */
#define SEGOPS_CPU_TABLE segops_cpu_fns_v3
#include "cpu_ops_table.h"

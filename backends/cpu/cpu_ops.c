/* cpu_ops.c: the CPU functions compiled for the build's baseline target (x86-64: SSE2), the
 * table every machine can run (cpu_ops_table.h). */
#define SEGOPS_CPU_TABLE segops_cpu_fns_base
#include "cpu_ops_table.h"

/* cpu_ops.c: instantiates the CPU kernels of cpu_ops_impl.h for float32 and float64. */
#include <math.h>
#include <string.h>

#include "cpu_internal.h"
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

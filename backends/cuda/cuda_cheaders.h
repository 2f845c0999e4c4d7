/* cuda_cheaders.h: the project's C headers as seen from CUDA C++ translation units (C linkage,
 * and C11's _Static_assert spelled the C++ way), so the shared headers stay plain C. */
#ifndef SEGOPS_CUDA_CHEADERS_H
#define SEGOPS_CUDA_CHEADERS_H
#ifdef __cplusplus
#ifndef _Static_assert
#define _Static_assert static_assert
#endif
extern "C" {
#endif
#include "backend.h"
#include "errors.h"
#include "ops.h"
#ifdef __cplusplus
}
#endif
#endif

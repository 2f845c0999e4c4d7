/* cuda_settings.h: the CUDA backend's values, filled by the configuration table from its rows
 * (cuda_settings.c, built with or without CUDA). Read once, when the backend is created. */
#ifndef SEGOPS_CUDA_SETTINGS_H
#define SEGOPS_CUDA_SETTINGS_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* --cuda-wait: the index into "auto|spin|yield|block". */
enum { SEGOPS_CUDA_WAIT_AUTO = 0, SEGOPS_CUDA_WAIT_SPIN, SEGOPS_CUDA_WAIT_YIELD, SEGOPS_CUDA_WAIT_BLOCK };

#define SEGOPS_CUDA_LANES_DEFAULT 4
#define SEGOPS_CUDA_LANES_MAX 16

typedef struct {
  int64_t lanes;              /* --cuda-lanes: workers per GPU */
  int wait;                   /* --cuda-wait: SEGOPS_CUDA_WAIT_* */
  int64_t wait_poll_us;       /* --cuda-wait-poll-us: with block, poll the stream this long first */
  int64_t layout_cache_bytes; /* --layout-cache-bytes: per worker; -1 = auto */
} segops_cuda_conf_t;

extern segops_cuda_conf_t segops_cuda_conf;

#ifdef __cplusplus
}
#endif
#endif

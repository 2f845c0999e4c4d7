/* cuda_settings.c: the CUDA backend's rows of the configuration table (core/settings.h); plain C,
 * built in every build so that --help and docs/configuration.md do not depend on CUDA. */
#include "cuda_settings.h"

#include <stddef.h>

#include "backend.h"

segops_cuda_conf_t segops_cuda_conf = {/* the defaults below */
                                       .lanes = SEGOPS_CUDA_LANES_DEFAULT,
                                       .wait = SEGOPS_CUDA_WAIT_AUTO,
                                       .wait_poll_us = 0,
                                       .layout_cache_bytes = -1};

#define AT(f) .offset = offsetof(segops_cuda_conf_t, f)

static const segops_setting ROWS[] = {
    /* 4: at 16 workers on one sm_90 GPU, 2 lanes were 46-93 % busy at 2^10-2^14 rows, and 4 lanes gave
     * a median 1.45x their steps/s at 2^14 and 1.22x at 2^10, 1.00x at 2^17, 0.89-0.96x at 2^20
     * (bench/worker/worker_bench.py --backend cuda --workers 16 --daemon-env SEGOPS_CUDA_LANES=2|4). */
    {.name = "cuda-lanes",
     .env = "SEGOPS_CUDA_LANES",
     .type = SEGOPS_SET_INT,
     AT(lanes),
     .lo = 1,
     .hi = SEGOPS_CUDA_LANES_MAX,
     .def = "4",
     .help = "workers per GPU, each with its own stream, staging and memory pool, so one request's copies overlap "
             "another's kernels; fewer lanes use less GPU memory, more help many small requests"},
    /* Measured at W = 16 over shared memory: block gave 0.83-1.16x auto's steps/s and 10-28 % less daemon CPU per
     * step at 2^10 rows; no policy wins on throughput, so auto stays and block is for hosts where the spinning
     * competes with other work. */
    {.name = "cuda-wait",
     .env = "SEGOPS_CUDA_WAIT",
     .type = SEGOPS_SET_ENUM,
     AT(wait),
     .choices = "auto|spin|yield|block",
     .def = "auto",
     .help = "how a worker's thread waits for the GPU: auto (CUDA's choice: spin while the GPUs are fewer than the "
             "CPUs), spin, yield, or block (sleep until the GPU signals: less CPU, when other work needs the cores)"},
    {.name = "cuda-wait-poll-us",
     .env = "SEGOPS_CUDA_WAIT_POLL_US",
     .type = SEGOPS_SET_INT,
     AT(wait_poll_us),
     .lo = 0,
     .hi = 10000,
     .def = "0",
     .metavar = "US",
     .help = "with --cuda-wait block: poll the stream this many microseconds before sleeping (a short call ends "
             "before the sleep)"},
    {.name = "layout-cache-bytes",
     .env = "SEGOPS_LAYOUT_CACHE_BYTES",
     .type = SEGOPS_SET_BYTES,
     AT(layout_cache_bytes),
     .lo = 0,
     .def = "auto",
     .def_doc = "auto (1 GiB, less on a small GPU)",
     .flags = SEGOPS_SET_AUTO,
     .help = "per worker: the cache of segment layouts built on the GPU for an idx seen before (0 = off); auto "
             "caps a GPU's lanes together at 1/16 of its memory"},
};

segops_settings_group segops_cuda_settings = {
    "CUDA backend", "Read when the CUDA backend starts (--backend cuda, or auto with a GPU); ignored otherwise.", ROWS,
    sizeof ROWS / sizeof ROWS[0], &segops_cuda_conf};

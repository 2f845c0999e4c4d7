/* backend.h: the backend interface, a struct of function pointers plus a context.
 * A backend receives only prepared (validated) calls: it may assert, never argue. */
#ifndef SEGOPS_BACKEND_H
#define SEGOPS_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "ops.h"
#include "settings.h"

typedef struct {
  char name[128];
  size_t memory_total; /* bytes; 0 when unknown */
  size_t memory_used;  /* bytes in use now (0 when unknown) */
  int physical;        /* the physical device this worker runs on (GPU ordinal; 0 for the host):
                          workers sharing one are reported once, with their count */
  char wait[16];       /* how the worker waits for the device ("spin", "yield", "block",
                          "auto"; read back from the device), or "" where nothing is waited for */
} segops_device_info;

/* A backend's cache of per-idx work (the CUDA segment layouts) on one worker. */
typedef struct {
  size_t bytes, cap; /* held now, and the cap */
  unsigned long long hits, misses;
} segops_cache_stats;

typedef struct segops_backend segops_backend;

struct segops_backend {
  const char *name; /* "cpu", "cuda" (static) */
  /* The feature shapes its kernels take (static; GET /v1/info "feature_shapes"), e.g. every
   * (N,*F), or only (N,) and (N,3) with what to do for the others. */
  const char *feature_shapes;
  void *ctx;
  int n_devices; /* workers the scheduler may run concurrently on this backend (>= 1) */
  /* Runs one prepared call on device `device` (0..n_devices-1), from host inputs to host
   * outputs; blocking. Thread-safe across different devices; calls on the same device are
   * serialised by the caller. Returns SEGOPS_OK or a negative SEGOPS_E_* code (NOMEM /
   * RESOURCE_EXHAUSTED / DEVICE / INTERNAL) with detail in err. */
  int (*run)(void *ctx, int device, const segops_call *call, char *err, size_t errlen);
  /* Fills info for a device; returns SEGOPS_OK or an error. */
  int (*device_info)(void *ctx, int device, segops_device_info *info);
  /* Optional (NULL: every worker takes every call): whether worker `device` may run `call`; the
   * scheduler leaves a call for the workers that take it (at least one must take every call),
   * and a worker takes the first queued call it may run. */
  int (*accepts)(void *ctx, int device, const segops_call *call);
  /* True while the backend can take work (false after a sticky device fault). */
  int (*ready)(void *ctx);
  /* Optional (NULL: the backend keeps no cache): fills st for worker `device`; SEGOPS_OK or an error. */
  int (*cache_stats)(void *ctx, int device, segops_cache_stats *st);
  /* Frees ctx. */
  void (*destroy)(void *ctx);
  /* Optional (NULL when the backend has no use for it): pins host memory [ptr, ptr+len) that
   * calls will read and write (shared-memory regions), so device copies go straight from and
   * to it; returns 0 when pinned. host_unregister undoes it before the memory is unmapped. */
  int (*host_register)(void *ctx, void *ptr, size_t len);
  void (*host_unregister)(void *ctx, void *ptr);
};

/* CPU backend. threads <= 0 picks the number of online CPUs. Returns NULL on failure.
 * Owned by the caller: free with segops_backend_free. */
segops_backend *segops_cpu_backend_new(int threads);

/* CUDA backend, when built with CUDA (SEGOPS_HAVE_CUDA). devices: list of ordinals, or NULL
 * with n_devices = 0 for all. Returns NULL with a message in err, and in *code (when not NULL)
 * SEGOPS_E_UNAVAILABLE when there is no usable GPU, SEGOPS_E_INVALID_ARGUMENT for a bad setting
 * (--devices, the CUDA rows of the configuration table), another SEGOPS_E_* otherwise. */
segops_backend *segops_cuda_backend_new(const int *devices, int n_devices, int *code, char *err, size_t errlen);

/* Calls destroy and frees the struct. Accepts NULL. */
void segops_backend_free(segops_backend *b);

/* Monotonic clock in seconds. */
double segops_now(void);

/* The backends' rows of the configuration table, declared beside their code and built whether or
 * not the backend is (so --help and docs/configuration.md are the same in every build). */
extern segops_settings_group segops_cpu_settings;  /* backends/cpu/cpu_settings.c */
extern segops_settings_group segops_cuda_settings; /* backends/cuda/cuda_settings.c */

/* The CPU backend's values (the table fills them; the initial values are the defaults). */
typedef struct {
  int64_t threads; /* --threads: compute threads; 0 = every online CPU */
  int isa;         /* --cpu-isa: SEGOPS_CPU_ISA_AUTO or SEGOPS_CPU_ISA_BASELINE */
} segops_cpu_conf_t;
enum { SEGOPS_CPU_ISA_AUTO = 0, SEGOPS_CPU_ISA_BASELINE = 1 };
extern segops_cpu_conf_t segops_cpu_conf;

#endif

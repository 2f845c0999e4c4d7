/* metrics.h: the daemon's counters and histograms, rendered as Prometheus text 0.0.4.
 * Every update is a relaxed atomic: cheap enough for the request path, lock-free. */
#ifndef SEGOPS_METRICS_H
#define SEGOPS_METRICS_H

#include <stddef.h>
#include <stdint.h>

#include "backend.h"
#include "ops.h"

/* Non-op routes, for the per-route request counter. */
typedef enum {
  SEGOPS_ROUTE_OP = 0,
  SEGOPS_ROUTE_INFO,
  SEGOPS_ROUTE_HEALTHZ,
  SEGOPS_ROUTE_READYZ,
  SEGOPS_ROUTE_METRICS,
  SEGOPS_ROUTE_V2,  /* the Open Inference Protocol's non-infer routes (infer counts as its function) */
  SEGOPS_ROUTE_SHM, /* the system shared memory routes */
  SEGOPS_ROUTE_OTHER,
  SEGOPS_ROUTE_COUNT
} segops_route;

/* Latency histograms of op requests, labelled by op and pass. TOTAL: headers to completion. */
typedef enum { SEGOPS_HIST_QUEUE = 0, SEGOPS_HIST_COMPUTE, SEGOPS_HIST_TOTAL, SEGOPS_HIST_COUNT } segops_hist;

/* Counts one finished request. op/pass only for SEGOPS_ROUTE_OP with a known function
 * (else pass -1); those also go into the request/response size histograms. status is the
 * HTTP status sent. */
void segops_metrics_request(segops_route route, int op, int pass, int status, uint64_t bytes_in, uint64_t bytes_out);
/* Observes a duration in seconds in one of the latency histograms of function (op, pass);
 * anything that is not a known function (a probe, a scrape, a bad path) is ignored. */
void segops_metrics_observe(segops_hist h, int op, int pass, double seconds);
/* Counts a request turned away with error err (a SEGOPS_E_* code): unauthenticated, too large,
 * queue or memory full, unavailable (starting, draining), deadline exceeded; others ignored. */
void segops_metrics_rejected(int err);
/* Observes the number of requests joined in one backend call, and its elements. */
void segops_metrics_batch(int requests, int64_t elements);
/* Time backend device (worker) `device` spent in a call. */
void segops_metrics_backend_busy(int device, double seconds);
void segops_metrics_inflight_add(int delta);
/* Op requests inside a backend call now (+n before the call, -n after). */
void segops_metrics_executing_add(int delta);

/* The native channel (server/native/): channels open (+1 when one opens, -1 when it ends); one
 * call answered, by function (SEGOPS_FN_*, -1 when the request named none) and status (SEGOPS_OK
 * or a SEGOPS_E_* code); bytes of client memory mapped and pinned (deltas). */
void segops_metrics_native_channels(int delta);
/* A native call began (in flight), and ended with status after seconds: it counts in the native
 * families and, with transport="native", in the request families HTTP's calls count in. */
void segops_metrics_native_start(void);
void segops_metrics_native_call(int fn, int status, double seconds);
void segops_metrics_native_bytes(int64_t mapped_delta, int64_t pinned_delta);

/* Renders everything into a malloc'd NUL-terminated buffer (caller frees); NULL on OOM.
 * queue_depth is sampled by the caller; the backend is asked for per-device memory. */
char *segops_metrics_render(int64_t queue_depth, const segops_backend *b, size_t *len);

#endif

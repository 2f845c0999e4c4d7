/* segops_types.h: what the daemon and its clients both speak, and neither owns: the dtypes, the
 * error table, the function ids and the limits of a call. The daemon's core and libsegops' public
 * header (clients/c/include/segops.h, which installs this header beside it) both include it, as
 * io_uring's two sides share its uapi header. Plain C, no functions. */
#ifndef SEGOPS_TYPES_H
#define SEGOPS_TYPES_H

#ifdef __cplusplus
extern "C" {
#endif

/* ---- dtypes ---------------------------------------------------------------------------------- */

typedef enum { SEGOPS_F32 = 0, SEGOPS_F64 = 1, SEGOPS_I32 = 2, SEGOPS_I64 = 3, SEGOPS_DTYPE_COUNT } segops_dtype;

/* ---- the error table ------------------------------------------------------------------------
 * X(ENUM_SUFFIX, value, "wire_code", http_status, "generic message"). Negative ints; a function
 * returns SEGOPS_OK (0) or one of these (libsegops with detail in its segops_error). The wire code
 * is what the daemon answers in {"error": {"code": ...}}; several values may share one (NOMEM and
 * RESOURCE_EXHAUSTED both answer "resource_exhausted"). The client-side codes (CONNECTION,
 * TIMEOUT, PROTOCOL) are never sent by the daemon: their status is 0. SHM_REGION_UNKNOWN: a request
 * names a shared-memory region the daemon does not know (for the caller's uid), e.g. after a
 * restart; a client registers it again and resends (every call is pure). */
#define SEGOPS_ERRNO_MAP(X)                                                         \
  X(INVALID_ARGUMENT, -1, "invalid_argument", 400, "invalid argument")              \
  X(MALFORMED_BODY, -2, "malformed_body", 400, "malformed request body")            \
  X(NOT_FOUND, -3, "not_found", 404, "not found")                                   \
  X(TOO_LARGE, -4, "too_large", 413, "request too large")                           \
  X(UNSUPPORTED_MEDIA, -5, "unsupported_media_type", 415, "unsupported media type") \
  X(NOT_ACCEPTABLE, -6, "not_acceptable", 406, "not acceptable")                    \
  X(UNAUTHENTICATED, -7, "unauthenticated", 401, "missing or invalid bearer token") \
  X(METHOD_NOT_ALLOWED, -8, "method_not_allowed", 405, "method not allowed")        \
  X(UNAVAILABLE, -9, "unavailable", 503, "service unavailable")                     \
  X(RESOURCE_EXHAUSTED, -10, "resource_exhausted", 503, "resource exhausted")       \
  X(DEADLINE_EXCEEDED, -11, "deadline_exceeded", 504, "deadline exceeded")          \
  X(INTERNAL, -12, "internal", 500, "internal error")                               \
  X(NOMEM, -13, "resource_exhausted", 503, "out of host memory")                    \
  X(DEVICE, -14, "internal", 500, "device error")                                   \
  X(NOT_IMPLEMENTED, -15, "not_implemented", 501, "not implemented")                \
  X(CONNECTION, -16, "connection_error", 0, "no connection to the daemon")          \
  X(TIMEOUT, -17, "timeout", 0, "the call's timeout passed")                        \
  X(PROTOCOL, -18, "protocol_error", 0, "the daemon's answer breaks the protocol")  \
  X(SHM_REGION_UNKNOWN, -19, "shm_region_unknown", 404, "shared-memory region not registered")

enum {
  SEGOPS_OK = 0,
#define SEGOPS_ERR_ENUM_(name, val, code, http, msg) SEGOPS_E_##name = (val),
  SEGOPS_ERRNO_MAP(SEGOPS_ERR_ENUM_)
#undef SEGOPS_ERR_ENUM_
};

/* ---- functions: one per (op, pass), in the order of the daemon's op table -------------------- */

/* SEGOPS_FN_IDS_BEGIN (clients/c/gen_typed.py writes what follows up to SEGOPS_FN_IDS_END) */
typedef enum {
  SEGOPS_FN_SEGMENTED_SUM_FORWARD = 0,
  SEGOPS_FN_SEGMENTED_SUM_BACKWARD,
  SEGOPS_FN_SEGMENTED_SUM_DOUBLE_BACKWARD,
  SEGOPS_FN_SEGMENTED_DOT_FORWARD,
  SEGOPS_FN_SEGMENTED_DOT_BACKWARD,
  SEGOPS_FN_SEGMENTED_DOT_DOUBLE_BACKWARD,
  SEGOPS_FN_SEGMENTED_MUL_FORWARD,
  SEGOPS_FN_SEGMENTED_MUL_BACKWARD,
  SEGOPS_FN_SEGMENTED_MUL_DOUBLE_BACKWARD,
  SEGOPS_FN_SEGMENTED_MEAN_FORWARD,
  SEGOPS_FN_SEGMENTED_MEAN_BACKWARD,
  SEGOPS_FN_SEGMENTED_MEAN_DOUBLE_BACKWARD,
  SEGOPS_FN_SEGMENTED_RMS_NORM_FORWARD,
  SEGOPS_FN_SEGMENTED_RMS_NORM_BACKWARD,
  SEGOPS_FN_SEGMENTED_RMS_NORM_DOUBLE_BACKWARD,
  SEGOPS_FN_SEGMENTED_MATVEC_FORWARD,
  SEGOPS_FN_SEGMENTED_MATVEC_BACKWARD,
  SEGOPS_FN_SEGMENTED_MATVEC_DOUBLE_BACKWARD,
  SEGOPS_FN_SEGMENTED_MAX_FORWARD,
  SEGOPS_FN_SEGMENTED_MAX_BACKWARD,
  SEGOPS_FN_SEGMENTED_MAX_DOUBLE_BACKWARD,
  SEGOPS_FN_SEGMENTED_MIN_FORWARD,
  SEGOPS_FN_SEGMENTED_MIN_BACKWARD,
  SEGOPS_FN_SEGMENTED_MIN_DOUBLE_BACKWARD,
  SEGOPS_FN_COUNT
} segops_fn_id;
/* SEGOPS_FN_IDS_END */

#define SEGOPS_MAX_INPUTS 5 /* per function, idx and num_segments not counted */
#define SEGOPS_MAX_OUTPUTS 3
#define SEGOPS_MAX_NDIM 6 /* (N, *F) with up to five trailing dimensions */

#ifdef __cplusplus
}
#endif

#endif

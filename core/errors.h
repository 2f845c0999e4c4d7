/* errors.h: the one error-code table of segops (negative ints, a name and an HTTP status each). */
#ifndef SEGOPS_ERRORS_H
#define SEGOPS_ERRORS_H

/* SEGOPS_ERR(ENUM_SUFFIX, value, "wire_code", http_status, "generic message") */
#define SEGOPS_ERRNO_MAP(X)                                                                  \
  X(INVALID_ARGUMENT, -1, "invalid_argument", 400, "invalid argument")                      \
  X(MALFORMED_BODY, -2, "malformed_body", 400, "malformed request body")                    \
  X(NOT_FOUND, -3, "not_found", 404, "not found")                                           \
  X(TOO_LARGE, -4, "too_large", 413, "request too large")                                   \
  X(UNSUPPORTED_MEDIA, -5, "unsupported_media_type", 415, "unsupported media type")         \
  X(NOT_ACCEPTABLE, -6, "not_acceptable", 406, "not acceptable")                            \
  X(UNAUTHENTICATED, -7, "unauthenticated", 401, "missing or invalid bearer token")         \
  X(METHOD_NOT_ALLOWED, -8, "method_not_allowed", 405, "method not allowed")                \
  X(UNAVAILABLE, -9, "unavailable", 503, "service unavailable")                             \
  X(RESOURCE_EXHAUSTED, -10, "resource_exhausted", 503, "resource exhausted")               \
  X(DEADLINE_EXCEEDED, -11, "deadline_exceeded", 504, "deadline exceeded")                  \
  X(INTERNAL, -12, "internal", 500, "internal error")                                       \
  X(NOMEM, -13, "resource_exhausted", 503, "out of host memory")                            \
  X(DEVICE, -14, "internal", 500, "device error")                                           \
  X(NOT_IMPLEMENTED, -15, "not_implemented", 501, "not implemented")

enum {
  SEGOPS_OK = 0,
#define SEGOPS_ERR_ENUM(name, val, code, http, msg) SEGOPS_E_##name = (val),
  SEGOPS_ERRNO_MAP(SEGOPS_ERR_ENUM)
#undef SEGOPS_ERR_ENUM
};

/* Wire code string ("invalid_argument", ...) for an error; "internal" for unknown values. */
const char *segops_err_code(int err);
/* HTTP status for an error (500 for unknown values, 200 for SEGOPS_OK). */
int segops_err_http_status(int err);
/* Generic human message for an error. */
const char *segops_err_message(int err);

/* Formats a detail message into buf (always NUL-terminated when len > 0) and returns err.
 * Used as: return segops_errf(err, buf, len, "segmented_mul: y ...", ...). */
int segops_errf(int err, char *buf, unsigned long len, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#endif

/* errors.h: lookups in the one error-code table of segops (negative ints, a name and an HTTP status
 * each), and the detail formatter. */
#ifndef SEGOPS_ERRORS_H
#define SEGOPS_ERRORS_H

/* The table itself, SEGOPS_ERRNO_MAP, and the SEGOPS_E_* values are in proto/segops_types.h,
 * which the daemon and libsegops share. */
#include "segops_types.h"

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

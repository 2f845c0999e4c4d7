/* errors.c: lookups in the error-code table of errors.h and the detail formatter. */
#include "errors.h"

#include <stdarg.h>
#include <stdio.h>

#define SEGOPS_ERR_CASE_CODE(name, val, code, http, msg) \
  case (val):                                            \
    return (code);
#define SEGOPS_ERR_CASE_HTTP(name, val, code, http, msg) \
  case (val):                                            \
    return (http);
#define SEGOPS_ERR_CASE_MSG(name, val, code, http, msg) \
  case (val):                                           \
    return (msg);

const char *segops_err_code(int err) {
  switch (err) {
    case SEGOPS_OK:
      return "ok";
      SEGOPS_ERRNO_MAP(SEGOPS_ERR_CASE_CODE)
    default:
      return "internal";
  }
}

int segops_err_http_status(int err) {
  switch (err) {
    case SEGOPS_OK:
      return 200;
      SEGOPS_ERRNO_MAP(SEGOPS_ERR_CASE_HTTP)
    default:
      return 500;
  }
}

const char *segops_err_message(int err) {
  switch (err) {
    case SEGOPS_OK:
      return "ok";
      SEGOPS_ERRNO_MAP(SEGOPS_ERR_CASE_MSG)
    default:
      return "internal error";
  }
}

int segops_errf(int err, char *buf, unsigned long len, const char *fmt, ...) {
  if (buf && len > 0) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, len, fmt, ap);
    va_end(ap);
  }
  return err;
}

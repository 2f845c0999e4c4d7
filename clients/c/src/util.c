/* util.c: inside libsegops, what every part shares: the clock, error filling, the error table's
 * lookups and allocation in the client's memory. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mem.h"
#include "transport.h"

double segops_client_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

const char *segops_err_name(int code) {
  switch (code) {
    case SEGOPS_OK:
      return "ok";
#define SEGOPS_CASE_(name, val, wire, http, msg) \
  case (val):                                    \
    return (wire);
      SEGOPS_ERRNO_MAP(SEGOPS_CASE_)
#undef SEGOPS_CASE_
    default:
      return "internal";
  }
}

int segops_err_status(int code) {
  switch (code) {
    case SEGOPS_OK:
      return 200;
#define SEGOPS_CASE_(name, val, wire, http, msg) \
  case (val):                                    \
    return (http);
      SEGOPS_ERRNO_MAP(SEGOPS_CASE_)
#undef SEGOPS_CASE_
    default:
      return 500;
  }
}

const char *segops_strerror(int code) {
  switch (code) {
    case SEGOPS_OK:
      return "ok";
#define SEGOPS_CASE_(name, val, wire, http, msg) \
  case (val):                                    \
    return (msg);
      SEGOPS_ERRNO_MAP(SEGOPS_CASE_)
#undef SEGOPS_CASE_
    default:
      return "internal error";
  }
}

int segops_client_err(segops_error *e, int code, const char *fmt, ...) {
  if (!e) return code;
  e->code = code;
  e->http_status = segops_err_status(code);
  e->retry_after_s = 0;
  snprintf(e->name, sizeof e->name, "%s", segops_err_name(code));
  int n = snprintf(e->message, sizeof e->message, "segops: ");
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(e->message + n, sizeof e->message - (size_t)n, fmt, ap);
  va_end(ap);
  return code;
}

void *segops_client_alloc(struct segops_mem *m, size_t nbytes) {
  if (nbytes == 0) nbytes = 1;
  if (m) {
    void *p = segops_mem_alloc(m, nbytes);
    if (p) return p;
  }
  void *p = NULL;
  return posix_memalign(&p, 64, (nbytes + 63) & ~(size_t)63) == 0 ? p : NULL;
}

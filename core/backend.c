/* backend.c: what all backends share. */
#include "backend.h"

#include <stdlib.h>
#include <time.h>

#include "errors.h"

double segops_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void segops_backend_free(segops_backend *b) {
  if (!b) return;
  if (b->destroy) b->destroy(b->ctx);
  free(b);
}

int segops_env_whole(const char *name, long long lo, long long hi, const char *unit, long long *val, char *err,
                     size_t errlen) {
  const char *v = getenv(name);
  if (!v || !*v) return SEGOPS_OK;
  char *end = NULL;
  long long l = strtoll(v, &end, 10);
  if (!end || *end || l < lo || l > hi)
    return segops_errf(SEGOPS_E_INVALID_ARGUMENT, err, errlen, "%s must be a whole number%s from %lld to %lld, not '%.32s'",
                       name, unit, lo, hi, v);
  *val = l;
  return SEGOPS_OK;
}

size_t segops_env_bytes(const char *name, size_t def) {
  const char *v = getenv(name);
  if (!v || !*v) return def;
  char *end = NULL;
  unsigned long long x = strtoull(v, &end, 10);
  switch (end && *end ? *end : 0) {
    case 'k':
    case 'K':
      x <<= 10;
      break;
    case 'm':
    case 'M':
      x <<= 20;
      break;
    case 'g':
    case 'G':
      x <<= 30;
      break;
    default:
      break;
  }
  return (size_t)x;
}

/* backend.c: what all backends share. */
#include "backend.h"

#include <stdlib.h>

void segops_backend_free(segops_backend *b) {
  if (!b) return;
  if (b->destroy) b->destroy(b->ctx);
  free(b);
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

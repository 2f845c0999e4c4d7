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

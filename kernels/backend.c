/* backend.c: what all backends share. */
#include "backend.h"

#include <stdlib.h>

void segops_backend_free(segops_backend *b) {
  if (!b) return;
  if (b->destroy) b->destroy(b->ctx);
  free(b);
}

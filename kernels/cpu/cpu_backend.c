/* cpu_backend.c: the CPU backend (placeholder until implemented). */
#include <stdlib.h>

#include "backend.h"

segops_backend *segops_cpu_backend_new(int threads) {
  (void)threads;
  return NULL;
}

/* backend_nocuda.c: the CUDA constructor of a build without CUDA, so callers need no #ifdef. */
#include "backend.h"
#include "errors.h"

segops_backend *segops_cuda_backend_new(const int *devices, int n_devices, int *code, char *err, size_t errlen) {
  (void)devices;
  (void)n_devices;
  int rc = segops_errf(SEGOPS_E_UNAVAILABLE, err, errlen, "this segopsd was built without the CUDA backend");
  if (code) *code = rc;
  return NULL;
}

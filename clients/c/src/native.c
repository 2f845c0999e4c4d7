/* native.c: the native same-node channel's client side (transport.h). PLACEHOLDER until the
 * channel lands: opening it fails, so "auto" falls back to HTTP. */
#include "transport.h"

segops_transport *segops_native_open(const char *path, struct segops_mem *mem, const char *token, int spin_us,
                                     double deadline, segops_error *e) {
  (void)mem, (void)token, (void)spin_us, (void)deadline;
  segops_client_err(e, SEGOPS_E_NOT_IMPLEMENTED, "the native channel (%s) is not built in this library", path);
  return NULL;
}

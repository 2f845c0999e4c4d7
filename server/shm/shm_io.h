/* shm_io.h: tensors by reference for a request: its inputs read from and its outputs written to
 * shared-memory regions (shm.h), resolved after decoding and released when the request ends. */
#ifndef SEGOPS_SHM_IO_H
#define SEGOPS_SHM_IO_H

#include "prepare.h"
#include "shm.h"

/* One output written into a region. */
typedef struct {
  segops_shm_ref ref;
  int k;       /* output index in the function's row */
  bool direct; /* computed straight into the region; else copied there after the call */
  uint64_t offset;
  char region[SEGOPS_SHM_NAME_MAX + 1];
} segops_shm_out;

typedef struct {
  segops_shm_ref in[SEGOPS_MAX_REQ_ARGS];
  int n_in;
  segops_shm_out out[SEGOPS_MAX_OUTPUTS];
  int n_out;
} segops_shm_use;

/* Points every by-reference input of req at its bytes (prod(shape) * itemsize at the given
 * offset of its region), among the regions of uid (the peer's, -1 when unknown: then any
 * reference is refused). Before segops_prepare. Returns SEGOPS_OK or an error with a message
 * naming the op, the argument and the region: SEGOPS_E_SHM_REGION_UNKNOWN for a region uid does
 * not hold, SEGOPS_E_INVALID_ARGUMENT and others for the rest. */
int segops_shm_use_inputs(segops_shm *reg, int64_t uid, segops_request *req, segops_shm_use *u, char *err,
                          size_t errlen);
/* After segops_prepare: takes uid's regions of req's outputs_shm for the outputs' places (their
 * declared byte size when larger); an output whose place is 64-byte aligned and shares no byte of
 * its object with an input is computed straight into it (p's call.out[k] points there). */
int segops_shm_use_outputs(segops_shm *reg, int64_t uid, const segops_request *req, segops_prepared *p,
                           segops_shm_use *u, char *err, size_t errlen);
/* After a successful call: copies the outputs not computed in place, and fails (400, naming the
 * region) when a region was truncated by its owner while in use. */
int segops_shm_use_finish(segops_shm_use *u, const segops_prepared *p, char *err, size_t errlen);
/* The region an output k went to (NULL when answered inline), and its offset. */
const char *segops_shm_use_output(const segops_shm_use *u, int k, uint64_t *offset);
void segops_shm_use_release(segops_shm_use *u); /* accepts a zeroed u */

#endif

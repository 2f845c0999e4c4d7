/* native_check.h: the native channel's descriptor check, a pure function: the daemon's own copy
 * of a ring slot's request plus the channel's pool table in, a segops_request ready for
 * segops_prepare (or an error) out; and, after prepare, the outputs' places checked and pointed
 * at. No threads, sockets or shared state, so a fuzz target drives it directly. */
#ifndef SEGOPS_NATIVE_CHECK_H
#define SEGOPS_NATIVE_CHECK_H

#include <stdbool.h>
#include <stdint.h>

#include "prepare.h"
#include "segops_ring.h"

/* A pool as the daemon mapped it: size bytes at base (page-aligned). */
typedef struct {
  unsigned char *base;
  uint64_t size;
} segops_native_view;

/* Where a tensor of the request lies: bytes [offset, offset + nbytes) of pool `pool`. */
typedef struct {
  bool present;
  uint32_t pool;
  uint64_t offset, nbytes;
} segops_native_range;

/* A checked request. req's tensors point into the pools (t.shared set: the client may rewrite
 * them at any time) and its names are the op table's static strings. */
typedef struct {
  int fn; /* SEGOPS_FN_*: op * 3 + pass */
  segops_request req;
  segops_native_range in[SEGOPS_MAX_INPUTS + 1]; /* the inputs, then idx: for the overlap rule */
  segops_native_range out[SEGOPS_MAX_OUTPUTS];   /* requested outputs: their places (nbytes: room) */
  double timeout_s;                              /* the client's bound on the call; 0: none */
} segops_native_checked;

/* Checks the daemon's private copy r of a request against the pools (views[0..npools)): function
 * id, output mask, flags, every tensor's dtype and rank, and every byte range against its pool
 * (64-bit, overflow-safe). Fills *c. Returns SEGOPS_OK, or SEGOPS_E_INVALID_ARGUMENT with a
 * message naming the function (when known), the argument and the rule. Shapes, sizes and idx
 * values are left to segops_prepare, so errors read as over HTTP. */
int segops_native_check(const segops_ring_request *r, const segops_native_view *views, uint32_t npools,
                        segops_native_checked *c, char *err, size_t errlen);

/* After segops_prepare(&c->req, ..., p): points p->call.out[k] of every requested output at its
 * place, after checking that it holds the output (p->out_nbytes[k] bytes), lies 64-byte aligned
 * and overlaps no input, idx or other output (pool and byte ranges compared, not addresses).
 * Returns SEGOPS_OK or SEGOPS_E_INVALID_ARGUMENT with a message. */
int segops_native_place_outputs(const segops_native_checked *c, const segops_native_view *views, uint32_t npools,
                                segops_prepared *p, char *err, size_t errlen);

#endif

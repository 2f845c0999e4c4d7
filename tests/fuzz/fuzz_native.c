/* fuzz_native.c: libFuzzer target for the native channel's descriptor check (server/native/
 * native_check.c), the pure function between a client's ring and segops_prepare. The input is
 *   byte 0: the ring's slot count (1 + b % 64), byte 1: the slot the request is read from,
 *   byte 2: the number of pools (b % 5), then 2 bytes per pool: its size in bytes (0..65535),
 *   then the request's bytes (zero-padded to a segops_ring_request).
 * The request goes into a ring of that many slots and is copied out of its slot as the daemon does
 * it; every pool is a heap block of exactly its size (ASan sees any byte past it). A request that
 * passes the check and segops_prepare gets its outputs placed, and every input and output byte
 * range is touched at both ends; the same request is then checked again against the pool table
 * with every pool shrunk, as a client truncating its memory between two calls would leave it. */
#include <stdlib.h>
#include <string.h>

#include "fuzz_common.h"
#include "native_check.h"

#define MAX_POOLS 4

static void touch(const unsigned char *p, size_t n) {
  volatile unsigned char sink = 0;
  if (n) sink ^= p[0] ^ p[n - 1];
  (void)sink;
}

/* The whole path the daemon takes for one request against one pool table. */
static void check_once(const segops_ring_request *r, const segops_native_view *views, uint32_t npools) {
  segops_native_checked c;
  char err[512] = "";
  int rc = segops_native_check(r, views, npools, &c, err, sizeof err);
  if (rc) {
    FUZZ_ASSERT(err[0] != 0);
    return;
  }
  /* Every accepted tensor lies inside its pool. */
  for (int a = 0; a < c.req.nargs; a++) {
    const segops_named_tensor *t = &c.req.args[a];
    FUZZ_ASSERT(t->t.shared);
    bool inside = false;
    for (uint32_t k = 0; k < npools; k++) {
      const unsigned char *b = views[k].base, *d = t->t.data;
      if (d >= b && d <= b + views[k].size && t->t.nbytes <= views[k].size - (size_t)(d - b)) inside = true;
    }
    FUZZ_ASSERT(inside);
    touch(t->t.data, t->t.nbytes);
  }
  segops_prepared p;
  rc = segops_prepare(&c.req, &FUZZ_LIMITS, &p, err, sizeof err);
  if (rc) {
    FUZZ_ASSERT(err[0] != 0);
    return;
  }
  rc = segops_native_place_outputs(&c, views, npools, &p, err, sizeof err);
  if (rc == SEGOPS_OK) {
    for (int k = 0; k < p.call.fn->n_out; k++) {
      if (!p.requested[k] || !p.out_nbytes[k]) continue;
      unsigned char *o = p.call.out[k];
      FUZZ_ASSERT(((uintptr_t)o & 63u) == 0);
      memset(o, 0x5a, p.out_nbytes[k]); /* the backend writes every byte: ASan checks the range */
    }
    for (int k = 0; k < p.call.fn->n_in; k++)
      if (p.call.in[k]) touch(p.call.in[k], 1);
  } else {
    FUZZ_ASSERT(err[0] != 0);
  }
  segops_prepared_free(&p);
}

/* Heap blocks of exactly the pools' sizes, 64-byte aligned as mappings are (page-aligned). */
static void pools(segops_native_view *views, const size_t *sizes, uint32_t n) {
  for (uint32_t k = 0; k < n; k++) {
    void *p = NULL;
    FUZZ_ASSERT(posix_memalign(&p, 64, sizes[k] ? sizes[k] : 1) == 0);
    memset(p, 0, sizes[k]); /* idx of zeros: in range for any num_segments > 0 */
    views[k] = (segops_native_view){p, sizes[k]};
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 3) return 0;
  uint32_t slots = 1u + data[0] % 64u, slot = data[1] % slots, npools = data[2] % (MAX_POOLS + 1);
  size_t at = 3;
  size_t sizes[MAX_POOLS] = {0};
  for (uint32_t k = 0; k < npools; k++, at += 2)
    sizes[k] = at + 1 < size ? (size_t)data[at] | (size_t)data[at + 1] << 8 : 64;
  /* The request, in its slot of a ring of `slots` slots, copied out as the daemon copies it. */
  size_t ring_len = (size_t)SEGOPS_RING_BYTES(slots);
  unsigned char *ring = calloc(1, ring_len);
  segops_ring_slot *s =
      (segops_ring_slot *)(void *)(ring + SEGOPS_RING_HEADER_BYTES + (size_t)slot * SEGOPS_RING_SLOT_BYTES);
  if (at < size) memcpy(&s->req, data + at, size - at < sizeof s->req ? size - at : sizeof s->req);
  segops_ring_request copy;
  memcpy(&copy, &s->req, sizeof copy);
  free(ring); /* nothing may read the ring after the copy */
  segops_native_view views[MAX_POOLS];
  pools(views, sizes, npools);
  check_once(&copy, views, npools);
  /* The same descriptors against smaller pools (and one pool fewer). */
  for (uint32_t k = 0; k < npools; k++) {
    free(views[k].base);
    sizes[k] /= 2;
  }
  pools(views, sizes, npools);
  check_once(&copy, views, npools ? npools - 1 : 0);
  for (uint32_t k = 0; k < npools; k++) free(views[k].base);
  return 0;
}

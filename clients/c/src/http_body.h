/* http_body.h: inside libsegops, the bodies of the HTTP transport (proto/API.md): a call's msgpack
 * request, its msgpack answer decoded with bounds into the caller's outputs, and the JSON error
 * body. No I/O. Not installed. */
#ifndef SEGOPS_CLIENT_HTTP_BODY_H
#define SEGOPS_CLIENT_HTTP_BODY_H

#include <stddef.h>
#include <stdint.h>

#include "transport.h"

/* A growing byte buffer (owned p). */
typedef struct {
  char *p;
  size_t len, cap;
} segops_buf;

/* Room for n more bytes; false when out of memory. */
bool segops_buf_reserve(segops_buf *b, size_t n);
void segops_buf_free(segops_buf *b);

/* The request body of tc (msgpack: every given input and idx as {"dtype", "shape", "data": bin},
 * num_segments, and "outputs" when not every output is asked for) into b, which is reset first. */
int segops_body_encode(const segops_tcall *tc, segops_buf *b, segops_error *e);

/* The most bytes a 200 answer to tc can take; a longer one breaks the protocol. */
size_t segops_body_answer_cap(const segops_tcall *tc);

/* The most bytes of an error body that are read (its message is at most segops_error.message). */
#define SEGOPS_ERROR_BODY_CAP ((size_t)64 << 10)

/* Decodes a 200 answer (msgpack: a map of output name -> tensor) into tc's requested outputs,
 * checking each against the expected dtype and shape; outputs whose data is NULL are allocated
 * (segops_client_alloc), and nothing allocated stays on failure. where: "POST http://..." for
 * messages. SEGOPS_OK or SEGOPS_E_PROTOCOL / SEGOPS_E_NOMEM. */
int segops_body_decode_answer(const segops_tcall *tc, const uint8_t *body, size_t len, const char *where,
                              segops_error *e);

/* Fills e from an error answer of HTTP status with body (JSON {"error": {"code", "message"}}: the
 * daemon's message verbatim, the code mapped to SEGOPS_E_* by its wire name; else by the status)
 * and returns the code. retry_after_s: the Retry-After header (0 when none). */
int segops_body_error(int status, const char *body, size_t len, double retry_after_s, const char *where,
                      segops_error *e);

#endif

/* transport.h: inside libsegops, the interface every transport implements (native channel,
 * HTTP over TCP or a unix socket, local), so that client.c (URL lists, failover, deadlines) drives
 * them alike. Not installed. */
#ifndef SEGOPS_CLIENT_TRANSPORT_H
#define SEGOPS_CLIENT_TRANSPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "segops.h"

/* One call, resolved by client.c before any transport sees it: the function's row, its inputs
 * in the table's order, and, for each requested output, where it goes. */
typedef struct {
  int fn;                /* SEGOPS_FN_* */
  const char *op, *pass; /* wire names (static) */
  int n_in, n_out;       /* the row's counts */
  const char *in_name[SEGOPS_MAX_INPUTS];
  const segops_array *in[SEGOPS_MAX_INPUTS]; /* NULL: omitted */
  const segops_array *idx;
  int64_t num_segments;
  unsigned want; /* bit k: output k requested (never 0 here) */
  const char *out_name[SEGOPS_MAX_OUTPUTS];
  /* Requested outputs: the caller's arrays. When out[k]->data is non-NULL it holds
   * out[k]->nbytes bytes; when NULL the transport allocates the output with segops_client_alloc
   * (client memory: the caller frees it with segops_free) once it knows the size. On success the
   * transport sets dtype, ndim, shape and nbytes. Unrequested entries are NULL. */
  segops_array *out[SEGOPS_MAX_OUTPUTS];
  /* Bytes of each given input and of idx (prod(shape) x itemsize, checked for overflow). */
  size_t in_nbytes[SEGOPS_MAX_INPUTS];
  size_t idx_nbytes;
  /* The answer client.c expects, from the row and the inputs (what the daemon's validation gives
   * a valid call): the float dtype, and per requested output its shape and bytes. expect_known is
   * false when the inputs contradict each other (no idx, mixed dtypes, a shape of no layout): the
   * daemon then refuses the call, and an answer of 200 breaks the protocol. */
  bool expect_known;
  segops_dtype out_dtype;
  int out_ndim[SEGOPS_MAX_OUTPUTS];
  int64_t out_shape[SEGOPS_MAX_OUTPUTS][SEGOPS_MAX_NDIM];
  size_t out_nbytes[SEGOPS_MAX_OUTPUTS];
} segops_tcall;

/* Sets tc's expected answer (expect_known, out_dtype, out_ndim, out_shape, out_nbytes) from its
 * row and inputs, as segops_call_build does (call_check.c); for a tcall assembled without it. */
void segops_call_expect(segops_tcall *tc);

typedef struct segops_transport segops_transport;

typedef struct {
  const char *name; /* "native", "unix", "http", "local" (static) */
  /* Runs one call before deadline (segops_client_now() seconds). SEGOPS_OK, or an error in e.
   * Whether client.c may retry the call on another daemon (or this one, reconnected) is decided by
   * the code: CONNECTION, UNAVAILABLE (503 or a drain) and RESOURCE_EXHAUSTED are retried; a
   * transport that loses its daemon mid-call reconnects by itself within the deadline when it can
   * (the native channel hands its memory over again) before it reports CONNECTION. Thread-safe. */
  int (*call)(segops_transport *t, const segops_tcall *call, double deadline, segops_error *e);
  /* GET /v1/info as JSON (malloc'd, NUL-terminated), or an error. */
  int (*info)(segops_transport *t, char **json, double deadline, segops_error *e);
  void (*close)(segops_transport *t); /* frees t */
  /* Optional (NULL: t is left allocated). In a forked child, for a transport the parent made:
   * frees what can be freed without a word to the daemon or to the parent's threads (a socket is
   * closed, never shut down), so the parent's connections stay the parent's. */
  void (*forget)(segops_transport *t);
} segops_transport_vt;

struct segops_transport {
  const segops_transport_vt *vt;
};

/* The client's memory shared with daemons (mem.h) when it has one, for transports that move
 * memory without a copy; NULL otherwise. */
struct segops_mem;

/* Allocation as segops_alloc does it for the client that owns this call (shared memory when the
 * client has it, else the heap): transports allocate outputs the caller left NULL with it. */
void *segops_client_alloc(struct segops_mem *m, size_t nbytes);

/* ---- the transports (each NULL with e filled when it cannot be opened) ---- */

/* The native channel to the daemon whose channel socket is at path (native_client.h): connects, hands
 * over the client's pools of mem (borrowed: it outlives the transport) and its ring. Every
 * connection's peer must be uid (and, on the first, pid when pid > 0) and the socket file uid's,
 * or nothing is sent (SEGOPS_E_CONNECTION naming both identities). */
segops_transport *segops_native_open(const char *path, struct segops_mem *mem, const char *token, int spin_us,
                                     uid_t uid, pid_t pid, double deadline, segops_error *e);
/* HTTP/1.1 with msgpack bodies through libcurl (http.c): url "http://host:port[/prefix]" or
 * "unix:///path" (HTTP over the unix socket). Keep-alive connections, one per calling thread. */
segops_transport *segops_http_open(const char *url, const char *token, segops_error *e);
/* GET /readyz through an HTTP transport (segops_http_open's): SEGOPS_OK when the daemon answers
 * 200, UNAVAILABLE (with its reason) for a 503, or another error. A failed daemon's way back. */
int segops_http_ready(segops_transport *t, double deadline, segops_error *e);
/* The CPU backend in this process (local.c). */
segops_transport *segops_local_open(int threads, segops_error *e);

/* The attempt under way on this thread (endpoints.c sets segops_connect_by before it and reads
 * segops_no_such_host after it): a connection, name resolution included, must be made by
 * segops_connect_by (0: by the call's deadline), else it is a CONNECTION error; http.c sets
 * segops_no_such_host when the URL's host name does not resolve. */
extern _Thread_local double segops_connect_by;
extern _Thread_local bool segops_no_such_host;

/* Monotonic clock in seconds. */
double segops_client_now(void);

/* Fills e (when not NULL) with code, the table's status and name, and a formatted message that
 * starts with "segops: "; returns code. */
int segops_client_err(segops_error *e, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#endif

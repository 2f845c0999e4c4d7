/* segops.h: libsegops, the C client of segopsd: the 18 segment functions called over the native
 * same-node channel, HTTP (TCP or a unix socket), or in-process on the CPU backend ("local").
 *
 * What the daemon and its clients both speak (the dtypes, the error table SEGOPS_ERRNO_MAP and
 * SEGOPS_E_*, the function ids SEGOPS_FN_*, SEGOPS_MAX_*) is segops_types.h, included here and
 * installed beside this header; its source is proto/segops_types.h, which the daemon includes too.
 *
 *   segops_client *c;
 *   segops_error e;
 *   if (segops_open(&c, "http://127.0.0.1:8080", NULL, &e)) { fprintf(stderr, "%s\n", e.message); ... }
 *   segops_array x = {SEGOPS_F64, 1, {n}, xs, 0}, idx = {SEGOPS_I32, 1, {n}, ids, 0};
 *   segops_array out = {0};                      // data NULL: the library allocates it
 *   if (segops_segmented_sum_forward(c, &x, &idx, num_segments, &out, &e)) ...
 *   ... use out.data (out.shape[0] values) ...
 *   segops_free(c, out.data);
 *   segops_close(c);
 *
 * Thread safety: segops_run and the typed functions, segops_alloc, segops_free, segops_info and
 * segops_transport_used may be called from any number of threads on one client at once (several
 * calls are then in flight). segops_open and segops_close are not concurrent with anything else
 * on the same client.
 *
 * Fork: a client used in a forked child opens its own connections, channels and local backend on
 * the child's first call; the parent's stay the parent's (the child neither uses nor waits on
 * them, and closes only its own copies of their descriptors). fork() may land while other threads
 * of the parent are inside calls: the library holds its own locks across fork() (pthread_atfork),
 * so the child never finds one held. The child's first call then allocates, connects, resolves
 * host names and starts threads, which POSIX does not promise in the child of a multithreaded
 * process and the GNU C library makes work. Not covered: https:// URLs. Their TLS library keeps
 * process-wide locks that a parent thread inside a TLS exchange may hold at the fork, and it does
 * not support a multithreaded fork without exec: with https, fork while no other thread is
 * inside a call, or exec in the child.
 *
 * Ownership: every pointer a function takes is borrowed for the duration of the call, unless its
 * comment says otherwise. Free functions accept NULL. */
#ifndef SEGOPS_H
#define SEGOPS_H

#include <stddef.h>
#include <stdint.h>

#include "segops_types.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SEGOPS_ABI_VERSION 2

/* What the shared library exports (it is built with -fvisibility=hidden). */
#if defined(__GNUC__) || defined(__clang__)
#define SEGOPS_API __attribute__((visibility("default")))
#else
#define SEGOPS_API
#endif

/* What went wrong, for a caller or a log line. */
typedef struct {
  int code;          /* SEGOPS_E_*, as returned */
  int http_status;   /* the daemon's HTTP status (or the table's for the code); 0 for client-side codes */
  char name[40];     /* the wire code: "invalid_argument", "connection_error", ... */
  char message[1024]; /* the daemon's message verbatim (it names the op, the argument and the rule), or
                         the library's own, which starts with "segops: " */
  double retry_after_s; /* the daemon's Retry-After with a 503, in seconds; else 0 */
} segops_error;

/* ---- functions: one per (op, pass), in the order of the daemon's op table (SEGOPS_FN_*) ------- */

/* SEGOPS_FN_* of ("segmented_sum", "forward"), or -1 when there is no such function. */
SEGOPS_API int segops_fn_lookup(const char *op, const char *pass);
/* Static strings: the op's and the pass's wire names ("segmented_sum", "forward"); NULL for fn out of range. */
SEGOPS_API const char *segops_fn_op(int fn);
SEGOPS_API const char *segops_fn_pass(int fn);
/* Inputs and outputs of fn, in the table's order (cotangents, g_out, forward inputs; idx and
 * num_segments are not counted); -1 for fn out of range. */
SEGOPS_API int segops_fn_inputs(int fn);
SEGOPS_API int segops_fn_outputs(int fn);
/* Static names of input / output k ("x", "grad_x", ...); NULL out of range. */
SEGOPS_API const char *segops_fn_input_name(int fn, int k);
SEGOPS_API const char *segops_fn_output_name(int fn, int k);

/* ---- arrays ---------------------------------------------------------------------------------- */

/* A C-contiguous, row-major array in the caller's memory.
 * As an input: dtype, ndim, shape and data are read; nbytes is ignored.
 * As an output: when data is NULL the library allocates it (free it with segops_free); else
 * data holds nbytes writable bytes for it (SEGOPS_E_INVALID_ARGUMENT when the output needs
 * more). On success the library sets dtype, ndim, shape and nbytes to the output's. On failure
 * nothing the library allocated is left (data stays NULL), and a caller's memory may have been
 * partly written. Two outputs of one call never share memory (SEGOPS_E_INVALID_ARGUMENT).
 *
 * After SEGOPS_E_TIMEOUT the daemon may still run the call. Over the native channel it writes the
 * outputs in place, so an output whose data lies in segops_alloc memory may still be written after
 * the call returned, until the daemon answers it (within its --request-timeout) or the channel
 * ends: its bytes mean nothing, and it must not be used for another call's output or input before
 * then. segops_free on it is safe at once (the library hands that memory out again only once the
 * daemon is done with it): free it and allocate a new one rather than reuse it. An output in any
 * other memory, and over HTTP or "local" every output, is not touched once the call returned (the
 * library copies into it only on success); the library's own temporary memory of that call stays
 * reserved until the daemon is done with it and is given back then (nothing leaks). */
typedef struct {
  segops_dtype dtype;
  int ndim; /* 0..SEGOPS_MAX_NDIM */
  int64_t shape[SEGOPS_MAX_NDIM];
  void *data;
  size_t nbytes;
} segops_array;

/* ---- clients --------------------------------------------------------------------------------- */

typedef struct segops_client segops_client;

/* A message the library has for a person (a call waiting for a daemon that went away): level is
 * SEGOPS_LOG_LEVEL_INFO or SEGOPS_LOG_LEVEL_WARNING (Python's logging levels), message one line. Called from
 * the calling thread, without the library's locks held. The library never writes to stderr itself. */
typedef void (*segops_log_fn)(void *user, int level, const char *message);
enum { SEGOPS_LOG_LEVEL_INFO = 20, SEGOPS_LOG_LEVEL_WARNING = 30 };

typedef struct {
  const char *token;     /* bearer token; NULL: $SEGOPS_TOKEN, when set */
  double timeout_s;      /* each call's whole deadline, failover and reconnects included; <= 0: 60 */
  const char *transport; /* "auto" (NULL), "native", "unix", "http" or "local"; see segops_open */
  int spin_us;           /* native: how long a caller polls for its answer before it sleeps; < 0: the
                            default ($SEGOPS_CLIENT_SPIN_US, else the library's) */
  int threads;           /* local: CPU backend threads; <= 0: online CPUs */
  double wait_s;         /* first contact: while the client has never reached any of its daemons, a call
                            gives up on them after this many seconds (then it fails naming every URL and
                            why); <= 0: $SEGOPS_WAIT_S, else 1. A daemon it has reached is waited for
                            until timeout_s (a restart). Set it for a client started beside its daemon. */
  segops_log_fn log;     /* messages for a person; NULL: none */
  void *log_user;        /* log's first argument */
} segops_options;

/* Fills o with the defaults above. */
SEGOPS_API void segops_options_init(segops_options *o);

/* Opens a client. url: "http://host:port", "unix:///path/segops.sock", "local", or several of
 * these comma-separated (calls go to a healthy daemon and move to another on a refused or
 * dropped connection, a 503 or a drain: every function is pure, so a retry is safe); NULL:
 * $SEGOPS_URL, else http://127.0.0.1:8080. transport "auto" uses the native channel when the
 * daemon is on this host (its /v1/info names the channel's socket and the socket answers), else
 * HTTP over the daemon's unix socket when it has one here, else HTTP over the URL. "local" runs
 * the CPU backend in this process: the same functions and bits, no daemon. No connection is made
 * here: the first call makes it (so a client may be opened before its daemon starts; its calls
 * wait for it for wait_s, and a client that never reached a daemon fails within about a second:
 * a URL nothing listens on, a socket that does not exist, a host name that does not resolve).
 * Returns SEGOPS_OK with *out set (free with segops_close), or an error (bad URL, option). */
SEGOPS_API int segops_open(segops_client **out, const char *url, const segops_options *opts, segops_error *err);

/* Closes the channels and frees the client. Memory from segops_alloc must be freed before. */
SEGOPS_API void segops_close(segops_client *c);

/* The transport the last call used: "native", "unix", "http" or "local"; for a client of several
 * daemons, the one the last call went to. "" before the first call. Static string. */
SEGOPS_API const char *segops_transport_used(segops_client *c);

/* Runs one function. inputs: segops_fn_inputs(fn) pointers in the table's order, NULL for an
 * omitted input (a cotangent that is zero, or one the formula does not read). want: bit k asks for
 * output k (0: every output). outputs: segops_fn_outputs(fn) arrays; only the requested ones are
 * touched. Inputs are only read; an input or output in memory from segops_alloc on a native
 * client travels without a copy. inputs may be NULL (every input omitted) and so may idx (the
 * daemon then says it is required). The library refuses only what it cannot send; the daemon (or
 * "local", with the same rules and messages) validates the rest. Returns SEGOPS_OK, or an error
 * with e filled (e may be NULL). */
SEGOPS_API int segops_run(segops_client *c, int fn, const segops_array *const *inputs, const segops_array *idx,
                int64_t num_segments, unsigned want, segops_array *outputs, segops_error *e);

/* The outputs segops_run would give for these arguments, without running anything: for each
 * requested output (want as segops_run's) its dtype, ndim, shape and nbytes (data untouched), as
 * the daemon's validation infers them; so a caller can allocate outputs (in segops_alloc memory,
 * a tensor of its own) before the call. SEGOPS_OK, or SEGOPS_E_INVALID_ARGUMENT when the
 * arguments do not determine them (the call itself then fails with the daemon's reason).
 * Thread-safe; needs no client. */
SEGOPS_API int segops_output_shapes(int fn, const segops_array *const *inputs, const segops_array *idx,
                          int64_t num_segments, unsigned want, segops_array *outputs, segops_error *e);

/* nbytes (at least 1) of 64-byte-aligned memory for inputs and outputs: in the memory the native
 * channel shares with the daemon when this client uses it (then never copied), else ordinary
 * heap memory. NULL when none is left. Valid until segops_free, across daemon restarts. */
SEGOPS_API void *segops_alloc(segops_client *c, size_t nbytes);
SEGOPS_API void segops_free(segops_client *c, void *p);

/* GET /v1/info of the daemon the next call would go to, as a NUL-terminated JSON document
 * (*json: malloc'd, the caller frees it); for "local", the same document for the in-process
 * backend. SEGOPS_OK or an error. */
SEGOPS_API int segops_info(segops_client *c, char **json, segops_error *e);

/* Wire code, HTTP status and generic message of a SEGOPS_E_* value (static strings). */
SEGOPS_API const char *segops_strerror(int code);
SEGOPS_API const char *segops_err_name(int code);
SEGOPS_API int segops_err_status(int code);

/* ---- the 24 functions, typed (generated from the op table: the same as segops_run) ---------- */
/* SEGOPS_TYPED_BEGIN (clients/c/gen_typed.py writes what follows up to SEGOPS_TYPED_END) */
/* Each runs one function as segops_run does, with the inputs in the table's order (NULL: omitted)
 * and one pointer per output: NULL leaves that output out (at least one must be asked for). */
SEGOPS_API int segops_segmented_sum_forward(segops_client *c, const segops_array *x, const segops_array *idx,
                                            int64_t num_segments, segops_array *out, segops_error *e);
SEGOPS_API int segops_segmented_sum_backward(segops_client *c, const segops_array *g_out, const segops_array *x,
                                             const segops_array *idx, int64_t num_segments, segops_array *grad_x,
                                             segops_error *e);
SEGOPS_API int segops_segmented_sum_double_backward(segops_client *c, const segops_array *gg_x,
                                                    const segops_array *g_out, const segops_array *x,
                                                    const segops_array *idx, int64_t num_segments,
                                                    segops_array *grad_g_out, segops_error *e);
SEGOPS_API int segops_segmented_dot_forward(segops_client *c, const segops_array *x, const segops_array *y,
                                            const segops_array *idx, int64_t num_segments, segops_array *out,
                                            segops_error *e);
SEGOPS_API int segops_segmented_dot_backward(segops_client *c, const segops_array *g_out, const segops_array *x,
                                             const segops_array *y, const segops_array *idx, int64_t num_segments,
                                             segops_array *grad_x, segops_array *grad_y, segops_error *e);
SEGOPS_API int segops_segmented_dot_double_backward(segops_client *c, const segops_array *gg_x,
                                                    const segops_array *gg_y, const segops_array *g_out,
                                                    const segops_array *x, const segops_array *y,
                                                    const segops_array *idx, int64_t num_segments,
                                                    segops_array *grad_g_out, segops_array *grad_x,
                                                    segops_array *grad_y, segops_error *e);
SEGOPS_API int segops_segmented_mul_forward(segops_client *c, const segops_array *x, const segops_array *y,
                                            const segops_array *idx, int64_t num_segments, segops_array *out,
                                            segops_error *e);
SEGOPS_API int segops_segmented_mul_backward(segops_client *c, const segops_array *g_out, const segops_array *x,
                                             const segops_array *y, const segops_array *idx, int64_t num_segments,
                                             segops_array *grad_x, segops_array *grad_y, segops_error *e);
SEGOPS_API int segops_segmented_mul_double_backward(segops_client *c, const segops_array *gg_x,
                                                    const segops_array *gg_y, const segops_array *g_out,
                                                    const segops_array *x, const segops_array *y,
                                                    const segops_array *idx, int64_t num_segments,
                                                    segops_array *grad_g_out, segops_array *grad_x,
                                                    segops_array *grad_y, segops_error *e);
SEGOPS_API int segops_segmented_mean_forward(segops_client *c, const segops_array *x, const segops_array *idx,
                                             int64_t num_segments, segops_array *out, segops_error *e);
SEGOPS_API int segops_segmented_mean_backward(segops_client *c, const segops_array *g_out, const segops_array *x,
                                              const segops_array *idx, int64_t num_segments, segops_array *grad_x,
                                              segops_error *e);
SEGOPS_API int segops_segmented_mean_double_backward(segops_client *c, const segops_array *gg_x,
                                                     const segops_array *g_out, const segops_array *x,
                                                     const segops_array *idx, int64_t num_segments,
                                                     segops_array *grad_g_out, segops_error *e);
SEGOPS_API int segops_segmented_rms_norm_forward(segops_client *c, const segops_array *x, const segops_array *idx,
                                                 int64_t num_segments, segops_array *out, segops_error *e);
SEGOPS_API int segops_segmented_rms_norm_backward(segops_client *c, const segops_array *g_out, const segops_array *x,
                                                  const segops_array *idx, int64_t num_segments, segops_array *grad_x,
                                                  segops_error *e);
SEGOPS_API int segops_segmented_rms_norm_double_backward(segops_client *c, const segops_array *gg_x,
                                                         const segops_array *g_out, const segops_array *x,
                                                         const segops_array *idx, int64_t num_segments,
                                                         segops_array *grad_g_out, segops_array *grad_x,
                                                         segops_error *e);
SEGOPS_API int segops_segmented_matvec_forward(segops_client *c, const segops_array *v, const segops_array *m,
                                               const segops_array *idx, int64_t num_segments, segops_array *out,
                                               segops_error *e);
SEGOPS_API int segops_segmented_matvec_backward(segops_client *c, const segops_array *g_out, const segops_array *v,
                                                const segops_array *m, const segops_array *idx, int64_t num_segments,
                                                segops_array *grad_v, segops_array *grad_m, segops_error *e);
SEGOPS_API int segops_segmented_matvec_double_backward(segops_client *c, const segops_array *gg_v,
                                                       const segops_array *gg_m, const segops_array *g_out,
                                                       const segops_array *v, const segops_array *m,
                                                       const segops_array *idx, int64_t num_segments,
                                                       segops_array *grad_g_out, segops_array *grad_v,
                                                       segops_array *grad_m, segops_error *e);
SEGOPS_API int segops_segmented_max_forward(segops_client *c, const segops_array *x, const segops_array *idx,
                                            int64_t num_segments, segops_array *out, segops_error *e);
SEGOPS_API int segops_segmented_max_backward(segops_client *c, const segops_array *g_out, const segops_array *x,
                                             const segops_array *idx, int64_t num_segments, segops_array *grad_x,
                                             segops_error *e);
SEGOPS_API int segops_segmented_max_double_backward(segops_client *c, const segops_array *gg_x,
                                                    const segops_array *g_out, const segops_array *x,
                                                    const segops_array *idx, int64_t num_segments,
                                                    segops_array *grad_g_out, segops_array *grad_x, segops_error *e);
SEGOPS_API int segops_segmented_min_forward(segops_client *c, const segops_array *x, const segops_array *idx,
                                            int64_t num_segments, segops_array *out, segops_error *e);
SEGOPS_API int segops_segmented_min_backward(segops_client *c, const segops_array *g_out, const segops_array *x,
                                             const segops_array *idx, int64_t num_segments, segops_array *grad_x,
                                             segops_error *e);
SEGOPS_API int segops_segmented_min_double_backward(segops_client *c, const segops_array *gg_x,
                                                    const segops_array *g_out, const segops_array *x,
                                                    const segops_array *idx, int64_t num_segments,
                                                    segops_array *grad_g_out, segops_array *grad_x, segops_error *e);
/* SEGOPS_TYPED_END */

#ifdef __cplusplus
}
#endif

#endif

/* prepare.h: the decoded request (what a codec produces) and its validation + shape inference
 * against the op table (proto/API.md, Validation). Nothing here touches a backend. */
#ifndef SEGOPS_PREPARE_H
#define SEGOPS_PREPARE_H

#include "ops.h"

#define SEGOPS_MAX_REQ_ARGS 16

typedef struct {
  const char *name; /* borrowed, not NUL-terminated */
  size_t name_len;
  segops_tensor t; /* t.data borrowed (usually points into the request body) */
  /* A tensor by reference ({"shm": {"region", "offset"}} instead of "data"): t.data is NULL and
   * t.nbytes 0 until the server resolves it in its shared-memory registry (server/shm/shm_io.h),
   * for shm_bytes bytes, prod(shape) * itemsize, when shm_sized (not when a dimension is negative:
   * then it is never resolved, and prepare refuses the shape). */
  const char *shm_region; /* borrowed, not NUL-terminated; NULL for inline data */
  size_t shm_region_len;
  uint64_t shm_offset;
  uint64_t shm_bytes;
  bool shm_sized;
} segops_named_tensor;

/* An output asked into a shared-memory region ("outputs_shm": {name: {"region", "offset"}}). */
typedef struct {
  const char *name, *region; /* borrowed, not NUL-terminated */
  size_t len, region_len;
  uint64_t offset;
  uint64_t byte_size; /* the bytes the client set aside (OIP's shared_memory_byte_size), */
  bool has_byte_size; /* checked against the output's size when given */
} segops_output_shm;

typedef enum {
  SEGOPS_NS_ABSENT = 0, /* no num_segments key */
  SEGOPS_NS_INT,        /* an integer; value in ns_value, or ns_overflow when outside int64 */
  SEGOPS_NS_NOT_INT     /* present but not an integer (float, string, ...) */
} segops_ns_kind;

/* A request as decoded from the wire, before validation. Everything is borrowed from the
 * decoder's storage and must outlive segops_prepare's use of it (and the call's, for inputs). */
typedef struct {
  segops_op op;
  segops_pass pass;
  segops_named_tensor args[SEGOPS_MAX_REQ_ARGS]; /* every tensor-valued key, idx included */
  int nargs;
  segops_ns_kind ns_kind;
  int64_t ns_value;
  bool ns_overflow;
  uint32_t owner;     /* the client's uid + 1 (0: unknown): validated-idx cache entries are per owner */
  bool has_dtype;     /* a request-level float dtype was given (JSON's top-level "dtype") */
  segops_dtype dtype; /* that dtype; the call's dtype when no float tensor fixes it (else float64) */
  bool has_outputs;   /* an "outputs" key was given */
  int n_outputs;
  struct {
    const char *name;
    size_t len;
  } outputs[SEGOPS_MAX_OUTPUTS * 2];
  int n_outputs_shm;
  segops_output_shm outputs_shm[SEGOPS_MAX_OUTPUTS * 2];
  /* The caller points call.out at places of its own after segops_prepare (the native channel's
   * outputs in the client's memory): no out_buf is allocated and call.out stays NULL. */
  bool outputs_placed;
} segops_request;

typedef struct {
  int64_t max_elements;     /* per tensor, in elements (N*3 for vec3) */
  int64_t max_segments;     /* bound on num_segments */
  int64_t max_output_bytes; /* the requested outputs together; 0 = no bound beyond max_elements */
} segops_limits;

/* A prepared call plus what it owns. out_* describe each output of the row; requested[k]
 * says whether output k is computed (then call.out[k] points into out_buf). */
typedef struct {
  segops_call call;
  bool requested[SEGOPS_MAX_OUTPUTS];
  int out_ndim[SEGOPS_MAX_OUTPUTS];
  int64_t out_shape[SEGOPS_MAX_OUTPUTS][SEGOPS_MAX_NDIM];
  size_t out_nbytes[SEGOPS_MAX_OUTPUTS];
  void *idx_buf;                     /* owned: aligned/narrowed copy of idx, or NULL when idx was usable in place */
  struct segops_idx_entry *idx_hold; /* held: the validated-idx cache's copy call.idx points to, or NULL */
  void *out_buf;                     /* owned: one 64-byte-aligned block for all requested outputs (hostbuf.h) */
} segops_prepared;

/* Validates req against the table and the limits (proto/API.md, Validation) and fills *p, allocating the
 * requested outputs (uninitialised: the backend writes every element) unless req->outputs_placed. On error returns a
 * negative SEGOPS_E_* code (INVALID_ARGUMENT, TOO_LARGE or NOMEM), writes a message naming
 * op, argument and rule into err, and leaves *p owning nothing.
 * Inputs in p->call stay borrowed from req's tensors. */
int segops_prepare(const segops_request *req, const segops_limits *lim, segops_prepared *p, char *err, size_t errlen);

/* Frees what p owns (idx_buf, out_buf). Accepts NULL and a zeroed p. */
void segops_prepared_free(segops_prepared *p);

/* Allocates nbytes (at least 1) aligned to 64 bytes; free with free(). NULL on failure. */
void *segops_aligned_alloc(size_t nbytes);

#endif

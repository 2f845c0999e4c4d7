/* codec_record.h: the neutral tensor record that the decoders (msgpack, JSON, the OIP) and the native
 * channel's descriptor check produce, and the one function that turns a record into a checked tensor.
 * The decoders only tokenize: what a tensor obeys on its own (a known dtype, at most three dimensions,
 * numbers that convert to its dtype, the bytes a shared-memory reference covers) is checked here, for
 * every wire alike; what a call obeys (names, shapes, sizes, idx values) is segops_prepare's. */
#ifndef SEGOPS_CODEC_RECORD_H
#define SEGOPS_CODEC_RECORD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "codec.h"

/* Whose words a message uses: v1 (msgpack and JSON) names dtypes "float32", ..., the OIP "FP32", ...,
 * and the native channel by number. Nothing else differs between them. Each wire brings its own
 * words, so the record check knows none: v1's and the native channel's are defined beside the
 * codec's helpers (codec_common.c), the OIP's with its decoder (oip.h: SEGOPS_WIRE_OIP). */
typedef struct {
  const char *(*dtype_name)(segops_dtype dt); /* the wire's name of a dtype, for parsing and messages */
  const char *field;                          /* after an argument's name in a message: "" or ".datatype" */
  const char *noun;                           /* what the wire calls a dtype: "dtype", "datatype" */
} segops_wire_words;
typedef const segops_wire_words *segops_wire;
extern const segops_wire_words segops_wire_v1, segops_wire_native;
#define SEGOPS_WIRE_V1 (&segops_wire_v1)
#define SEGOPS_WIRE_NATIVE (&segops_wire_native)

/* One number of a list as the wire holds it: an integer, a real, or something else (a string, null). */
typedef enum { SEGOPS_NUM_INT, SEGOPS_NUM_REAL, SEGOPS_NUM_OTHER } segops_num_kind;
typedef struct {
  segops_num_kind kind;
  int64_t i;
  double d;
} segops_wire_number;

/* Visits the numbers of a list in row-major order: f(cls, i, v) for the i-th, stopping at (and
 * returning) f's first non-zero result. The decoder that made the record provides it. */
typedef int (*segops_number_fn)(void *cls, size_t i, const segops_wire_number *v);
typedef int (*segops_numbers_visit)(const void *list, segops_number_fn f, void *cls);

/* Where a tensor's bytes come from. */
typedef enum {
  SEGOPS_REC_BYTES,   /* inline bytes, borrowed (a msgpack bin, the OIP's binary data, a native pool) */
  SEGOPS_REC_NUMBERS, /* a list of numbers to materialise in the dtype (JSON) */
  SEGOPS_REC_SHM      /* a reference into a registered shared-memory region */
} segops_rec_source;

/* dtype_code values that are not a segops_dtype: the dtype follows from the request. */
#define SEGOPS_REC_DTYPE_CALL (-1) /* the call's float dtype (JSON's top-level "dtype"; float64 by default) */
#define SEGOPS_REC_DTYPE_INT (-2)  /* int32, or int64 when a value needs it (JSON's bare idx list) */

/* A tensor as the wire gave it. Every pointer is borrowed from the decoder's storage. */
typedef struct {
  const char *name; /* not NUL-terminated */
  size_t name_len;
  const char *dtype_text; /* the wire's dtype name (not NUL-terminated); NULL: dtype_code says */
  size_t dtype_len;
  int64_t dtype_code;             /* a segops_dtype, SEGOPS_REC_DTYPE_*, or any number a peer sent (refused) */
  size_t ndim;                    /* dimensions as the wire gave them: more than SEGOPS_MAX_NDIM is refused, */
  bool ndim_open;                 /* and a nested list counted this far only goes deeper still */
  int64_t shape[SEGOPS_MAX_NDIM]; /* the first min(ndim, SEGOPS_MAX_NDIM) are set */
  segops_rec_source src;
  /* SEGOPS_REC_BYTES */
  const void *bytes;
  size_t nbytes;
  bool shared; /* another process may write them while the request runs (segops_tensor.shared) */
  /* SEGOPS_REC_NUMBERS: count numbers; nested: a bare nested list, whose numbers are named x[i][j] */
  const void *list;
  size_t count;
  segops_numbers_visit visit;
  bool nested;
  /* SEGOPS_REC_SHM: offset into region; has_byte_size: the size the client declared (the OIP's
   * shared_memory_byte_size), which must be the tensor's */
  const char *region;
  size_t region_len;
  uint64_t offset;
  bool has_byte_size;
  uint64_t byte_size;
} segops_tensor_record;

/* What a check needs besides the record. */
typedef struct {
  segops_wire wire;
  segops_op op;
  segops_pass pass;
  segops_dtype call_dtype; /* what SEGOPS_REC_DTYPE_CALL stands for */
  segops_decoded *store;   /* owns the numbers a record materialises (segops_decoded_alloc) */
} segops_record_ctx;

/* Turns record r into the checked tensor *out: its dtype known (by the wire's name or code) and its
 * rank at most SEGOPS_MAX_NDIM; its numbers materialised into c->store, each a number that converts
 * to the dtype exactly enough (integers for integer dtypes, in range for int32 and float32); a
 * shared-memory reference sized, shm_bytes, to prod(shape) * itemsize (equal to the declared size
 * where the client declared one; left unsized, shm_sized false, when a dimension is negative: prepare
 * refuses the shape), and resolved later by the server (shm_io.h). out's pointers borrow r's (and c->store's).
 * Returns SEGOPS_OK, or an error whose message names the op, the argument and the rule; a tensor
 * refused under a name the function does not take is reported as that unknown argument. */
int segops_record_check(const segops_record_ctx *c, const segops_tensor_record *r, segops_named_tensor *out, char *err,
                        size_t errlen);

/* The request-level float dtype, by the wire's name (text, len) or, with text NULL, by code: JSON's
 * top-level "dtype" and the native request's dtype field. Returns SEGOPS_OK with *dt set, or an error. */
int segops_record_call_dtype(segops_wire wire, segops_op op, const char *text, size_t len, int64_t code,
                             segops_dtype *dt, char *err, size_t errlen);

/* A request as a decoder tokenized it: its tensors as records, in the order the body gave them, and
 * the top-level "dtype" where the wire has one. The request's other fields (num_segments, outputs,
 * outputs_shm) the decoder sets in the segops_decoded itself. */
typedef struct {
  segops_tensor_record rec[SEGOPS_MAX_REQ_ARGS];
  int n;
  const char *dtype_text; /* NULL: none given */
  size_t dtype_len;
} segops_records;

/* Finishes out->req from a tokenized request: the call's dtype, then every record through
 * segops_record_check into out->req.args. With copy_strings, every name and region name the request
 * borrows (records, outputs, outputs_shm) is first copied into storage out owns, so that the
 * decoder's tree may go. On error out may own storage: the caller frees it. */
int segops_records_finish(segops_wire wire, segops_records *rs, bool copy_strings, segops_decoded *out, char *err,
                          size_t errlen);

#endif

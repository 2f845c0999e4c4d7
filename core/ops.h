/* ops.h: the op table (8 ops x 3 passes) and the types every layer shares: dtypes, tensors,
 * argument descriptors and the prepared call a backend runs. */
#ifndef SEGOPS_OPS_H
#define SEGOPS_OPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum {
#define SEGOPS_OP(e, name) SEGOPS_OP_##e,
#include "ops.def"
#undef SEGOPS_OP
  SEGOPS_OP_COUNT
} segops_op;

typedef enum {
#define SEGOPS_PASS(e, name) SEGOPS_PASS_##e,
#include "ops.def"
#undef SEGOPS_PASS
  SEGOPS_PASS_COUNT
} segops_pass;

_Static_assert(SEGOPS_OP_COUNT == 8, "proto/API.md defines eight ops");
_Static_assert(SEGOPS_PASS_COUNT == 3, "proto/API.md defines three passes");

/* segops_dtype (SEGOPS_F32, SEGOPS_F64, SEGOPS_I32, SEGOPS_I64): proto/segops_types.h, shared with libsegops. */
#include "segops_types.h"

/* Shape kinds of the table. F is the call's feature shape (the trailing shape of its rows, any
 * rank up to SEGOPS_MAX_NDIM - 1, F = () included) and w = prod(F) the width of a row.
 *   ELEM     (N,*F)                                 SEG      (S,*F)
 *   ELEM3    (N,3) always                           SEG1     (S,) always
 *   MAT      (S,3,3)                                IDX      (N,) int32/int64
 *   SEG1F    (S,) or (S,*F) (mul's y: scales each row, or multiplies element-wise) */
typedef enum {
  SEGOPS_SH_ELEM,
  SEGOPS_SH_ELEM3,
  SEGOPS_SH_SEG,
  SEGOPS_SH_SEG1,
  SEGOPS_SH_MAT,
  SEGOPS_SH_SEG1F
} segops_shape_kind;
/* Values in one row (one segment) of the widest segment shape, (S,3,3): what a backend reads of
 * segment s per segment input (tests/core/test_table_capacity.c checks every row's kinds). */
#define SEGOPS_SEG_ROW_MAX 9

/* How an input is used by its function:
 *   REQ      read by the formula, must be given
 *   COTAN    a double-backward cotangent gg_a: may be omitted, meaning zeros
 *   UNREAD   not read by the formula: may be omitted, validated when given */
typedef enum { SEGOPS_ARG_REQ, SEGOPS_ARG_COTAN, SEGOPS_ARG_UNREAD } segops_arg_use;

/* SEGOPS_MAX_INPUTS, SEGOPS_MAX_OUTPUTS, SEGOPS_MAX_NDIM: segops_types.h. */

typedef struct {
  const char *name;
  segops_shape_kind shape;
  segops_arg_use use;
} segops_arg_desc;

typedef struct {
  const char *name;
  segops_shape_kind shape;
} segops_out_desc;

/* What a function's element outputs (shapes ELEM, ELEM3) read of their segment s = idx[i],
 * beyond inputs at i and segment rows at s. It decides what a backend plans before them:
 *   NONE    nothing: they are a gather in element order, independent of any reduction
 *   COUNTS  c_s (mean backward): segment offsets, no reduction
 *   NORMS   values of the segment's own reduction (rms_norm's inv_s, q_s): the reduction
 *           (visit + finish) runs first and hands n_segval values per segment to post */
typedef enum { SEGOPS_READS_NONE = 0, SEGOPS_READS_COUNTS, SEGOPS_READS_NORMS } segops_elem_reads;

/* One row of the table: one function (op, pass), made from its ops.def SEGOPS_FN row (the plan
 * facts: vec3_only, elem_reads, n_acc, n_segval) and its arguments in ops.c. Inputs are listed
 * in the order of proto/API.md: cotangents, then g_out, then the forward inputs. idx and
 * num_segments are implicit. Outputs of a segment shape (SEG, SEG1, MAT: segops_shape_is_segment)
 * are written by the reduction's finish; outputs of an element shape by post (elem_reads NORMS)
 * or gather (NONE, COUNTS). The phase names are those of segops_rowmath.h. */
typedef struct {
  segops_op op;
  segops_pass pass;
  const char *c_name; /* ops.def's C name of the function, e.g. "sum_forward" */
  int n_in, n_out;
  segops_arg_desc in[SEGOPS_MAX_INPUTS];
  segops_out_desc out[SEGOPS_MAX_OUTPUTS];
  bool vec3_only; /* rows fixed at (N,3) (matvec); else any (N,*F) */
  segops_elem_reads elem_reads;
  /* Accumulators per segment of the reduction (double each), for width 1 and width 3:
   * n_acc[width == 3]; at another width segops_fn_acc. 0 = the function has no reduction. */
  int n_acc[2];
  /* Segment values finish hands to post (rms_norm backward 1, double backward 2; max and min
   * backward 1 per column: segops_fn_segval), else 0. */
  int n_segval;
} segops_fn_desc;

/* Capacities derived from the rows of ops.def, for whatever sizes per-segment storage at compile
 * time (the CPU drivers' accumulator and segment-value arrays): SEGOPS_FN_MAX_ACC, the most
 * accumulators per segment of any row at either width, and SEGOPS_FN_MAX_SEGVAL, the most segment
 * values finish hands to post at width 1 or 3 (3 x n_segval for a row whose values are per
 * column). A row that needs more raises them: no layer keeps a fixed limit of its own. (Each is
 * the size of a union of one char array per row, n + 1 bytes: an integer constant in C and C++.) */
#define SEGOPS_FN(o, p, name, vec3, reads, acc1, acc3, nsv) char name[((acc1) > (acc3) ? (acc1) : (acc3)) + 1];
typedef union {
#include "ops.def"
} segops_fn_acc_capacity_;
#undef SEGOPS_FN
#define SEGOPS_FN(o, p, name, vec3, reads, acc1, acc3, nsv) \
  char name[((acc1) > 0 && (acc3) == 3 * (acc1) ? 3 * (nsv) : (nsv)) + 1];
typedef union {
#include "ops.def"
} segops_fn_segval_capacity_;
#undef SEGOPS_FN
#define SEGOPS_FN_MAX_ACC ((int)sizeof(segops_fn_acc_capacity_) - 1)
#define SEGOPS_FN_MAX_SEGVAL ((int)sizeof(segops_fn_segval_capacity_) - 1)

/* Which phases a call runs, derived from its row and the outputs it asks for (bit k of
 * `requested` = output k). Both backends plan from this; a phase with nothing to write is off. */
typedef struct {
  unsigned seg_outs;  /* requested outputs written by finish (segment shapes) */
  unsigned elem_outs; /* requested outputs written by post or gather (element shapes) */
  bool reduce;        /* visit + finish over every segment: seg_outs, or post needs segment values */
  bool post;          /* elem_outs read segment values (elem_reads NORMS) */
  bool gather;        /* elem_outs need no reduction (elem_reads NONE or COUNTS) */
  bool counts;        /* gather reads c_s (elem_reads COUNTS) */
} segops_plan;
segops_plan segops_plan_of(const segops_fn_desc *fn, unsigned requested);

/* Lookups in the table; all returned pointers and strings are static (borrowed, never freed). */
const segops_fn_desc *segops_fn(segops_op op, segops_pass pass);
const char *segops_op_name(segops_op op);
const char *segops_pass_name(segops_pass pass);
/* Parses a wire name of len bytes (not NUL-terminated); returns the enum or -1. */
int segops_op_parse(const char *s, size_t len);
int segops_pass_parse(const char *s, size_t len);

const char *segops_dtype_name(segops_dtype dt);
int segops_dtype_parse(const char *s, size_t len); /* -1 if unknown */
size_t segops_dtype_size(segops_dtype dt);

/* A tensor view. data is borrowed and MAY BE UNALIGNED (msgpack bin payloads are read in
 * place): readers use memcpy-style loads or copy. Row-major, C-contiguous. */
typedef struct {
  segops_dtype dtype;
  int ndim;
  int64_t shape[SEGOPS_MAX_NDIM];
  const void *data;
  size_t nbytes; /* bytes the wire carried for data; validated against shape x itemsize */
  /* data lies in memory that another process may write while the request runs (a client's
   * shared-memory region): prepare copies what memory safety rests on (idx) as it checks it,
   * so the backend never reads values that were not the ones checked. */
  bool shared;
} segops_tensor;

/* True for the shapes indexed by segment (SEG, SEG1, SEG1F, MAT): outputs a reduction writes. */
static inline bool segops_shape_is_segment(segops_shape_kind k) {
  return k == SEGOPS_SH_SEG || k == SEGOPS_SH_SEG1 || k == SEGOPS_SH_SEG1F || k == SEGOPS_SH_MAT;
}

/* The shape pattern of a kind as text, e.g. "(N,3)"; width 0 = any F ("(N,*F)"), 1 or 3 = F () or
 * (3,). Static. */
const char *segops_shape_text(segops_shape_kind k, int width);
/* Number of elements of a shape kind at row width w (N*w, S*w, S, S*9; SEG1F: its (S,) form),
 * INT64_MAX when that overflows. */
int64_t segops_shape_count(segops_shape_kind k, int64_t width, int64_t n, int64_t s);
/* Fills shape/ndim of a shape kind for F = () (width 1) or F = (3,) (width 3); returns ndim. A
 * call of any F: segops_call_dims. */
int segops_shape_dims(segops_shape_kind k, int width, int64_t n, int64_t s, int64_t shape[SEGOPS_MAX_NDIM]);

/* A validated call, ready for a backend. Produced by segops_prepare (prepare.h).
 * Inputs are indexed like the row's `in`, outputs like its `out`.
 *   in[k]  NULL: an omitted COTAN (zeros) or UNREAD input. Else borrowed host memory,
 *          possibly unaligned, of segops_call_count(...) elements of `dtype`.
 *   out[k] NULL: output not requested. Else host memory, aligned to 64 bytes, owned by whoever
 *          prepared the call, of segops_call_count(...) elements; the backend writes every
 *          element (zeros included).
 *   idx    int32, aligned, every value in [0, s). idx_sorted: non-decreasing. */
typedef struct segops_call {
  const segops_fn_desc *fn;
  segops_dtype dtype;         /* SEGOPS_F32 or SEGOPS_F64 */
  int64_t width;              /* w = prod(F), the values of one row (0 allowed); 3 for matvec */
  int nf;                     /* F = f[0 .. nf): the trailing shape of the (N,*F) and (S,*F) arguments; */
  int64_t f[SEGOPS_MAX_NDIM]; /* read only for shapes (segops_call_dims), backends need width */
  bool y_wide;                /* mul: y, gg_y and grad_y are (S,*F), not (S,) (SEGOPS_SH_SEG1F) */
  int64_t n, s;
  const int32_t *idx;
  bool idx_sorted;
  bool idx_hashed; /* idx_hash identifies idx's values: segops_hash_idx (hash.h) of the bytes of the
                    * request's idx they were checked from (int32 or int64; prepare.c) */
  uint64_t idx_hash[2];
  const void *in[SEGOPS_MAX_INPUTS];
  void *out[SEGOPS_MAX_OUTPUTS];
} segops_call;

/* The shape of kind k in call c (its n, s, F and y_wide); returns ndim. */
int segops_call_dims(const segops_call *c, segops_shape_kind k, int64_t shape[SEGOPS_MAX_NDIM]);
/* The elements of kind k in call c (its n, s, width and y_wide), INT64_MAX when that overflows. */
int64_t segops_call_count(const segops_call *c, segops_shape_kind k);
/* Accumulators per segment of function fn at row width w (mul: y_wide, y (S,*F)): n_acc[0] at
 * width 1, n_acc[1] at 3, per column (w x n_acc[0]) for a row that sums rows, else n_acc[1]. */
int64_t segops_fn_acc(const segops_fn_desc *fn, int64_t w, bool y_wide);
/* Segment values per segment that finish hands to post at row width w: n_segval, or w x n_segval
 * for a row whose accumulators are per column (max and min backward: one arg element per column). */
int64_t segops_fn_segval(const segops_fn_desc *fn, int64_t w);

#endif

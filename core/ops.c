/* ops.c: THE function table (one row per op x pass) and the name lookups derived from ops.def. */
#include "ops.h"

#include <string.h>

#define E SEGOPS_SH_ELEM
#define E3 SEGOPS_SH_ELEM3
#define G SEGOPS_SH_SEG
#define G1 SEGOPS_SH_SEG1
#define M SEGOPS_SH_MAT
#define REQ SEGOPS_ARG_REQ
#define COT SEGOPS_ARG_COTAN
#define UNR SEGOPS_ARG_UNREAD
/* The table reads as a table: keep clang-format away from it. */
// clang-format off
/* Each function's arguments, by its ops.def c_name, row by row of proto/API.md (Formulas). Inputs:
 * cotangents first (gg_<a> in forward order), then g_out, then the forward inputs. An input the
 * formula does not read is UNR; a cotangent is COT. What the passes need (vec3_only, elem_reads,
 * n_acc, n_segval) is the function's ops.def row. */
#define ARGS_sum_forward .n_in = 1, .in = {{"x", E, REQ}}, .n_out = 1, .out = {{"out", G}}
#define ARGS_sum_backward .n_in = 2, .in = {{"g_out", G, REQ}, {"x", E, UNR}}, .n_out = 1, .out = {{"grad_x", E}}
#define ARGS_sum_double_backward .n_in = 3, .in = {{"gg_x", E, COT}, {"g_out", G, UNR}, {"x", E, UNR}}, \
    .n_out = 1, .out = {{"grad_g_out", G}}

#define ARGS_dot_forward .n_in = 2, .in = {{"x", E, REQ}, {"y", E, REQ}}, .n_out = 1, .out = {{"out", G1}}
#define ARGS_dot_backward .n_in = 3, .in = {{"g_out", G1, REQ}, {"x", E, REQ}, {"y", E, REQ}}, .n_out = 2, \
    .out = {{"grad_x", E}, {"grad_y", E}}
#define ARGS_dot_double_backward .n_in = 5, \
    .in = {{"gg_x", E, COT}, {"gg_y", E, COT}, {"g_out", G1, REQ}, {"x", E, REQ}, {"y", E, REQ}}, .n_out = 3, \
    .out = {{"grad_g_out", G1}, {"grad_x", E}, {"grad_y", E}}

#define ARGS_mul_forward .n_in = 2, .in = {{"x", E, REQ}, {"y", G1, REQ}}, .n_out = 1, .out = {{"out", E}}
#define ARGS_mul_backward .n_in = 3, .in = {{"g_out", E, REQ}, {"x", E, REQ}, {"y", G1, REQ}}, .n_out = 2, \
    .out = {{"grad_x", E}, {"grad_y", G1}}
#define ARGS_mul_double_backward .n_in = 5, \
    .in = {{"gg_x", E, COT}, {"gg_y", G1, COT}, {"g_out", E, REQ}, {"x", E, REQ}, {"y", G1, REQ}}, .n_out = 3, \
    .out = {{"grad_g_out", E}, {"grad_x", E}, {"grad_y", G1}}

#define ARGS_mean_forward .n_in = 1, .in = {{"x", E, REQ}}, .n_out = 1, .out = {{"out", G}}
#define ARGS_mean_backward .n_in = 2, .in = {{"g_out", G, REQ}, {"x", E, UNR}}, .n_out = 1, .out = {{"grad_x", E}}
#define ARGS_mean_double_backward .n_in = 3, .in = {{"gg_x", E, COT}, {"g_out", G, UNR}, {"x", E, UNR}}, \
    .n_out = 1, .out = {{"grad_g_out", G}}

#define ARGS_rms_norm_forward .n_in = 1, .in = {{"x", E3, REQ}}, .n_out = 1, .out = {{"out", G1}}
#define ARGS_rms_norm_backward .n_in = 2, .in = {{"g_out", G1, REQ}, {"x", E3, REQ}}, .n_out = 1, \
    .out = {{"grad_x", E3}}
#define ARGS_rms_norm_double_backward .n_in = 3, .in = {{"gg_x", E3, COT}, {"g_out", G1, REQ}, {"x", E3, REQ}}, \
    .n_out = 2, .out = {{"grad_g_out", G1}, {"grad_x", E3}}

#define ARGS_matvec_forward .n_in = 2, .in = {{"v", E3, REQ}, {"m", M, REQ}}, .n_out = 1, .out = {{"out", E3}}
#define ARGS_matvec_backward .n_in = 3, .in = {{"g_out", E3, REQ}, {"v", E3, REQ}, {"m", M, REQ}}, .n_out = 2, \
    .out = {{"grad_v", E3}, {"grad_m", M}}
#define ARGS_matvec_double_backward .n_in = 5, \
    .in = {{"gg_v", E3, COT}, {"gg_m", M, COT}, {"g_out", E3, REQ}, {"v", E3, REQ}, {"m", M, REQ}}, .n_out = 3, \
    .out = {{"grad_g_out", E3}, {"grad_v", E3}, {"grad_m", M}}

/* One row per ops.def SEGOPS_FN: its plan facts, then its arguments (ARGS_<c_name> above: a row
 * without them does not compile). */
static const segops_fn_desc FN_TABLE[SEGOPS_OP_COUNT][SEGOPS_PASS_COUNT] = {
#define SEGOPS_FN(o, p, name, vec3, reads, acc1, acc3, nsv)                                              \
    [SEGOPS_OP_##o][SEGOPS_PASS_##p] = {.op = SEGOPS_OP_##o, .pass = SEGOPS_PASS_##p, .c_name = #name,     \
                                        .vec3_only = (vec3), .elem_reads = SEGOPS_READS_##reads,           \
                                        .n_acc = {(acc1), (acc3)}, .n_segval = (nsv), ARGS_##name},
#include "ops.def"
#undef SEGOPS_FN
};

// clang-format on

static const char *const OP_NAMES[SEGOPS_OP_COUNT] = {
#define SEGOPS_OP(e, name) name,
#include "ops.def"
#undef SEGOPS_OP
};

static const char *const PASS_NAMES[SEGOPS_PASS_COUNT] = {
#define SEGOPS_PASS(e, name) name,
#include "ops.def"
#undef SEGOPS_PASS
};

static const char *const DTYPE_NAMES[SEGOPS_DTYPE_COUNT] = {"float32", "float64", "int32", "int64"};
static const size_t DTYPE_SIZES[SEGOPS_DTYPE_COUNT] = {4, 8, 4, 8};

const segops_fn_desc *segops_fn(segops_op op, segops_pass pass) {
  if ((unsigned)op >= SEGOPS_OP_COUNT || (unsigned)pass >= SEGOPS_PASS_COUNT) return NULL;
  return &FN_TABLE[op][pass];
}

const char *segops_op_name(segops_op op) { return (unsigned)op < SEGOPS_OP_COUNT ? OP_NAMES[op] : "?"; }

const char *segops_pass_name(segops_pass pass) { return (unsigned)pass < SEGOPS_PASS_COUNT ? PASS_NAMES[pass] : "?"; }

static int parse_name(const char *const *names, int count, const char *s, size_t len) {
  for (int i = 0; i < count; i++)
    if (strlen(names[i]) == len && memcmp(names[i], s, len) == 0) return i;
  return -1;
}

int segops_op_parse(const char *s, size_t len) { return parse_name(OP_NAMES, SEGOPS_OP_COUNT, s, len); }
int segops_pass_parse(const char *s, size_t len) { return parse_name(PASS_NAMES, SEGOPS_PASS_COUNT, s, len); }
int segops_dtype_parse(const char *s, size_t len) { return parse_name(DTYPE_NAMES, SEGOPS_DTYPE_COUNT, s, len); }

const char *segops_dtype_name(segops_dtype dt) { return (unsigned)dt < SEGOPS_DTYPE_COUNT ? DTYPE_NAMES[dt] : "?"; }

size_t segops_dtype_size(segops_dtype dt) { return (unsigned)dt < SEGOPS_DTYPE_COUNT ? DTYPE_SIZES[dt] : 0; }

const char *segops_shape_text(segops_shape_kind k, int width) {
  switch (k) {
    case SEGOPS_SH_ELEM:
      return width == 3 ? "(N,3)" : width == 1 ? "(N,)" : "(N,) or (N,3)";
    case SEGOPS_SH_ELEM3:
      return "(N,3)";
    case SEGOPS_SH_SEG:
      return width == 3 ? "(S,3)" : width == 1 ? "(S,)" : "(S,) or (S,3)";
    case SEGOPS_SH_SEG1:
      return "(S,)";
    case SEGOPS_SH_MAT:
      return "(S,3,3)";
  }
  return "?";
}

int segops_shape_dims(segops_shape_kind k, int width, int64_t n, int64_t s, int64_t shape[SEGOPS_MAX_NDIM]) {
  switch (k) {
    case SEGOPS_SH_ELEM:
      shape[0] = n;
      shape[1] = 3;
      return width == 3 ? 2 : 1;
    case SEGOPS_SH_ELEM3:
      shape[0] = n;
      shape[1] = 3;
      return 2;
    case SEGOPS_SH_SEG:
      shape[0] = s;
      shape[1] = 3;
      return width == 3 ? 2 : 1;
    case SEGOPS_SH_SEG1:
      shape[0] = s;
      return 1;
    case SEGOPS_SH_MAT:
      shape[0] = s;
      shape[1] = 3;
      shape[2] = 3;
      return 3;
  }
  return 0;
}

int64_t segops_shape_count(segops_shape_kind k, int width, int64_t n, int64_t s) {
  int64_t shape[SEGOPS_MAX_NDIM];
  int nd = segops_shape_dims(k, width, n, s, shape);
  int64_t c = 1;
  for (int i = 0; i < nd; i++) c *= shape[i];
  return c;
}

segops_plan segops_plan_of(const segops_fn_desc *fn, unsigned requested) {
  segops_plan p = {0};
  for (int o = 0; o < fn->n_out; o++) {
    if (!((requested >> o) & 1u)) continue;
    if (segops_shape_is_segment(fn->out[o].shape))
      p.seg_outs |= 1u << o;
    else
      p.elem_outs |= 1u << o;
  }
  p.post = p.elem_outs && fn->elem_reads == SEGOPS_READS_NORMS;
  p.gather = p.elem_outs && fn->elem_reads != SEGOPS_READS_NORMS;
  p.counts = p.gather && fn->elem_reads == SEGOPS_READS_COUNTS;
  p.reduce = p.seg_outs || p.post;
  return p;
}

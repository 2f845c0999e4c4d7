/* ops.c: THE function table (one row per op x pass) and the name lookups derived from ops.def. */
#include "ops.h"

#include <string.h>

#define E SEGOPS_SH_ELEM
#define E3 SEGOPS_SH_ELEM3
#define G SEGOPS_SH_SEG
#define G1 SEGOPS_SH_SEG1
#define Y SEGOPS_SH_SEG1F
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

#define ARGS_mul_forward .n_in = 2, .in = {{"x", E, REQ}, {"y", Y, REQ}}, .n_out = 1, .out = {{"out", E}}
#define ARGS_mul_backward .n_in = 3, .in = {{"g_out", E, REQ}, {"x", E, REQ}, {"y", Y, REQ}}, .n_out = 2, \
    .out = {{"grad_x", E}, {"grad_y", Y}}
#define ARGS_mul_double_backward .n_in = 5, \
    .in = {{"gg_x", E, COT}, {"gg_y", Y, COT}, {"g_out", E, REQ}, {"x", E, REQ}, {"y", Y, REQ}}, .n_out = 3, \
    .out = {{"grad_g_out", E}, {"grad_x", E}, {"grad_y", Y}}

#define ARGS_mean_forward .n_in = 1, .in = {{"x", E, REQ}}, .n_out = 1, .out = {{"out", G}}
#define ARGS_mean_backward .n_in = 2, .in = {{"g_out", G, REQ}, {"x", E, UNR}}, .n_out = 1, .out = {{"grad_x", E}}
#define ARGS_mean_double_backward .n_in = 3, .in = {{"gg_x", E, COT}, {"g_out", G, UNR}, {"x", E, UNR}}, \
    .n_out = 1, .out = {{"grad_g_out", G}}

#define ARGS_rms_norm_forward .n_in = 1, .in = {{"x", E, REQ}}, .n_out = 1, .out = {{"out", G1}}
#define ARGS_rms_norm_backward .n_in = 2, .in = {{"g_out", G1, REQ}, {"x", E, REQ}}, .n_out = 1, \
    .out = {{"grad_x", E}}
#define ARGS_rms_norm_double_backward .n_in = 3, .in = {{"gg_x", E, COT}, {"g_out", G1, REQ}, {"x", E, REQ}}, \
    .n_out = 2, .out = {{"grad_g_out", G1}, {"grad_x", E}}

/* max and min: the backward reads x for each column's arg element; the double backward's x term is 0. */
#define ARGS_max_forward .n_in = 1, .in = {{"x", E, REQ}}, .n_out = 1, .out = {{"out", G}}
#define ARGS_max_backward .n_in = 2, .in = {{"g_out", G, REQ}, {"x", E, REQ}}, .n_out = 1, .out = {{"grad_x", E}}
#define ARGS_max_double_backward .n_in = 3, .in = {{"gg_x", E, COT}, {"g_out", G, UNR}, {"x", E, REQ}}, \
    .n_out = 2, .out = {{"grad_g_out", G}, {"grad_x", E}}
#define ARGS_min_forward ARGS_max_forward
#define ARGS_min_backward ARGS_max_backward
#define ARGS_min_double_backward ARGS_max_double_backward

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
      return width == 3 ? "(N,3)" : width == 1 ? "(N,)" : "(N,*F)";
    case SEGOPS_SH_ELEM3:
      return "(N,3)";
    case SEGOPS_SH_SEG:
      return width == 3 ? "(S,3)" : width == 1 ? "(S,)" : "(S,*F)";
    case SEGOPS_SH_SEG1:
      return "(S,)";
    case SEGOPS_SH_SEG1F:
      return width == 1 ? "(S,)" : "(S,) or (S,*F)";
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
    case SEGOPS_SH_SEG1F:
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

/* a * b, or INT64_MAX past it (sizes are checked against limits far below). */
static int64_t mul_sat(int64_t a, int64_t b) {
  int64_t c;
  return __builtin_mul_overflow(a, b, &c) ? INT64_MAX : c;
}

int64_t segops_shape_count(segops_shape_kind k, int64_t width, int64_t n, int64_t s) {
  switch (k) {
    case SEGOPS_SH_ELEM:
      return mul_sat(n, width);
    case SEGOPS_SH_ELEM3:
      return mul_sat(n, 3);
    case SEGOPS_SH_SEG:
      return mul_sat(s, width);
    case SEGOPS_SH_SEG1:
    case SEGOPS_SH_SEG1F:
      return s;
    case SEGOPS_SH_MAT:
      return mul_sat(s, 9);
  }
  return 0;
}

/* Whether kind k of call c has the call's feature shape F as trailing dimensions. */
static bool has_features(const segops_call *c, segops_shape_kind k) {
  return k == SEGOPS_SH_ELEM || k == SEGOPS_SH_SEG || (k == SEGOPS_SH_SEG1F && c->y_wide);
}

int segops_call_dims(const segops_call *c, segops_shape_kind k, int64_t shape[SEGOPS_MAX_NDIM]) {
  if (!has_features(c, k)) return segops_shape_dims(k, 1, c->n, c->s, shape);
  shape[0] = k == SEGOPS_SH_ELEM ? c->n : c->s;
  for (int i = 0; i < c->nf && i + 1 < SEGOPS_MAX_NDIM; i++) shape[1 + i] = c->f[i];
  return 1 + c->nf;
}

int64_t segops_call_count(const segops_call *c, segops_shape_kind k) {
  if (k == SEGOPS_SH_SEG1F && c->y_wide) return mul_sat(c->s, c->width);
  return segops_shape_count(k, c->width, c->n, c->s);
}

int64_t segops_fn_acc(const segops_fn_desc *fn, int64_t w, bool y_wide) {
  if (fn->n_acc[1] == 0) return 0;
  if (fn->op == SEGOPS_OP_MUL && y_wide) return w; /* Σ g_out ⊙ x per column */
  if (w == 1) return fn->n_acc[0];
  if (fn->n_acc[0] > 0 && fn->n_acc[1] == 3 * fn->n_acc[0]) return mul_sat(w, fn->n_acc[0]); /* per column */
  return fn->n_acc[1];
}

int64_t segops_fn_segval(const segops_fn_desc *fn, int64_t w) {
  if (fn->n_acc[0] > 0 && fn->n_acc[1] == 3 * fn->n_acc[0]) return mul_sat(w, fn->n_segval); /* per column */
  return fn->n_segval;
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

/* fn_table.c: the public function ids (segops.h's SEGOPS_FN_*) as lookups in core's op table
 * (core/ops.c), compiled into the library: one id per (op, pass), op-major, as ops.def orders them. */
#include <string.h>

#include "ops.h"
#include "segops.h"

_Static_assert(SEGOPS_FN_COUNT == SEGOPS_OP_COUNT * SEGOPS_PASS_COUNT, "one function id per op and pass");
_Static_assert(SEGOPS_FN_SEGMENTED_DOT_FORWARD == SEGOPS_OP_DOT * SEGOPS_PASS_COUNT + SEGOPS_PASS_FORWARD,
               "function ids are op-major in ops.def's order");
_Static_assert(SEGOPS_FN_SEGMENTED_MATVEC_DOUBLE_BACKWARD ==
                   SEGOPS_OP_MATVEC * SEGOPS_PASS_COUNT + SEGOPS_PASS_DOUBLE_BACKWARD,
               "function ids are op-major in ops.def's order");

/* The table's row of fn, or NULL out of range. */
static const segops_fn_desc *row_of(int fn) {
  if (fn < 0 || fn >= SEGOPS_FN_COUNT) return NULL;
  return segops_fn((segops_op)(fn / SEGOPS_PASS_COUNT), (segops_pass)(fn % SEGOPS_PASS_COUNT));
}

int segops_fn_lookup(const char *op, const char *pass) {
  if (!op || !pass) return -1;
  int o = segops_op_parse(op, strlen(op)), p = segops_pass_parse(pass, strlen(pass));
  return o < 0 || p < 0 ? -1 : o * SEGOPS_PASS_COUNT + p;
}

const char *segops_fn_op(int fn) {
  const segops_fn_desc *r = row_of(fn);
  return r ? segops_op_name(r->op) : NULL;
}

const char *segops_fn_pass(int fn) {
  const segops_fn_desc *r = row_of(fn);
  return r ? segops_pass_name(r->pass) : NULL;
}

int segops_fn_inputs(int fn) {
  const segops_fn_desc *r = row_of(fn);
  return r ? r->n_in : -1;
}

int segops_fn_outputs(int fn) {
  const segops_fn_desc *r = row_of(fn);
  return r ? r->n_out : -1;
}

const char *segops_fn_input_name(int fn, int k) {
  const segops_fn_desc *r = row_of(fn);
  return r && k >= 0 && k < r->n_in ? r->in[k].name : NULL;
}

const char *segops_fn_output_name(int fn, int k) {
  const segops_fn_desc *r = row_of(fn);
  return r && k >= 0 && k < r->n_out ? r->out[k].name : NULL;
}

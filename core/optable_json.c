/* optable_json.c: segops_optable_json prints the op table (ops.def's rows and ops.c's arguments) as
 * JSON on standard output, for the generators of what restates the table outside C
 * (scripts/gen_optable.py writes proto/optable.json from it, and from that the client's table, the
 * OpenAPI enums and the example bodies). A build tool: not installed, no I/O in the core itself.
 * Format: {"ops": [wire names], "passes": [wire names], "functions": [one object per SEGOPS_FN row,
 * in ops.def's order: id, op, pass, c_name, vec3_only, elem_reads ("none", "counts", "norms"),
 * n_acc [width 1, width 3], n_segval, inputs [{name, shape, shape_text, use}], outputs [{name,
 * shape, shape_text}]]}; shape is the kind (E, E3, G, G1, M, G1F: ops.h), use "required", "cotangent"
 * or "unread" (as GET /v1/info says). */
#include <stdio.h>

#include "ops.h"

static const char *kind_code(segops_shape_kind k) {
  switch (k) {
    case SEGOPS_SH_ELEM:
      return "E";
    case SEGOPS_SH_ELEM3:
      return "E3";
    case SEGOPS_SH_SEG:
      return "G";
    case SEGOPS_SH_SEG1:
      return "G1";
    case SEGOPS_SH_MAT:
      return "M";
    case SEGOPS_SH_SEG1F:
      return "G1F";
  }
  return "?";
}

static const char *use_name(segops_arg_use u) {
  return u == SEGOPS_ARG_REQ ? "required" : u == SEGOPS_ARG_COTAN ? "cotangent" : "unread";
}

static const char *reads_name(segops_elem_reads r) {
  return r == SEGOPS_READS_COUNTS ? "counts" : r == SEGOPS_READS_NORMS ? "norms" : "none";
}

/* Every name of the table is a C identifier: printed between quotes as it is. */
static void print_function(const segops_fn_desc *fn, int id) {
  const int w = fn->vec3_only ? 3 : 0;
  printf("{\"id\": %d, \"op\": \"%s\", \"pass\": \"%s\", \"c_name\": \"%s\", \"vec3_only\": %s, ", id,
         segops_op_name(fn->op), segops_pass_name(fn->pass), fn->c_name, fn->vec3_only ? "true" : "false");
  printf("\"elem_reads\": \"%s\", \"n_acc\": [%d, %d], \"n_segval\": %d, \"inputs\": [", reads_name(fn->elem_reads),
         fn->n_acc[0], fn->n_acc[1], fn->n_segval);
  for (int k = 0; k < fn->n_in; k++)
    printf("%s{\"name\": \"%s\", \"shape\": \"%s\", \"shape_text\": \"%s\", \"use\": \"%s\"}", k ? ", " : "",
           fn->in[k].name, kind_code(fn->in[k].shape), segops_shape_text(fn->in[k].shape, w), use_name(fn->in[k].use));
  printf("], \"outputs\": [");
  for (int k = 0; k < fn->n_out; k++)
    printf("%s{\"name\": \"%s\", \"shape\": \"%s\", \"shape_text\": \"%s\"}", k ? ", " : "", fn->out[k].name,
           kind_code(fn->out[k].shape), segops_shape_text(fn->out[k].shape, w));
  printf("]}");
}

int main(void) {
  printf("{\"ops\": [");
  for (int op = 0; op < SEGOPS_OP_COUNT; op++) printf("%s\"%s\"", op ? ", " : "", segops_op_name((segops_op)op));
  printf("], \"passes\": [");
  for (int p = 0; p < SEGOPS_PASS_COUNT; p++) printf("%s\"%s\"", p ? ", " : "", segops_pass_name((segops_pass)p));
  printf("], \"functions\": [");
  int id = 0;
#define SEGOPS_FN(o, p, name, ...) \
  printf("%s", id ? ", " : "");    \
  print_function(segops_fn(SEGOPS_OP_##o, SEGOPS_PASS_##p), id++);
#include "ops.def"
#undef SEGOPS_FN
  printf("]}\n");
  return ferror(stdout) ? 1 : 0;
}

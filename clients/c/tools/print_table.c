/* print_table.c: prints core's op table (core/ops.c) one function a line, for gen_typed.py:
 *   <op> <pass> in <name>,<name>,... out <name>,...
 * in the order of the SEGOPS_FN_* ids (op-major). Built from core, so the generator reads the
 * table the library is compiled from, never a second copy of it. */
#include <stdio.h>

#include "ops.h"

int main(void) {
  for (int o = 0; o < SEGOPS_OP_COUNT; o++)
    for (int p = 0; p < SEGOPS_PASS_COUNT; p++) {
      const segops_fn_desc *fn = segops_fn((segops_op)o, (segops_pass)p);
      printf("%s %s in ", segops_op_name(fn->op), segops_pass_name(fn->pass));
      for (int k = 0; k < fn->n_in; k++) printf("%s%s", k ? "," : "", fn->in[k].name);
      printf(" out ");
      for (int k = 0; k < fn->n_out; k++) printf("%s%s", k ? "," : "", fn->out[k].name);
      printf("\n");
    }
  return 0;
}

/* optable_dump.c: prints the op table with its internals (segops_optable_json) on standard output,
 * for scripts/gen_optable.py, which writes every file that restates the table outside C. A build
 * tool: not installed. */
#include <jansson.h>
#include <stdio.h>

#include "optable_json.h"

int main(void) {
  json_t *t = segops_optable_json(true);
  int rc = t ? json_dumpf(t, stdout, JSON_COMPACT) : -1;
  json_decref(t);
  return rc || putchar('\n') == EOF || fflush(stdout) ? 1 : 0;
}

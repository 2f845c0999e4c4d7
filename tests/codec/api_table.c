/* api_table.c: prints the per-function request/response tables of proto/API.md from the op table,
 * so the document is generated, not written twice. `--check FILE` compares FILE's generated
 * section with the table and checks that every function of the table has its row in the
 * document's "Formulas" section (exit 1 on a difference); `--update FILE` rewrites the section. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops.h"
#include "slurp.h"

#define BEGIN_MARK "<!-- BEGIN generated op table: build/tests/codec/segops_api_table --update proto/API.md -->\n"
#define END_MARK "<!-- END generated op table -->\n"

static const char *use_text(segops_arg_use u) {
  switch (u) {
    case SEGOPS_ARG_REQ:
      return "required";
    case SEGOPS_ARG_COTAN:
      return "optional: zeros when omitted";
    case SEGOPS_ARG_UNREAD:
      return "optional: not read, validated when given";
  }
  return "?";
}

static size_t gen(char *buf, size_t cap) {
  size_t o = 0;
#define P(...) o += (size_t)snprintf(buf + o, o < cap ? cap - o : 0, __VA_ARGS__)
  P("%s", BEGIN_MARK);
  for (int op = 0; op < SEGOPS_OP_COUNT; op++) {
    P("\n### %s\n", segops_op_name((segops_op)op));
    for (int pass = 0; pass < SEGOPS_PASS_COUNT; pass++) {
      const segops_fn_desc *fn = segops_fn((segops_op)op, (segops_pass)pass);
      P("\n`POST /v1/%s/%s`\n\n", segops_op_name((segops_op)op), segops_pass_name((segops_pass)pass));
      P("| | name | shape | dtype | |\n|---|---|---|---|---|\n");
      for (int k = 0; k < fn->n_in; k++)
        P("| in | `%s` | %s | float32 or float64 | %s |\n", fn->in[k].name,
          segops_shape_text(fn->in[k].shape, fn->vec3_only ? 3 : 0), use_text(fn->in[k].use));
      P("| in | `idx` | (N,) | int32 or int64 | required |\n");
      P("| in | `num_segments` | integer | | required: S >= 0 |\n");
      for (int k = 0; k < fn->n_out; k++)
        P("| out | `%s` | %s | the inputs' | returned unless `outputs` leaves it out |\n", fn->out[k].name,
          segops_shape_text(fn->out[k].shape, fn->vec3_only ? 3 : 0));
    }
  }
  P("\n%s", END_MARK);
#undef P
  return o;
}

/* Every function's formula row, "| `op/pass` | formula |", in the "## Formulas" section (which
 * ends at the next "## " heading, before the generated tables). Returns how many are missing. */
static int missing_formulas(const char *doc, const char *gen_begin, const char *path) {
  const char *sec = strstr(doc, "\n## Formulas\n");
  if (!sec || sec > gen_begin) {
    fprintf(stderr, "%s: no \"## Formulas\" section before the generated tables\n", path);
    return 1;
  }
  const char *end = strstr(sec + 1, "\n## ");
  if (!end) end = gen_begin;
  int missing = 0;
  for (int op = 0; op < SEGOPS_OP_COUNT; op++)
    for (int pass = 0; pass < SEGOPS_PASS_COUNT; pass++) {
      char row[128];
      snprintf(row, sizeof row, "\n| `%s/%s` | ", segops_op_name((segops_op)op), segops_pass_name((segops_pass)pass));
      const char *hit = strstr(sec, row);
      if (!hit || hit > end) {
        fprintf(stderr, "%s: the Formulas section has no row for %s\n", path, row + 1);
        missing++;
      }
    }
  if (!missing) printf("%s: every function has its formula\n", path);
  return missing;
}

int main(int argc, char **argv) {
  static char table[1 << 16];
  size_t tlen = gen(table, sizeof table);
  if (tlen >= sizeof table) return 2;
  if (argc < 3) {
    fputs(table, stdout);
    return 0;
  }
  size_t len;
  char *doc = slurp(argv[2], &len);
  if (!doc) {
    fprintf(stderr, "cannot read %s\n", argv[2]);
    return 1;
  }
  char *b = strstr(doc, BEGIN_MARK), *e = b ? strstr(b, END_MARK) : NULL;
  if (!b || !e) {
    fprintf(stderr, "%s: generated-section markers not found\n", argv[2]);
    free(doc);
    return 1;
  }
  e += strlen(END_MARK);
  int rc = 0;
  if (!strcmp(argv[1], "--check")) {
    if ((size_t)(e - b) != tlen || memcmp(b, table, tlen)) {
      fprintf(stderr, "%s is out of date with the op table: run segops_api_table --update %s\n", argv[2], argv[2]);
      rc = 1;
    } else {
      printf("%s matches the op table\n", argv[2]);
    }
    if (missing_formulas(doc, b, argv[2])) rc = 1;
  } else if (!strcmp(argv[1], "--update")) {
    FILE *f = fopen(argv[2], "wb");
    if (!f)
      rc = 1;
    else {
      fwrite(doc, 1, (size_t)(b - doc), f);
      fwrite(table, 1, tlen, f);
      fputs(e, f);
      fclose(f);
    }
  } else {
    rc = 2;
  }
  free(doc);
  return rc;
}

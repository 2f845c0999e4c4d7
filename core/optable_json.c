/* optable_json.c: segops_optable_json renders the op table (ops.def's rows and ops.c's arguments) as
 * JSON: the one printer of the table. GET /v1/info serves it (server/http/http_info.c), the "local"
 * transport's info answers it (clients/c/src/local.c), and segops_optable_dump prints it with the
 * internals for scripts/gen_optable.py, which writes every file restating the table outside C. */
#include "optable_json.h"

#include <jansson.h>

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

/* One argument: {name, optional, use, shape (its text)}, plus "kind" (the shape kind) for a
 * table argument when internals are asked for. */
static json_t *input_json(const char *name, segops_arg_use use, const char *shape, const char *kind) {
  json_t *a = json_pack("{s:s, s:b, s:s, s:s}", "name", name, "optional", use != SEGOPS_ARG_REQ, "use", use_name(use),
                        "shape", shape);
  if (a && kind) json_object_set_new(a, "kind", json_string(kind));
  return a;
}

/* One function: {inputs, outputs, vec3_only}, as GET /v1/info serves it; with internals also its
 * id (ops.def's order), c_name, elem_reads, n_acc [width 1, width 3] and n_segval. */
static json_t *function_json(const segops_fn_desc *fn, int id, bool internals) {
  const int w = fn->vec3_only ? 3 : 0;
  json_t *in = json_array(), *out = json_array();
  for (int k = 0; k < fn->n_in; k++)
    json_array_append_new(in, input_json(fn->in[k].name, fn->in[k].use, segops_shape_text(fn->in[k].shape, w),
                                         internals ? kind_code(fn->in[k].shape) : NULL));
  json_array_append_new(in, input_json("idx", SEGOPS_ARG_REQ, "(N,)", NULL));
  json_array_append_new(in, input_json("num_segments", SEGOPS_ARG_REQ, "integer", NULL));
  for (int k = 0; k < fn->n_out; k++) {
    json_t *o = json_pack("{s:s, s:s}", "name", fn->out[k].name, "shape", segops_shape_text(fn->out[k].shape, w));
    if (o && internals) json_object_set_new(o, "kind", json_string(kind_code(fn->out[k].shape)));
    json_array_append_new(out, o);
  }
  json_t *f = json_pack("{s:o, s:o, s:b}", "inputs", in, "outputs", out, "vec3_only", fn->vec3_only);
  if (f && internals) {
    json_object_set_new(f, "id", json_integer(id));
    json_object_set_new(f, "c_name", json_string(fn->c_name));
    json_object_set_new(f, "elem_reads", json_string(reads_name(fn->elem_reads)));
    json_object_set_new(f, "n_acc", json_pack("[i, i]", fn->n_acc[0], fn->n_acc[1]));
    json_object_set_new(f, "n_segval", json_integer(fn->n_segval));
  }
  return f;
}

json_t *segops_optable_json(bool internals) {
  /* The function ids are ops.def's row order. */
  int ids[SEGOPS_OP_COUNT][SEGOPS_PASS_COUNT], id = 0;
#define SEGOPS_FN(o, p, ...) ids[SEGOPS_OP_##o][SEGOPS_PASS_##p] = id++;
#include "ops.def"
#undef SEGOPS_FN
  json_t *ops = json_object();
  for (int o = 0; ops && o < SEGOPS_OP_COUNT; o++) {
    json_t *passes = json_object();
    for (int p = 0; passes && p < SEGOPS_PASS_COUNT; p++)
      json_object_set_new(passes, segops_pass_name((segops_pass)p),
                          function_json(segops_fn((segops_op)o, (segops_pass)p), ids[o][p], internals));
    json_object_set_new(ops, segops_op_name((segops_op)o), passes);
  }
  return ops;
}

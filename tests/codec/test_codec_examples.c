/* test_codec_examples.c: every request body in proto/examples decodes with the C decoders and
 * passes segops_prepare; every (op, pass) has a JSON and a msgpack example; the CPU backend runs
 * each, the JSON and msgpack bodies of one case give identical outputs, and proto/API.md's curl
 * example answers exactly that document's text. Usage: test_codec_examples <proto/examples dir>. */
#include <dirent.h>
#include <stdint.h>
#include <stdlib.h>

#include "backend.h"
#include "codec_test.h"
#include "slurp.h"

static const segops_limits LIM = {.max_elements = 1 << 24, .max_segments = 1 << 24};

/* Decodes, prepares and runs one body; returns the JSON encoding of its outputs (owned) or NULL. */
static char *run_body(segops_backend *be, const char *path, segops_op op, segops_pass pass, bool json) {
  size_t len;
  char *body = slurp(path, &len), err[512];
  if (!body) return NULL;
  segops_decoded d;
  int rc = json ? segops_decode_json(body, len, op, pass, NULL, &d, err, sizeof err)
                : segops_decode_msgpack(body, len, op, pass, NULL, &d, err, sizeof err);
  char *text = NULL;
  segops_prepared p = {0};
  if (rc == 0) rc = segops_prepare(&d.req, &LIM, &p, err, sizeof err);
  if (rc == 0) rc = be->run(be->ctx, 0, &p.call, err, sizeof err);
  if (rc == 0) {
    segops_out_tensor outs[SEGOPS_MAX_OUTPUTS];
    int n = 0;
    for (int o = 0; o < p.call.fn->n_out; o++) {
      if (!p.requested[o]) continue;
      outs[n] = (segops_out_tensor){.name = p.call.fn->out[o].name,
                                    .dtype = p.call.dtype,
                                    .ndim = p.out_ndim[o],
                                    .data = p.call.out[o],
                                    .nbytes = p.out_nbytes[o]};
      memcpy(outs[n].shape, p.out_shape[o], sizeof outs[n].shape);
      n++;
    }
    segops_encoded e;
    if (segops_encode_json(outs, n, &e) == 0) {
      text = malloc(e.total + 1);
      memcpy(text, e.iov[0].iov_base, e.total);
      text[e.total] = 0;
      segops_encoded_free(&e);
    }
  } else {
    fprintf(stderr, "%s: %s: %s\n", path, segops_err_code(rc), err);
  }
  segops_prepared_free(&p);
  segops_decoded_free(&d);
  free(body);
  return text;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s <examples dir>\n", argv[0]);
    return 2;
  }
  segops_backend *be = segops_cpu_backend_new(1);
  CHECK(be != NULL);
  if (!be) return 1;
  int seen[SEGOPS_OP_COUNT][SEGOPS_PASS_COUNT][2] = {{{0}}};
  int files = 0;
  DIR *dir = opendir(argv[1]);
  CHECK(dir != NULL);
  struct dirent *de;
  while (dir && (de = readdir(dir))) {
    /* <op>.<pass>[.<variant>].json|msgpack */
    const char *name = de->d_name, *dot1 = strchr(name, '.');
    const char *ext = strrchr(name, '.');
    if (!dot1 || !ext || (strcmp(ext, ".json") && strcmp(ext, ".msgpack"))) continue;
    const char *dot2 = strchr(dot1 + 1, '.');
    int op = segops_op_parse(name, (size_t)(dot1 - name));
    int pass = segops_pass_parse(dot1 + 1, (size_t)(dot2 - dot1 - 1));
    CHECK(op >= 0 && pass >= 0);
    if (op < 0 || pass < 0) continue;
    bool json = strcmp(ext, ".json") == 0;
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", argv[1], name);
    char *out = run_body(be, path, (segops_op)op, (segops_pass)pass, json);
    if (!out) {
      fprintf(stderr, "%s: not accepted\n", path);
      g_failures++;
      continue;
    }
    files++;
    seen[op][pass][json]++;
    /* The JSON and msgpack bodies of one case carry the same numbers: same answer. */
    if (dot2 == ext && json) {
      char other[4096];
      snprintf(other, sizeof other, "%s/%.*s.msgpack", argv[1], (int)(ext - name), name);
      char *out2 = run_body(be, other, (segops_op)op, (segops_pass)pass, false);
      if (!out2 || strcmp(out, out2)) {
        fprintf(stderr, "%s: JSON and msgpack bodies answer differently:\n%s\n%s\n", name, out, out2 ? out2 : "-");
        g_failures++;
      }
      free(out2);
    }
    if (!strcmp(name, "segmented_sum.forward.json") || !strcmp(name, "segmented_sum.forward.map.json"))
      CHECK(!strcmp(out, "{\"out\":{\"dtype\":\"float64\",\"shape\":[3],\"data\":[3.0,12.0,6.0]}}"));
    if (!strcmp(name, "segmented_matvec.forward.json")) /* exact case 9 of proto/API.md */
      CHECK(!strcmp(out, "{\"out\":{\"dtype\":\"float64\",\"shape\":[1,3],\"data\":[1.0,2.0,0.0]}}"));
    if (!strcmp(name, "segmented_sum.backward.json")) /* exact case 3 of proto/API.md */
      CHECK(!strcmp(out, "{\"grad_x\":{\"dtype\":\"float64\",\"shape\":[3],\"data\":[3.5,-1.25,-1.25]}}"));
    free(out);
  }
  if (dir) closedir(dir);
  for (int o = 0; o < SEGOPS_OP_COUNT; o++)
    for (int p = 0; p < SEGOPS_PASS_COUNT; p++)
      if (!seen[o][p][0] || !seen[o][p][1]) {
        fprintf(stderr, "missing example: %s %s (%s)\n", segops_op_name((segops_op)o), segops_pass_name((segops_pass)p),
                seen[o][p][1] ? "msgpack" : "json");
        g_failures++;
      }
  printf("%d example bodies decoded, validated and run\n", files);
  segops_backend_free(be);
  return test_result("test_codec_examples");
}

/* test_cpu_isa.c: the CPU backend's function tables for each instruction set (the baseline one,
 * and the x86-64-v3 one where the build has it and the CPU runs it) give the same bits, for every
 * function, dtype and width, sorted and unsorted idx, with omitted cotangents and unaligned
 * inputs. --cpu-isa baseline (the configuration table's row) at backend creation picks the
 * baseline table. On a CPU or build without the second table there is nothing to compare: SKIP. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "cpu_internal.h"
#include "errors.h"
#include "test_util.h"

static segops_backend *base_be, *auto_be;
static long compared;

static void check_layout(const tu_layout *L, tu_rng *rng) {
  for (int op = 0; op < SEGOPS_OP_COUNT; op++)
    for (int pass = 0; pass < SEGOPS_PASS_COUNT; pass++) {
      const segops_fn_desc *fn = segops_fn((segops_op)op, (segops_pass)pass);
      for (int d = 0; d < 2; d++)
        for (int w = fn->vec3_only ? 3 : 1; w <= 3; w += 2)
          for (int omit = -1; omit < fn->n_in; omit++) { /* -1: every input; else that cotangent omitted */
            if (omit >= 0 && fn->in[omit].use != SEGOPS_ARG_COTAN) continue;
            segops_dtype dt = d ? SEGOPS_F64 : SEGOPS_F32;
            tu_buf ins[SEGOPS_MAX_INPUTS] = {0}, outs[2][SEGOPS_MAX_OUTPUTS] = {{{0}}};
            segops_call call = {
                .fn = fn, .dtype = dt, .width = w, .n = L->n, .s = L->s, .idx = L->idx, .idx_sorted = L->sorted};
            for (int k = 0; k < fn->n_in; k++) {
              if (k == omit) continue;
              int64_t count = segops_shape_count(fn->in[k].shape, w, L->n, L->s);
              double *v = malloc((size_t)(count ? count : 1) * sizeof(double));
              for (int64_t j = 0; j < count; j++) v[j] = tu_uniform(rng, -4, 4);
              ins[k] = tu_input(dt, v, count, (size_t)(k + 1) % 3); /* unaligned too */
              call.in[k] = ins[k].data;
              free(v);
            }
            for (int b = 0; b < 2; b++) {
              segops_backend *be = b ? auto_be : base_be;
              for (int o = 0; o < fn->n_out; o++) {
                outs[b][o] = tu_output(dt, segops_shape_count(fn->out[o].shape, w, L->n, L->s));
                call.out[o] = outs[b][o].data;
              }
              char err[256];
              TU_CHECK(be->run(be->ctx, 0, &call, err, sizeof err) == SEGOPS_OK, "%s: run failed: %s", L->name, err);
            }
            for (int o = 0; o < fn->n_out; o++) {
              TU_CHECK(memcmp(outs[0][o].data, outs[1][o].data, outs[0][o].nbytes) == 0,
                       "[%s] %s/%s %s w=%d omit=%d: %s differs between the baseline and the picked table", L->name,
                       segops_op_name(fn->op), segops_pass_name(fn->pass), segops_dtype_name(dt), w, omit,
                       fn->out[o].name);
              compared++;
              tu_buf_free(&outs[0][o]);
              tu_buf_free(&outs[1][o]);
            }
            for (int k = 0; k < SEGOPS_MAX_INPUTS; k++) tu_buf_free(&ins[k]);
          }
    }
}

static segops_backend *backend_with_isa(const char *isa) {
  segops_settings_group *const groups[] = {&segops_cpu_settings, NULL};
  char err[256];
  if (segops_settings_set(groups, "cpu-isa", isa, err, sizeof err)) {
    printf("FAIL: %s\n", err);
    exit(1);
  }
  return segops_cpu_backend_new(2);
}

int main(void) {
  if (segops_cpu_pick_fns() == &segops_cpu_fns_base) {
    printf("SKIP: this build or CPU has only the baseline table\n");
    return 77;
  }
  base_be = backend_with_isa("baseline");
  auto_be = backend_with_isa("auto");
  if (!base_be || !auto_be) return 1;
  tu_rng rng = {77};
  tu_layout L = tu_layout_random("N=50000 S=2000 unsorted", 50000, 2000, &rng);
  check_layout(&L, &rng);
  tu_layout_free(&L);
  int64_t *lens = calloc(3000, sizeof *lens);
  for (int64_t s = 0; s < 3000; s++) lens[s] = s % 7 == 3 ? 0 : tu_below(&rng, 40); /* 0-39 rows, some empty */
  L = tu_layout_from_lengths("sorted, lengths 0-39", lens, 3000, NULL);
  check_layout(&L, &rng);
  tu_layout_free(&L);
  free(lens);
  printf("test_cpu_isa: %ld outputs compared\n", compared);
  segops_backend_free(base_be);
  segops_backend_free(auto_be);
  return tu_summary("cpu_isa");
}

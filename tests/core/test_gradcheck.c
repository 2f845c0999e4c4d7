/* test_gradcheck.c: central finite differences in float64, through the CPU backend, of every
 * backward against its forward and every double backward against its backward (proto/API.md, Formulas).
 * For a pair (F, G) of consecutive passes, L = sum over F's outputs of <cotangent, output>
 * (out pairs with g_out, grad_a with gg_a) and G's output grad_b must equal dL/db. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "errors.h"
#include "test_util.h"

#define MAXVARS 16
#define H 1e-5
#define TOL 1e-6

typedef struct {
  char name[16];
  double *v;
  int64_t count;
} var;

static segops_backend *be;
static var vars[MAXVARS];
static int nvars;
static int64_t N, S;
static const int32_t *IDX;
static int64_t W; /* row width prod(F): 1, 3 and general widths */
static bool YW;   /* mul: y (S,*F) */

/* Elements of kind k in the current call. */
static int64_t count_of(segops_shape_kind k) {
  const segops_call c = {.width = W, .y_wide = YW, .n = N, .s = S};
  return segops_call_count(&c, k);
}

static var *find(const char *name) {
  for (int k = 0; k < nvars; k++)
    if (strcmp(vars[k].name, name) == 0) return &vars[k];
  return NULL;
}

/* Creates a random variable for every input of fn that does not exist yet. */
static void make_vars(const segops_fn_desc *fn, tu_rng *rng) {
  for (int k = 0; k < fn->n_in; k++) {
    if (find(fn->in[k].name)) continue;
    var *v = &vars[nvars++];
    snprintf(v->name, sizeof v->name, "%s", fn->in[k].name);
    v->count = count_of(fn->in[k].shape);
    v->v = malloc((size_t)(v->count ? v->count : 1) * sizeof(double));
    /* Away from 0 so that rms_norm stays differentiable (no zero-norm segment). */
    for (int64_t j = 0; j < v->count; j++) {
      double u = tu_uniform(rng, 0.2, 1.0);
      v->v[j] = tu_below(rng, 2) ? u : -u;
    }
  }
}

/* Runs fn on the backend with the current variables; outs[o] receives output o. */
static void eval(const segops_fn_desc *fn, double *outs[SEGOPS_MAX_OUTPUTS]) {
  segops_call call = {.fn = fn,
                      .dtype = SEGOPS_F64,
                      .width = W,
                      .y_wide = YW,
                      .n = N,
                      .s = S,
                      .idx = IDX,
                      .idx_sorted = tu_is_sorted(IDX, N)};
  for (int k = 0; k < fn->n_in; k++) call.in[k] = find(fn->in[k].name)->v;
  for (int o = 0; o < fn->n_out; o++) call.out[o] = outs[o];
  char err[256];
  int rc = be->run(be->ctx, 0, &call, err, sizeof err);
  TU_CHECK(rc == SEGOPS_OK, "%s/%s: run failed: %s", segops_op_name(fn->op), segops_pass_name(fn->pass), err);
}

/* The cotangent variable paired with an output name: out -> g_out, grad_a -> gg_a. */
static var *cotangent_of(const char *out_name) {
  char name[32];
  if (strcmp(out_name, "out") == 0) return find("g_out");
  snprintf(name, sizeof name, "gg_%s", out_name + 5); /* "grad_x" -> "gg_x" */
  return find(name);
}

static double loss(const segops_fn_desc *f) {
  double *outs[SEGOPS_MAX_OUTPUTS] = {0};
  for (int o = 0; o < f->n_out; o++) outs[o] = calloc((size_t)count_of(f->out[o].shape) + 1, sizeof(double));
  eval(f, outs);
  double l = 0;
  for (int o = 0; o < f->n_out; o++) {
    var *c = cotangent_of(f->out[o].name);
    int64_t cnt = count_of(f->out[o].shape);
    for (int64_t j = 0; j < cnt; j++) l += c->v[j] * outs[o][j];
    free(outs[o]);
  }
  return l;
}

static void check_pair(segops_op op, segops_pass pf, const char *layout) {
  const segops_fn_desc *f = segops_fn(op, pf), *g = segops_fn(op, (segops_pass)(pf + 1));
  char what[160];
  snprintf(what, sizeof what, "[%s] %s %s vs %s w=%lld%s", layout, segops_op_name(op), segops_pass_name(g->pass),
           segops_pass_name(pf), (long long)W, YW ? " y=(S,*F)" : "");
  double *an[SEGOPS_MAX_OUTPUTS] = {0};
  for (int o = 0; o < g->n_out; o++) an[o] = calloc((size_t)count_of(g->out[o].shape) + 1, sizeof(double));
  eval(g, an);
  /* Every input that F reads must have its gradient among G's outputs. */
  for (int k = 0; k < f->n_in; k++) {
    if (f->in[k].use == SEGOPS_ARG_UNREAD) continue;
    bool found = false;
    for (int o = 0; o < g->n_out; o++) found |= strcmp(g->out[o].name + 5, f->in[k].name) == 0;
    TU_CHECK(found, "%s: no gradient output for %s", what, f->in[k].name);
  }
  for (int o = 0; o < g->n_out; o++) {
    var *b = find(g->out[o].name + 5); /* grad_b -> b */
    TU_CHECK(b != NULL, "%s: output %s names no input", what, g->out[o].name);
    if (!b) continue;
    double worst = 0;
    int64_t worst_at = 0;
    double worst_fd = 0;
    for (int64_t j = 0; j < b->count; j++) {
      double keep = b->v[j];
      b->v[j] = keep + H;
      double lp = loss(f);
      b->v[j] = keep - H;
      double lm = loss(f);
      b->v[j] = keep;
      double fd = (lp - lm) / (2 * H), e = tu_relerr(an[o][j], fd);
      if (e > worst) worst = e, worst_at = j, worst_fd = fd;
    }
    TU_CHECK(worst <= TOL, "%s: %s[%lld] = %.12g, finite difference %.12g", what, g->out[o].name, (long long)worst_at,
             an[o][worst_at], worst_fd);
  }
  for (int o = 0; o < g->n_out; o++) free(an[o]);
}

static void run_layout(const char *name, const int32_t *idx, int64_t n, int64_t s) {
  N = n;
  S = s;
  IDX = idx;
  tu_rng rng = {99};
  const int64_t widths[] = {1, 3, 2, 5}; /* 2 and 5: the general-width code (F = (2,), (5,)) */
  for (int op = 0; op < SEGOPS_OP_COUNT; op++)
    for (int wi = 0; wi < 4; wi++)
      for (int yw = 0; yw <= (op == SEGOPS_OP_MUL); yw++) {
        W = widths[wi];
        YW = yw;
        if (segops_fn((segops_op)op, SEGOPS_PASS_FORWARD)->vec3_only && W != 3) continue;
        nvars = 0;
        for (int p = 0; p < SEGOPS_PASS_COUNT; p++) make_vars(segops_fn((segops_op)op, (segops_pass)p), &rng);
        check_pair((segops_op)op, SEGOPS_PASS_FORWARD, name);
        check_pair((segops_op)op, SEGOPS_PASS_BACKWARD, name);
        for (int k = 0; k < nvars; k++) free(vars[k].v);
      }
}

int main(void) {
  be = segops_cpu_backend_new(2);
  if (!be) return 1;
  const int32_t unsorted[] = {0, 2, 0, 1, 2, 2, 0}; /* segment 3 empty */
  const int32_t sorted[] = {0, 0, 1, 1, 1};
  run_layout("N=7 S=4 unsorted, empty segment", unsorted, 7, 4);
  run_layout("N=5 S=2 sorted", sorted, 5, 2);
  segops_backend_free(be);
  return tu_summary("gradcheck");
}

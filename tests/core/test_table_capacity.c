/* test_table_capacity.c: the CPU backend's per-segment storage is sized from the op table. A
 * test-only row (ops.def's SEGOPS_FN_TEST_ROW) needing one accumulator and one segment value more
 * than any real row runs through the CPU drivers (cpu_phases.h: the walk over a sorted idx, reduce
 * and elems over an unsorted one, empty segments, the four visit lanes in scalars and in vectors)
 * and is checked exactly against a reference; under the sanitizers an array sized by a fixed limit
 * below the row's needs is an out-of-bounds write. Also: every real row's segment inputs fit a
 * gather's row buffer (SEGOPS_CPU_MAX_ROW). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The real rows' needs, before the test row joins the table. */
#define SEGOPS_FN(o, p, name, vec3, reads, acc1, acc3, nsv) char name[((acc1) > (acc3) ? (acc1) : (acc3)) + 1];
typedef union {
#include "ops.def"
} real_acc_u;
#undef SEGOPS_FN
#define SEGOPS_FN(o, p, name, vec3, reads, acc1, acc3, nsv) char name[(nsv) + 1];
typedef union {
#include "ops.def"
} real_segval_u;
#undef SEGOPS_FN
/* One more than any real row. */
#define NACC ((int)sizeof(real_acc_u))
#define NSV ((int)sizeof(real_segval_u))

#define SEGOPS_FN_TEST_ROW SEGOPS_FN(SUM, FORWARD, test_wider_row, 0, NORMS, NACC, NACC, NSV)
#include "cpu_phases.h"
#include "test_util.h"

_Static_assert(SEGOPS_FN_MAX_ACC == NACC && SEGOPS_FN_MAX_SEGVAL == NSV,
               "the capacities of ops.h follow the rows of ops.def, the test row included");
_Static_assert(SEGOPS_CPU_MAX_ACC >= NACC, "SEGOPS_CPU_MAX_ACC (cpu_phases.h) is below a row's accumulators");
_Static_assert(SEGOPS_CPU_MAX_SEGVAL >= NSV, "SEGOPS_CPU_MAX_SEGVAL (cpu_phases.h) is below a row's segment values");

/* The row's function: in[0] = x (n x w doubles, integers: every sum is exact in any order);
 * accumulator a of segment s = Σ (a+1) * x[i][a % w]; out[0] = those NACC values per segment;
 * segment value v = acc[v] + v; out[1][i] = the NSV segment values of i's segment (post). */
static void wide_visit(const segops_cpu_job *J, int64_t i, double *acc, int64_t w) {
  const double *x = J->in[0];
  for (int a = 0; a < NACC; a++) acc[a] += (a + 1) * x[i * w + a % w];
}
static void wide_visit4(const segops_cpu_job *J, int64_t i, segops_v4d *A, int m, int64_t w) {
  const double *x = J->in[0];
  for (int a = 0; a < NACC; a++) {
    segops_v4d v = {0, 0, 0, 0};
    for (int q = 0; q < 4; q++) v[q] = (a + 1) * x[(i + q) * w + a % w]; /* rows up to i+3 exist */
    segops_cpu_keep(&v, m);
    A[a] += v;
  }
}
static void wide_finish(const segops_cpu_job *J, int64_t s, int64_t cnt, const double *acc, double *sv, int64_t w) {
  double *o = J->out[0];
  (void)cnt, (void)w;
  for (int a = 0; a < NACC; a++) o[s * NACC + a] = acc[a];
  for (int v = 0; v < NSV; v++) sv[v] = acc[v] + v;
}
static void wide_post(const segops_cpu_job *J, int64_t i, int64_t j, const double *sv, int64_t w) {
  double *d = J->out[1];
  (void)w;
  for (int64_t p = i; p < j; p++)
    for (int v = 0; v < NSV; v++) d[p * NSV + v] = sv[v];
}

#define HOOKS(v4) \
  ((segops_cpu_hooks){NULL, wide_visit, v4, SEGOPS_CPU_ACC_LANES, wide_finish, wide_post, NULL, SEGOPS_CPU_SUM, NULL})
#define TASK(driver, v4, tag)                            \
  static void wide_##driver##tag(void *arg, int64_t c) { \
    const segops_cpu_job *J = arg;                       \
    if (J->w == 3)                                       \
      segops_cpu_##driver(J, HOOKS(v4), c, 3, NULL);           \
    else                                                 \
      segops_cpu_##driver(J, HOOKS(v4), c, 1, NULL);           \
  }
TASK(walk, NULL, _scalar)
TASK(walk, wide_visit4, _vec)
TASK(reduce, NULL, _scalar)
TASK(elems, NULL, _scalar)

static void run(const tu_layout *L, int w, bool vec, const double *x, double *o, double *d) {
  segops_cpu_job J = {.idx = L->idx, .n = L->n, .s = L->s, .w = w, .n_acc = NACC, .n_segval = NSV};
  J.in[0] = x;
  J.out[0] = o;
  J.out[1] = d;
  J.plan = (segops_plan){.seg_outs = 1, .elem_outs = 2, .reduce = true, .post = true};
  J.nchunks = L->n >= 64 ? 5 : 1;
  if (L->sorted) {
    for (int64_t c = 0; c < J.nchunks; c++) (vec ? wide_walk_vec : wide_walk_scalar)(&J, c);
    return;
  }
  const int64_t ranges = L->s >= 3 ? 3 : 1, s = L->s > 0 ? L->s : 1;
  int64_t bounds[4];
  for (int64_t c = 0; c <= ranges; c++) bounds[c] = segops_cpu_split(L->s, ranges, c);
  J.bounds = bounds;
  J.acc = malloc((size_t)(s * SEGOPS_CPU_LANES * J.n_acc) * sizeof *J.acc);
  J.segval = malloc((size_t)(s * J.n_segval) * sizeof *J.segval);
  J.cnt = malloc((size_t)s * sizeof *J.cnt);
  for (int64_t c = 0; c < ranges; c++) wide_reduce_scalar(&J, c);
  for (int64_t c = 0; c < J.nchunks; c++) wide_elems_scalar(&J, c);
  free(J.acc);
  free(J.segval);
  free(J.cnt);
}

static void check(const tu_layout *L, int w, bool vec, tu_rng *rng) {
  const int64_t n = L->n, s = L->s;
  /* 4 rows of slack: visit4 reads up to 3 rows past a segment's end, which exist in a real call */
  double *x = calloc((size_t)((n + 4) * w), sizeof *x), *o = malloc((size_t)(s * NACC + 1) * sizeof *o),
         *d = malloc((size_t)(n * NSV + 1) * sizeof *d), *ref = calloc((size_t)(s * NACC + 1), sizeof *ref);
  for (int64_t k = 0; k < n * w; k++) x[k] = (double)((int64_t)tu_uniform(rng, -50, 50));
  for (int64_t i = 0; i < n; i++)
    for (int a = 0; a < NACC; a++) ref[L->idx[i] * NACC + a] += (a + 1) * x[i * w + a % w];
  run(L, w, vec, x, o, d);
  int64_t bad = 0;
  for (int64_t k = 0; k < s * NACC; k++) bad += o[k] != ref[k];
  TU_CHECK(bad == 0, "[%s] w=%d %s: %lld of %lld accumulated values wrong", L->name, w, vec ? "visit4" : "visit",
           (long long)bad, (long long)(s * NACC));
  bad = 0;
  for (int64_t i = 0; i < n; i++)
    for (int v = 0; v < NSV; v++) bad += d[i * NSV + v] != ref[L->idx[i] * NACC + v] + v;
  TU_CHECK(bad == 0, "[%s] w=%d %s: %lld post outputs wrong", L->name, w, vec ? "visit4" : "visit", (long long)bad);
  free(x);
  free(o);
  free(d);
  free(ref);
}

int main(void) {
  printf("test row: %d accumulators (capacity %d), %d segment values (capacity %d)\n", NACC, SEGOPS_CPU_MAX_ACC, NSV,
         SEGOPS_CPU_MAX_SEGVAL);
  /* Every real row's segment inputs fit the row buffer a gather reads (two of (S,3,3) for matvec). */
  for (int o = 0; o < SEGOPS_OP_COUNT; o++)
    for (int p = 0; p < SEGOPS_PASS_COUNT; p++) {
      const segops_fn_desc *fn = segops_fn((segops_op)o, (segops_pass)p);
      int64_t vals = 0;
      for (int k = 0; k < fn->n_in; k++)
        if (segops_shape_is_segment(fn->in[k].shape)) {
          const int64_t one = segops_shape_count(fn->in[k].shape, 3, 0, 1);
          TU_CHECK(one <= SEGOPS_SEG_ROW_MAX, "%s: input %s has %lld values per segment, SEGOPS_SEG_ROW_MAX is %d",
                   fn->c_name, fn->in[k].name, (long long)one, SEGOPS_SEG_ROW_MAX);
          vals += one;
        }
      TU_CHECK(vals <= SEGOPS_CPU_MAX_ROW, "%s: %lld segment-row values, SEGOPS_CPU_MAX_ROW is %d", fn->c_name,
               (long long)vals, SEGOPS_CPU_MAX_ROW);
    }
  tu_rng rng = {4242};
  const int64_t lens[] = {500, 1, 0, 3, 200, 2, 0, 7, 50, 1, 4, 100, 9, 0};
  const int64_t ns = (int64_t)(sizeof lens / sizeof lens[0]);
  for (int w = 1; w <= 3; w += 2)
    for (int vec = 0; vec <= 1; vec++) {
      tu_layout L = tu_layout_from_lengths("mixed lengths, sorted", lens, ns, NULL);
      check(&L, w, vec, &rng);
      tu_layout_free(&L);
      L = tu_layout_from_lengths("mixed lengths, unsorted", lens, ns, &rng);
      check(&L, w, vec, &rng);
      tu_layout_free(&L);
      L = tu_layout_random("random N=3000 S=200 unsorted", 3000, 200, &rng);
      check(&L, w, vec, &rng);
      tu_layout_free(&L);
      const int64_t zero[3] = {0, 0, 0};
      L = tu_layout_from_lengths("N=0 S=3", zero, 3, NULL);
      check(&L, w, vec, &rng);
      tu_layout_free(&L);
    }
  return tu_summary("table_capacity (cpu drivers, test-only row)");
}

/* test_reducer_max.c: a reduction that is not a sum (segment max) runs through the CPU backend's
 * drivers unchanged (backends/cpu/cpu_phases.h): the walk over a sorted idx, the reduce and elems
 * tasks over an unsorted one, with several chunks, the four visit lanes and their combination,
 * empty segments and a post pass. Test-only: the function is its hooks and its reducer here,
 * not an op of the table. Segments whose values are all negative fail any driver that starts
 * an accumulator at 0 or combines lanes with +. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_phases.h"
#include "test_util.h"

/* The max reducer: accumulators start at -inf, partials combine by max (inputs hold no NaN). */
static double max_combine(double a, double b) { return b > a ? b : a; }
#define MAX_REDUCER ((segops_cpu_reducer){-INFINITY, max_combine, NULL})

/* in[0] = x (n x w doubles); out[0] = m[s] = max over the segment of x, per component (0 for an
 * empty segment); out[1] = d[i] = x[i] - m[idx[i]][0] (post, from the one segment value m[s][0]). */
static void max_visit(const segops_cpu_job *J, int64_t i, double *acc, int64_t w) {
  const double *x = J->in[0];
  for (int64_t c = 0; c < w; c++) acc[c] = max_combine(acc[c], x[i * w + c]);
}
static void max_finish(const segops_cpu_job *J, int64_t s, int64_t cnt, const double *acc, double *sv, int64_t w) {
  double *m = J->out[0];
  for (int64_t c = 0; c < w; c++) m[s * w + c] = cnt > 0 ? acc[c] : 0.0;
  sv[0] = m[s * w];
}
static void max_post(const segops_cpu_job *J, int64_t i, int64_t j, const double *sv, int64_t w) {
  const double *x = J->in[0];
  double *d = J->out[1];
  for (int64_t p = i; p < j; p++)
    for (int64_t c = 0; c < w; c++) d[p * w + c] = x[p * w + c] - sv[0];
}

#define MAX_HOOKS \
  ((segops_cpu_hooks){NULL, max_visit, NULL, SEGOPS_CPU_ACC_LANES, max_finish, max_post, NULL, MAX_REDUCER, NULL})
#define TASK(driver)                                 \
  static void max_##driver(void *arg, int64_t c) {   \
    const segops_cpu_job *J = arg;                   \
    if (J->w == 3)                                   \
      segops_cpu_##driver(J, MAX_HOOKS, c, 3, NULL); \
    else                                             \
      segops_cpu_##driver(J, MAX_HOOKS, c, 1, NULL); \
  }
TASK(walk)
TASK(reduce)
TASK(elems)

/* Runs the max function on layout L at width w, as cpu_backend.c drives a function: one walk over
 * chunks when sorted, else reduce over segment ranges then elems over element chunks. */
static void run_max(const tu_layout *L, int w, const double *x, double *m, double *d) {
  segops_cpu_job J = {.idx = L->idx, .n = L->n, .s = L->s, .w = w, .n_acc = 3, .n_segval = 1};
  J.in[0] = x;
  J.out[0] = m;
  J.out[1] = d;
  J.plan = (segops_plan){.seg_outs = 1, .elem_outs = 2, .reduce = true, .post = true};
  J.nchunks = L->n >= 64 ? 5 : 1;
  if (L->sorted) {
    for (int64_t c = 0; c < J.nchunks; c++) max_walk(&J, c);
    return;
  }
  const int64_t ranges = L->s >= 3 ? 3 : 1, s = L->s > 0 ? L->s : 1;
  int64_t bounds[4];
  for (int64_t c = 0; c <= ranges; c++) bounds[c] = segops_cpu_split(L->s, ranges, c);
  J.bounds = bounds;
  J.acc = malloc((size_t)(s * SEGOPS_CPU_LANES * J.n_acc) * sizeof *J.acc);
  J.segval = malloc((size_t)(s * J.n_segval) * sizeof *J.segval);
  J.cnt = malloc((size_t)s * sizeof *J.cnt);
  for (int64_t c = 0; c < ranges; c++) max_reduce(&J, c);
  for (int64_t c = 0; c < J.nchunks; c++) max_elems(&J, c);
  free(J.acc);
  free(J.segval);
  free(J.cnt);
}

static void check(const tu_layout *L, int w, tu_rng *rng) {
  const int64_t n = L->n, s = L->s;
  double *x = malloc((size_t)(n * w + 1) * sizeof *x), *m = malloc((size_t)(s * w + 1) * sizeof *m),
         *d = malloc((size_t)(n * w + 1) * sizeof *d), *ref = malloc((size_t)(s * w + 1) * sizeof *ref);
  /* Segment s % 3 == 0: every value negative; the others: any sign. */
  for (int64_t i = 0; i < n; i++)
    for (int64_t c = 0; c < w; c++)
      x[i * w + c] = L->idx[i] % 3 == 0 ? tu_uniform(rng, -9, -1) : tu_uniform(rng, -1, 1);
  for (int64_t k = 0; k < s * w; k++) ref[k] = -INFINITY;
  for (int64_t i = 0; i < n; i++)
    for (int64_t c = 0; c < w; c++) {
      double *r = &ref[L->idx[i] * w + c];
      if (x[i * w + c] > *r) *r = x[i * w + c];
    }
  for (int64_t k = 0; k < s * w; k++)
    if (ref[k] == -INFINITY) ref[k] = 0.0; /* empty segment */
  run_max(L, w, x, m, d);
  int64_t bad = 0, first = -1;
  for (int64_t k = 0; k < s * w; k++)
    if (m[k] != ref[k]) bad++, first = first < 0 ? k : first;
  TU_CHECK(bad == 0, "[%s] w=%d: %lld segment maxima wrong, first m[%lld] = %g, expected %g", L->name, w,
           (long long)bad, (long long)first, first >= 0 ? m[first] : 0.0, first >= 0 ? ref[first] : 0.0);
  bad = 0;
  for (int64_t i = 0; i < n; i++)
    for (int64_t c = 0; c < w; c++)
      if (d[i * w + c] != x[i * w + c] - ref[L->idx[i] * w]) bad++;
  TU_CHECK(bad == 0, "[%s] w=%d: %lld post outputs wrong", L->name, w, (long long)bad);
  free(x);
  free(m);
  free(d);
  free(ref);
}

int main(void) {
  tu_rng rng = {777};
  const int64_t lens[] = {500, 1, 0, 3, 200, 2, 0, 7, 50, 1, 4, 100, 9, 0};
  const int64_t ns = (int64_t)(sizeof lens / sizeof lens[0]);
  for (int w = 1; w <= 3; w += 2) {
    tu_layout L = tu_layout_from_lengths("mixed lengths, sorted", lens, ns, NULL);
    check(&L, w, &rng);
    tu_layout_free(&L);
    L = tu_layout_from_lengths("mixed lengths, unsorted", lens, ns, &rng);
    check(&L, w, &rng);
    tu_layout_free(&L);
    L = tu_layout_random("random N=5000 S=300 unsorted", 5000, 300, &rng);
    check(&L, w, &rng);
    tu_layout_free(&L);
    const int64_t zero[3] = {0, 0, 0};
    L = tu_layout_from_lengths("N=0 S=3", zero, 3, NULL);
    check(&L, w, &rng);
    tu_layout_free(&L);
  }
  return tu_summary("reducer_max (cpu drivers)");
}

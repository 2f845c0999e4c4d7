/* test_threads.c: the CPU backend gives the same bits whatever its thread count (1, 2, 3, 8),
 * for every function, dtype and width, on layouts big enough to take the parallel path
 * (sorted, unsorted, many empty segments, one segment holding most elements), and the same bits
 * for sorted idx whether it is declared sorted (the walk) or not (the reduction over all of idx). Also runs calls
 * from several threads at once on one backend (contention for its pool) and compares again. And an unsorted
 * idx against the same elements sorted by segment, bit for bit, with and without the partition by segment
 * (cpu_unsorted.c). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "cpu_internal.h"
#include "errors.h"
#include "test_util.h"

#define NB 4
static const int THREADS[NB] = {1, 2, 3, 8};
static segops_backend *backends[NB];

typedef struct {
  segops_call call;
  tu_buf outs[SEGOPS_MAX_OUTPUTS];
  int rc;
} job;

static void *run_job(void *vp) {
  job *j = vp;
  char err[256];
  j->rc = backends[NB - 1]->run(backends[NB - 1]->ctx, 0, &j->call, err, sizeof err);
  return NULL;
}

/* Fresh output buffers for call, pointed to by call->out. */
static void alloc_outs(segops_call *call, tu_buf *outs) {
  const segops_fn_desc *fn = call->fn;
  for (int o = 0; o < fn->n_out; o++) {
    outs[o] = tu_output(call->dtype, segops_call_count(call, fn->out[o].shape));
    call->out[o] = outs[o].data;
  }
}

static void check_layout(const tu_layout *L, tu_rng *rng) {
  for (int op = 0; op < SEGOPS_OP_COUNT; op++)
    for (int pass = 0; pass < SEGOPS_PASS_COUNT; pass++) {
      const segops_fn_desc *fn = segops_fn((segops_op)op, (segops_pass)pass);
      for (int d = 0; d < 2; d++)
        for (int wi = 0; wi < 4; wi++) { /* widths 1, 3, 16 (general code), 16 with mul's y (S,*F) */
          const int w = wi == 0 ? 1 : wi == 1 ? 3 : 16;
          const bool y_wide = wi == 3;
          if ((fn->vec3_only && w != 3) || (y_wide && op != SEGOPS_OP_MUL)) continue;
          segops_dtype dt = d ? SEGOPS_F64 : SEGOPS_F32;
          tu_buf ins[SEGOPS_MAX_INPUTS] = {0};
          segops_call call = {.fn = fn,
                              .dtype = dt,
                              .width = w,
                              .y_wide = y_wide,
                              .n = L->n,
                              .s = L->s,
                              .idx = L->idx,
                              .idx_sorted = L->sorted};
          for (int k = 0; k < fn->n_in; k++) {
            int64_t count = segops_call_count(&call, fn->in[k].shape);
            double *v = malloc((size_t)(count ? count : 1) * sizeof(double));
            for (int64_t j = 0; j < count; j++) v[j] = tu_uniform(rng, -1, 1);
            ins[k] = tu_input(dt, v, count, 0);
            call.in[k] = ins[k].data;
            free(v);
          }
          tu_buf first[SEGOPS_MAX_OUTPUTS] = {0};
          for (int b = 0; b < NB; b++) {
            tu_buf outs[SEGOPS_MAX_OUTPUTS] = {0};
            alloc_outs(&call, outs);
            char err[256];
            int rc = backends[b]->run(backends[b]->ctx, 0, &call, err, sizeof err);
            TU_CHECK(rc == SEGOPS_OK, "%s: run failed: %s", L->name, err);
            for (int o = 0; o < fn->n_out; o++) {
              if (b == 0) {
                first[o] = outs[o];
                continue;
              }
              TU_CHECK(memcmp(first[o].data, outs[o].data, outs[o].nbytes) == 0,
                       "[%s] %s/%s %s w=%d: %s with %d threads differs from 1 thread", L->name, segops_op_name(fn->op),
                       segops_pass_name(fn->pass), segops_dtype_name(dt), w, fn->out[o].name, THREADS[b]);
              tu_buf_free(&outs[o]);
            }
          }
          /* Sorted idx through the unsorted path (idx_sorted false): a segment's reduction order
           * depends only on its own elements, so the bits are the same. */
          if (L->sorted) {
            segops_call u = call;
            u.idx_sorted = false;
            tu_buf outs[SEGOPS_MAX_OUTPUTS] = {0};
            alloc_outs(&u, outs);
            char err[256];
            TU_CHECK(backends[1]->run(backends[1]->ctx, 0, &u, err, sizeof err) == SEGOPS_OK, "%s: run failed: %s",
                     L->name, err);
            for (int o = 0; o < fn->n_out; o++) {
              TU_CHECK(memcmp(first[o].data, outs[o].data, outs[o].nbytes) == 0,
                       "[%s] %s/%s %s w=%d: %s through the unsorted path differs from the sorted one", L->name,
                       segops_op_name(fn->op), segops_pass_name(fn->pass), segops_dtype_name(dt), w, fn->out[o].name);
              tu_buf_free(&outs[o]);
            }
          }
          /* Three concurrent calls on the 8-thread backend: one gets the pool, the others run
           * on their own threads; all must match the single-threaded bits. */
          job jobs[3];
          pthread_t th[3];
          for (int t = 0; t < 3; t++) {
            jobs[t].call = call;
            alloc_outs(&jobs[t].call, jobs[t].outs);
            pthread_create(&th[t], NULL, run_job, &jobs[t]);
          }
          for (int t = 0; t < 3; t++) {
            pthread_join(th[t], NULL);
            TU_CHECK(jobs[t].rc == SEGOPS_OK, "concurrent run failed");
            for (int o = 0; o < fn->n_out; o++) {
              TU_CHECK(memcmp(first[o].data, jobs[t].outs[o].data, first[o].nbytes) == 0,
                       "[%s] %s/%s: concurrent call %d differs", L->name, segops_op_name(fn->op),
                       segops_pass_name(fn->pass), t);
              tu_buf_free(&jobs[t].outs[o]);
            }
          }
          for (int o = 0; o < SEGOPS_MAX_OUTPUTS; o++) tu_buf_free(&first[o]);
          for (int k = 0; k < SEGOPS_MAX_INPUTS; k++) tu_buf_free(&ins[k]);
        }
    }
}

/* Rows of an element shape of call c: the element inputs and outputs a permutation moves. */
static int64_t elem_row(const segops_call *c, segops_shape_kind k) {
  return k == SEGOPS_SH_ELEM ? c->width : k == SEGOPS_SH_ELEM3 ? 3 : 0;
}

/* One function of layout L (unsorted) against the same elements in segment order (a stable sort:
 * a segment keeps its elements' order), declared sorted, which the walk reduces: segment outputs
 * bit for bit, element outputs bit for bit at the elements' new positions. Inputs are random
 * doubles rounded to dt (tu_input), permuted in dt's bytes. */
static void check_permuted_fn(const tu_layout *L, const int32_t *sidx, const int64_t *perm, segops_call u,
                              tu_rng *rng) {
  const segops_fn_desc *fn = u.fn;
  const size_t ts = segops_dtype_size(u.dtype);
  segops_call s = u;
  s.idx = sidx;
  s.idx_sorted = true;
  tu_buf ins[SEGOPS_MAX_INPUTS] = {0}, pins[SEGOPS_MAX_INPUTS] = {0}, uo[SEGOPS_MAX_OUTPUTS], so[SEGOPS_MAX_OUTPUTS];
  for (int k = 0; k < fn->n_in; k++) {
    const int64_t count = segops_call_count(&u, fn->in[k].shape), r = elem_row(&u, fn->in[k].shape);
    double *v = malloc((size_t)(count ? count : 1) * sizeof(double));
    for (int64_t j = 0; j < count; j++) v[j] = tu_uniform(rng, -1, 1);
    ins[k] = tu_input(u.dtype, v, count, 0);
    pins[k] = tu_input(u.dtype, v, count, 0);
    for (int64_t p = 0; r && p < L->n; p++) /* sorted position p holds element perm[p] */
      memcpy((char *)pins[k].data + p * r * ts, (const char *)ins[k].data + perm[p] * r * ts, (size_t)r * ts);
    u.in[k] = ins[k].data;
    s.in[k] = pins[k].data;
    free(v);
  }
  alloc_outs(&u, uo);
  alloc_outs(&s, so);
  char err[256];
  TU_CHECK(backends[1]->run(backends[1]->ctx, 0, &u, err, sizeof err) == SEGOPS_OK, "unsorted run: %s", err);
  TU_CHECK(backends[1]->run(backends[1]->ctx, 0, &s, err, sizeof err) == SEGOPS_OK, "sorted run: %s", err);
  for (int o = 0; o < fn->n_out; o++) {
    const int64_t r = elem_row(&u, fn->out[o].shape);
    bool same = r ? true : memcmp(uo[o].data, so[o].data, uo[o].nbytes) == 0;
    for (int64_t p = 0; r && p < L->n; p++)
      same = same && !memcmp((char *)so[o].data + p * r * ts, (char *)uo[o].data + perm[p] * r * ts, (size_t)r * ts);
    TU_CHECK(same, "[%s] %s/%s %s w=%lld: %s over the unsorted idx differs from the same elements sorted", L->name,
             segops_op_name(fn->op), segops_pass_name(fn->pass), segops_dtype_name(u.dtype), (long long)u.width,
             fn->out[o].name);
    tu_buf_free(&uo[o]);
    tu_buf_free(&so[o]);
  }
  for (int k = 0; k < fn->n_in; k++) tu_buf_free(&ins[k]), tu_buf_free(&pins[k]);
}

/* Every function, dtype and width of check_layout on unsorted layout L, against its elements
 * sorted (check_permuted_fn): a segment's reduction order must not depend on where its elements
 * are in idx. */
static void check_permuted(const tu_layout *L, tu_rng *rng) {
  int64_t *perm = malloc((size_t)L->n * sizeof *perm), *start = calloc((size_t)L->s + 1, sizeof *start);
  int32_t *sidx = malloc((size_t)L->n * sizeof *sidx);
  for (int64_t i = 0; i < L->n; i++) start[L->idx[i] + 1]++;
  for (int64_t s = 0; s < L->s; s++) start[s + 1] += start[s];
  for (int64_t i = 0; i < L->n; i++) perm[start[L->idx[i]]++] = i;
  for (int64_t p = 0; p < L->n; p++) sidx[p] = L->idx[perm[p]];
  for (int op = 0; op < SEGOPS_OP_COUNT; op++)
    for (int pass = 0; pass < SEGOPS_PASS_COUNT; pass++)
      for (int d = 0; d < 2; d++)
        for (int wi = 0; wi < 4; wi++) {
          const segops_fn_desc *fn = segops_fn((segops_op)op, (segops_pass)pass);
          const int w = wi == 0 ? 1 : wi == 1 ? 3 : 16;
          if ((fn->vec3_only && w != 3) || (wi == 3 && op != SEGOPS_OP_MUL)) continue;
          const segops_call u = {.fn = fn,
                                 .dtype = d ? SEGOPS_F64 : SEGOPS_F32,
                                 .width = w,
                                 .y_wide = wi == 3,
                                 .n = L->n,
                                 .s = L->s,
                                 .idx = L->idx};
          check_permuted_fn(L, sidx, perm, u, rng);
        }
  free(perm);
  free(start);
  free(sidx);
}

int main(void) {
  for (int b = 0; b < NB; b++) {
    backends[b] = segops_cpu_backend_new(THREADS[b]);
    if (!backends[b]) return 1;
    TU_CHECK(backends[b]->n_devices >= 1, "n_devices < 1");
  }
  tu_rng rng = {2024};
  tu_layout L = tu_layout_random("N=60000 S=3000 unsorted", 60000, 3000, &rng);
  check_layout(&L, &rng);
  check_permuted(&L, &rng);
  /* The same through the partition by segment (cpu_unsorted.c), which the backend takes by
   * itself only for larger S: every thread count, and against the sorted elements. */
  segops_cpu_partition_always = true;
  check_layout(&L, &rng);
  check_permuted(&L, &rng);
  segops_cpu_partition_always = false;
  tu_layout_free(&L);
  L = tu_layout_random("N=100000 S=40000 unsorted", 100000, 40000, &rng); /* the partition at widths 1, 3 */
  check_permuted(&L, &rng);
  tu_layout_free(&L);
  int64_t *lens = calloc(40000, sizeof *lens);
  for (int64_t i = 0; i < 60000; i++) lens[tu_below(&rng, 40000) & ~(int64_t)3]++; /* 3 of 4 empty */
  L = tu_layout_from_lengths("N=60000 S=40000 sorted, empty segments", lens, 40000, NULL);
  check_layout(&L, &rng);
  tu_layout_free(&L);
  int64_t skew[3] = {45000, 10, 15000};
  L = tu_layout_from_lengths("one dominant segment", skew, 3, NULL);
  check_layout(&L, &rng);
  tu_layout_free(&L);
  free(lens);
  for (int b = 0; b < NB; b++) segops_backend_free(backends[b]);
  return tu_summary("threads");
}

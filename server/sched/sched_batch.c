/* sched_batch.c: dynamic batching: joins compatible prepared calls into one backend call and
 * splits the results. Segment-indexed tensors (S rows) concatenate by segment, element-indexed
 * ones (N rows) by element, and idx is offset by the segments of the calls before it, so every
 * segment of every request keeps its own elements in their own order: a backend that reduces
 * each segment in a fixed order gives the same bits as running each request alone. */
#include <stdlib.h>
#include <string.h>

#include "errors.h"
#include "prepare.h"
#include "scheduler.h"

bool segops_batch_compatible(const segops_call *a, const segops_call *b) {
  if (a->fn != b->fn || a->dtype != b->dtype || a->width != b->width) return false;
  /* Rows of one width but another feature shape (F = (6,) and (2,3)), or mul's y (S,) and (S,*F),
   * are other calls: the answers' shapes are each request's own. */
  if (a->nf != b->nf || a->y_wide != b->y_wide) return false;
  for (int i = 0; i < a->nf; i++)
    if (a->f[i] != b->f[i]) return false;
  /* A sorted and an unsorted idx may take different backend paths; keep the classes apart so
   * each request is computed by the path it would have taken alone. */
  if (a->idx_sorted != b->idx_sorted) return false;
  for (int k = 0; k < a->fn->n_in; k++)
    if ((a->in[k] == NULL) != (b->in[k] == NULL)) return false;
  for (int k = 0; k < a->fn->n_out; k++)
    if ((a->out[k] == NULL) != (b->out[k] == NULL)) return false;
  return true;
}

static size_t round64(size_t x) { return (x + 63) & ~(size_t)63; }

/* Elements of kind k in call c's shapes with n elements and s segments (the batch's). */
static int64_t count_of(const segops_call *c, segops_shape_kind k, int64_t n, int64_t s) {
  segops_call t = *c;
  t.n = n;
  t.s = s;
  return segops_call_count(&t, k);
}

int segops_batch_run(segops_backend *be, int device, segops_job **jobs, int n, char *err, size_t errlen) {
  const segops_call *c0 = jobs[0]->call;
  const segops_fn_desc *fn = c0->fn;
  const size_t isz = segops_dtype_size(c0->dtype);
  int64_t N = 0, S = 0;
  for (int j = 0; j < n; j++) {
    N += jobs[j]->call->n;
    S += jobs[j]->call->s;
  }
  if (S > INT32_MAX) return segops_errf(SEGOPS_E_INTERNAL, err, errlen, "batch has too many segments");

  /* One block: idx, then each present input, then each requested output. */
  size_t off_in[SEGOPS_MAX_INPUTS] = {0}, off_out[SEGOPS_MAX_OUTPUTS] = {0};
  size_t total = round64((size_t)N * sizeof(int32_t));
  for (int k = 0; k < fn->n_in; k++) {
    if (!c0->in[k]) continue;
    off_in[k] = total;
    total += round64((size_t)count_of(c0, fn->in[k].shape, N, S) * isz);
  }
  for (int k = 0; k < fn->n_out; k++) {
    if (!c0->out[k]) continue;
    off_out[k] = total;
    total += round64((size_t)count_of(c0, fn->out[k].shape, N, S) * isz);
  }
  char *blk = segops_aligned_alloc(total);
  if (!blk) return segops_errf(SEGOPS_E_NOMEM, err, errlen, "out of memory for a batch of %d requests", n);

  segops_call m = *c0;
  m.n = N;
  m.s = S;
  int32_t *idx = (int32_t *)blk;
  m.idx = idx;
  m.idx_hashed = false; /* the batch's idx is new bytes */
  int64_t ebase = 0, sbase = 0;
  size_t pos_in[SEGOPS_MAX_INPUTS] = {0};
  for (int j = 0; j < n; j++) {
    const segops_call *c = jobs[j]->call;
    for (int64_t i = 0; i < c->n; i++) idx[ebase + i] = (int32_t)(c->idx[i] + sbase);
    for (int k = 0; k < fn->n_in; k++) {
      if (!c0->in[k]) continue;
      size_t bytes = (size_t)segops_call_count(c, fn->in[k].shape) * isz;
      if (bytes) memcpy(blk + off_in[k] + pos_in[k], c->in[k], bytes); /* source may be unaligned */
      pos_in[k] += bytes;
    }
    ebase += c->n;
    sbase += c->s;
  }
  for (int k = 0; k < fn->n_in; k++) m.in[k] = c0->in[k] ? blk + off_in[k] : NULL;
  for (int k = 0; k < fn->n_out; k++) m.out[k] = c0->out[k] ? blk + off_out[k] : NULL;

  int rc = be->run(be->ctx, device, &m, err, errlen);
  if (rc == SEGOPS_OK) {
    size_t pos_out[SEGOPS_MAX_OUTPUTS] = {0};
    for (int j = 0; j < n; j++) {
      segops_call *c = jobs[j]->call;
      for (int k = 0; k < fn->n_out; k++) {
        if (!c0->out[k]) continue;
        size_t bytes = (size_t)segops_call_count(c, fn->out[k].shape) * isz;
        if (bytes) memcpy(c->out[k], blk + off_out[k] + pos_out[k], bytes);
        pos_out[k] += bytes;
      }
    }
  }
  free(blk);
  return rc;
}

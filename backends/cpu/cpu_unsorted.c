/* cpu_unsorted.c: a reduction over an unsorted idx with many segments. The reduce task (cpu_phases.h)
 * accumulates each element into its segment's accumulators (SEGOPS_CPU_LANES sets per segment, by
 * position in the segment) and counts; over all of idx, with hundreds of thousands of segments,
 * every element misses the cache there. So the elements are first partitioned by bucket of
 * segments, 2^lb consecutive segments a bucket, few enough that a bucket's accumulators and counts
 * stay in cache (ACC_BYTES); then reduce runs over each bucket's elements alone:
 *   1. counts of each chunk of elements per bucket (id >> lb), then offsets bucket by bucket and
 *      chunk by chunk; 2. each chunk scatters its elements (id, the rows of every element input,
 *      and its index in the call when post reads segment values) to their bucket's next
 *      positions. A bucket holds its elements in increasing index: the partition is stable.
 *   3. reduce over each bucket (a job whose idx and element inputs are the bucket's, segments
 *      s0 .. s1, accumulators of the task's own).
 * reduce visits a segment's elements in increasing index into the same lanes whatever the range
 * of elements it scans, so the bits are those of reduce over all of idx (and of the sorted walk),
 * whatever the buckets, chunks or threads. Counts (J->cnt) and segment values (J->segval, an arg
 * reducer's element indices taken back to the call's by segops_cpu_keep_sv) are left for elems,
 * which writes element outputs in element order.
 *
 * Memory, malloc'd per call and freed before it returns: one copy of the ids and of every element
 * input's rows, plus an int32 index per element when post reads segment values: N x (4 + the
 * bytes of one row of each element input [+ 4]); counts per (element chunk, bucket); per task,
 * write-combining buffers (buckets x 16 rows of each array) and one bucket's accumulators. */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include "cpu_internal.h"

#define PART_MAX (SEGOPS_MAX_INPUTS + 2) /* arrays moved: the ids, the element inputs, the indices */
#define BLOCK 512                        /* elements whose destinations are computed at once */
#define MAX_BUCKETS 4096                 /* buckets at most (write buffers of pass 1) */
#define ACC_BYTES ((int64_t)64 << 10)    /* a bucket's accumulators and counts at most */

bool segops_cpu_partition_always = false;

typedef struct {
  segops_cpu_job J; /* the call's, idx unsorted */
  segops_cpu_task_fn reduce;
  int m;                     /* arrays: 0 the ids, then element inputs, then the indices if any */
  int64_t rb[PART_MAX];      /* bytes of one element's row */
  const char *src[PART_MAX]; /* the call's arrays (the indices: NULL, made from i) */
  char *a[PART_MAX];         /* after pass 1 */
  int in_of[PART_MAX];       /* the job input an array is; -1 the ids or the indices */
  int lb;                    /* bucket = id >> lb */
  int64_t nb, nec, nbc;      /* buckets, element chunks (pass 1), bucket chunks (pass 2) */
  int64_t *off;              /* [nec][nb]: pass 1's counts, then each chunk's next position */
  int64_t *bstart, *bchunk;  /* nb + 1 bucket starts; nbc + 1 bucket chunk bounds */
  char *mem_a;
} part;

/* size bytes, freed with free: large blocks aligned to 2 MiB and marked for transparent huge
 * pages, so that first touching them (a fresh mapping per call) faults once per 2 MiB, not per
 * 4 KiB page. */
static void *segops_cpu_big_alloc(size_t size) {
  enum { HUGE = 2 << 20 };
  if (size < 4 * (size_t)HUGE) return malloc(size ? size : 1);
  void *p = NULL;
  if (posix_memalign(&p, HUGE, size)) return NULL;
#ifdef MADV_HUGEPAGE
  madvise(p, size, MADV_HUGEPAGE);
#endif
  return p;
}

/* Rows i0 .. i0+k of src (rb bytes each) to rows dest[0 .. k) of dst; the indices (src NULL):
 * i0 + q as int32. A case per common row size, so each copy is a fixed-size move. */
static void move_rows(char *restrict dst, const char *restrict src, int64_t rb, const int64_t *dest, int64_t i0,
                      int64_t k) {
#define MOVE(RB) \
  for (int64_t q = 0; q < k; q++) memcpy(dst + dest[q] * (RB), src + (i0 + q) * (RB), (size_t)(RB))
  if (!src) {
    int32_t *d = (int32_t *)(void *)dst;
    for (int64_t q = 0; q < k; q++) d[dest[q]] = (int32_t)(i0 + q);
    return;
  }
  switch (rb) {
    case 4:
      MOVE(4);
      break;
    case 8:
      MOVE(8);
      break;
    case 12:
      MOVE(12);
      break;
    case 16:
      MOVE(16);
      break;
    case 24:
      MOVE(24);
      break;
    default:
      MOVE(rb);
      break;
  }
#undef MOVE
}

/* Pass 1, counts: chunk c's elements per bucket. */
static void count_task(void *arg, int64_t c) {
  const part *P = arg;
  const int64_t i0 = segops_cpu_split(P->J.n, P->nec, c), i1 = segops_cpu_split(P->J.n, P->nec, c + 1);
  int64_t *h = P->off + c * P->nb;
  const int32_t *idx = P->J.idx;
  const int lb = P->lb;
  for (int64_t i = i0; i < i1; i++) h[(uint32_t)idx[i] >> lb]++;
}

/* Pass 1 writes an array of rows of at most WC_MAX_RB bytes through buffers (software write
 * combining): each bucket's next GROUP positions gather in a buffer, and a group whose positions
 * are all this chunk's goes to memory at once in non-temporal stores (GROUP rows are a whole
 * number of 64-byte lines, aligned, as the arrays are): no read of the lines for ownership, and
 * the stores of a buffer at a time instead of nb streams. A chunk's first and last group in a
 * bucket (their lines shared with the neighbouring chunks) are stored plainly. */
#define GROUP 16
#define WC_MAX_RB 24

static void wc_group(char *dst, const char *buf, int64_t bytes) {
#ifdef __SSE2__
  for (int64_t o = 0; o < bytes; o += 16)
    _mm_stream_si128((__m128i *)(void *)(dst + o), _mm_loadu_si128((const __m128i *)(const void *)(buf + o)));
#else
  memcpy(dst, buf, (size_t)bytes);
#endif
}

/* Positions [from, e) of a group (g its first position, gbuf its buffer) to dst plainly. */
static void wc_part(char *dst, int64_t rb, const char *gbuf, int64_t g, int64_t from, int64_t e) {
  if (e > from) memcpy(dst + from * rb, gbuf + (from - g) * rb, (size_t)((e - from) * rb));
}

/* Rows i0 .. i0+k of src (the indices: i0 + q as int32) to positions dest[q] of dst, through the
 * buffers buf (GROUP rows per bucket); bk[q] the bucket, start[b] the chunk's first position in b. */
static void wc_rows(char *dst, const char *src, int64_t rb, char *buf, const int64_t *start, const int64_t *dest,
                    const int32_t *bk, int64_t i0, int64_t k) {
#define WC(RB, LOAD)                                                     \
  for (int64_t q = 0; q < k; q++) {                                      \
    const int64_t p = dest[q], b = bk[q], g = p & ~(int64_t)(GROUP - 1); \
    char *gbuf = buf + b * GROUP * (RB);                                 \
    LOAD(gbuf + (p - g) * (RB), RB);                                     \
    if (p - g == GROUP - 1) {                                            \
      if (g >= start[b])                                                 \
        wc_group(dst + g * (RB), gbuf, GROUP * (RB));                    \
      else                                                               \
        wc_part(dst, RB, gbuf, g, start[b], p + 1);                      \
    }                                                                    \
  }
#define ROW(slot, RB) memcpy(slot, src + (i0 + q) * (RB), (size_t)(RB))
#define INDEX(slot, RB) memcpy(slot, &(int32_t){(int32_t)(i0 + q)}, 4)
  if (!src) {
    WC(4, INDEX)
    return;
  }
  switch (rb) {
    case 4:
      WC(4, ROW) break;
    case 8:
      WC(8, ROW) break;
    case 12:
      WC(12, ROW) break;
    case 16:
      WC(16, ROW) break;
    case 24:
      WC(24, ROW) break;
    default:
      WC(rb, ROW) break;
  }
#undef INDEX
#undef ROW
#undef WC
}

/* Pass 1, scatter: chunk c's elements to their buckets, from the chunk's offsets on; arrays of
 * short rows through write-combining buffers (plain stores when those cannot be allocated). */
static void scatter_task(void *arg, int64_t c) {
  const part *P = arg;
  const int64_t i0 = segops_cpu_split(P->J.n, P->nec, c), i1 = segops_cpu_split(P->J.n, P->nec, c + 1);
  int64_t *pos = P->off + c * P->nb, dest[BLOCK];
  int32_t bk[BLOCK];
  const int32_t *idx = P->J.idx;
  const int lb = P->lb;
  int64_t wcb[PART_MAX + 1] = {0}; /* offsets of the arrays' buffers */
  for (int a = 0; a < P->m; a++) wcb[a + 1] = wcb[a] + (P->rb[a] <= WC_MAX_RB ? P->nb * GROUP * P->rb[a] : 0);
  int64_t *start = malloc((size_t)P->nb * sizeof *start);
  char *wc = wcb[P->m] ? malloc((size_t)wcb[P->m]) : NULL;
  if (start) memcpy(start, pos, (size_t)P->nb * sizeof *start);
  const bool use_wc = start && wc;
  for (int64_t i = i0; i < i1; i += BLOCK) {
    const int64_t k = i1 - i < BLOCK ? i1 - i : BLOCK;
    for (int64_t q = 0; q < k; q++) bk[q] = (int32_t)((uint32_t)idx[i + q] >> lb), dest[q] = pos[bk[q]]++;
    for (int a = 0; a < P->m; a++)
      if (use_wc && P->rb[a] <= WC_MAX_RB)
        wc_rows(P->a[a], P->src[a], P->rb[a], wc + wcb[a], start, dest, bk, i, k);
      else
        move_rows(P->a[a], P->src[a], P->rb[a], dest, i, k);
  }
  for (int a = 0; use_wc && a < P->m; a++) /* the last groups, not full */
    for (int64_t b = 0; P->rb[a] <= WC_MAX_RB && b < P->nb; b++) {
      const int64_t g = pos[b] & ~(int64_t)(GROUP - 1);
      wc_part(P->a[a], P->rb[a], wc + wcb[a] + b * GROUP * P->rb[a], g, g > start[b] ? g : start[b], pos[b]);
    }
#ifdef __SSE2__
  _mm_sfence(); /* the non-temporal stores, before the pool reports the chunk done */
#endif
  free(start);
  free(wc);
}

/* Arrays for n elements of each of P's arrays in one block (each 64-byte aligned): dst[a]. */
static char *alloc_arrays(const part *P, int64_t n, char **dst) {
  int64_t off[PART_MAX + 1] = {0};
  for (int a = 0; a < P->m; a++) off[a + 1] = off[a] + ((n * P->rb[a] + 63) & ~(int64_t)63);
  char *mem = segops_cpu_big_alloc((size_t)off[P->m]);
  for (int a = 0; mem && a < P->m; a++) dst[a] = mem + off[a];
  return mem;
}

/* Pass 2, chunk c: reduce over each of its buckets, with the task's accumulators (acc, for 2^lb
 * segments). */
static void bucket_task(void *arg, int64_t c) {
  const part *P = arg;
  const int64_t stride = segops_cpu_acc_stride(&P->J);
  double *acc = malloc((size_t)((stride << P->lb) + 1) * sizeof *acc);
  if (!acc) {
    __atomic_store_n(P->J.failed, 1, __ATOMIC_RELAXED);
    return;
  }
  for (int64_t b = P->bchunk[c]; b < P->bchunk[c + 1]; b++) {
    const int64_t o0 = P->bstart[b], o1 = P->bstart[b + 1], s0 = b << P->lb;
    const int64_t bounds[2] = {s0, P->J.s - s0 < ((int64_t)1 << P->lb) ? P->J.s : s0 + ((int64_t)1 << P->lb)};
    segops_cpu_job L = P->J;
    L.idx = (const int32_t *)(const void *)P->a[0] + o0;
    L.n = o1 - o0;
    L.bounds = bounds;
    L.acc = acc;
    L.acc_s0 = s0;
    for (int a = 1; a < P->m; a++) {
      if (P->in_of[a] >= 0)
        L.in[P->in_of[a]] = P->a[a] + o0 * P->rb[a];
      else
        L.orig = (const int32_t *)(const void *)P->a[a] + o0;
    }
    P->reduce(&L, 0);
  }
  free(acc);
}

/* The arrays to move (the ids, the element inputs given, the indices when segment values are
 * kept) and the buckets: 2^lb segments each, their accumulators and counts within ACC_BYTES, and
 * at most MAX_BUCKETS of them. False when one bucket would hold every segment (reduce over all of
 * idx keeps them in cache as well), or when an index would not fit in an int32. */
static bool plan_part(part *P, const segops_fn_desc *fn, size_t tsize) {
  const segops_cpu_job *J = &P->J;
  const bool orig = J->segval && J->plan.post; /* post reads segment values: indices to keep */
  if (orig && J->n > INT32_MAX) return false;
  P->m = 0;
  P->src[P->m] = (const char *)J->idx, P->rb[P->m] = 4, P->in_of[P->m++] = -1;
  for (int k = 0; k < fn->n_in; k++) {
    const segops_shape_kind sh = fn->in[k].shape;
    if (!J->in[k] || (sh != SEGOPS_SH_ELEM && sh != SEGOPS_SH_ELEM3)) continue;
    const int64_t w = sh == SEGOPS_SH_ELEM3 ? 3 : J->w;
    if (w == 0) continue;
    P->src[P->m] = J->in[k], P->rb[P->m] = w * (int64_t)tsize, P->in_of[P->m++] = k;
  }
  if (orig) P->src[P->m] = NULL, P->rb[P->m] = 4, P->in_of[P->m++] = -1;
  const int64_t stride = segops_cpu_acc_stride(J);
  const int64_t per_seg = (stride + 1) * (int64_t)sizeof(double); /* accumulators and a count */
  P->lb = 0;
  while (P->lb < 30 && ((per_seg << (P->lb + 1)) <= ACC_BYTES || (J->s - 1) >> P->lb >= MAX_BUCKETS)) P->lb++;
  P->nb = ((J->s - 1) >> P->lb) + 1;
  /* Where reduce over all of idx is as fast (measured: bench/RESULTS.md, Feature widths): its
   * accumulators within a few MiB (L2 and L3 hits), or long rows, whose copy costs more than the
   * cache misses it saves. */
  int64_t bytes = 0;
  for (int a = 0; a < P->m; a++) bytes += P->rb[a];
  const int64_t foot = J->s * per_seg;
  if (!segops_cpu_partition_always &&
      (bytes <= 32 ? foot <= ((int64_t)2 << 20) : bytes > 320 || foot <= ((int64_t)16 << 20)))
    return false;
  return P->nb > 1;
}

/* Pass 1's copy, counts and bounds; false when out of memory. */
static bool alloc_part(part *P) {
  P->mem_a = alloc_arrays(P, P->J.n, P->a);
  P->off = calloc((size_t)(P->nec * P->nb), sizeof *P->off);
  P->bstart = malloc((size_t)(P->nb + 1) * sizeof *P->bstart);
  P->bchunk = malloc((size_t)(P->nbc + 1) * sizeof *P->bchunk);
  return P->mem_a && P->off && P->bstart && P->bchunk;
}

/* Pass 1's offsets from its counts (bucket by bucket, chunk by chunk), and pass 2's chunks of
 * consecutive buckets with about as many elements each. */
static void offsets(part *P) {
  int64_t run = 0;
  for (int64_t b = 0; b < P->nb; b++) {
    P->bstart[b] = run;
    for (int64_t c = 0; c < P->nec; c++) {
      const int64_t t = P->off[c * P->nb + b];
      P->off[c * P->nb + b] = run;
      run += t;
    }
  }
  P->bstart[P->nb] = run;
  P->bchunk[0] = 0;
  for (int64_t c = 1, b = 0; c < P->nbc; c++) {
    const int64_t at = segops_cpu_split(P->J.n, P->nbc, c);
    while (b < P->nb && P->bstart[b] < at) b++;
    P->bchunk[c] = b;
  }
  P->bchunk[P->nbc] = P->nb;
}

bool segops_cpu_unsorted_reduce(segops_cpu_pool *pool, int threads, const segops_fn_desc *fn, segops_cpu_job *J,
                                segops_cpu_task_fn reduce, size_t tsize, bool *oom) {
  part P = {.J = *J, .reduce = reduce};
  *oom = false;
  if (!plan_part(&P, fn, tsize)) return false;
  P.nec = J->nchunks;
  P.nbc = J->nchunks > 1 ? 8 * (int64_t)threads : 1;
  if (P.nbc > P.nb) P.nbc = P.nb;
  const bool ok = alloc_part(&P);
  if (ok) {
    segops_cpu_parallel_for(pool, P.nec, count_task, &P);
    offsets(&P);
    segops_cpu_parallel_for(pool, P.nec, scatter_task, &P);
    segops_cpu_parallel_for(pool, P.nbc, bucket_task, &P);
  }
  free(P.mem_a);
  free(P.off);
  free(P.bstart);
  free(P.bchunk);
  *oom = !ok;
  return ok;
}

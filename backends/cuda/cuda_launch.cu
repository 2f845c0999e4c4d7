/* cuda_launch.cu: the segment layout on the device (sort permutation when idx is unsorted, CSR
 * offsets, tickets of long segments), its sizes, and the job-level entry points: scratch sizing
 * and launch, which runs the job's function through its runner (cuda_registry.cuh). What a job
 * needs (a reduction, a post pass, segment counts) is its row's plan (segops_plan_of). A layout
 * depends only on (idx, S), so a caller may build it once and pass it to every later job with the
 * same idx and S (cuda_backend.cu caches them). */
#include <string.h>

#include <cub/device/device_radix_sort.cuh>

#include "cuda_registry.cuh"

/* Carve-up of a layout's kept bytes, its build's temporary bytes and a call's scratch, identical
 * for sizing and for use: every piece 256-byte aligned. */
typedef struct {
  size_t off, ticket, keys, perm, keep;           /* kept */
  size_t perm_in, sort_tmp, sort_tmp_bytes, temp; /* build only */
  size_t partial, segval, call;                   /* per call */
} layout_plan;

static size_t align_up(size_t v) { return (v + 255) & ~(size_t)255; }

/* Key bits the sort needs: enough for S - 1. */
static int sort_end_bit(int64_t s) {
  int b = 1;
  while (b < 31 && ((int64_t)1 << b) < s) b++;
  return b;
}

static int wide_perm(int64_t n) { return n >= ((int64_t)1 << 31); }

/* The phases of a function (every output asked for): its row's plan. */
static segops_plan fn_plan(const segops_fn_desc *fn) { return segops_plan_of(fn, (1u << fn->n_out) - 1); }

static int64_t tiles(int64_t n) { return (n + SEGOPS_CUDA_TILE - 1) / SEGOPS_CUDA_TILE; }

extern "C" int segops_cuda_needs_layout(const segops_cuda_job *job) {
  /* A gather needs the layout only for segment counts (the mean backward's). */
  return job->s > 0 && (!segops_cuda_is_gather(job->fn) || fn_plan(job->fn).counts);
}

static cudaError_t plan(const segops_cuda_job *job, layout_plan *p) {
  const int64_t n = job->n, s = job->s;
  memset(p, 0, sizeof *p);
  if (!segops_cuda_needs_layout(job)) return cudaSuccess;
  size_t at = 0;
  p->off = at;
  at += align_up((size_t)(s + 1) * 8);
  p->ticket = at;
  at += align_up((size_t)s * 4);
  if (!job->idx_sorted && n > 0) {
    const size_t pe = wide_perm(n) ? 8 : 4;
    p->keys = at;
    at += align_up((size_t)n * 4);
    p->perm = at;
    at += align_up((size_t)n * pe);
    size_t t = 0;
    p->perm_in = t;
    t += align_up((size_t)n * pe);
    cudaError_t e =
        wide_perm(n)
            ? cub::DeviceRadixSort::SortPairs(nullptr, p->sort_tmp_bytes, (const int32_t *)nullptr, (int32_t *)nullptr,
                                              (const int64_t *)nullptr, (int64_t *)nullptr, n, 0, sort_end_bit(s))
            : cub::DeviceRadixSort::SortPairs(nullptr, p->sort_tmp_bytes, (const int32_t *)nullptr, (int32_t *)nullptr,
                                              (const int32_t *)nullptr, (int32_t *)nullptr, (int)n, 0, sort_end_bit(s));
    if (e != cudaSuccess) return e;
    p->sort_tmp = t;
    t += align_up(p->sort_tmp_bytes);
    p->temp = t;
  }
  p->keep = at;
  size_t c = 0;
  if (!segops_cuda_is_gather(job->fn)) {
    p->partial = c;
    /* Two partial rows per tile and n_segval values per segment, each row of K accumulators: the
     * job's own table row (the kernel structs' K and NSV are checked against it, cuda_registry.cuh);
     * rows of a run-time width (cuda_wide.cuh), the row's accumulators at the job's width
     * (segops_fn_acc: w per column for the sums, K for whole rows). */
    const size_t k = segops_cuda_job_wide(job)
                         ? (size_t)segops_fn_acc(job->fn, job->width, job->y_wide != 0)
                         : (size_t)(job->fn->n_acc[0] > job->fn->n_acc[1] ? job->fn->n_acc[0] : job->fn->n_acc[1]);
    if (n > SEGOPS_CUDA_TILE) c += align_up((size_t)tiles(n) * 2 * k * sizeof(double));
    p->segval = c;
    if (fn_plan(job->fn).post) c += align_up((size_t)s * (size_t)job->fn->n_segval * sizeof(double));
  } else if (segops_cuda_mean_quotients(job)) {
    p->segval = c; /* the per-segment quotients g_out[s] / c_s (cuda_mean.cu) */
    c += align_up((size_t)s * (size_t)job->width * sizeof(double));
  }
  p->call = c;
  return cudaSuccess;
}

extern "C" int segops_cuda_layout_bytes(const segops_cuda_job *job, size_t *keep, size_t *temp) {
  layout_plan p;
  cudaError_t e = plan(job, &p);
  *keep = p.keep;
  *temp = p.temp;
  return (int)e;
}

extern "C" int segops_cuda_scratch_bytes(const segops_cuda_job *job, size_t *bytes) {
  layout_plan p;
  cudaError_t e = plan(job, &p);
  *bytes = p.call + (job->layout ? 0 : p.keep + p.temp);
  return (int)e;
}

template <typename P>
__global__ void iota_kernel(P *v, int64_t n) {
  const int64_t stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) v[i] = (P)i;
}

/* off[s] = first sorted position whose key is >= s, for s in [0, S]: the thread at each key
 * boundary (and at the end) writes the offsets of the segments that start there, empty ones
 * included, and zeroes their tickets. Reads the keys once, coalesced. */
__global__ void offsets_kernel(const int32_t *keys, int64_t n, int64_t nseg, int64_t *off, int32_t *ticket) {
  const int64_t stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i <= n; i += stride) {
    int64_t prev = i == 0 ? -1 : (int64_t)__ldg(keys + i - 1);
    int64_t cur = i == n ? nseg : (int64_t)__ldg(keys + i);
    for (int64_t s = prev + 1; s <= cur; s++) {
      off[s] = i;
      if (s < nseg) ticket[s] = 0;
    }
  }
}

/* The same by binary search, one thread per segment: cheaper when S is much smaller than N (it
 * reads about S log N keys instead of all N). */
__global__ void offsets_search_kernel(const int32_t *keys, int64_t n, int64_t nseg, int64_t *off, int32_t *ticket) {
  const int64_t stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t s = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; s <= nseg; s += stride) {
    int64_t lo = 0, hi = n;
    while (lo < hi) {
      int64_t mid = lo + (hi - lo) / 2;
      if ((int64_t)__ldg(keys + mid) < s)
        lo = mid + 1;
      else
        hi = mid;
    }
    off[s] = lo;
    if (s < nseg) ticket[s] = 0;
  }
}

static int blocks_for(int64_t items, int threads, int cap) {
  int64_t b = (items + threads - 1) / threads;
  if (b < 1) b = 1;
  return b > cap ? cap : (int)b;
}

int64_t segops_cuda_seg_blocks(int64_t n, int64_t s, int sm_count, int long_role, int64_t *seg_warps,
                               int *tiles_per_warp, int64_t *tile_warps) {
  /* Which warp reduces a segment or a chunk changes no bit: only how many warps there are. A
   * chunk of 256 elements spans 4 tiles: 4 tiles per warp give each warp about one chunk when
   * segments are long; past 2048 tiles per multiprocessor (N = 2^25 on 132 multiprocessors), 32 (one per
   * lane), which spares most of the warps when segments are short and still leaves ~120 warps
   * per multiprocessor for the long ones (measured on one sm_90 GPU, bench_cuda --log2n 25). */
  *seg_warps = (s + SEGOPS_SEG_PER_WARP - 1) / SEGOPS_SEG_PER_WARP;
  *tiles_per_warp = tiles(n) >= (int64_t)sm_count * 2048 ? 32 : 4;
  *tile_warps = long_role && n > SEGOPS_CUDA_TILE ? (tiles(n) + *tiles_per_warp - 1) / *tiles_per_warp : 0;
  const int64_t warps = *seg_warps + *tile_warps;
  const int64_t per_block = SEGOPS_SEG_THREADS / 32;
  const int64_t b = (warps + per_block - 1) / per_block;
  return b < 1 ? 1 : b;
}

/* Longest run of equal values of a sorted idx: its longest segment (host; 0 when n = 0). */
extern "C" int64_t segops_cuda_sorted_longest(const int32_t *idx, int64_t n) {
  int64_t best = 0, start = 0;
  for (int64_t i = 1; i <= n; i++)
    if (i == n || idx[i] != idx[start]) {
      if (i - start > best) best = i - start;
      start = i;
    }
  return best;
}

int segops_cuda_gather_grid(const segops_cuda_job *job, int w) {
  return blocks_for(job->n * w, 256, job->sm_count * 64);
}

/* Device view of a built layout in keep (and the call's scratch, when given). */
static void view(const segops_cuda_job *job, const layout_plan *p, const void *keep, void *call_scratch,
                 segops_seg_layout *L) {
  const char *k = (const char *)keep;
  memset(L, 0, sizeof *L);
  L->off = (const int64_t *)(k + p->off);
  L->ticket = (int32_t *)(k + p->ticket);
  if (!job->idx_sorted && job->n > 0) {
    L->keys = (const int32_t *)(k + p->keys);
    if (wide_perm(job->n))
      L->perm64 = (const int64_t *)(k + p->perm);
    else
      L->perm32 = (const int32_t *)(k + p->perm);
  } else {
    L->keys = job->idx;
  }
  if (call_scratch) {
    L->partial = (double *)((char *)call_scratch + p->partial);
    L->segval = (double *)((char *)call_scratch + p->segval);
  }
}

extern "C" int segops_cuda_layout_build(const segops_cuda_job *job, void *keep, void *temp, cudaStream_t st) {
  layout_plan p;
  cudaError_t e = plan(job, &p);
  if (e != cudaSuccess || p.keep == 0) return (int)e;
  segops_seg_layout L;
  view(job, &p, keep, NULL, &L);
  const int64_t n = job->n, s = job->s;
  char *k = (char *)keep, *t = (char *)temp;
  if (!job->idx_sorted && n > 0) {
    size_t tmp = p.sort_tmp_bytes;
    const int g = blocks_for(n, 256, job->sm_count * 16);
    /* Radix sort is stable: equal keys keep their element order, so each segment's elements
     * come out in the same order as in a sorted request. */
    if (wide_perm(n)) {
      iota_kernel<int64_t><<<g, 256, 0, st>>>((int64_t *)(t + p.perm_in), n);
      e = cub::DeviceRadixSort::SortPairs(t + p.sort_tmp, tmp, job->idx, (int32_t *)(k + p.keys),
                                          (const int64_t *)(t + p.perm_in), (int64_t *)(k + p.perm), n, 0,
                                          sort_end_bit(s), st);
    } else {
      iota_kernel<int32_t><<<g, 256, 0, st>>>((int32_t *)(t + p.perm_in), n);
      e = cub::DeviceRadixSort::SortPairs(t + p.sort_tmp, tmp, job->idx, (int32_t *)(k + p.keys),
                                          (const int32_t *)(t + p.perm_in), (int32_t *)(k + p.perm), (int)n, 0,
                                          sort_end_bit(s), st);
    }
    if (e != cudaSuccess) return (int)e;
  }
  int64_t *off = (int64_t *)(k + p.off);
  int32_t *ticket = (int32_t *)(k + p.ticket);
  if ((s + 1) * 256 < n)
    offsets_search_kernel<<<blocks_for(s + 1, 256, job->sm_count * 16), 256, 0, st>>>(L.keys, n, s, off, ticket);
  else
    offsets_kernel<<<blocks_for(n + 1, 256, job->sm_count * 16), 256, 0, st>>>(L.keys, n, s, off, ticket);
  return (int)cudaGetLastError();
}

extern "C" int segops_cuda_is_gather(const segops_fn_desc *fn) { return !fn_plan(fn).reduce; }

extern "C" int segops_cuda_fn_wide(const segops_fn_desc *fn) {
  switch ((int)fn->op * SEGOPS_PASS_COUNT + (int)fn->pass) {
#define SEGOPS_FN(o, p, name, ...)                                   \
  case (int)SEGOPS_OP_##o *SEGOPS_PASS_COUNT + (int)SEGOPS_PASS_##p: \
    return segops_cuda_wide_##name();
#include "ops.def"
#undef SEGOPS_FN
  }
  return 0;
}

/* The runner of a function: segops_cuda_run_<c_name>, one case per ops.def row. */
static segops_cuda_run_fn runner_of(const segops_fn_desc *fn) {
  switch ((int)fn->op * SEGOPS_PASS_COUNT + (int)fn->pass) {
#define SEGOPS_FN(o, p, name, ...)                                   \
  case (int)SEGOPS_OP_##o *SEGOPS_PASS_COUNT + (int)SEGOPS_PASS_##p: \
    return segops_cuda_run_##name;
#include "ops.def"
#undef SEGOPS_FN
  }
  return NULL;
}

cudaError_t segops_cuda_kargs(const segops_cuda_job *job, segops_kargs *a, cudaStream_t st) {
  layout_plan p;
  cudaError_t e = plan(job, &p);
  if (e != cudaSuccess) return e;
  memset(a, 0, sizeof *a);
  for (int k = 0; k < SEGOPS_MAX_INPUTS; k++) a->in[k] = job->in[k];
  for (int k = 0; k < SEGOPS_MAX_OUTPUTS; k++) a->out[k] = job->out[k];
  a->idx = job->idx;
  a->n = job->n;
  a->s = job->s;
  a->w = job->width;
  a->y_wide = job->y_wide;
  if (p.keep) {
    const void *keep = job->layout;
    if (!keep) {
      /* No layout given: build one in the scratch, after the call's own part. */
      char *sc = (char *)job->scratch + p.call;
      int rc = segops_cuda_layout_build(job, sc, sc + align_up(p.keep), st);
      if (rc != 0) return (cudaError_t)rc;
      keep = sc;
    }
    view(job, &p, keep, job->scratch, &a->L);
  }
  return cudaSuccess;
}

extern "C" int segops_cuda_launch(const segops_cuda_job *job, cudaStream_t st) {
  if (job->s == 0) return cudaSuccess; /* then n = 0 too: every output is empty */
  segops_kargs a;
  cudaError_t e = segops_cuda_kargs(job, &a, st);
  if (e != cudaSuccess) return (int)e;
  const segops_cuda_run_fn run = runner_of(job->fn);
  return (int)(run ? run(job, &a, st) : cudaErrorInvalidValue);
}

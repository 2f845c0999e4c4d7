/* cuda_layout.cu: the segment layout on the device (sort permutation when idx is unsorted,
 * CSR offsets, chunk map) and the job-level entry points: scratch sizing and launch. */
#include <string.h>

#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_scan.cuh>

#include "cuda_kernels.cuh"

namespace {

/* Scratch carve-up, identical for sizing and for use: every piece 256-byte aligned. */
typedef struct {
  size_t off, pch, pbase, multi, nmulti, partial, segval, keys, perm_in, perm, sort_tmp, scan_tmp, total;
  size_t sort_tmp_bytes, scan_tmp_bytes;
} scratch_plan;

size_t align_up(size_t v) { return (v + 255) & ~(size_t)255; }

int sort_end_bit(int64_t s) {
  int b = 1;
  while (b < 31 && ((int64_t)1 << b) < s) b++;
  return b;
}

cudaError_t plan_scratch(const segops_cuda_job *job, scratch_plan *p) {
  const int64_t n = job->n, s = job->s;
  const bool gather = segops_cuda_is_gather(job->fn);
  /* A gather needs the layout only for the mean backward's counts. */
  const bool need_layout = !gather || job->fn->op == SEGOPS_OP_MEAN;
  size_t at = 0;
  memset(p, 0, sizeof *p);
  if (s == 0 || !need_layout) return cudaSuccess;
  p->off = at;
  at += align_up((size_t)(s + 1) * 8);
  p->pch = at;
  at += align_up((size_t)(s + 1) * 8);
  p->pbase = at;
  at += align_up((size_t)(s + 1) * 8);
  p->multi = at;
  at += align_up((size_t)s * 4);
  p->nmulti = at;
  at += 256;
  /* Multi-chunk segments hold more than CHUNK elements each and at most 2*count/CHUNK chunks. */
  size_t max_part = (size_t)(2 * (n / SEGOPS_CUDA_CHUNK) + 1);
  p->partial = at;
  at += align_up(max_part * 9 * sizeof(double));
  p->segval = at;
  at += align_up((size_t)s * 2 * sizeof(double));
  cudaError_t e = cub::DeviceScan::ExclusiveSum(nullptr, p->scan_tmp_bytes, (const int64_t *)nullptr,
                                                (int64_t *)nullptr, s + 1);
  if (e != cudaSuccess) return e;
  p->scan_tmp = at;
  at += align_up(p->scan_tmp_bytes);
  if (!job->idx_sorted && n > 0) {
    p->keys = at;
    at += align_up((size_t)n * 4);
    p->perm_in = at;
    at += align_up((size_t)n * 8);
    p->perm = at;
    at += align_up((size_t)n * 8);
    e = cub::DeviceRadixSort::SortPairs(nullptr, p->sort_tmp_bytes, (const int32_t *)nullptr, (int32_t *)nullptr,
                                        (const int64_t *)nullptr, (int64_t *)nullptr, n, 0, sort_end_bit(s));
    if (e != cudaSuccess) return e;
    p->sort_tmp = at;
    at += align_up(p->sort_tmp_bytes);
  }
  p->total = at;
  return cudaSuccess;
}

__global__ void iota_kernel(int64_t *v, int64_t n) {
  const int64_t stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) v[i] = i;
}

/* off[s] = first sorted position whose key is >= s, for s in [0, S]: the thread at each key
 * boundary (and at the end) writes the offsets of the segments that start there, empty ones
 * included. Reads the keys once, coalesced. */
__global__ void offsets_kernel(const int32_t *keys, int64_t n, int64_t nseg, int64_t *off) {
  const int64_t stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i <= n; i += stride) {
    int64_t prev = i == 0 ? -1 : (int64_t)__ldg(keys + i - 1);
    int64_t cur = i == n ? nseg : (int64_t)__ldg(keys + i);
    for (int64_t s = prev + 1; s <= cur; s++) off[s] = i;
  }
}

/* The same offsets by binary search, one thread per segment: cheaper when S is much smaller
 * than N (it reads about S log N keys instead of all N). */
__global__ void offsets_search_kernel(const int32_t *keys, int64_t n, int64_t nseg, int64_t *off) {
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
  }
}

/* Chunks of each segment longer than one chunk (0 for the others), scanned into pbase, and the
 * list of those segments. The list's order is irrelevant: each entry is reduced alone. */
__global__ void chunks_kernel(const int64_t *off, int64_t nseg, int64_t *pch, int32_t *multi, int32_t *nmulti) {
  const int64_t stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t s = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; s <= nseg; s += stride) {
    if (s == nseg) {
      pch[s] = 0;
      continue;
    }
    int64_t c = off[s + 1] - off[s];
    int64_t k = 0;
    if (c > SEGOPS_CUDA_CHUNK) {
      k = (c + SEGOPS_CUDA_CHUNK - 1) / SEGOPS_CUDA_CHUNK;
      multi[atomicAdd(nmulti, 1)] = (int32_t)s;
    }
    pch[s] = k;
  }
}

int blocks_for(int64_t items, int threads, int cap) {
  int64_t b = (items + threads - 1) / threads;
  if (b < 1) b = 1;
  return b > cap ? cap : (int)b;
}

}  // namespace

int segops_cuda_seg_grid(const segops_cuda_job *job) {
  int64_t groups = (job->s + SEGOPS_SEG_GROUP - 1) / SEGOPS_SEG_GROUP; /* one warp each */
  return blocks_for(groups * 32, SEGOPS_SEG_THREADS, job->sm_count * 8);
}

int segops_cuda_chunk_grid(const segops_cuda_job *job) {
  int64_t chunks = 2 * (job->n / SEGOPS_CUDA_CHUNK) + 1; /* upper bound of chunks of long segments */
  return blocks_for(chunks * 32, SEGOPS_SEG_THREADS, job->sm_count * 8);
}

int segops_cuda_gather_grid(const segops_cuda_job *job) { return blocks_for(job->n, 256, job->sm_count * 64); }

cudaError_t segops_cuda_build_layout(const segops_cuda_job *job, segops_seg_layout *L, cudaStream_t st) {
  scratch_plan p;
  cudaError_t e = plan_scratch(job, &p);
  if (e != cudaSuccess) return e;
  memset(L, 0, sizeof *L);
  if (p.total == 0) return cudaSuccess;
  char *base = (char *)job->scratch;
  const int64_t n = job->n, s = job->s;
  const int32_t *keys = job->idx;
  if (!job->idx_sorted && n > 0) {
    int64_t *perm_in = (int64_t *)(base + p.perm_in);
    iota_kernel<<<blocks_for(n, 256, job->sm_count * 16), 256, 0, st>>>(perm_in, n);
    size_t tmp = p.sort_tmp_bytes;
    /* Radix sort is stable: equal keys keep their element order, so each segment's elements
     * come out in the same order as in a sorted request. */
    e = cub::DeviceRadixSort::SortPairs(base + p.sort_tmp, tmp, job->idx, (int32_t *)(base + p.keys), perm_in,
                                        (int64_t *)(base + p.perm), n, 0, sort_end_bit(s), st);
    if (e != cudaSuccess) return e;
    keys = (const int32_t *)(base + p.keys);
    L->perm = (const int64_t *)(base + p.perm);
  }
  int64_t *off = (int64_t *)(base + p.off);
  if ((s + 1) * 256 < n)
    offsets_search_kernel<<<blocks_for(s + 1, 256, job->sm_count * 16), 256, 0, st>>>(keys, n, s, off);
  else
    offsets_kernel<<<blocks_for(n + 1, 256, job->sm_count * 16), 256, 0, st>>>(keys, n, s, off);
  int32_t *nmulti = (int32_t *)(base + p.nmulti);
  e = cudaMemsetAsync(nmulti, 0, sizeof(int32_t), st);
  if (e != cudaSuccess) return e;
  chunks_kernel<<<blocks_for(s + 1, 256, job->sm_count * 16), 256, 0, st>>>(off, s, (int64_t *)(base + p.pch),
                                                                            (int32_t *)(base + p.multi), nmulti);
  size_t tmp = p.scan_tmp_bytes;
  e = cub::DeviceScan::ExclusiveSum(base + p.scan_tmp, tmp, (const int64_t *)(base + p.pch),
                                    (int64_t *)(base + p.pbase), s + 1, st);
  if (e != cudaSuccess) return e;
  L->off = off;
  L->pbase = (const int64_t *)(base + p.pbase);
  L->multi = (const int32_t *)(base + p.multi);
  L->nmulti = nmulti;
  L->partial = (double *)(base + p.partial);
  L->segval = (double *)(base + p.segval);
  return cudaGetLastError();
}

extern "C" int segops_cuda_is_gather(const segops_fn_desc *fn) {
  switch (fn->op) {
    case SEGOPS_OP_SUM:
    case SEGOPS_OP_DOT:
    case SEGOPS_OP_MEAN:
      return fn->pass == SEGOPS_PASS_BACKWARD;
    case SEGOPS_OP_MUL:
    case SEGOPS_OP_MATVEC:
      return fn->pass == SEGOPS_PASS_FORWARD;
    default:
      return 0;
  }
}

extern "C" int segops_cuda_scratch_bytes(const segops_cuda_job *job, size_t *bytes) {
  scratch_plan p;
  cudaError_t e = plan_scratch(job, &p);
  *bytes = p.total;
  return (int)e;
}

extern "C" int segops_cuda_launch(const segops_cuda_job *job, cudaStream_t st) {
  if (job->s == 0) return cudaSuccess; /* then n = 0 too: every output is empty */
  segops_kargs a;
  memset(&a, 0, sizeof a);
  for (int k = 0; k < SEGOPS_MAX_INPUTS; k++) a.in[k] = job->in[k];
  for (int k = 0; k < SEGOPS_MAX_OUTPUTS; k++) a.out[k] = job->out[k];
  const size_t isz = job->dtype == SEGOPS_F64 ? 8 : 4;
  for (int k = 0; k < job->fn->n_in; k++) {
    segops_shape_kind sh = job->fn->in[k].shape;
    if (sh == SEGOPS_SH_ELEM) a.in_row_bytes[k] = (int64_t)(isz * job->width);
    if (sh == SEGOPS_SH_ELEM3) a.in_row_bytes[k] = (int64_t)(isz * 3);
  }
  a.idx = job->idx;
  a.n = job->n;
  a.s = job->s;
  cudaError_t e = segops_cuda_build_layout(job, &a.L, st);
  if (e != cudaSuccess) return (int)e;
  switch (job->fn->op) {
    case SEGOPS_OP_SUM:
      return (int)segops_cuda_sum(job, a, st);
    case SEGOPS_OP_DOT:
      return (int)segops_cuda_dot(job, a, st);
    case SEGOPS_OP_MUL:
      return (int)segops_cuda_mul(job, a, st);
    case SEGOPS_OP_MEAN:
      return (int)segops_cuda_mean(job, a, st);
    case SEGOPS_OP_RMS_NORM:
      return (int)segops_cuda_rms_norm(job, a, st);
    case SEGOPS_OP_MATVEC:
      return (int)segops_cuda_matvec(job, a, st);
    default:
      return (int)cudaErrorInvalidValue;
  }
}

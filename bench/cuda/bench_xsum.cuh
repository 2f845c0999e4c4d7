/* bench_xsum.cuh: a bench-only candidate for the unsorted scatter-sum: segmented_sum forward of vec3
 * rows with the order-free accumulation of core/segops_exactsum.h (per segment and component the
 * largest exponent and the count, then fixed-point terms added with integer atomics: one 64-bit
 * word for float32, two for float64), against the production kernel and a plain float atomicAdd
 * scatter (fast, not deterministic) on the same data. Checks that two runs give the same bits and
 * that they are the CPU model's bits (the header compiled on the host), and reports the error
 * against the production result. Run by `bench_cuda --xsum`; no production kernel uses it.
 *
 * Kernels: each thread walks a contiguous chunk of elements and keeps one run (segment, partial)
 * in registers, flushing it with atomics when the segment changes; at the end, the warp's lanes
 * that hold the same segment (__match_any_sync) combine before one of them flushes. Integer
 * atomics from many threads on one accumulator: the result does not depend on their order. */
#ifndef SEGOPS_BENCH_XSUM_CUH
#define SEGOPS_BENCH_XSUM_CUH

#include "segops_exactsum.h"

/* Per segment (count) and per segment and component (emax, flags, acc[words]). */
struct xs_state {
  unsigned long long *count;
  int *emax;
  unsigned *flags;
  unsigned long long *acc; /* [s * 3 * words] */
};

__global__ void xs_init(xs_state st, int64_t s, int words) {
  for (int64_t k = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; k < s * 3; k += (int64_t)gridDim.x * blockDim.x) {
    st.emax[k] = SEGOPS_XSUM_EMAX_NONE;
    st.flags[k] = 0;
    for (int w = 0; w < words; w++) st.acc[k * words + w] = 0;
    if (k % 3 == 0) st.count[k / 3] = 0;
  }
}

/* The lanes of this warp holding `key` (key < 0: none), lowest lane first. */
__device__ static inline unsigned xs_peers(int64_t key) { return __match_any_sync(0xffffffffu, key); }

/* Pass 1: count, emax and flags per segment (and component). */
template <typename T>
__global__ void xs_bound(const T *x, const int32_t *idx, int64_t n, int64_t chunk, xs_state st) {
  const int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  const int64_t i0 = t * chunk, i1 = min(i0 + chunk, n);
  int64_t key = -1;
  unsigned long long cnt = 0;
  int em[3] = {SEGOPS_XSUM_EMAX_NONE, SEGOPS_XSUM_EMAX_NONE, SEGOPS_XSUM_EMAX_NONE};
  unsigned fl[3] = {0, 0, 0};
  for (int64_t i = i0; i < i1; i++) {
    const int64_t k = idx[i];
    if (k != key) {
      if (key >= 0) {
        atomicAdd(&st.count[key], cnt);
        for (int c = 0; c < 3; c++) {
          atomicMax(&st.emax[key * 3 + c], em[c]);
          if (fl[c]) atomicOr(&st.flags[key * 3 + c], fl[c]);
          em[c] = SEGOPS_XSUM_EMAX_NONE;
          fl[c] = 0;
        }
      }
      key = k;
      cnt = 0;
    }
    cnt++;
    for (int c = 0; c < 3; c++) {
      segops_xsum_bound b = {0, em[c], fl[c]};
      segops_xsum_bound_add(&b, (double)x[i * 3 + c]);
      em[c] = b.emax;
      fl[c] = b.flags;
    }
  }
  /* The last run: lanes of one segment combine first (S = 1: one atomic per warp). */
  const unsigned peers = xs_peers(key);
  const int lane = threadIdx.x & 31, leader = __ffs(peers) - 1;
  cnt = __reduce_add_sync(peers, (unsigned)cnt);
  for (int c = 0; c < 3; c++) {
    em[c] = __reduce_max_sync(peers, em[c]);
    fl[c] = __reduce_or_sync(peers, fl[c]);
  }
  if (key >= 0 && lane == leader) {
    atomicAdd(&st.count[key], cnt);
    for (int c = 0; c < 3; c++) {
      atomicMax(&st.emax[key * 3 + c], em[c]);
      if (fl[c]) atomicOr(&st.flags[key * 3 + c], fl[c]);
    }
  }
}

__device__ static inline segops_xsum_scale xs_scale(const xs_state &st, int64_t key, int c, int words) {
  segops_xsum_bound b = {st.count[key], st.emax[key * 3 + c], 0};
  return segops_xsum_scale_of(&b, words);
}

/* a += t on the device accumulator: atomicAdd on the low word, the carry from the old value it
 * returns, atomicAdd on the high word. */
__device__ static inline void xs_flush(unsigned long long *acc, segops_xsum_acc t, int words) {
  if (words == 1) {
    if (t.w[0]) atomicAdd(acc, (unsigned long long)t.w[0]);
    return;
  }
  const unsigned long long old = atomicAdd(acc, (unsigned long long)t.w[0]);
  const unsigned long long carry = old + t.w[0] < old ? 1ull : 0ull;
  if (t.w[1] + carry) atomicAdd(acc + 1, (unsigned long long)(t.w[1] + carry));
}

/* Sum of the peers' accumulators (any subset of lanes), by a walk over the subset: integers, so
 * the order does not matter. */
__device__ static inline segops_xsum_acc xs_warp_sum(unsigned peers, segops_xsum_acc a, int words) {
  segops_xsum_acc s = segops_xsum_zero();
  for (unsigned m = peers; m; m &= m - 1) {
    const int src = __ffs(m) - 1;
    segops_xsum_acc o;
    o.w[0] = __shfl_sync(peers, a.w[0], src);
    o.w[1] = __shfl_sync(peers, a.w[1], src);
    segops_xsum_add(&s, o, words);
  }
  return s;
}

/* Pass 2: fixed-point terms, added with integer atomics. */
template <typename T>
__global__ void xs_add(const T *x, const int32_t *idx, int64_t n, int64_t chunk, xs_state st, int words) {
  const int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  const int64_t i0 = t * chunk, i1 = min(i0 + chunk, n);
  int64_t key = -1;
  segops_xsum_acc a[3] = {segops_xsum_zero(), segops_xsum_zero(), segops_xsum_zero()};
  segops_xsum_scale sc[3] = {{0, words}, {0, words}, {0, words}};
  for (int64_t i = i0; i < i1; i++) {
    const int64_t k = idx[i];
    if (k != key) {
      if (key >= 0)
        for (int c = 0; c < 3; c++) {
          xs_flush(&st.acc[(key * 3 + c) * words], a[c], words);
          a[c] = segops_xsum_zero();
        }
      key = k;
      for (int c = 0; c < 3; c++) sc[c] = xs_scale(st, key, c, words);
    }
    for (int c = 0; c < 3; c++) segops_xsum_add(&a[c], segops_xsum_term((double)x[i * 3 + c], sc[c]), words);
  }
  const unsigned peers = xs_peers(key);
  const int lane = threadIdx.x & 31, leader = __ffs(peers) - 1;
  for (int c = 0; c < 3; c++) {
    segops_xsum_acc s = __popc(peers) > 1 ? xs_warp_sum(peers, a[c], words) : a[c];
    if (key >= 0 && lane == leader) xs_flush(&st.acc[(key * 3 + c) * words], s, words);
  }
}

/* The segment sums in the output type. */
template <typename T>
__global__ void xs_finish(xs_state st, int64_t s, int words, T *out) {
  for (int64_t k = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; k < s * 3; k += (int64_t)gridDim.x * blockDim.x) {
    segops_xsum_bound b = {st.count[k / 3], st.emax[k], st.flags[k]};
    segops_xsum_scale sc = segops_xsum_scale_of(&b, words);
    segops_xsum_acc a = segops_xsum_zero();
    a.w[0] = st.acc[k * words];
    if (words > 1) a.w[1] = st.acc[k * words + 1];
    if (sizeof(T) == 4)
      out[k] = (T)segops_xsum_result_f(&a, &b, sc);
    else
      out[k] = (T)segops_xsum_result(&a, &b, sc);
  }
}

/* The plain float atomicAdd scatter: atomic speed, bits that depend on the order. */
template <typename T>
__global__ void xs_atomic_float(const T *x, const int32_t *idx, int64_t n, T *out) {
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    const int64_t k = idx[i];
    for (int c = 0; c < 3; c++) atomicAdd(&out[k * 3 + c], x[i * 3 + c]);
  }
}

/* The candidate, one call: init, bound, add, finish; chunk elements per thread. */
template <typename T>
static void xs_run(const T *x, const int32_t *idx, int64_t n, int64_t s, xs_state st, int words, T *out, int64_t chunk,
                   int sms, cudaStream_t stream) {
  const int64_t threads = (n + chunk - 1) / chunk;
  const int blocks = (int)((threads + 255) / 256);
  xs_init<<<sms * 8, 256, 0, stream>>>(st, s, words);
  if (blocks) {
    xs_bound<T><<<blocks, 256, 0, stream>>>(x, idx, n, chunk, st);
    xs_add<T><<<blocks, 256, 0, stream>>>(x, idx, n, chunk, st, words);
  }
  xs_finish<T><<<sms * 8, 256, 0, stream>>>(st, s, words, out);
}

/* The CPU model of the same call: per segment and component, terms in element order. */
template <typename T>
static void xs_host_model(const T *x, const int32_t *idx, int64_t n, int64_t s, int words, T *out) {
  segops_xsum_bound *b = (segops_xsum_bound *)malloc((size_t)(s ? s : 1) * 3 * sizeof *b);
  segops_xsum_acc *a = (segops_xsum_acc *)malloc((size_t)(s ? s : 1) * 3 * sizeof *a);
  for (int64_t k = 0; k < s * 3; k++) {
    b[k] = segops_xsum_bound_empty();
    a[k] = segops_xsum_zero();
  }
  for (int64_t i = 0; i < n; i++)
    for (int c = 0; c < 3; c++) segops_xsum_bound_add(&b[idx[i] * 3 + c], (double)x[i * 3 + c]);
  for (int64_t i = 0; i < n; i++)
    for (int c = 0; c < 3; c++) {
      const int64_t k = idx[i] * 3 + c;
      segops_xsum_add(&a[k], segops_xsum_term((double)x[i * 3 + c], segops_xsum_scale_of(&b[k], words)), words);
    }
  for (int64_t k = 0; k < s * 3; k++) {
    segops_xsum_scale sc = segops_xsum_scale_of(&b[k], words);
    out[k] = sizeof(T) == 4 ? (T)segops_xsum_result_f(&a[k], &b[k], sc) : (T)segops_xsum_result(&a[k], &b[k], sc);
  }
  free(b);
  free(a);
}

/* FNV-1a of a device buffer, for bit comparisons. */
static uint64_t xs_digest(const void *d, size_t bytes) {
  unsigned char *h = (unsigned char *)malloc(bytes ? bytes : 1);
  if (!h || cudaMemcpy(h, d, bytes, cudaMemcpyDeviceToHost) != cudaSuccess) exit(1);
  uint64_t f = 1469598103934665603ull;
  for (size_t q = 0; q < bytes; q++) f = (f ^ h[q]) * 1099511628211ull;
  free(h);
  return f;
}

/* Median device time (ms) of `call` over reps, each after a spin so the launches are queued. */
template <typename F>
static double xs_time(F call, int reps, int64_t n, cudaStream_t stream, cudaEvent_t e0, cudaEvent_t e1, double *tms) {
  for (int r = 0; r < 3; r++) call();
  for (int r = 0; r < reps; r++) {
    spin_kernel<<<1, 1, 0, stream>>>(n <= ((int64_t)1 << 20) ? 40000 : 1000);
    if (cudaEventRecord(e0, stream) != cudaSuccess) exit(1);
    call();
    if (cudaEventRecord(e1, stream) != cudaSuccess || cudaEventSynchronize(e1) != cudaSuccess) exit(1);
    float ms;
    cudaEventElapsedTime(&ms, e0, e1);
    tms[r] = ms;
  }
  return median(tms, reps);
}

/* One row of `bench_cuda --xsum`: the candidate on layout lay, dtype T, against the production
 * segmented_sum forward (warm layout) and the float atomicAdd scatter, on x (n x 3) and idx. */
template <typename T>
static void xs_row(const char *lay_name, const T *x, const int32_t *d_idx, const int32_t *h_idx, int64_t n, int64_t s,
                   bool sorted, int64_t longest, const cudaDeviceProp &prop, int sm_major, double copy_gbs, int reps,
                   cudaStream_t stream, cudaEvent_t e0, cudaEvent_t e1, double *tms, T *out, T *out2, T *prod) {
  const int words = sizeof(T) == 4 ? 1 : 2;
  xs_state st;
  CK(cudaMalloc(&st.count, (size_t)(s ? s : 1) * 8));
  CK(cudaMalloc(&st.emax, (size_t)(s ? s : 1) * 3 * 4));
  CK(cudaMalloc(&st.flags, (size_t)(s ? s : 1) * 3 * 4));
  CK(cudaMalloc(&st.acc, (size_t)(s ? s : 1) * 3 * 8 * words));
  const int64_t chunk = 8;
  auto cand = [&] { xs_run<T>(x, d_idx, n, s, st, words, out, chunk, prop.multiProcessorCount, stream); };
  /* bits: two runs, then the CPU model */
  cand();
  CK(cudaStreamSynchronize(stream));
  CK(cudaGetLastError());
  const size_t ob = (size_t)s * 3 * sizeof(T);
  const uint64_t d1 = xs_digest(out, ob);
  CK(cudaMemsetAsync(out, 0, ob, stream));
  cand();
  CK(cudaStreamSynchronize(stream));
  const uint64_t d2 = xs_digest(out, ob);
  T *hx = (T *)malloc((size_t)n * 3 * sizeof(T)), *hm = (T *)malloc(ob ? ob : 1), *hg = (T *)malloc(ob ? ob : 1),
    *hp = (T *)malloc(ob ? ob : 1);
  CK(cudaMemcpy(hx, x, (size_t)n * 3 * sizeof(T), cudaMemcpyDeviceToHost));
  xs_host_model<T>(hx, h_idx, n, s, words, hm);
  CK(cudaMemcpy(hg, out, ob, cudaMemcpyDeviceToHost));
  const bool same_model = memcmp(hm, hg, ob) == 0;
  /* the production kernel, warm layout */
  segops_cuda_job job;
  memset(&job, 0, sizeof job);
  job.fn = segops_fn(SEGOPS_OP_SUM, SEGOPS_PASS_FORWARD);
  job.dtype = sizeof(T) == 4 ? SEGOPS_F32 : SEGOPS_F64;
  job.width = 3;
  job.n = n;
  job.s = s;
  job.idx = d_idx;
  job.idx_sorted = sorted;
  job.longest = longest;
  job.sm_count = prop.multiProcessorCount;
  job.sm_major = sm_major;
  job.in[0] = x;
  job.out[0] = prod;
  size_t keep = 0, temp = 0, need = 0;
  void *layout = NULL, *ltemp = NULL, *scratch = NULL;
  CK((cudaError_t)segops_cuda_layout_bytes(&job, &keep, &temp));
  if (keep) CK(cudaMalloc(&layout, keep));
  if (temp) CK(cudaMalloc(&ltemp, temp));
  if (keep) CK((cudaError_t)segops_cuda_layout_build(&job, layout, ltemp, stream));
  CK((cudaError_t)segops_cuda_scratch_bytes(&job, &need));
  if (need) CK(cudaMalloc(&scratch, need));
  job.scratch = scratch;
  job.scratch_bytes = need;
  job.layout = layout;
  const double t_prod =
      xs_time([&] { CK((cudaError_t)segops_cuda_launch(&job, stream)); }, reps, n, stream, e0, e1, tms);
  CK(cudaMemcpy(hp, prod, ob, cudaMemcpyDeviceToHost));
  double worst = 0;
  for (int64_t k = 0; k < s * 3; k++) {
    const double r = (double)hp[k], g = (double)hg[k], e = fabs(g - r) / fmax(fabs(r), 1.0);
    if (e > worst || e != e) worst = e;
  }
  const double t_cand = xs_time(cand, reps, n, stream, e0, e1, tms);
  auto atom = [&] {
    CK(cudaMemsetAsync(out2, 0, ob, stream));
    xs_atomic_float<T><<<prop.multiProcessorCount * 16, 256, 0, stream>>>(x, d_idx, n, out2);
  };
  const double t_atom = xs_time(atom, reps, n, stream, e0, e1, tms);
  const double bytes = (double)n * 4 + (double)n * 3 * sizeof(T) + (double)s * 3 * sizeof(T);
  auto pct = [&](double ms) { return 100.0 * bytes / (ms * 1e-3) / 1e9 / copy_gbs; };
  printf("%-15s %-8s %10lld %9.4f %6.0f%% %9.4f %6.0f%% %9.4f %6.0f%%   %-4s %-4s %9.2g\n", lay_name,
         sizeof(T) == 4 ? "float32" : "float64", (long long)s, t_cand, pct(t_cand), t_prod, pct(t_prod), t_atom,
         pct(t_atom), d1 == d2 ? "yes" : "NO", same_model ? "yes" : "NO", worst);
  free(hx);
  free(hm);
  free(hg);
  free(hp);
  cudaFree(layout);
  cudaFree(ltemp);
  cudaFree(scratch);
  cudaFree(st.count);
  cudaFree(st.emax);
  cudaFree(st.flags);
  cudaFree(st.acc);
}

#endif

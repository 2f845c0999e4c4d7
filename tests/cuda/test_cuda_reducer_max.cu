/* test_cuda_reducer_max.cu: a reduction that is not a sum (segment max, test-only) runs through
 * the CUDA backend's drivers unchanged (cuda_kernels.cuh, cuda_runners.cuh): the 8-lane walk of
 * short segments, the tile role's chunks of long ones with their partials and tickets, a segment
 * that is one chunk, the split past SEGOPS_CUDA_SPLIT_N, the sort permutation of an unsorted idx,
 * and the post pass (as a gather and inline). Segments whose values are all negative fail any
 * driver that starts an accumulator at 0 or combines with +. SKIPs (77) without a GPU; FAILs then
 * when SEGOPS_REQUIRE_CUDA=1. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <vector>

#include "cuda_registry.cuh"

/* in[0] = x (n x W); out[0] = m[s] = max of the segment per component (0 for an empty segment);
 * out[1] = d[i] = x[i] - m[idx[i]][0] (post, from the segment value m[s][0]). */
struct max_reduce {
  enum { K = 3, NSV = 1, POST = 1 };
  __device__ static double identity() { return -INFINITY; }
  __device__ static double combine(double x, double acc) { return x > acc ? x : acc; }
  template <typename T, int W>
  __device__ static void visit(const segops_kargs *a, int64_t i, int64_t, double *acc) {
#pragma unroll
    for (int c = 0; c < W; c++) acc[c] = combine(ld<T>(a->in[0], i * W + c), acc[c]);
  }
  template <typename T, int W>
  __device__ static void finish(const segops_kargs *a, int64_t s, int64_t cnt, const double *acc, double *sv,
                                bool writer) {
    if (writer)
      for (int c = 0; c < W; c++) st<T>(a->out[0], s * W + c, cnt > 0 ? acc[c] : 0.0);
    sv[0] = cnt > 0 ? acc[0] : 0.0;
  }
  template <typename T, int W>
  __device__ static void post(const segops_kargs *a, int64_t i, int64_t, const double *sv) {
#pragma unroll
    for (int c = 0; c < W; c++) st<T>(a->out[1], i * W + c, ld<T>(a->in[0], i * W + c) - sv[0]);
  }
};
typedef segops_cuda_kernels<max_reduce, void> max_runner;

static int failures, checks, sm_major;

#define CK(x)                                                                             \
  do {                                                                                    \
    cudaError_t e_ = (x);                                                                 \
    if (e_ != cudaSuccess) {                                                              \
      fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      exit(1);                                                                            \
    }                                                                                     \
  } while (0)

static uint64_t rng = 2024;
static uint64_t rnd(void) {
  uint64_t z = (rng += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
static double uniform(double lo, double hi) { return lo + (hi - lo) * (double)(rnd() >> 11) / 9007199254740992.0; }

/* Runs the max function on idx (n values, s segments) at width W in dtype T and checks it.
 * longest: what the job says of a sorted idx's longest segment (0: unknown). */
template <typename T, int W>
static void check(const char *name, const std::vector<int32_t> &idx, int64_t s, bool sorted, int64_t longest,
                  int sm_count, cudaStream_t st) {
  const int64_t n = (int64_t)idx.size();
  std::vector<T> x((size_t)(n * W + 1));
  for (int64_t i = 0; i < n; i++)
    for (int c = 0; c < W; c++) x[i * W + c] = (T)(idx[i] % 3 == 0 ? uniform(-9, -1) : uniform(-1, 1));
  std::vector<double> ref((size_t)(s * W + 1), -INFINITY);
  for (int64_t i = 0; i < n; i++)
    for (int c = 0; c < W; c++) ref[idx[i] * W + c] = fmax(ref[idx[i] * W + c], (double)x[i * W + c]);
  for (double &r : ref)
    if (r == -INFINITY) r = 0.0;

  void *d_x, *d_m, *d_d, *scratch = NULL;
  int32_t *d_idx;
  CK(cudaMalloc(&d_x, x.size() * sizeof(T)));
  CK(cudaMalloc(&d_m, (size_t)(s * W + 1) * sizeof(T)));
  CK(cudaMalloc(&d_d, (size_t)(n * W + 1) * sizeof(T)));
  CK(cudaMalloc(&d_idx, (size_t)(n + 1) * 4));
  CK(cudaMemcpy(d_x, x.data(), x.size() * sizeof(T), cudaMemcpyHostToDevice));
  CK(cudaMemcpy(d_idx, idx.data(), (size_t)n * 4, cudaMemcpyHostToDevice));
  segops_cuda_job job;
  memset(&job, 0, sizeof job);
  /* A reduction with a post pass (rms_norm backward's row), with this struct's K accumulators per
   * segment: the scratch's partial rows are sized from the row's n_acc, which is 1 for rms_norm. */
  segops_fn_desc fn = *segops_fn(SEGOPS_OP_RMS_NORM, SEGOPS_PASS_BACKWARD);
  fn.n_acc[0] = fn.n_acc[1] = max_reduce::K;
  job.fn = &fn;
  job.dtype = sizeof(T) == 8 ? SEGOPS_F64 : SEGOPS_F32;
  job.width = W;
  job.n = n;
  job.s = s;
  job.idx = d_idx;
  job.idx_sorted = sorted;
  job.longest = longest;
  job.sm_count = sm_count;
  job.sm_major = sm_major;
  job.in[0] = d_x;
  job.out[0] = d_m;
  job.out[1] = d_d;
  CK((cudaError_t)segops_cuda_scratch_bytes(&job, &job.scratch_bytes));
  CK(cudaMalloc(&scratch, job.scratch_bytes ? job.scratch_bytes : 1));
  job.scratch = scratch;
  segops_kargs a;
  CK(segops_cuda_kargs(&job, &a, st));
  CK((segops_cuda_dispatch<false, max_runner>(&job, &a, st)));
  CK(cudaStreamSynchronize(st));

  std::vector<T> m((size_t)(s * W + 1)), d((size_t)(n * W + 1));
  CK(cudaMemcpy(m.data(), d_m, (size_t)(s * W) * sizeof(T), cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(d.data(), d_d, (size_t)(n * W) * sizeof(T), cudaMemcpyDeviceToHost));
  int64_t bad_m = 0, bad_d = 0, first = -1;
  for (int64_t k = 0; k < s * W; k++)
    if ((double)m[k] != ref[k]) bad_m++, first = first < 0 ? k : first;
  for (int64_t i = 0; i < n; i++)
    for (int c = 0; c < W; c++)
      if (d[i * W + c] != (T)((double)x[i * W + c] - ref[idx[i] * W])) bad_d++;
  checks += 2;
  if (bad_m || bad_d) {
    failures++;
    fprintf(stderr,
            "FAIL: [%s] %s W=%d: %lld maxima wrong (first m[%lld] = %g, expected %g), %lld post outputs wrong\n", name,
            sizeof(T) == 8 ? "float64" : "float32", W, (long long)bad_m, (long long)first,
            first >= 0 ? (double)m[first] : 0.0, first >= 0 ? ref[first] : 0.0, (long long)bad_d);
  }
  CK(cudaFree(d_x));
  CK(cudaFree(d_m));
  CK(cudaFree(d_d));
  CK(cudaFree(d_idx));
  CK(cudaFree(scratch));
}

/* idx of the given segment lengths, in order; *longest: the longest. */
static std::vector<int32_t> from_lengths(const std::vector<int64_t> &lens, int64_t *longest) {
  std::vector<int32_t> idx;
  *longest = 0;
  for (size_t s = 0; s < lens.size(); s++) {
    idx.insert(idx.end(), (size_t)lens[s], (int32_t)s);
    if (lens[s] > *longest) *longest = lens[s];
  }
  return idx;
}

template <int W>
static void check_width(int sm, cudaStream_t st) {
  int64_t longest;
  std::vector<int64_t> lens;
  for (int k = 0; k < 3000; k++) lens.push_back(k % 7 == 3 ? 0 : (int64_t)(rnd() % 41)); /* short, some empty */
  std::vector<int32_t> idx = from_lengths(lens, &longest);
  check<double, W>("short sorted segments (8 lanes, post inline)", idx, (int64_t)lens.size(), true, longest, sm, st);
  check<float, W>("short sorted segments (8 lanes, post inline)", idx, (int64_t)lens.size(), true, longest, sm, st);
  check<double, W>("short sorted segments, longest unknown (tile role)", idx, (int64_t)lens.size(), true, 0, sm, st);
  lens = {5000, 3, 200, 0, 90, 100000, 64, 65, 256, 257, 1, 70000};
  idx = from_lengths(lens, &longest);
  check<double, W>("long sorted segments (chunks, partials, one-chunk segments)", idx, (int64_t)lens.size(), true,
                   longest, sm, st);
  std::vector<int32_t> shuffled = idx;
  for (size_t i = shuffled.size() - 1; i > 0; i--) std::swap(shuffled[i], shuffled[rnd() % (i + 1)]);
  check<double, W>("long segments, unsorted (permutation)", shuffled, (int64_t)lens.size(), false, 0, sm, st);
  check<float, W>("long segments, unsorted (permutation)", shuffled, (int64_t)lens.size(), false, 0, sm, st);
  lens.clear();
  for (int64_t at = 0; at <= SEGOPS_CUDA_SPLIT_N;) { /* past the split: two launches */
    const int64_t len = rnd() % 8 == 0 ? 300 + (int64_t)(rnd() % 20000) : 1 + (int64_t)(rnd() % 60);
    lens.push_back(len);
    at += len;
  }
  idx = from_lengths(lens, &longest);
  check<double, W>("past the split, sorted", idx, (int64_t)lens.size(), true, longest, sm, st);
}

int main(void) {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    const char *req = getenv("SEGOPS_REQUIRE_CUDA");
    const bool required = req && strcmp(req, "1") == 0;
    printf("%s: no GPU\n", required ? "FAIL (SEGOPS_REQUIRE_CUDA=1)" : "SKIPPED");
    return required ? 1 : 77;
  }
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  sm_major = prop.major;
  cudaStream_t st;
  CK(cudaStreamCreate(&st));
  check_width<1>(prop.multiProcessorCount, st);
  check_width<3>(prop.multiProcessorCount, st);
  CK(cudaStreamDestroy(st));
  printf("reducer_max (cuda drivers): %d checks, %d failures\n", checks, failures);
  return failures ? 1 : 0;
}

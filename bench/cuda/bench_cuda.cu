/* bench_cuda.cu: GPU benchmark of every function (float32, float64, vec3) on device-resident data:
 * GB/s of minimal traffic (each input read once, each output written once, idx included) against
 * the device-to-device copy bandwidth measured in the same run; median of many event-timed runs
 * after warm-up. Each timed call follows a spin kernel, so the events measure device time from
 * the call's first kernel to its last (no host launch latency). Two columns: layout cold (built
 * in the call, as without the cache) and warm (the layout of this idx built before, as on a
 * layout cache hit). Optionally end-to-end through the backend (host copies included).
 * Usage: bench_cuda [--log2n 25] [--reps 20] [--e2e] [--tsv FILE] [--idx-dir DIR]
 *                   [--only SUBSTR] [--layouts 0123] [--dtypes 32,64] [--digest FILE]
 *                   [--widths 3,16,64]
 * --only keeps the functions whose "op/pass" name contains SUBSTR, --layouts the layouts by number
 * (0 seg32, 1 powerlaw, 2 S=1, 3 seg32-unsorted), --dtypes float32 and/or float64: for profiling
 * one kernel (ncu) without timing every row; --digest writes a hash of every output of each row's
 * last call, so that two builds can be compared bit for bit; SEGOPS_BENCH_PLAIN_LAUNCH=1 in the
 * environment launches without programmatic dependent launches (the same build, compared).
 * --widths: rows of these widths w = prod(F) (default 3, the vec3 rows); at a width w other than 3
 * the rows are 3*N/w, so every width moves the values of N vec3 rows, and mul runs with y (S,) and
 * with y (S,*F) (the function's name then says y=(S,*F)); matvec only at 3. The layouts are built
 * over the rows (segments of rows), the bytes are each input and output at its shape.
 * --xsum runs only the order-free scatter-sum candidate (bench_xsum.cuh) on segmented_sum forward:
 * its time, bits and error against the production kernel's and a float atomicAdd scatter's. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <algorithm>

#include "cuda_internal.h"

#define CK(x)                                                                             \
  do {                                                                                    \
    cudaError_t e_ = (x);                                                                 \
    if (e_ != cudaSuccess) {                                                              \
      fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      exit(1);                                                                            \
    }                                                                                     \
  } while (0)

static uint64_t rng_state = 12345;
static uint64_t rnd(void) {
  uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* Layouts: sorted segments of random length 1..63 (mean 32); power-law lengths; one segment;
 * the first layout shuffled (unsorted idx). Returns S and fills idx (host). */
static int64_t make_layout(int which, int32_t *idx, int64_t n) {
  int64_t s = 0, at = 0;
  if (which == 2) {
    for (int64_t i = 0; i < n; i++) idx[i] = 0;
    return 1;
  }
  while (at < n) {
    int64_t len;
    if (which == 1) { /* Pareto, alpha 1.2, min 4: most segments short, a few very long */
      double u = ((double)(rnd() >> 11) + 1.0) / 9007199254740993.0;
      len = (int64_t)(4.0 * pow(u, -1.0 / 1.2));
      if (len > n / 8) len = n / 8;
    } else {
      len = 1 + (int64_t)(rnd() % 63);
    }
    if (len > n - at) len = n - at;
    for (int64_t k = 0; k < len; k++) idx[at + k] = (int32_t)s;
    at += len;
    s++;
  }
  if (which == 3)
    for (int64_t i = n - 1; i > 0; i--) {
      int64_t j = (int64_t)(rnd() % (uint64_t)(i + 1));
      std::swap(idx[i], idx[j]);
    }
  return s;
}

static const char *LAYOUT_NAMES[] = {"seg32", "powerlaw", "S=1", "seg32-unsorted"};

__global__ void fill_kernel(double *p, int64_t n, uint64_t seed) {
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    uint64_t z = seed + (uint64_t)i * 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    /* full 53-bit fractions: with 20-bit ones float32 sums of a few thousand
     * values were exact in the double accumulators, so --digest could not see a changed order */
    p[i] = (double)(z >> 11) / 9007199254740992.0 - 0.5;
  }
}
__global__ void to_f32_kernel(const double *src, float *dst, int64_t n) {
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
    dst[i] = (float)src[i];
}

/* Keeps the GPU busy for about `ns` nanoseconds, so that the launches queued behind it are all
 * on the device when the timing event before them fires. */
__global__ void spin_kernel(long long ns) {
  long long t0;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  for (;;) {
    long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    if (t - t0 > ns) break;
  }
}

static double median(double *v, int n) {
  std::sort(v, v + n);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

#include "bench_xsum.cuh"

int main(int argc, char **argv) {
  int log2n = 25, reps = 20, e2e = 0, xsum = 0;
  int64_t copy_bytes = (int64_t)1 << 30;
  const char *tsv = NULL, *idx_dir = NULL, *only = NULL, *layouts = "0123", *dtypes = "32,64", *digest = NULL;
  int64_t widths[16] = {3};
  int n_widths = 1;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--log2n") && i + 1 < argc)
      log2n = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--reps") && i + 1 < argc)
      reps = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--tsv") && i + 1 < argc)
      tsv = argv[++i];
    else if (!strcmp(argv[i], "--idx-dir") && i + 1 < argc)
      idx_dir = argv[++i];
    else if (!strcmp(argv[i], "--e2e"))
      e2e = 1;
    else if (!strcmp(argv[i], "--xsum"))
      xsum = 1;
    else if (!strcmp(argv[i], "--copy-mib") && i + 1 < argc)
      copy_bytes = (int64_t)atoi(argv[++i]) << 20;
    else if (!strcmp(argv[i], "--only") && i + 1 < argc)
      only = argv[++i];
    else if (!strcmp(argv[i], "--digest") && i + 1 < argc)
      digest = argv[++i];
    else if (!strcmp(argv[i], "--layouts") && i + 1 < argc)
      layouts = argv[++i];
    else if (!strcmp(argv[i], "--dtypes") && i + 1 < argc)
      dtypes = argv[++i];
    else if (!strcmp(argv[i], "--widths") && i + 1 < argc) {
      n_widths = 0;
      for (char *p = argv[++i]; *p && n_widths < 16;) {
        char *end;
        const long long v = strtoll(p, &end, 10);
        if (end == p || v < 1 || v > 4096) {
          fprintf(stderr, "--widths: widths from 1 to 4096, comma-separated\n");
          return 2;
        }
        widths[n_widths++] = v;
        p = *end == ',' ? end + 1 : end;
        if (*end && *end != ',') {
          fprintf(stderr, "--widths: widths from 1 to 4096, comma-separated\n");
          return 2;
        }
      }
    } else {
      fprintf(stderr,
              "usage: %s [--log2n K] [--reps R] [--e2e] [--tsv FILE] [--idx-dir DIR] [--copy-mib M]\n"
              "          [--only SUBSTR] [--layouts 0123] [--dtypes 32,64] [--digest FILE] [--xsum] [--widths 3,16]\n",
              argv[0]);
      return 2;
    }
  }
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    printf("SKIP: no GPU\n");
    return 77;
  }
  CK(cudaSetDevice(0));
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  /* SEGOPS_BENCH_PLAIN_LAUNCH=1: no programmatic dependent launches (bit comparisons) */
  const int sm_major = getenv("SEGOPS_BENCH_PLAIN_LAUNCH") ? 0 : prop.major;
  if (reps < 1 || reps > 4096) reps = 20;
  const int64_t n = (int64_t)1 << log2n;
  cudaStream_t st;
  CK(cudaStreamCreate(&st));
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));

  /* Copy bandwidth: 1 GiB device-to-device, bytes read + written. */
  const size_t cb = (size_t)copy_bytes;
  void *ca, *cbuf;
  CK(cudaMalloc(&ca, cb));
  CK(cudaMalloc(&cbuf, cb));
  CK(cudaMemset(ca, 1, cb));
  static double tms[4096];
  for (int r = 0; r < 3; r++) CK(cudaMemcpyAsync(cbuf, ca, cb, cudaMemcpyDeviceToDevice, st));
  for (int r = 0; r < reps; r++) {
    CK(cudaEventRecord(e0, st));
    CK(cudaMemcpyAsync(cbuf, ca, cb, cudaMemcpyDeviceToDevice, st));
    CK(cudaEventRecord(e1, st));
    CK(cudaEventSynchronize(e1));
    float ms;
    CK(cudaEventElapsedTime(&ms, e0, e1));
    tms[r] = ms;
  }
  const double copy_gbs = 2.0 * cb / (median(tms, reps) * 1e-3) / 1e9;
  CK(cudaFree(ca));
  CK(cudaFree(cbuf));
  printf("device: %s, %d SMs; N = 2^%d vec3; copy bandwidth (1 GiB D2D, read+write): %.0f GB/s\n", prop.name,
         prop.multiProcessorCount, log2n, copy_gbs);

  /* Buffers big enough for every function: 5 inputs and 3 outputs of N x 3 float64. */
  const int64_t elems = n * 3;
  double *buf_in[SEGOPS_MAX_INPUTS], *buf_out[SEGOPS_MAX_OUTPUTS];
  float *buf_in32[SEGOPS_MAX_INPUTS];
  for (int k = 0; k < SEGOPS_MAX_INPUTS; k++) {
    CK(cudaMalloc(&buf_in[k], elems * 8));
    CK(cudaMalloc(&buf_in32[k], elems * 4));
    fill_kernel<<<4096, 256, 0, st>>>(buf_in[k], elems, 1000 + k);
    to_f32_kernel<<<4096, 256, 0, st>>>(buf_in[k], buf_in32[k], elems);
  }
  for (int k = 0; k < SEGOPS_MAX_OUTPUTS; k++) CK(cudaMalloc(&buf_out[k], elems * 8));
  /* rows of each width: n vec3 rows, or the same 3n values in rows of w */
  int64_t max_rows = n;
  for (int wi = 0; wi < n_widths; wi++)
    if (widths[wi] != 3) max_rows = std::max(max_rows, 3 * n / widths[wi]);
  int32_t *h_idx = (int32_t *)malloc((size_t)max_rows * 4), *d_idx;
  CK(cudaMalloc(&d_idx, (size_t)max_rows * 4));
  void *scratch = NULL, *layout = NULL, *ltemp = NULL;
  size_t scratch_cap = 0, layout_cap = 0, ltemp_cap = 0;
  FILE *tf = tsv ? fopen(tsv, "w") : NULL;
  FILE *dg = digest ? fopen(digest, "w") : NULL;
  if (tf) fprintf(tf, "fn\tdtype\tlayout\tn\ts\tbytes\tmedian_ms\tgbps\tcopy_gbps\twarm_ms\twarm_gbps\n");

  if (xsum) {
    printf(
        "\nsegmented_sum forward, vec3: the order-free candidate (bench_xsum.cuh) against the production kernel\n"
        "(warm layout) and a float atomicAdd scatter (not deterministic); same run: 2 runs' bits, the CPU model's\n"
        "bits, the largest error against production relative to max(|ref|, 1)\n");
    printf("%-15s %-8s %10s %9s %7s %9s %7s %9s %7s   %-4s %-4s %9s\n", "layout", "dtype", "S", "cand ms", "%copy",
           "prod ms", "%copy", "atom ms", "%copy", "rep", "cpu", "err");
    for (int lay = 0; lay < 4; lay++) {
      if (!strchr(layouts, '0' + lay)) continue;
      const int64_t s = make_layout(lay, h_idx, n);
      const int64_t longest = lay != 3 ? segops_cuda_sorted_longest(h_idx, n) : 0;
      CK(cudaMemcpy(d_idx, h_idx, (size_t)n * 4, cudaMemcpyHostToDevice));
      if (strstr(dtypes, "32"))
        xs_row<float>(LAYOUT_NAMES[lay], buf_in32[0], d_idx, h_idx, n, s, lay != 3, longest, prop, sm_major, copy_gbs,
                      reps, st, e0, e1, tms, (float *)buf_out[0], (float *)buf_out[1], (float *)buf_out[2]);
      if (strstr(dtypes, "64"))
        xs_row<double>(LAYOUT_NAMES[lay], buf_in[0], d_idx, h_idx, n, s, lay != 3, longest, prop, sm_major, copy_gbs,
                       reps, st, e0, e1, tms, buf_out[0], buf_out[1], buf_out[2]);
    }
    printf("\ndone\n");
    return 0;
  }
  printf("\n%-34s %-8s %-15s %10s %9s %8s %7s %9s %8s %7s\n", "function", "dtype", "layout", "S", "cold ms", "GB/s",
         "%copy", "warm ms", "GB/s", "%copy");
  for (int wi = 0; wi < n_widths; wi++)
    for (int lay = 0; lay < 4; lay++) {
      if (!strchr(layouts, '0' + lay)) continue;
      /* rows of this width (shadows the vec3 rows' n: the loop's code is the same at every width) */
      const int64_t w = widths[wi], n_vec3 = n, n = w == 3 ? n_vec3 : 3 * n_vec3 / w;
      if (n < 1) continue;
      char wsuf[32] = ""; /* the function names of rows of another width than 3 */
      if (w != 3) snprintf(wsuf, sizeof wsuf, " w=%lld", (long long)w);
      const int64_t s = make_layout(lay, h_idx, n);
      const int64_t longest = lay != 3 ? segops_cuda_sorted_longest(h_idx, n) : 0; /* as the backend measures it */
      CK(cudaMemcpy(d_idx, h_idx, (size_t)n * 4, cudaMemcpyHostToDevice));
      if (idx_dir) {
        char path[512];
        if (w == 3)
          snprintf(path, sizeof path, "%s/idx_%s.i32", idx_dir, LAYOUT_NAMES[lay]);
        else
          snprintf(path, sizeof path, "%s/idx_%s_w%lld.i32", idx_dir, LAYOUT_NAMES[lay], (long long)w);
        FILE *f = fopen(path, "wb");
        if (f) {
          fwrite(h_idx, 4, (size_t)n, f);
          fclose(f);
        }
      }
      for (int op = 0; op < SEGOPS_OP_COUNT; op++)
        for (int pass = 0; pass < SEGOPS_PASS_COUNT; pass++)
          for (int dt = 0; dt < 2; dt++)
            for (int yw = 0; yw <= (op == SEGOPS_OP_MUL && w != 3); yw++) {
              const segops_fn_desc *fn = segops_fn((segops_op)op, (segops_pass)pass);
              if (!strstr(dtypes, dt ? "64" : "32")) continue;
              if (fn->vec3_only && w != 3) continue;
              char name[96];
              snprintf(name, sizeof name, "%s/%s%s%s", segops_op_name(fn->op), segops_pass_name(fn->pass), wsuf,
                       yw ? " y=(S,*F)" : "");
              if (only && !strstr(name, only)) continue;
              segops_cuda_job job;
              memset(&job, 0, sizeof job);
              job.fn = fn;
              job.dtype = dt ? SEGOPS_F64 : SEGOPS_F32;
              job.width = w;
              job.y_wide = yw;
              job.n = n;
              job.s = s;
              segops_call shp; /* for the shapes' element counts */
              memset(&shp, 0, sizeof shp);
              shp.width = w;
              shp.y_wide = yw;
              shp.n = n;
              shp.s = s;
              job.idx = d_idx;
              job.idx_sorted = lay != 3;
              job.longest = longest;
              job.sm_count = prop.multiProcessorCount;
              job.sm_major = sm_major;
              const size_t isz = dt ? 8 : 4;
              double bytes = (double)n * 4; /* idx */
              for (int k = 0; k < fn->n_in; k++) {
                if (fn->in[k].use == SEGOPS_ARG_UNREAD) continue;
                job.in[k] = dt ? (void *)buf_in[k] : (void *)buf_in32[k];
                bytes += (double)segops_call_count(&shp, fn->in[k].shape) * isz;
              }
              for (int k = 0; k < fn->n_out; k++) {
                job.out[k] = buf_out[k];
                bytes += (double)segops_call_count(&shp, fn->out[k].shape) * isz;
              }
              size_t need = 0, keep = 0, temp = 0;
              CK((cudaError_t)segops_cuda_layout_bytes(&job, &keep, &temp));
              if (keep > layout_cap) {
                if (layout) CK(cudaFree(layout));
                CK(cudaMalloc(&layout, keep));
                layout_cap = keep;
              }
              if (temp > ltemp_cap) {
                if (ltemp) CK(cudaFree(ltemp));
                CK(cudaMalloc(&ltemp, temp));
                ltemp_cap = temp;
              }
              if (keep) CK((cudaError_t)segops_cuda_layout_build(&job, layout, ltemp, st));
              CK((cudaError_t)segops_cuda_scratch_bytes(&job, &need));
              if (need > scratch_cap) {
                if (scratch) CK(cudaFree(scratch));
                CK(cudaMalloc(&scratch, need));
                scratch_cap = need;
              }
              job.scratch = scratch;
              job.scratch_bytes = scratch_cap;
              /* cold: the layout is built inside each call; warm: built once before, passed in. */
              double med_cold = 0, med_warm = 0;
              for (int warm = 0; warm < 2; warm++) {
                job.layout = warm ? layout : NULL;
                for (int r = 0; r < 3; r++) CK((cudaError_t)segops_cuda_launch(&job, st));
                for (int r = 0; r < reps; r++) {
                  spin_kernel<<<1, 1, 0, st>>>(n <= ((int64_t)1 << 20) ? 40000 : 1000);
                  CK(cudaEventRecord(e0, st));
                  CK((cudaError_t)segops_cuda_launch(&job, st));
                  CK(cudaEventRecord(e1, st));
                  CK(cudaEventSynchronize(e1));
                  float ms;
                  CK(cudaEventElapsedTime(&ms, e0, e1));
                  tms[r] = ms;
                }
                (warm ? med_warm : med_cold) = median(tms, reps);
              }
              CK(cudaGetLastError());
              if (dg) /* the last call's outputs, to compare builds bit for bit (bench/gpu.sh compare) */
                for (int k = 0; k < fn->n_out; k++) {
                  const size_t ob = (size_t)segops_call_count(&shp, fn->out[k].shape) * isz;
                  unsigned char *h = (unsigned char *)malloc(ob ? ob : 1);
                  if (!h) exit(1);
                  CK(cudaMemcpy(h, buf_out[k], ob, cudaMemcpyDeviceToHost));
                  uint64_t f = 1469598103934665603ull, w; /* FNV-1a over 8-byte words (outputs are 4-byte multiples) */
                  for (size_t q = 0; q < ob; q += 8) {
                    w = 0;
                    memcpy(&w, h + q, ob - q < 8 ? ob - q : 8);
                    f = (f ^ w) * 1099511628211ull;
                  }
                  free(h);
                  fprintf(dg, "%s\t%s\t%s\t%d\t%016llx\n", name, dt ? "float64" : "float32", LAYOUT_NAMES[lay], k,
                          (unsigned long long)f);
                }
              double gbs = bytes / (med_cold * 1e-3) / 1e9, gbs_w = bytes / (med_warm * 1e-3) / 1e9;
              printf("%-34s %-8s %-15s %10lld %9.4f %8.0f %6.0f%% %9.4f %8.0f %6.0f%%\n", name,
                     dt ? "float64" : "float32", LAYOUT_NAMES[lay], (long long)s, med_cold, gbs, 100.0 * gbs / copy_gbs,
                     med_warm, gbs_w, 100.0 * gbs_w / copy_gbs);
              if (tf)
                fprintf(tf, "%s\t%s\t%s\t%lld\t%lld\t%.0f\t%.5f\t%.1f\t%.1f\t%.5f\t%.1f\n", name,
                        dt ? "float64" : "float32", LAYOUT_NAMES[lay], (long long)n, (long long)s, bytes, med_cold, gbs,
                        copy_gbs, med_warm, gbs_w);
            }
    }
  if (tf) fclose(tf);
  if (dg) fclose(dg);

  if (e2e) {
    /* End-to-end through the backend: host inputs -> pinned staging -> device -> host outputs. */
    char err[256];
    segops_backend *b = segops_cuda_backend_new(NULL, 0, NULL, err, sizeof err);
    if (!b) {
      fprintf(stderr, "backend: %s\n", err);
      return 1;
    }
    const int64_t s = make_layout(0, h_idx, n);
    float *hin[SEGOPS_MAX_INPUTS], *hout[SEGOPS_MAX_OUTPUTS];
    for (int k = 0; k < SEGOPS_MAX_INPUTS; k++) {
      CK(cudaMallocHost(&hin[k], elems * 4)); /* any host memory would do; pinned keeps the test short */
      CK(cudaMemcpy(hin[k], buf_in32[k], elems * 4, cudaMemcpyDeviceToHost));
    }
    for (int k = 0; k < SEGOPS_MAX_OUTPUTS; k++) hout[k] = (float *)aligned_alloc(64, elems * 4);
    printf("\nend to end through the backend (host copies included), float32, seg32:\n");
    printf("%-34s %9s %8s\n", "function", "ms", "GB/s");
    for (int op = 0; op < SEGOPS_OP_COUNT; op++)
      for (int pass = 0; pass < SEGOPS_PASS_COUNT; pass++) {
        const segops_fn_desc *fn = segops_fn((segops_op)op, (segops_pass)pass);
        segops_call c;
        memset(&c, 0, sizeof c);
        c.fn = fn;
        c.dtype = SEGOPS_F32;
        c.width = 3;
        c.n = n;
        c.s = s;
        c.idx = h_idx;
        c.idx_sorted = true;
        double bytes = (double)n * 4;
        for (int k = 0; k < fn->n_in; k++) {
          if (fn->in[k].use == SEGOPS_ARG_UNREAD) continue;
          c.in[k] = hin[k];
          bytes += (double)segops_shape_count(fn->in[k].shape, 3, n, s) * 4;
        }
        for (int k = 0; k < fn->n_out; k++) {
          c.out[k] = hout[k];
          bytes += (double)segops_shape_count(fn->out[k].shape, 3, n, s) * 4;
        }
        double best = 1e30;
        for (int r = 0; r < 3; r++) {
          struct timespec t0, t1;
          clock_gettime(CLOCK_MONOTONIC, &t0);
          int rc = b->run(b->ctx, 0, &c, err, sizeof err);
          clock_gettime(CLOCK_MONOTONIC, &t1);
          if (rc) {
            fprintf(stderr, "run: %s\n", err);
            return 1;
          }
          double ms = (t1.tv_sec - t0.tv_sec) * 1e3 + (t1.tv_nsec - t0.tv_nsec) * 1e-6;
          if (r > 0 && ms < best) best = ms;
        }
        char name[64];
        snprintf(name, sizeof name, "%s/%s", segops_op_name(fn->op), segops_pass_name(fn->pass));
        printf("%-34s %9.2f %8.1f\n", name, best, bytes / (best * 1e-3) / 1e9);
      }
    segops_backend_free(b);
  }
  printf("\ndone\n");
  return 0;
}

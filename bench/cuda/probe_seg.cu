/* probe_seg.cu: kernel-shape probe for issue 12 (not part of the backend). Times candidate shapes
 * of a sorted segment reduction of float32 vec3 rows (segments of 1..63 rows, CSR int64 offsets,
 * double accumulators as the backend keeps) against a D2D copy in the same run:
 *   sum:  out[s] = sum x[i]                                     (reads 12 B/row)
 *   mixd: o1[i] = a[i]*y[s] + z[s]*c[i]; o2[i] = z[s]*b[i]; r[s] = sum dot(a[i], b[i])
 *         (mul's double backward: reads 36 B/row, writes 24 B/row)
 * Shapes: g8 (8 lanes per segment, one segment per group, loop unrolled U), g8p (8 lanes, rows of
 * a segment <= 64 loaded by a predicated full unroll before any add), thr (thread per segment),
 * smem (warp stages its 4 segments' rows in shared memory with coalesced loads, groups reduce
 * there; outputs staged and written coalesced). Usage: probe_seg [log2n] (default 25). */
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <vector>

#define CK(x)                                                                             \
  do {                                                                                    \
    cudaError_t e_ = (x);                                                                 \
    if (e_ != cudaSuccess) {                                                              \
      fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e_));          \
      exit(1);                                                                            \
    }                                                                                     \
  } while (0)

struct P {
  const float *x, *a, *b, *c, *y, *z;
  const int64_t *off;
  float *out, *o1, *o2, *r;
  int64_t s;
};

/* Butterfly of 3 accumulators over a group of 8 lanes; the writer stores segment g's row. */
__device__ __forceinline__ void sum8_store(const P &p, int64_t g, bool writer, double a0, double a1, double a2) {
  for (int o = 4; o > 0; o >>= 1) {
    a0 += __shfl_xor_sync(0xffffffffu, a0, o, 8);
    a1 += __shfl_xor_sync(0xffffffffu, a1, o, 8);
    a2 += __shfl_xor_sync(0xffffffffu, a2, o, 8);
  }
  if (writer) {
    p.out[3 * g] = (float)a0;
    p.out[3 * g + 1] = (float)a1;
    p.out[3 * g + 2] = (float)a2;
  }
}

/* ---- sum ---- */
template <int U>
__global__ void __launch_bounds__(256) sum_g8(P p) {
  const int64_t g = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 3;
  const int sl = threadIdx.x & 7;
  const bool ok = g < p.s;
  const int64_t beg = ok ? __ldg(p.off + g) : 0, end = ok ? __ldg(p.off + g + 1) : 0;
  double a0 = 0, a1 = 0, a2 = 0;
#pragma unroll U
  for (int64_t q = beg + sl; q < end; q += 8) {
    a0 += (double)__ldg(p.x + 3 * q);
    a1 += (double)__ldg(p.x + 3 * q + 1);
    a2 += (double)__ldg(p.x + 3 * q + 2);
  }
  sum8_store(p, g, ok && sl == 0, a0, a1, a2);
}

__global__ void __launch_bounds__(256) sum_g8p(P p) {
  const int64_t g = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 3;
  const int sl = threadIdx.x & 7;
  const bool ok = g < p.s;
  const int64_t beg = ok ? __ldg(p.off + g) : 0, end = ok ? __ldg(p.off + g + 1) : 0;
  double a0 = 0, a1 = 0, a2 = 0;
  for (int64_t base = beg; base < end; base += 64) {
    float v[8][3];
#pragma unroll
    for (int j = 0; j < 8; j++) {
      const int64_t q = base + sl + 8 * j;
      const int64_t qc = q < end ? q : beg; /* in bounds; not added */
      v[j][0] = __ldg(p.x + 3 * qc);
      v[j][1] = __ldg(p.x + 3 * qc + 1);
      v[j][2] = __ldg(p.x + 3 * qc + 2);
    }
#pragma unroll
    for (int j = 0; j < 8; j++)
      if (base + sl + 8 * j < end) {
        a0 += (double)v[j][0];
        a1 += (double)v[j][1];
        a2 += (double)v[j][2];
      }
  }
  sum8_store(p, g, ok && sl == 0, a0, a1, a2);
}

__global__ void __launch_bounds__(256) sum_thr(P p) {
  const int64_t s = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (s >= p.s) return;
  const int64_t beg = __ldg(p.off + s), end = __ldg(p.off + s + 1);
  double a0 = 0, a1 = 0, a2 = 0;
#pragma unroll 4
  for (int64_t q = beg; q < end; q++) {
    a0 += (double)__ldg(p.x + 3 * q);
    a1 += (double)__ldg(p.x + 3 * q + 1);
    a2 += (double)__ldg(p.x + 3 * q + 2);
  }
  p.out[3 * s] = (float)a0;
  p.out[3 * s + 1] = (float)a1;
  p.out[3 * s + 2] = (float)a2;
}

/* smem: warp w takes segments 4w..4w+3; stages their rows (at most 256) as floats. */
#define SM_ROWS 256
__global__ void __launch_bounds__(256) sum_smem(P p) {
  __shared__ float buf[8][SM_ROWS * 3];
  const int lane = threadIdx.x & 31, wib = threadIdx.x >> 5, sub = lane >> 3, sl = lane & 7;
  const int64_t w = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
  const int64_t s0 = w * 4;
  if (s0 >= p.s) return;
  const int ng = p.s - s0 < 4 ? (int)(p.s - s0) : 4;
  const int64_t o = lane <= ng ? __ldg(p.off + s0 + lane) : 0;
  const int64_t gb = __shfl_sync(0xffffffffu, o, 0), ge = __shfl_sync(0xffffffffu, o, ng);
  const int64_t nf = (ge - gb) * 3;
  float *b = buf[wib];
  const float *src = p.x + 3 * gb;
  /* coalesced: lane l takes floats l, l+32, ...; all loads before any store to smem */
  if (nf <= SM_ROWS * 3) {
    float t[24];
#pragma unroll
    for (int j = 0; j < 24; j++) {
      const int64_t k = lane + 32 * j;
      t[j] = k < nf ? __ldg(src + k) : 0.f;
    }
#pragma unroll
    for (int j = 0; j < 24; j++) {
      const int64_t k = lane + 32 * j;
      if (k < nf) b[k] = t[j];
    }
  }
  __syncwarp();
  const int g = sub;
  const bool ok = g < ng;
  const int64_t beg = __shfl_sync(0xffffffffu, o, ok ? g : 0), end = __shfl_sync(0xffffffffu, o, ok ? g + 1 : 0);
  double a0 = 0, a1 = 0, a2 = 0;
  if (ok) {
    if (nf <= SM_ROWS * 3) {
      for (int64_t q = beg + sl; q < end; q += 8) {
        const int64_t k = 3 * (q - gb);
        a0 += (double)b[k];
        a1 += (double)b[k + 1];
        a2 += (double)b[k + 2];
      }
    } else {
      for (int64_t q = beg + sl; q < end; q += 8) {
        a0 += (double)__ldg(p.x + 3 * q);
        a1 += (double)__ldg(p.x + 3 * q + 1);
        a2 += (double)__ldg(p.x + 3 * q + 2);
      }
    }
  }
  sum8_store(p, s0 + g, ok && sl == 0, a0, a1, a2);
}

/* ---- mixed (mul double backward shape) ---- */
template <int U>
__global__ void __launch_bounds__(256) mix_g8(P p) {
  const int64_t g = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 3;
  const int sl = threadIdx.x & 7;
  const bool ok = g < p.s;
  const int64_t beg = ok ? __ldg(p.off + g) : 0, end = ok ? __ldg(p.off + g + 1) : 0;
  const double y = ok ? (double)__ldg(p.y + g) : 0, z = ok ? (double)__ldg(p.z + g) : 0;
  double acc = 0;
#pragma unroll U
  for (int64_t q = beg + sl; q < end; q += 8) {
    double d = 0;
#pragma unroll
    for (int c = 0; c < 3; c++) {
      const double av = __ldg(p.a + 3 * q + c), bv = __ldg(p.b + 3 * q + c), cv = __ldg(p.c + 3 * q + c);
      p.o1[3 * q + c] = (float)(av * y + z * cv);
      p.o2[3 * q + c] = (float)(z * bv);
      d += av * bv;
    }
    acc += d;
  }
  for (int o = 4; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o, 8);
  if (ok && sl == 0) p.r[g] = (float)acc;
}

__global__ void __launch_bounds__(256) mix_g8p(P p) {
  const int64_t g = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 3;
  const int sl = threadIdx.x & 7;
  const bool ok = g < p.s;
  const int64_t beg = ok ? __ldg(p.off + g) : 0, end = ok ? __ldg(p.off + g + 1) : 0;
  const double y = ok ? (double)__ldg(p.y + g) : 0, z = ok ? (double)__ldg(p.z + g) : 0;
  double acc = 0;
  for (int64_t base = beg; base < end; base += 32) {
    float va[4][3], vb[4][3], vc[4][3];
#pragma unroll
    for (int j = 0; j < 4; j++) {
      const int64_t q = base + sl + 8 * j;
      const int64_t qc = q < end ? q : beg;
#pragma unroll
      for (int c = 0; c < 3; c++) {
        va[j][c] = __ldg(p.a + 3 * qc + c);
        vb[j][c] = __ldg(p.b + 3 * qc + c);
        vc[j][c] = __ldg(p.c + 3 * qc + c);
      }
    }
#pragma unroll
    for (int j = 0; j < 4; j++) {
      const int64_t q = base + sl + 8 * j;
      if (q < end) {
        double d = 0;
#pragma unroll
        for (int c = 0; c < 3; c++) {
          p.o1[3 * q + c] = (float)(va[j][c] * y + z * vc[j][c]);
          p.o2[3 * q + c] = (float)(z * vb[j][c]);
          d += (double)va[j][c] * vb[j][c];
        }
        acc += d;
      }
    }
  }
  for (int o = 4; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o, 8);
  if (ok && sl == 0) p.r[g] = (float)acc;
}

/* Reduction only in the segment kernel; element outputs by a separate coalesced elementwise
 * kernel over positions (needs idx: here found from a per-position segment id array). */
__global__ void __launch_bounds__(256) mix_red(P p) {
  const int64_t g = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 3;
  const int sl = threadIdx.x & 7;
  const bool ok = g < p.s;
  const int64_t beg = ok ? __ldg(p.off + g) : 0, end = ok ? __ldg(p.off + g + 1) : 0;
  double acc = 0;
#pragma unroll 4
  for (int64_t q = beg + sl; q < end; q += 8) {
    double d = 0;
#pragma unroll
    for (int c = 0; c < 3; c++) d += (double)__ldg(p.a + 3 * q + c) * __ldg(p.b + 3 * q + c);
    acc += d;
  }
  for (int o = 4; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o, 8);
  if (ok && sl == 0) p.r[g] = (float)acc;
}
__global__ void __launch_bounds__(256) mix_elem(P p, const int32_t *idx, int64_t n) {
  const int64_t stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t k = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; k < 3 * n; k += stride) {
    const int64_t i = k / 3;
    const int32_t s = __ldg(idx + i);
    const double y = __ldg(p.y + s), z = __ldg(p.z + s);
    p.o1[k] = (float)(__ldg(p.a + k) * y + z * __ldg(p.c + k));
    p.o2[k] = (float)(z * __ldg(p.b + k));
  }
}

__global__ void copy_k(const float4 *a, float4 *b, int64_t n4) {
  const int64_t stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += stride) b[i] = a[i];
}

template <typename F>
static float timeit(F f, int reps) {
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  std::vector<float> t;
  for (int r = 0; r < reps + 3; r++) {
    CK(cudaEventRecord(e0));
    f();
    CK(cudaEventRecord(e1));
    CK(cudaEventSynchronize(e1));
    float ms;
    CK(cudaEventElapsedTime(&ms, e0, e1));
    if (r >= 3) t.push_back(ms);
  }
  CK(cudaGetLastError());
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

int main(int argc, char **argv) {
  const int lg = argc > 1 ? atoi(argv[1]) : 25;
  const int64_t n = (int64_t)1 << lg;
  srand(7);
  std::vector<int64_t> off(1, 0);
  std::vector<int32_t> idx(n);
  while (off.back() < n) {
    int64_t l = 1 + rand() % 63;
    int64_t e = std::min(n, off.back() + l);
    for (int64_t i = off.back(); i < e; i++) idx[i] = (int32_t)(off.size() - 1);
    off.push_back(e);
  }
  const int64_t s = (int64_t)off.size() - 1;
  float *x, *a, *b, *c, *y, *z, *out, *o1, *o2, *r;
  int64_t *doff;
  int32_t *didx;
  const size_t rb = (size_t)n * 12;
  CK(cudaMalloc(&x, rb));
  CK(cudaMalloc(&a, rb));
  CK(cudaMalloc(&b, rb));
  CK(cudaMalloc(&c, rb));
  CK(cudaMalloc(&o1, rb));
  CK(cudaMalloc(&o2, rb));
  CK(cudaMalloc(&y, s * 4));
  CK(cudaMalloc(&z, s * 4));
  CK(cudaMalloc(&r, s * 4));
  CK(cudaMalloc(&out, s * 12));
  CK(cudaMalloc(&doff, (s + 1) * 8));
  CK(cudaMalloc(&didx, n * 4));
  std::vector<float> h(3 * n);
  for (int64_t i = 0; i < 3 * n; i++) h[i] = (float)((i * 2654435761u) % 1000) / 1000.f - 0.5f;
  for (float *d : {x, a, b, c}) CK(cudaMemcpy(d, h.data(), rb, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(y, h.data(), s * 4, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(z, h.data() + 5, s * 4, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(doff, off.data(), (s + 1) * 8, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(didx, idx.data(), n * 4, cudaMemcpyHostToDevice));
  P p = {x, a, b, c, y, z, doff, out, o1, o2, r, s};
  int sms;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const int reps = 30;
  const float tc = timeit([&] { copy_k<<<sms * 16, 256>>>((const float4 *)a, (float4 *)o1, (int64_t)rb / 16); }, reps);
  const double copy_gbs = 2.0 * rb / (tc * 1e6);
  printf("N=2^%d S=%lld copy %.1f GB/s (%.3f ms for %zu B read+written)\n", lg, (long long)s, copy_gbs, tc, 2 * rb);
  const unsigned g8 = (unsigned)((s * 8 + 255) / 256), g1 = (unsigned)((s + 255) / 256),
                 gw = (unsigned)((((s + 3) / 4) * 32 + 255) / 256);
  const double sb = rb + s * 12.0, mb = rb * 5.0 + s * 12.0;
  auto row = [&](const char *name, double bytes, float ms) {
    printf("%-10s %8.1f us  %7.1f GB/s  %5.1f %% of copy\n", name, ms * 1e3, bytes / (ms * 1e6),
           100.0 * bytes / (ms * 1e6) / copy_gbs);
  };
  std::vector<float> ref(3 * s), got(3 * s);
  sum_g8<1><<<g8, 256>>>(p);
  CK(cudaMemcpy(ref.data(), out, s * 12, cudaMemcpyDeviceToHost));
  auto check = [&](const char *name) {
    CK(cudaMemcpy(got.data(), out, s * 12, cudaMemcpyDeviceToHost));
    if (memcmp(ref.data(), got.data(), s * 12)) printf("%s: DIFFERS from sum_g8<1>\n", name);
  };
  row("sum_g8u1", sb, timeit([&] { sum_g8<1><<<g8, 256>>>(p); }, reps));
  row("sum_g8u2", sb, timeit([&] { sum_g8<2><<<g8, 256>>>(p); }, reps));
  check("g8u2");
  row("sum_g8u4", sb, timeit([&] { sum_g8<4><<<g8, 256>>>(p); }, reps));
  check("g8u4");
  row("sum_g8u8", sb, timeit([&] { sum_g8<8><<<g8, 256>>>(p); }, reps));
  row("sum_g8p", sb, timeit([&] { sum_g8p<<<g8, 256>>>(p); }, reps));
  check("g8p");
  row("sum_thr", sb, timeit([&] { sum_thr<<<g1, 256>>>(p); }, reps));
  row("sum_smem", sb, timeit([&] { sum_smem<<<gw, 256>>>(p); }, reps));
  check("smem");
  row("mix_g8u1", mb, timeit([&] { mix_g8<1><<<g8, 256>>>(p); }, reps));
  row("mix_g8u2", mb, timeit([&] { mix_g8<2><<<g8, 256>>>(p); }, reps));
  row("mix_g8u4", mb, timeit([&] { mix_g8<4><<<g8, 256>>>(p); }, reps));
  row("mix_g8p", mb, timeit([&] { mix_g8p<<<g8, 256>>>(p); }, reps));
  row("mix_2k", mb + n * 4.0, timeit([&] {
        mix_red<<<g8, 256>>>(p);
        mix_elem<<<sms * 32, 256>>>(p, didx, n);
      }, reps));
  row("mix_red", rb * 2 + s * 4.0, timeit([&] { mix_red<<<g8, 256>>>(p); }, reps));
  row("mix_elem", rb * 5 + n * 4.0, timeit([&] { mix_elem<<<sms * 32, 256>>>(p, didx, n); }, reps));
  return 0;
}

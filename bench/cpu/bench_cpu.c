/* bench_cpu.c: segops_bench_cpu, every function of the CPU backend at N vec3 elements (default
 * 2^22, about 32 per segment, sorted idx), or at rows of other widths w = prod(F) (--width 1,16,256:
 * N = --elems / w rows each, so every width moves the same bytes; --unsorted shuffles idx),
 * reporting GB/s of minimal memory traffic (each input
 * the formula reads, read once; each output written once; idx included) and the ratio to a
 * memcpy moving as many bytes (read + written), with as many threads as the backend, measured
 * in the same run, rep by rep alternating with the function. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend.h"
#include "errors.h"

typedef struct {
  int64_t n;
  int reps, threads, seg_min, seg_max;
  int dtypes; /* bit 0: float32, bit 1: float64 */
  bool csv;
  const char *only;   /* run only functions whose "op/pass" contains this */
  int64_t widths[16]; /* row widths w = prod(F) */
  int nwidths;
  int64_t elems; /* > 0: N = elems / w rows at each width (else N = n) */
  bool unsorted; /* idx shuffled (the same segments, in random order) */
  bool mul_wide; /* mul with y (S,*F) instead of y (S,) */
} options;

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static uint64_t rng_state = 0x5e90b5;
static uint64_t rnd(void) {
  uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

typedef struct {
  char *dst;
  const char *src;
  size_t len;
} copy_part;

static void *copy_main(void *vp) {
  copy_part *c = vp;
  memcpy(c->dst, c->src, c->len);
  return NULL;
}

/* One memcpy of len bytes split over `threads` threads (contiguous slices, like the backend's
 * chunks), so the floor uses as many cores as the backend does. */
static void parallel_copy(char *dst, const char *src, size_t len, int threads) {
  enum { MAXT = 256 };
  pthread_t th[MAXT];
  copy_part parts[MAXT];
  bool running[MAXT] = {false};
  if (threads > MAXT) threads = MAXT;
  if (threads < 1) threads = 1;
  size_t step = (len + (size_t)threads - 1) / (size_t)threads;
  for (int t = 0; t < threads; t++) {
    size_t lo = (size_t)t * step < len ? (size_t)t * step : len, hi = lo + step < len ? lo + step : len;
    parts[t] = (copy_part){dst + lo, src + lo, hi - lo};
  }
  for (int t = 1; t < threads; t++) running[t] = pthread_create(&th[t], NULL, copy_main, &parts[t]) == 0;
  copy_main(&parts[0]);
  for (int t = 1; t < threads; t++) {
    if (running[t])
      pthread_join(th[t], NULL);
    else
      copy_main(&parts[t]); /* could not start a thread: copy here */
  }
}

/* A memcpy floor for `traffic` bytes (half read, half written) with `threads` threads: its
 * buffers, allocated and faulted in once, and the best time seen so far. */
typedef struct {
  char *src, *dst;
  size_t half;
  int threads;
  double best;
} copy_floor;

static bool floor_init(copy_floor *f, size_t traffic, int threads) {
  f->half = traffic / 2 > 0 ? traffic / 2 : 1;
  f->src = malloc(f->half);
  f->dst = malloc(f->half);
  f->best = 1e30;
  if (!f->src || !f->dst) return false;
  memset(f->src, 1, f->half);
  memset(f->dst, 2, f->half);
  /* Small copies: starting threads would cost more than the copy (smoke runs only). */
  f->threads = threads;
  if ((size_t)f->threads > f->half / (1u << 20))
    f->threads = (int)(f->half / (1u << 20)) > 0 ? (int)(f->half / (1u << 20)) : 1;
  return true;
}

/* One timed copy; run 0 only warms up. */
static void floor_rep(copy_floor *f, int r) {
  double t0 = now();
  parallel_copy(f->dst, f->src, f->half, f->threads);
  double t = now() - t0;
  if (r > 0 && t < f->best) f->best = t;
  f->src[(size_t)r % f->half] ^= f->dst[((size_t)r * 7) % f->half]; /* keep the copies observable */
}

static void floor_free(copy_floor *f) {
  free(f->src);
  free(f->dst);
}

static int bench_fn(segops_backend *be, const segops_fn_desc *fn, segops_dtype dt, int64_t w, int64_t n, int64_t s,
                    const int32_t *idx, const options *o) {
  size_t isz = dt == SEGOPS_F32 ? 4 : 8, traffic = (size_t)n * sizeof(int32_t);
  segops_call call = {.fn = fn,
                      .dtype = dt,
                      .width = w,
                      .y_wide = o->mul_wide && fn->op == SEGOPS_OP_MUL,
                      .n = n,
                      .s = s,
                      .idx = idx,
                      .idx_sorted = !o->unsorted};
  void *bufs[SEGOPS_MAX_INPUTS + SEGOPS_MAX_OUTPUTS] = {0};
  int nb = 0, rc = 0;
  for (int k = 0; k < fn->n_in; k++) {
    if (fn->in[k].use == SEGOPS_ARG_UNREAD) continue; /* not read by the formula: not passed */
    size_t bytes = (size_t)segops_call_count(&call, fn->in[k].shape) * isz;
    unsigned char *p = malloc(bytes ? bytes : 1);
    if (!p) goto oom;
    bufs[nb++] = p;
    for (size_t b = 0; b < bytes; b += isz) { /* values in [-1, 1) */
      double v = (double)(rnd() >> 11) * (2.0 / 9007199254740992.0) - 1.0;
      if (dt == SEGOPS_F32) {
        float f = (float)v;
        memcpy(p + b, &f, 4);
      } else {
        memcpy(p + b, &v, 8);
      }
    }
    call.in[k] = p;
    traffic += bytes;
  }
  for (int k = 0; k < fn->n_out; k++) {
    size_t bytes = (size_t)segops_call_count(&call, fn->out[k].shape) * isz;
    void *p = aligned_alloc(64, ((bytes + 63) & ~(size_t)63) + 64);
    if (!p) goto oom;
    memset(p, 0, bytes); /* fault the pages in before timing */
    bufs[nb++] = p;
    call.out[k] = p;
    traffic += bytes;
  }
  /* The function and the copy alternate, rep by rep, so both see the same machine (it is shared:
   * other work comes and goes); each keeps its best time. */
  copy_floor cf;
  if (!floor_init(&cf, traffic, o->threads)) {
    floor_free(&cf);
    goto oom;
  }
  double best = 1e30;
  char err[256] = "";
  for (int r = 0; r <= o->reps; r++) {
    double t0 = now();
    rc = be->run(be->ctx, 0, &call, err, sizeof err);
    double t = now() - t0;
    if (rc) {
      fprintf(stderr, "%s/%s: %s\n", segops_op_name(fn->op), segops_pass_name(fn->pass), err);
      floor_free(&cf);
      goto done;
    }
    if (r > 0 && t < best) best = t;
    floor_rep(&cf, r);
  }
  double tm = cf.best * (double)traffic / (double)(2 * cf.half);
  floor_free(&cf);
  double gbs = (double)traffic / best * 1e-9, mgbs = tm > 0 ? (double)traffic / tm * 1e-9 : 0;
  char name[64];
  snprintf(name, sizeof name, "%s/%s", segops_op_name(fn->op), segops_pass_name(fn->pass));
  if (o->csv)
    printf("%s,%s,%lld,%zu,%.6e,%.3f,%.3f,%.3f,%lld,%d\n", name, segops_dtype_name(dt), (long long)n, traffic, best,
           gbs, mgbs, mgbs > 0 ? gbs / mgbs : 0, (long long)w, !o->unsorted);
  else
    printf("%-36s %-8s %5lld %9.1f %9.3f %8.2f %8.2f %7.2f\n", name, segops_dtype_name(dt), (long long)w,
           (double)traffic / 1e6, best * 1e3, gbs, mgbs, mgbs > 0 ? gbs / mgbs : 0);
  fflush(stdout);
  goto done;
oom:
  fprintf(stderr, "out of memory\n");
  rc = 1;
done:
  for (int k = 0; k < nb; k++) free(bufs[k]);
  return rc;
}

static void usage(const char *argv0) {
  fprintf(stderr,
          "usage: %s [--n N] [--reps R] [--threads T] [--seg-len MIN MAX] [--dtype f32|f64|both] [--only TEXT] "
          "[--csv]\n"
          "          [--width W[,W...]] [--elems E] [--unsorted] [--mul-wide]\n"
          "  defaults: N=4194304 (2^22) vec3 elements, R=5 (best of R after one warm-up), T=all CPUs,\n"
          "  segment lengths uniform in [16,48] (mean 32), idx sorted, width 3.\n"
          "  --width: row widths w = prod(F) (matvec runs at 3 only); --elems E: N = E / w rows at each\n"
          "  width (the same bytes at every width); --unsorted: idx shuffled; --mul-wide: mul's y (S,*F)\n",
          argv0);
}

int main(int argc, char **argv) {
  options o = {.n = (int64_t)1 << 22,
               .reps = 5,
               .threads = 0,
               .seg_min = 16,
               .seg_max = 48,
               .dtypes = 3,
               .widths = {3},
               .nwidths = 1};
  for (int a = 1; a < argc; a++) {
    const char *f = argv[a];
    if (!strcmp(f, "--n") && a + 1 < argc)
      o.n = strtoll(argv[++a], NULL, 0);
    else if (!strcmp(f, "--reps") && a + 1 < argc)
      o.reps = atoi(argv[++a]);
    else if (!strcmp(f, "--threads") && a + 1 < argc)
      o.threads = atoi(argv[++a]);
    else if (!strcmp(f, "--seg-len") && a + 2 < argc) {
      o.seg_min = atoi(argv[++a]);
      o.seg_max = atoi(argv[++a]);
    } else if (!strcmp(f, "--dtype") && a + 1 < argc) {
      const char *d = argv[++a];
      o.dtypes = !strcmp(d, "f32") ? 1 : !strcmp(d, "f64") ? 2 : 3;
    } else if (!strcmp(f, "--only") && a + 1 < argc)
      o.only = argv[++a];
    else if (!strcmp(f, "--csv"))
      o.csv = true;
    else if (!strcmp(f, "--unsorted"))
      o.unsorted = true;
    else if (!strcmp(f, "--mul-wide"))
      o.mul_wide = true;
    else if (!strcmp(f, "--elems") && a + 1 < argc)
      o.elems = strtoll(argv[++a], NULL, 0);
    else if (!strcmp(f, "--width") && a + 1 < argc) {
      o.nwidths = 0;
      for (char *t = argv[++a]; *t && o.nwidths < 16;) {
        o.widths[o.nwidths++] = strtoll(t, &t, 0);
        if (*t == ',')
          t++;
        else if (*t)
          break;
      }
    } else {
      usage(argv[0]);
      return 2;
    }
  }
  if (o.n < 1 || o.reps < 1 || o.seg_min < 1 || o.seg_max < o.seg_min || o.nwidths < 1) {
    usage(argv[0]);
    return 2;
  }
  for (int k = 0; k < o.nwidths; k++)
    if (o.widths[k] < 1 || (o.elems > 0 && o.elems / o.widths[k] < 1)) {
      usage(argv[0]);
      return 2;
    }
  segops_backend *be = segops_cpu_backend_new(o.threads);
  if (!be) return 1;
  if (o.threads <= 0) o.threads = be->n_devices; /* the CPU backend's n_devices is its thread count */
  segops_device_info info;
  be->device_info(be->ctx, 0, &info);
  if (o.csv)
    printf("function,dtype,n,bytes,seconds,gbps,memcpy_gbps,ratio,width,sorted\n");
  else
    printf(
        "segops_bench_cpu: %s, %s idx, segments of %d-%d rows, best of %d\n"
        "traffic = inputs read once + outputs written once + idx; memcpy: the same traffic (read + written)\n"
        "copied by %d threads; ratio = GB/s / memcpy GB/s\n",
        info.name, o.unsorted ? "unsorted" : "sorted", o.seg_min, o.seg_max, o.reps, o.threads);
  int rc = 0;
  for (int wi = 0; wi < o.nwidths; wi++) {
    const int64_t w = o.widths[wi], n = o.elems > 0 ? o.elems / w : o.n;
    /* Segment lengths uniform in [seg_min, seg_max], in order; shuffled for --unsorted. */
    int32_t *idx = malloc((size_t)n * sizeof *idx);
    if (!idx) return 1;
    int64_t s = 0;
    for (int64_t i = 0; i < n; s++) {
      int64_t len = o.seg_min + (int64_t)(rnd() % (uint64_t)(o.seg_max - o.seg_min + 1));
      for (int64_t j = 0; j < len && i < n; j++) idx[i++] = (int32_t)s;
    }
    if (o.unsorted)
      for (int64_t i = n - 1; i > 0; i--) {
        const int64_t k = (int64_t)(rnd() % (uint64_t)(i + 1));
        const int32_t t = idx[i];
        idx[i] = idx[k];
        idx[k] = t;
      }
    if (!o.csv)
      printf("width %lld: N=%lld rows, S=%lld (%.1f per segment)\n%-36s %-8s %5s %9s %9s %8s %8s %7s\n", (long long)w,
             (long long)n, (long long)s, (double)n / (double)s, "function", "dtype", "w", "MB", "ms", "GB/s", "memcpy",
             "ratio");
    for (int d = 0; d < 2; d++) {
      if (!((o.dtypes >> d) & 1)) continue;
      for (int op = 0; op < SEGOPS_OP_COUNT; op++)
        for (int pass = 0; pass < SEGOPS_PASS_COUNT; pass++) {
          const segops_fn_desc *fn = segops_fn((segops_op)op, (segops_pass)pass);
          char name[64];
          snprintf(name, sizeof name, "%s/%s", segops_op_name(fn->op), segops_pass_name(fn->pass));
          if (o.only && !strstr(name, o.only)) continue;
          if (fn->vec3_only && w != 3) continue;
          rc |= bench_fn(be, fn, d ? SEGOPS_F64 : SEGOPS_F32, w, n, s, idx, &o);
        }
    }
    free(idx);
  }
  segops_backend_free(be);
  return rc;
}

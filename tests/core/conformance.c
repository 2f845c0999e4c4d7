/* conformance.c: the backend conformance harness. One case list (the exact cases of proto/API.md, its
 * layouts, edge layouts, unsorted idx, every function x dtype x width, omitted cotangents,
 * output subsets) run against a plain float64 reference, with guard bytes, poisoned outputs and
 * unaligned inputs. Usage: segops_conformance --backend cpu|cuda [--quick] [--digest FILE]. The one harness for
 * every backend (the CUDA tests in tests/cuda cover determinism in batches, limits and OOM).
 * For cuda it also compares with the CPU backend and checks repeated runs for identical bits;
 * without a usable GPU it exits 77 (skipped), or fails when SEGOPS_REQUIRE_CUDA=1.
 * --digest FILE writes a hash of every output of every random case, one line each, so that two
 * builds of a backend can be compared bit for bit (the case list and its inputs are seeded). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "errors.h"
#include "ref.h"
#include "test_util.h"

static segops_backend *target; /* the backend under test */
static segops_backend *cpu;    /* the CPU backend (== target when testing cpu) */
static bool target_is_cuda;
/* --quick or SEGOPS_CUDA_TEST_QUICK=1 (runs under compute-sanitizer): no variants, one case each. */
static bool quick;
static FILE *digest; /* --digest: one line per output of every random case */

static const segops_dtype DTYPES[2] = {SEGOPS_F32, SEGOPS_F64};

static double tolerance(segops_dtype dt, int64_t max_count) {
  if (dt == SEGOPS_F64) return 1e-12;
  return max_count > 10000 ? 1e-4 : 1e-5;
}

/* FNV-1a over the bytes of an output. */
static uint64_t fnv1a(const void *p, size_t len) {
  const unsigned char *b = p;
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < len; i++) h = (h ^ b[i]) * 1099511628211ull;
  return h;
}

static const char *fn_label(const segops_fn_desc *fn, char *buf, size_t len) {
  snprintf(buf, len, "%s/%s", segops_op_name(fn->op), segops_pass_name(fn->pass));
  return buf;
}

/* Runs call on backend b; returns false (after recording a failure) when it reports an error. */
static bool run_call(segops_backend *b, const segops_call *call, const char *what) {
  char err[256] = "";
  int rc = b->run(b->ctx, 0, call, err, sizeof err);
  TU_CHECK(rc == SEGOPS_OK, "%s: %s backend returned %d (%s)", what, b->name, rc, err);
  return rc == SEGOPS_OK;
}

/* ---- Random cases against the reference ---- */

typedef struct {
  unsigned omit;     /* bit k: input k passed as NULL (only COTAN and UNREAD inputs) */
  unsigned outs;     /* bit k: output k requested */
  const char *label; /* for messages */
} variant;

/* Fills values for input k of fn: uniform in [-1, 1], rounded to dt. rms_norm's x gets whole
 * zero rows for every segment s with s % 5 == 1 (zero-norm segments). max's and min's x takes
 * nine values (multiples of 1/4, 0 with either sign): most extrema tie, so every driver's lanes,
 * chunks and orders must keep the lowest index. */
static void fill_input(const segops_fn_desc *fn, int k, const tu_layout *L, int64_t w, segops_dtype dt, tu_rng *rng,
                       double *v, int64_t count) {
  for (int64_t j = 0; j < count; j++) v[j] = tu_round(dt, tu_uniform(rng, -1.0, 1.0));
  if (fn->op == SEGOPS_OP_RMS_NORM && strcmp(fn->in[k].name, "x") == 0)
    for (int64_t i = 0; i < L->n; i++)
      if (L->idx[i] % 5 == 1)
        for (int64_t c = 0; c < w; c++) v[i * w + c] = 0.0;
  if ((fn->op == SEGOPS_OP_MAX || fn->op == SEGOPS_OP_MIN) && strcmp(fn->in[k].name, "x") == 0)
    for (int64_t j = 0; j < count; j++) v[j] = round(v[j] * 4.0) / 4.0;
}

static void check_case(const tu_layout *L, const segops_fn_desc *fn, segops_dtype dt, int64_t w, bool y_wide,
                       const variant *var, tu_rng *rng) {
  char lab[64], what[320];
  snprintf(what, sizeof what, "[%s] %s %s w=%lld%s %s", L->name, fn_label(fn, lab, sizeof lab), segops_dtype_name(dt),
           (long long)w, y_wide ? " y=(S,*F)" : "", var->label);
  double *vals[SEGOPS_MAX_INPUTS] = {0};
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
    if ((var->omit >> k) & 1u && fn->in[k].use != SEGOPS_ARG_REQ) continue;
    int64_t count = segops_call_count(&call, fn->in[k].shape);
    vals[k] = malloc((size_t)(count ? count : 1) * sizeof(double));
    fill_input(fn, k, L, w, dt, rng, vals[k], count);
    ins[k] = tu_input(dt, vals[k], count, 1 + (size_t)(3 * k) % 7); /* skews 1,4,7,3,6: never aligned */
    call.in[k] = ins[k].data;
  }
  /* The reference sees omitted cotangents as NULL (zeros) and never needs UNREAD inputs. */
  const double *rin[SEGOPS_MAX_INPUTS] = {0};
  for (int k = 0; k < fn->n_in; k++) rin[k] = vals[k];
  double *ref[SEGOPS_MAX_OUTPUTS] = {0};
  int64_t ocount[SEGOPS_MAX_OUTPUTS] = {0};
  tu_buf outs[SEGOPS_MAX_OUTPUTS] = {0}, outs2[SEGOPS_MAX_OUTPUTS] = {0}, outs_cpu[SEGOPS_MAX_OUTPUTS] = {0};
  for (int o = 0; o < fn->n_out; o++) {
    ocount[o] = segops_call_count(&call, fn->out[o].shape);
    ref[o] = malloc((size_t)(ocount[o] ? ocount[o] : 1) * sizeof(double));
  }
  ref_run_y(fn->op, fn->pass, w, y_wide, L->n, L->s, L->idx, rin, ref);

  for (int o = 0; o < fn->n_out; o++)
    if ((var->outs >> o) & 1u) {
      outs[o] = tu_output(dt, ocount[o]);
      call.out[o] = outs[o].data;
    }
  const double tol = tolerance(dt, L->max_count);
  if (run_call(target, &call, what)) {
    for (int o = 0; o < fn->n_out; o++) {
      if (!((var->outs >> o) & 1u)) continue;
      TU_CHECK(tu_guards_ok(&outs[o]), "%s: output %s written out of bounds", what, fn->out[o].name);
      double worst = 0;
      int64_t worst_at = -1;
      for (int64_t j = 0; j < ocount[o]; j++) {
        double e = tu_relerr(tu_get(dt, outs[o].data, j), ref[o][j]);
        if (e > worst) worst = e, worst_at = j;
      }
      TU_CHECK(worst <= tol, "%s: %s[%lld] = %.17g, reference %.17g (rel err %.3g > %.1g)", what, fn->out[o].name,
               (long long)worst_at, worst_at >= 0 ? tu_get(dt, outs[o].data, worst_at) : 0.0,
               worst_at >= 0 ? ref[o][worst_at] : 0.0, worst, tol);
      if (digest)
        fprintf(digest, "%s\t%s\t%016llx\n", what, fn->out[o].name,
                (unsigned long long)fnv1a(outs[o].data, outs[o].nbytes));
    }
    /* Determinism: a second run gives the same bits. */
    segops_call call2 = call;
    for (int o = 0; o < fn->n_out; o++)
      if ((var->outs >> o) & 1u) {
        outs2[o] = tu_output(dt, ocount[o]);
        call2.out[o] = outs2[o].data;
      }
    if (run_call(target, &call2, what))
      for (int o = 0; o < fn->n_out; o++)
        if ((var->outs >> o) & 1u)
          TU_CHECK(memcmp(outs[o].data, outs2[o].data, outs[o].nbytes) == 0, "%s: %s differs between two runs", what,
                   fn->out[o].name);
    /* Another backend against the CPU reference backend. */
    if (target_is_cuda) {
      segops_call callc = call;
      for (int o = 0; o < fn->n_out; o++)
        if ((var->outs >> o) & 1u) {
          outs_cpu[o] = tu_output(dt, ocount[o]);
          callc.out[o] = outs_cpu[o].data;
        }
      if (run_call(cpu, &callc, what))
        for (int o = 0; o < fn->n_out; o++) {
          if (!((var->outs >> o) & 1u)) continue;
          double worst = 0;
          for (int64_t j = 0; j < ocount[o]; j++) {
            double e = tu_relerr(tu_get(dt, outs[o].data, j), tu_get(dt, outs_cpu[o].data, j));
            if (e > worst) worst = e;
          }
          TU_CHECK(worst <= 2 * tol, "%s: %s differs from the CPU backend (rel err %.3g)", what, fn->out[o].name,
                   worst);
          /* max and min select an element: no rounding, so the same bits as the CPU backend */
          if (fn->op == SEGOPS_OP_MAX || fn->op == SEGOPS_OP_MIN)
            TU_CHECK(memcmp(outs[o].data, outs_cpu[o].data, outs[o].nbytes) == 0,
                     "%s: %s is not bit-identical to the CPU backend's", what, fn->out[o].name);
        }
    }
  }
  for (int k = 0; k < SEGOPS_MAX_INPUTS; k++) {
    free(vals[k]);
    tu_buf_free(&ins[k]);
  }
  for (int o = 0; o < SEGOPS_MAX_OUTPUTS; o++) {
    free(ref[o]);
    tu_buf_free(&outs[o]);
    tu_buf_free(&outs2[o]);
    tu_buf_free(&outs_cpu[o]);
  }
}

/* Row widths w = prod(F) beyond 1 and 3 (the constant-width code): F = (2,), (4,3), (16,),
 * (2,3,3), (64,), (256,) and prod(F) = 0, through the general-width code. Which a layout gets:
 * wide_level 0 none, 1 w = 16 only, 2 all (small layouts: keeps the harness's time). */
static const int64_t WIDE[] = {2, 12, 16, 18, 64, 256, 0};
static int wide_level = 2;

/* Every function, dtype and width on one layout; small layouts also get every variant (at width
 * 1 and 3, and at 16). mul also with y (S,*F) at every width. */
static void check_layout(const tu_layout *L, bool variants, tu_rng *rng) {
  int64_t widths[2 + sizeof WIDE / sizeof WIDE[0]];
  int nw = 0;
  widths[nw++] = 1;
  widths[nw++] = 3;
  for (size_t k = 0; k < sizeof WIDE / sizeof WIDE[0]; k++)
    if (wide_level == 2 || (wide_level == 1 && WIDE[k] == 16)) widths[nw++] = WIDE[k];
  for (int op = 0; op < SEGOPS_OP_COUNT; op++)
    for (int pass = 0; pass < SEGOPS_PASS_COUNT; pass++) {
      const segops_fn_desc *fn = segops_fn((segops_op)op, (segops_pass)pass);
      unsigned all = (1u << fn->n_out) - 1;
      for (int d = 0; d < 2; d++)
        for (int wi = 0; wi < nw; wi++)
          for (int yw = 0; yw <= (op == SEGOPS_OP_MUL); yw++) {
            const int64_t w = widths[wi];
            const bool y_wide = yw;
            if (fn->vec3_only && w != 3) continue;
            variant full = {0, all, "all inputs, all outputs"};
            check_case(L, fn, DTYPES[d], w, y_wide, &full, rng);
            if (!variants || quick || (w != 1 && w != 3 && w != 16)) continue;
            unsigned optional = 0;
            for (int k = 0; k < fn->n_in; k++)
              if (fn->in[k].use != SEGOPS_ARG_REQ) optional |= 1u << k;
            variant none = {optional, all, "optional inputs omitted"};
            if (optional) check_case(L, fn, DTYPES[d], w, y_wide, &none, rng);
            for (int k = 0; k < fn->n_in; k++)
              if (fn->in[k].use == SEGOPS_ARG_COTAN) {
                char label[64];
                snprintf(label, sizeof label, "%s omitted", fn->in[k].name);
                variant one = {1u << k, all, label};
                check_case(L, fn, DTYPES[d], w, y_wide, &one, rng);
              }
            if (fn->n_out > 1)
              for (int o = 0; o < fn->n_out; o++) {
                char label[64];
                snprintf(label, sizeof label, "outputs=[%s]", fn->out[o].name);
                variant sub = {0, 1u << o, label};
                check_case(L, fn, DTYPES[d], w, y_wide, &sub, rng);
                variant rest = {0, all & ~(1u << o), "all outputs but one"};
                if (fn->n_out > 2) check_case(L, fn, DTYPES[d], w, y_wide, &rest, rng);
              }
          }
    }
}

static void random_lengths(tu_rng *rng, int64_t n, int64_t s, int64_t *lens) {
  /* Every segment non-empty: one element each, the rest spread at random. */
  for (int64_t k = 0; k < s; k++) lens[k] = 1;
  for (int64_t i = s; i < n; i++) lens[tu_below(rng, s)]++;
}

static void run_layouts(void) {
  tu_rng rng = {12345};
  tu_layout L;
#define RUN(expr, variants)                                                                 \
  do {                                                                                      \
    L = (expr);                                                                             \
    wide_level = L.n <= 1000 ? 2 : L.n <= 40000 ? 1 : 0;                                    \
    long before = tu_failures;                                                              \
    double t0 = tu_seconds();                                                               \
    check_layout(&L, variants, &rng);                                                       \
    printf("  %-48s N=%-7lld S=%-6lld %s %.2f s\n", L.name, (long long)L.n, (long long)L.s, \
           tu_failures == before ? "ok  " : "FAIL", tu_seconds() - t0);                     \
    tu_layout_free(&L);                                                                     \
  } while (0)

  const int64_t golden_lens[] = {500, 1, 3, 200, 2, 1, 50, 1, 1, 100};
  RUN(tu_layout_from_lengths("golden lengths", golden_lens, 10, NULL), true);
  RUN(tu_layout_from_lengths("golden lengths", golden_lens, 10, &rng), true);
  int64_t lens[256];
  for (int k = 0; k < 12; k++) lens[k] = 100;
  RUN(tu_layout_from_lengths("uniform N=1200 S=12", lens, 12, NULL), false);
  RUN(tu_layout_from_lengths("uniform N=1200 S=12", lens, 12, &rng), false);
  /* Sorted idx announced as unsorted (idx_sorted is only a hint that it is sorted): the
   * counting-sort path must give the same results as the sorted path. */
  L = tu_layout_from_lengths("uniform N=1200 S=12, sorted but flagged unsorted", lens, 12, NULL);
  L.sorted = false;
  check_layout(&L, false, &rng);
  tu_layout_free(&L);
  for (int k = 0; k < 256; k++) lens[k] = 1;
  RUN(tu_layout_from_lengths("singletons N=S=256", lens, 256, NULL), true);
  RUN(tu_layout_from_lengths("singletons N=S=256", lens, 256, &rng), false);
  const int64_t big[] = {10000, 8500, 10240};
  for (int b = 0; b < 3; b++) {
    char name[64];
    snprintf(name, sizeof name, "one segment of %lld", (long long)big[b]);
    RUN(tu_layout_from_lengths(name, &big[b], 1, NULL), false);
  }
  const int64_t ns[][2] = {{12, 4}, {64, 8}, {100, 5}, {24, 24}};
  for (int c = 0; c < 4; c++) {
    char name[64];
    snprintf(name, sizeof name, "N=%lld S=%lld", (long long)ns[c][0], (long long)ns[c][1]);
    random_lengths(&rng, ns[c][0], ns[c][1], lens);
    RUN(tu_layout_from_lengths(name, lens, ns[c][1], NULL), true);
    RUN(tu_layout_from_lengths(name, lens, ns[c][1], &rng), true);
  }
  /* Segments longer than a GPU chunk (1024) next to short ones, and many mid-size ones. */
  const int64_t chunky[][2] = {{7000, 3}, {3000, 2000}};
  for (int c = 0; c < 2; c++) {
    char name[64];
    snprintf(name, sizeof name, "N=%lld S=%lld", (long long)chunky[c][0], (long long)chunky[c][1]);
    int64_t *cl = malloc((size_t)chunky[c][1] * sizeof *cl);
    random_lengths(&rng, chunky[c][0], chunky[c][1], cl);
    RUN(tu_layout_from_lengths(name, cl, chunky[c][1], NULL), c == 0);
    RUN(tu_layout_from_lengths(name, cl, chunky[c][1], &rng), false);
    free(cl);
  }
  const int64_t trailing[] = {3, 2, 0}, holes[] = {0, 4, 0, 0, 3, 0, 1, 0};
  RUN(tu_layout_from_lengths("empty trailing segment", trailing, 3, NULL), true);
  RUN(tu_layout_from_lengths("empty segments first/middle/last", holes, 8, NULL), true);
  RUN(tu_layout_from_lengths("empty segments first/middle/last", holes, 8, &rng), true);
  RUN(tu_layout_from_lengths("N=0 S=1", trailing + 2, 1, NULL), true);
  /* A segment whose length is a multiple of four ending in the last 1-3 elements of idx, then
   * short segments to the end (a sorted walk that reduces four at a time reaches the end of idx
   * just past such a segment: the 1-3 after it are another segment's). */
  for (int64_t a = 4; a <= 12; a += 4)
    for (int64_t b = 1; b <= 3; b++) {
      const int64_t tails[][4] = {{a, b}, {5, a, b}, {a, 0, b}, {a, 1, b - 1 > 0 ? b - 1 : 1}};
      const int64_t ns[] = {2, 3, 3, 3};
      for (int t = 0; t < 4; t++) {
        char tname[96];
        snprintf(tname, sizeof tname, "four-multiple segment before the last %d-element tail (%d)", (int)b, t);
        RUN(tu_layout_from_lengths(tname, tails[t], ns[t], NULL), true);
      }
    }
  { /* Rows of 2^20 values (forward and backward, float32): the general-width code keeps no
     * per-row or per-column storage on a stack, sorted or not. */
    const int64_t wide_lens[] = {2, 0, 1};
    for (int shuffled = 0; shuffled < 2; shuffled++) {
      L = tu_layout_from_lengths("N=3 S=3, rows of 2^20 values", wide_lens, 3, shuffled ? &rng : NULL);
      const long before = tu_failures;
      for (int op = 0; op < SEGOPS_OP_COUNT; op++)
        for (int pass = 0; pass < 2; pass++)
          for (int yw = 0; yw <= (op == SEGOPS_OP_MUL); yw++) {
            const segops_fn_desc *fn = segops_fn((segops_op)op, (segops_pass)pass);
            if (fn->vec3_only) continue;
            variant full = {0, (1u << fn->n_out) - 1, "all inputs, all outputs"};
            check_case(&L, fn, SEGOPS_F32, (int64_t)1 << 20, yw, &full, &rng);
          }
      printf("  %-48s N=%-7lld S=%-6lld %s\n", L.name, (long long)L.n, (long long)L.s,
             tu_failures == before ? "ok  " : "FAIL");
      tu_layout_free(&L);
    }
  }
  int64_t zeros[5] = {0};
  RUN(tu_layout_from_lengths("N=0 S=5", zeros, 5, NULL), true);
  RUN(tu_layout_from_lengths("N=0 S=0", zeros, 0, NULL), true);
  RUN(tu_layout_random("random N=40000 S=3000 unsorted", 40000, 3000, &rng), false);
  /* S > 65535 (launch limits of a grid's y/z dimension), unsorted, with empty segments. */
  RUN(tu_layout_random("random N=80000 S=70000 unsorted", 80000, 70000, &rng), false);
  L = tu_layout_random("random N=80000 S=70000 sorted", 80000, 70000, &rng);
  int64_t *cnt = calloc(70000, sizeof *cnt);
  for (int64_t i = 0; i < L.n; i++) cnt[L.idx[i]]++;
  tu_layout_free(&L);
  RUN(tu_layout_from_lengths("random N=80000 S=70000 sorted", cnt, 70000, NULL), false);
  free(cnt);
#undef RUN
}

/* ---- proto/API.md, Exact cases ---- */

/* Runs (op, pass) on the target in both dtypes, inputs as doubles (NULL: omitted), and checks
 * every output with a non-NULL want[o] for equality: exact in float64, and in float32 where the
 * value is representable (else within 1e-6). Every output is requested and checked for bounds. */
static void golden(const char *name, segops_op op, segops_pass pass, int w, int64_t n, int64_t s, const int32_t *idx,
                   const double *const in[SEGOPS_MAX_INPUTS], const double *const want[SEGOPS_MAX_OUTPUTS]) {
  const segops_fn_desc *fn = segops_fn(op, pass);
  for (int d = 0; d < 2; d++) {
    segops_dtype dt = DTYPES[d];
    char what[160];
    snprintf(what, sizeof what, "golden %s (%s)", name, segops_dtype_name(dt));
    tu_buf ins[SEGOPS_MAX_INPUTS] = {0}, outs[SEGOPS_MAX_OUTPUTS] = {0};
    segops_call call = {
        .fn = fn, .dtype = dt, .width = w, .n = n, .s = s, .idx = idx, .idx_sorted = tu_is_sorted(idx, n)};
    for (int k = 0; k < fn->n_in; k++)
      if (in[k]) {
        ins[k] = tu_input(dt, in[k], segops_shape_count(fn->in[k].shape, w, n, s), 1);
        call.in[k] = ins[k].data;
      }
    for (int o = 0; o < fn->n_out; o++) {
      outs[o] = tu_output(dt, segops_shape_count(fn->out[o].shape, w, n, s));
      call.out[o] = outs[o].data;
    }
    if (run_call(target, &call, what))
      for (int o = 0; o < fn->n_out; o++) {
        TU_CHECK(tu_guards_ok(&outs[o]), "%s: %s written out of bounds", what, fn->out[o].name);
        int64_t count = segops_shape_count(fn->out[o].shape, w, n, s);
        for (int64_t j = 0; j < count; j++) {
          double got = tu_get(dt, outs[o].data, j);
          if (!want[o]) {
            TU_CHECK(!isnan(got), "%s: %s[%lld] left unwritten", what, fn->out[o].name, (long long)j);
            continue;
          }
          double e = want[o][j];
          bool exact = dt == SEGOPS_F64 || (double)(float)e == e;
          bool ok = exact ? got == tu_round(dt, e) : tu_relerr(got, e) <= 1e-6;
          /* max and min: a NaN is expected as NaN, and a zero with its sign. */
          if (op == SEGOPS_OP_MAX || op == SEGOPS_OP_MIN) ok = isnan(e) ? isnan(got) : ok && signbit(got) == signbit(e);
          TU_CHECK(ok, "%s: %s[%lld] = %.17g, expected %.17g", what, fn->out[o].name, (long long)j, got, e);
        }
      }
    for (int k = 0; k < SEGOPS_MAX_INPUTS; k++) tu_buf_free(&ins[k]);
    for (int o = 0; o < SEGOPS_MAX_OUTPUTS; o++) tu_buf_free(&outs[o]);
  }
}

/* ---- max and min: NaN, signed zeros and infinities in every lane, bit for bit ----
 * The order of proto/API.md (Formulas) one element at a time: b takes the pair (v, a) when the
 * pair is empty, when b is a NaN and v is not, or when neither is a NaN and b is strictly further. */
static bool arg_takes(double v, bool empty, double b, bool is_max) {
  if (empty) return true;
  if (isnan(v) || isnan(b)) return isnan(b) && !isnan(v);
  return is_max ? b > v : b < v;
}
/* Column c of segment k of length len, its element at position q (q-th in index order): plain
 * quarters, two NaNs of different payloads, zeros of both signs among numbers all below (or all
 * above) zero, or every element one infinity, by (k, c): segments k % 3 == 1 without infinities,
 * k % 3 == 2 without NaN. Positions cover every lane of four. */
static double arg_lane_value(int64_t k, int64_t c, int64_t q, int64_t len, tu_rng *rng) {
  const double quarter = round(tu_uniform(rng, -1.0, 1.0) * 4.0) / 4.0, mag = 0.25 + fabs(quarter);
  uint64_t bits = 0x7ff8100000000000ull + ((uint64_t)(q & 3) << 48) + ((uint64_t)(q & 4) << 61);
  double nan_q;
  memcpy(&nan_q, &bits, sizeof nan_q); /* a quiet NaN whose payload (and sign) tells q's */
  /* two zeros: the first at z (lane z % 4), the other in lane 0 of the next group of four */
  const int64_t z = (1 + c) % len, z2 = (z / 4 + 1) * 4 % len;
  int kind = (int)((k * 7 + c) % 6);
  if ((k % 3 == 1 && kind >= 4) || (k % 3 == 2 && kind == 1)) kind = 0;
  switch (kind) {
    case 1:
      return q == (3 + c) % len || q == (5 + 2 * c) % len ? nan_q : quarter;
    case 2:
      return q == z ? (c & 1 ? 0.0 : -0.0) : q == z2 ? (c & 1 ? -0.0 : 0.0) : -mag;
    case 3:
      return q == z ? (c & 1 ? -0.0 : 0.0) : q == z2 ? (c & 1 ? 0.0 : -0.0) : mag;
    case 4:
      return -INFINITY;
    case 5:
      return INFINITY;
    default:
      return quarter;
  }
}
/* One layout and width: every pass of max and min in both dtypes against the order above. */
static void arg_lanes_case(const tu_layout *L, const int64_t *lens, int64_t w) {
  const int64_t n = L->n, s = L->s;
  double *x = malloc((size_t)(n * w + 1) * sizeof *x), *gg = malloc((size_t)(n * w + 1) * sizeof *gg);
  double *g = malloc((size_t)(s * w + 1) * sizeof *g), *want = malloc((size_t)(n * w + s * w + 1) * sizeof *want);
  int64_t *pos = calloc((size_t)s + 1, sizeof *pos), *arg = malloc((size_t)(s * w + 1) * sizeof *arg);
  tu_rng rng = {(uint64_t)(11 + w)};
  for (int64_t i = 0; i < n; i++) {
    const int32_t k = L->idx[i];
    for (int64_t c = 0; c < w; c++) x[i * w + c] = arg_lane_value(k, c, pos[k], lens[k], &rng);
    pos[k]++;
  }
  for (int64_t k = 0; k < n * w; k++) gg[k] = (double)(k + 1);
  for (int64_t k = 0; k < s * w; k++) g[k] = -(double)(k + 1);
  for (int d = 0; d < 2; d++) {
    const segops_dtype dt = DTYPES[d];
    for (int64_t k = 0; k < n * w; k++) x[k] = tu_round(dt, x[k]);
    for (int op = SEGOPS_OP_MAX; op <= SEGOPS_OP_MIN; op++) {
      for (int64_t k = 0; k < s * w; k++) arg[k] = -1;
      for (int64_t i = 0; i < n; i++)
        for (int64_t c = 0, t = L->idx[i] * w; c < w; c++)
          if (arg_takes(arg[t + c] < 0 ? 0 : x[arg[t + c] * w + c], arg[t + c] < 0, x[i * w + c], op == SEGOPS_OP_MAX))
            arg[t + c] = i;
      for (int pass = 0; pass < SEGOPS_PASS_COUNT; pass++) {
        const segops_fn_desc *fn = segops_fn((segops_op)op, (segops_pass)pass);
        const double *in[3] = {x, NULL, NULL};
        if (pass == SEGOPS_PASS_BACKWARD) in[0] = g, in[1] = x;
        if (pass == SEGOPS_PASS_DOUBLE_BACKWARD) in[0] = gg, in[2] = x;
        /* want: the segment output (forward, double backward) then grad_x (backward, double backward) */
        const int64_t ns = pass == SEGOPS_PASS_BACKWARD ? 0 : s * w, ne = pass == SEGOPS_PASS_FORWARD ? 0 : n * w;
        for (int64_t k = 0; k < ns + ne; k++) want[k] = 0.0;
        for (int64_t k = 0; k < s * w; k++) {
          const int64_t e = arg[k] * w + k % w;
          if (arg[k] >= 0 && pass == SEGOPS_PASS_FORWARD) want[k] = x[e];
          if (arg[k] >= 0 && pass == SEGOPS_PASS_BACKWARD) want[e] = tu_round(dt, g[k]);
          if (arg[k] >= 0 && pass == SEGOPS_PASS_DOUBLE_BACKWARD) want[k] = tu_round(dt, gg[e]);
        }
        tu_buf ins[3] = {0}, outs[2] = {0};
        segops_call call = {.fn = fn, .dtype = dt, .width = w, .n = n, .s = s, .idx = L->idx, .idx_sorted = L->sorted};
        for (int k = 0; k < fn->n_in; k++)
          if (in[k])
            ins[k] = tu_input(dt, in[k], segops_call_count(&call, fn->in[k].shape), 1 + (size_t)k),
            call.in[k] = ins[k].data;
        for (int o = 0; o < fn->n_out; o++)
          outs[o] = tu_output(dt, segops_call_count(&call, fn->out[o].shape)), call.out[o] = outs[o].data;
        char what[200];
        snprintf(what, sizeof what, "max/min lanes [%s] %s/%s %s w=%lld", L->name, segops_op_name(fn->op),
                 segops_pass_name(fn->pass), segops_dtype_name(dt), (long long)w);
        if (run_call(target, &call, what))
          for (int64_t k = 0; k < ns + ne; k++) {
            const double got = tu_get(dt, outs[k < ns ? 0 : fn->n_out - 1].data, k < ns ? k : k - ns);
            TU_CHECK(memcmp(&got, &want[k], sizeof got) == 0, "%s: %s[%lld] = %.17g, expected %.17g (bits differ)",
                     what, k < ns ? fn->out[0].name : "grad_x", (long long)(k < ns ? k : k - ns), got, want[k]);
          }
        for (int k = 0; k < 3; k++) tu_buf_free(&ins[k]);
        for (int o = 0; o < 2; o++) tu_buf_free(&outs[o]);
      }
    }
  }
  free(x), free(gg), free(g), free(want), free(pos), free(arg);
}
static void check_arg_lanes(void) {
  const int64_t lens[] = {13, 9, 5, 2, 0, 33, 4, 11, 1, 7, 3, 6};
  const int64_t widths[] = {1, 3, 16, 18};
  tu_rng rng = {5};
  for (int sh = 0; sh < 2; sh++) {
    tu_layout L = tu_layout_from_lengths(sh ? "shuffled" : "sorted", lens, 12, sh ? &rng : NULL);
    for (size_t k = 0; k < sizeof widths / sizeof widths[0]; k++) arg_lanes_case(&L, lens, widths[k]);
    tu_layout_free(&L);
  }
}

#define IN(...) ((const double *const[SEGOPS_MAX_INPUTS]){__VA_ARGS__})
#define WANT(...) ((const double *const[SEGOPS_MAX_OUTPUTS]){__VA_ARGS__})

static void run_golden(void) {
  { /* 1 */
    const double x[] = {1, 2, 3, 4, 5, 6, 7, 8, 9}, out[] = {5, 7, 9, 7, 8, 9};
    const int32_t idx[] = {0, 0, 1};
    golden("1 sum forward", SEGOPS_OP_SUM, SEGOPS_PASS_FORWARD, 3, 3, 2, idx, IN(x), WANT(out));
  }
  { /* 2 */
    const double x[] = {1, 0, 0, 0, 2, 0, 0, 0, 3, 4, 0, 0};
    const double y[] = {2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13};
    const double out[] = {14, 74}, g[] = {1, 1};
    const int32_t idx[] = {0, 0, 1, 1};
    golden("2 dot forward", SEGOPS_OP_DOT, SEGOPS_PASS_FORWARD, 3, 4, 2, idx, IN(x, y), WANT(out));
    golden("2 dot backward", SEGOPS_OP_DOT, SEGOPS_PASS_BACKWARD, 3, 4, 2, idx, IN(g, x, y), WANT(y, x));
  }
  { /* 3 */
    const double g[] = {3.5, -1.25}, gx[] = {3.5, -1.25, -1.25};
    const int32_t idx[] = {0, 1, 1};
    golden("3 sum backward", SEGOPS_OP_SUM, SEGOPS_PASS_BACKWARD, 1, 3, 2, idx, IN(g), WANT(gx));
  }
  { /* 4 */
    const double ggx[] = {1, 2, 3, 4}, out[] = {3, 7};
    const int32_t idx[] = {0, 0, 1, 1};
    golden("4 sum double backward", SEGOPS_OP_SUM, SEGOPS_PASS_DOUBLE_BACKWARD, 1, 4, 2, idx, IN(ggx), WANT(out));
  }
  { /* 5 */
    const double x[] = {1, 2, 3, 4, 5, 6}, out[] = {3, 12, 6};
    const int32_t idx[] = {0, 0, 1, 1, 1, 2};
    golden("5 sum forward", SEGOPS_OP_SUM, SEGOPS_PASS_FORWARD, 1, 6, 3, idx, IN(x), WANT(out));
  }
  { /* 6 */
    const double x[] = {1, 1, 1, 1, 1, 1, 1, 1, 1}, out[] = {1, 1, 1, 1, 1, 1, 0, 0, 0};
    const int32_t idx[] = {0, 0, 1};
    golden("6 mean forward, empty trailing segment", SEGOPS_OP_MEAN, SEGOPS_PASS_FORWARD, 3, 3, 3, idx, IN(x),
           WANT(out));
  }
  { /* 7, 8 */
    const double x[] = {3, 4, 0, 0, 0, 0, 1, 2, 2, 0, 0, 0};
    const int32_t idx[] = {0, 0, 1, 2};
    const double out[] = {3.5355339059327378, 3, 0, 0}, g[] = {1, 1, 1, 1};
    const double gx[] = {0.4242640687119285, 0.565685424949238, 0, 0, 0, 0, 1.0 / 3, 2.0 / 3, 2.0 / 3, 0, 0, 0};
    golden("7 rms_norm forward, zero norm, empty", SEGOPS_OP_RMS_NORM, SEGOPS_PASS_FORWARD, 3, 4, 4, idx, IN(x),
           WANT(out));
    golden("8 rms_norm backward, zero norm", SEGOPS_OP_RMS_NORM, SEGOPS_PASS_BACKWARD, 3, 4, 4, idx, IN(g, x),
           WANT(gx));
  }
  { /* 9, 10 */
    const double v[] = {1, 0, 0}, m[] = {1, 2, 0, 0, 1, 0, 0, 0, 1}, out[] = {1, 2, 0};
    const double g[] = {0.5, -1, 2}, gm[] = {0.5, -1, 2, 0, 0, 0, 0, 0, 0}, gv[] = {-1.5, -1, 2};
    const int32_t idx[] = {0};
    golden("9 matvec forward (transpose convention)", SEGOPS_OP_MATVEC, SEGOPS_PASS_FORWARD, 3, 1, 1, idx, IN(v, m),
           WANT(out));
    golden("10 matvec backward", SEGOPS_OP_MATVEC, SEGOPS_PASS_BACKWARD, 3, 1, 1, idx, IN(g, v, m), WANT(gv, gm));
  }
  { /* max and min (proto/API.md, Formulas): the lowest index among ties, NaN beyond every number
     * (the lowest NaN wins), +0.0 and -0.0 tie (the lowest index's sign), an empty segment 0; sorted
     * and interleaved idx. Segments: {1,3,2,3}, {-0,+0}, {+0,-0}, {2,NaN,5,NaN}, {} and {-inf}. */
    const double x[] = {1, 3, 2, 3, -0.0, 0.0, 0.0, -0.0, 2, NAN, 5, NAN, -INFINITY};
    const double g[] = {10, 20, 30, 40, 50, 60}, gg[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13};
    const int32_t idx[] = {0, 0, 0, 0, 1, 1, 2, 2, 3, 3, 3, 3, 5};
    const double zeros[13] = {0};
    const double max_out[] = {3, -0.0, 0.0, NAN, 0, -INFINITY}, min_out[] = {1, -0.0, 0.0, NAN, 0, -INFINITY};
    const double max_gx[] = {0, 10, 0, 0, 20, 0, 30, 0, 0, 40, 0, 0, 60};
    const double min_gx[] = {10, 0, 0, 0, 20, 0, 30, 0, 0, 40, 0, 0, 60};
    const double max_gg[] = {2, 5, 7, 10, 0, 13}, min_gg[] = {1, 5, 7, 10, 0, 13};
    golden("max forward: ties, signed zeros, NaN", SEGOPS_OP_MAX, SEGOPS_PASS_FORWARD, 1, 13, 6, idx, IN(x),
           WANT(max_out));
    golden("max backward: lowest index", SEGOPS_OP_MAX, SEGOPS_PASS_BACKWARD, 1, 13, 6, idx, IN(g, x), WANT(max_gx));
    golden("max double backward", SEGOPS_OP_MAX, SEGOPS_PASS_DOUBLE_BACKWARD, 1, 13, 6, idx, IN(gg, NULL, x),
           WANT(max_gg, zeros));
    golden("min forward: ties, signed zeros, NaN", SEGOPS_OP_MIN, SEGOPS_PASS_FORWARD, 1, 13, 6, idx, IN(x),
           WANT(min_out));
    golden("min backward: lowest index", SEGOPS_OP_MIN, SEGOPS_PASS_BACKWARD, 1, 13, 6, idx, IN(g, x), WANT(min_gx));
    golden("min double backward", SEGOPS_OP_MIN, SEGOPS_PASS_DOUBLE_BACKWARD, 1, 13, 6, idx, IN(gg, NULL, x),
           WANT(min_gg, zeros));
    /* The same elements interleaved (unsorted idx): element order decides the ties. */
    const double ux[] = {3, -0.0, 0.0, 1, 0.0, NAN, 3, -0.0, 2, -INFINITY, NAN, 2, 5};
    const int32_t uidx[] = {0, 1, 2, 0, 1, 3, 0, 2, 0, 5, 3, 3, 3};
    const double umax_out[] = {3, -0.0, 0.0, NAN, 0, -INFINITY}, umin_out[] = {1, -0.0, 0.0, NAN, 0, -INFINITY};
    const double umax_gx[] = {10, 20, 30, 0, 0, 40, 0, 0, 0, 60, 0, 0, 0};
    const double umin_gx[] = {0, 20, 30, 10, 0, 40, 0, 0, 0, 60, 0, 0, 0};
    golden("max forward, interleaved idx", SEGOPS_OP_MAX, SEGOPS_PASS_FORWARD, 1, 13, 6, uidx, IN(ux), WANT(umax_out));
    golden("max backward, interleaved idx", SEGOPS_OP_MAX, SEGOPS_PASS_BACKWARD, 1, 13, 6, uidx, IN(g, ux),
           WANT(umax_gx));
    golden("min forward, interleaved idx", SEGOPS_OP_MIN, SEGOPS_PASS_FORWARD, 1, 13, 6, uidx, IN(ux), WANT(umin_out));
    golden("min backward, interleaved idx", SEGOPS_OP_MIN, SEGOPS_PASS_BACKWARD, 1, 13, 6, uidx, IN(g, ux),
           WANT(umin_gx));
    /* (N,3) rows: every column has its own arg element. */
    const double x3[] = {1, 5, 0, 2, 5, -1, 0, 9, -1}, g3[] = {1, 2, 3};
    const double max3[] = {2, 9, 0}, min3[] = {0, 5, -1};
    const double max3_gx[] = {0, 0, 3, 1, 0, 0, 0, 2, 0}, min3_gx[] = {0, 2, 0, 0, 0, 3, 1, 0, 0};
    const int32_t idx3[] = {0, 0, 0};
    golden("max forward, (N,3)", SEGOPS_OP_MAX, SEGOPS_PASS_FORWARD, 3, 3, 1, idx3, IN(x3), WANT(max3));
    golden("max backward, (N,3)", SEGOPS_OP_MAX, SEGOPS_PASS_BACKWARD, 3, 3, 1, idx3, IN(g3, x3), WANT(max3_gx));
    golden("min forward, (N,3)", SEGOPS_OP_MIN, SEGOPS_PASS_FORWARD, 3, 3, 1, idx3, IN(x3), WANT(min3));
    golden("min backward, (N,3)", SEGOPS_OP_MIN, SEGOPS_PASS_BACKWARD, 3, 3, 1, idx3, IN(g3, x3), WANT(min3_gx));
  }
  { /* 11: every function with N = 0, S = 5: zero-filled outputs (segment outputs all zeros). */
    const double segv[5 * 9] = {1, -2, 3, 4, 5, 6, 7, 8, 9, 1, 2, 3, 4, 5, 6, 7, 8, 9, 1, 2, 3, 4, 5,
                                6, 7,  8, 9, 1, 2, 3, 4, 5, 6, 7, 8, 9, 1, 2, 3, 4, 5, 6, 7, 8, 9};
    const double zeros[5 * 9] = {0}, none[1] = {0};
    const int32_t idx[1] = {0};
    for (int op = 0; op < SEGOPS_OP_COUNT; op++)
      for (int pass = 0; pass < SEGOPS_PASS_COUNT; pass++) {
        const segops_fn_desc *fn = segops_fn((segops_op)op, (segops_pass)pass);
        for (int w = fn->vec3_only ? 3 : 1; w <= 3; w += 2) {
          const double *in[SEGOPS_MAX_INPUTS] = {0}, *want[SEGOPS_MAX_OUTPUTS] = {0};
          for (int k = 0; k < fn->n_in; k++)
            in[k] = (fn->in[k].shape == SEGOPS_SH_ELEM || fn->in[k].shape == SEGOPS_SH_ELEM3) ? none : segv;
          for (int o = 0; o < fn->n_out; o++) want[o] = zeros;
          char name[96];
          snprintf(name, sizeof name, "11 N=0 S=5 %s/%s w=%d", segops_op_name(fn->op), segops_pass_name(fn->pass), w);
          golden(name, fn->op, fn->pass, w, 0, 5, idx, in, want);
        }
      }
  }
  { /* 12: d/dx of sum(x).sum() + mean(x).sum() = 1 + 1/c, as sum backward + mean backward of ones. */
    const int64_t lens[] = {500, 1, 3, 200, 2, 1, 50, 1, 1, 100};
    tu_rng rng = {7};
    tu_layout L = tu_layout_from_lengths("golden lengths", lens, 10, &rng);
    double ones[10], *want = malloc((size_t)L.n * sizeof(double));
    for (int k = 0; k < 10; k++) ones[k] = 1;
    for (int64_t i = 0; i < L.n; i++) want[i] = 1.0 + 1.0 / (double)lens[L.idx[i]];
    for (int d = 0; d < 2; d++) {
      segops_dtype dt = DTYPES[d];
      tu_buf g = tu_input(dt, ones, 10, 2), a = tu_output(dt, L.n), b = tu_output(dt, L.n);
      segops_call c1 = {.fn = segops_fn(SEGOPS_OP_SUM, SEGOPS_PASS_BACKWARD),
                        .dtype = dt,
                        .width = 1,
                        .n = L.n,
                        .s = 10,
                        .idx = L.idx,
                        .idx_sorted = L.sorted,
                        .in = {g.data},
                        .out = {a.data}};
      segops_call c2 = c1;
      c2.fn = segops_fn(SEGOPS_OP_MEAN, SEGOPS_PASS_BACKWARD);
      c2.out[0] = b.data;
      if (run_call(target, &c1, "golden 12") && run_call(target, &c2, "golden 12"))
        for (int64_t i = 0; i < L.n; i++) {
          double got = tu_get(dt, a.data, i) + tu_get(dt, b.data, i);
          double e = dt == SEGOPS_F64 ? want[i] : 1.0 + (double)(float)(1.0 / (double)lens[L.idx[i]]);
          TU_CHECK(got == e, "golden 12 (%s): element %lld: %.17g, expected %.17g", segops_dtype_name(dt), (long long)i,
                   got, e);
        }
      tu_buf_free(&g);
      tu_buf_free(&a);
      tu_buf_free(&b);
    }
    free(want);
    tu_layout_free(&L);
  }
}

int main(int argc, char **argv) {
  const char *which = "cpu";
  for (int a = 1; a < argc; a++) {
    if (strcmp(argv[a], "--backend") == 0 && a + 1 < argc)
      which = argv[++a];
    else if (strcmp(argv[a], "--quick") == 0)
      quick = true;
    else if (strcmp(argv[a], "--digest") == 0 && a + 1 < argc) {
      if (!(digest = fopen(argv[++a], "w"))) {
        perror(argv[a]);
        return 2;
      }
    } else {
      fprintf(stderr, "usage: %s --backend cpu|cuda [--quick] [--digest FILE]\n", argv[0]);
      return 2;
    }
  }
  const char *q = getenv("SEGOPS_CUDA_TEST_QUICK");
  if (q && strcmp(q, "1") == 0) quick = true;
  /* 3 threads: more than this machine's cores, so the pool's hand-off is exercised too. */
  cpu = segops_cpu_backend_new(3);
  if (!cpu) {
    fprintf(stderr, "segops_cpu_backend_new failed\n");
    return 1;
  }
  if (strcmp(which, "cpu") == 0) {
    target = cpu;
  } else if (strcmp(which, "cuda") == 0) {
    char err[256] = "";
    target = segops_cuda_backend_new(NULL, 0, NULL, err, sizeof err);
    if (!target) {
      const char *req = getenv("SEGOPS_REQUIRE_CUDA");
      bool required = req && strcmp(req, "1") == 0;
      printf("%s: no CUDA backend: %s\n", required ? "FAIL (SEGOPS_REQUIRE_CUDA=1)" : "SKIPPED", err);
      segops_backend_free(cpu);
      return required ? 1 : 77;
    }
    target_is_cuda = true;
  } else {
    fprintf(stderr, "unknown backend '%s' (cpu or cuda)\n", which);
    return 2;
  }
  printf("conformance: backend %s, %d device(s)\n", target->name, target->n_devices);
  run_golden();
  check_arg_lanes();
  run_layouts();
  int rc = tu_summary(target_is_cuda ? "conformance (cuda vs reference and cpu)" : "conformance (cpu)");
  if (target != cpu) segops_backend_free(target);
  segops_backend_free(cpu);
  if (digest) fclose(digest);
  return rc;
}

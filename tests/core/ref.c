/* ref.c: the float64 reference of proto/API.md's formulas used by the conformance tests (see ref.h). */
#include "ref.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Value k of a, or 0 when a is NULL (an omitted cotangent). */
static double at(const double *a, int64_t k) { return a ? a[k] : 0.0; }

static void zero(double *a, int64_t count) {
  for (int64_t k = 0; k < count; k++) a[k] = 0.0;
}

static void ref_sum_like(int64_t w, int64_t n, int64_t s, const int32_t *idx, const int64_t *c, const double *x,
                         double *out, int mean) {
  zero(out, s * w);
  for (int64_t i = 0; i < n; i++)
    for (int64_t k = 0; k < w; k++) out[idx[i] * w + k] += at(x, i * w + k);
  if (mean)
    for (int64_t g = 0; g < s; g++)
      for (int64_t k = 0; k < w; k++) out[g * w + k] = c[g] ? out[g * w + k] / (double)c[g] : 0.0;
}

static double dotw(int64_t w, const double *a, int64_t i, const double *b, int64_t j) {
  double d = 0;
  for (int64_t k = 0; k < w; k++) d += at(a, i * w + k) * at(b, j * w + k);
  return d;
}

static void ref_rms(int64_t w, int64_t n, int64_t s, const int32_t *idx, const int64_t *c, const double *x, double *r,
                    double *inv) {
  zero(r, s);
  for (int64_t i = 0; i < n; i++) r[idx[i]] += dotw(w, x, i, x, i);
  for (int64_t g = 0; g < s; g++) {
    r[g] = c[g] ? sqrt(r[g] / (double)c[g]) : 0.0;
    inv[g] = c[g] * r[g] != 0.0 ? 1.0 / ((double)c[g] * r[g]) : 0.0;
  }
}

/* max (is_max) or min per column: arg[g*w+k] = the lowest i of segment g whose x[i][k] is the
 * extremum, a NaN counting as beyond every number (the lowest NaN wins); -1 for an empty segment.
 * Scans i upwards and moves only on a strictly better value, so ties keep the lowest index. */
static void ref_arg(int64_t w, int64_t n, int64_t s, const int32_t *idx, const double *x, int is_max, int64_t *arg) {
  for (int64_t k = 0; k < s * w; k++) arg[k] = -1;
  for (int64_t i = 0; i < n; i++)
    for (int64_t k = 0; k < w; k++) {
      int64_t *a = &arg[idx[i] * w + k];
      const double v = x[i * w + k];
      if (*a < 0) {
        *a = i;
        continue;
      }
      const double b = x[*a * w + k];
      if (isnan(b)) continue;
      if (isnan(v) || (is_max ? v > b : v < b)) *a = i;
    }
}

/* max and min: forward (x), backward (g_out, x), double backward (gg_x, g_out, x). */
static void ref_extremum(segops_pass pass, int is_max, int64_t w, int64_t n, int64_t s, const int32_t *idx,
                         const double *const in[SEGOPS_MAX_INPUTS], double *const out[SEGOPS_MAX_OUTPUTS]) {
  int64_t *arg = malloc((size_t)(s * w + 1) * sizeof *arg);
  const double *x = in[pass == SEGOPS_PASS_FORWARD ? 0 : pass == SEGOPS_PASS_BACKWARD ? 1 : 2];
  ref_arg(w, n, s, idx, x, is_max, arg);
  if (pass == SEGOPS_PASS_FORWARD)
    for (int64_t k = 0; k < s * w; k++) out[0][k] = arg[k] < 0 ? 0.0 : x[arg[k] * w + k % w];
  if (pass == SEGOPS_PASS_BACKWARD)
    for (int64_t i = 0; i < n; i++)
      for (int64_t k = 0; k < w; k++) out[0][i * w + k] = arg[idx[i] * w + k] == i ? in[0][idx[i] * w + k] : 0.0;
  if (pass == SEGOPS_PASS_DOUBLE_BACKWARD) {
    for (int64_t k = 0; k < s * w; k++) out[0][k] = arg[k] < 0 ? 0.0 : at(in[0], arg[k] * w + k % w);
    zero(out[1], n * w);
  }
  free(arg);
}

void ref_run(segops_op op, segops_pass pass, int64_t w, int64_t n, int64_t s, const int32_t *idx,
             const double *const in[SEGOPS_MAX_INPUTS], double *const out[SEGOPS_MAX_OUTPUTS]) {
  ref_run_y(op, pass, w, false, n, s, idx, in, out);
}

/* mul with y (S,*F): out[i] = x[i] ⊙ y[s] and its backward and double backward, per element. */
static void ref_mul_wide(segops_pass pass, int64_t w, int64_t n, int64_t s, const int32_t *idx,
                         const double *const in[SEGOPS_MAX_INPUTS], double *const out[SEGOPS_MAX_OUTPUTS]) {
  const double *a0 = in[0], *a1 = in[1], *a2 = in[2], *a3 = in[3], *a4 = in[4];
  for (int64_t i = 0; i < n; i++)
    for (int64_t k = 0; k < w; k++) {
      const int64_t e = i * w + k, g = idx[i] * w + k;
      if (pass == SEGOPS_PASS_FORWARD) { /* x, y */
        out[0][e] = a0[e] * a1[g];
      } else if (pass == SEGOPS_PASS_BACKWARD) { /* g_out, x, y */
        out[0][e] = a0[e] * a2[g];
      } else { /* gg_x, gg_y, g_out, x, y */
        out[0][e] = at(a0, e) * a4[g] + at(a1, g) * a3[e];
        out[1][e] = at(a1, g) * a2[e];
      }
    }
  if (pass == SEGOPS_PASS_FORWARD) return;
  double *gy = out[pass == SEGOPS_PASS_BACKWARD ? 1 : 2];
  zero(gy, s * w);
  for (int64_t i = 0; i < n; i++)
    for (int64_t k = 0; k < w; k++)
      gy[idx[i] * w + k] +=
          pass == SEGOPS_PASS_BACKWARD ? a0[i * w + k] * a1[i * w + k] : at(a0, i * w + k) * a2[i * w + k];
}

void ref_run_y(segops_op op, segops_pass pass, int64_t w, bool y_wide, int64_t n, int64_t s, const int32_t *idx,
               const double *const in[SEGOPS_MAX_INPUTS], double *const out[SEGOPS_MAX_OUTPUTS]) {
  if (op == SEGOPS_OP_MUL && y_wide) {
    ref_mul_wide(pass, w, n, s, idx, in, out);
    return;
  }
  if (op == SEGOPS_OP_MAX || op == SEGOPS_OP_MIN) {
    ref_extremum(pass, op == SEGOPS_OP_MAX, w, n, s, idx, in, out);
    return;
  }
  int64_t *c = calloc((size_t)s + 1, sizeof *c);
  double *r = calloc((size_t)s + 1, sizeof *r), *inv = calloc((size_t)s + 1, sizeof *inv);
  double *q = calloc((size_t)s + 1, sizeof *q);
  for (int64_t i = 0; i < n; i++) c[idx[i]]++;
  const double *a0 = in[0], *a1 = in[1], *a2 = in[2], *a3 = in[3], *a4 = in[4];

  switch (op * 3 + pass) {
    case SEGOPS_OP_SUM * 3 + SEGOPS_PASS_FORWARD:         /* x */
    case SEGOPS_OP_SUM * 3 + SEGOPS_PASS_DOUBLE_BACKWARD: /* gg_x */
      ref_sum_like(w, n, s, idx, c, a0, out[0], 0);
      break;
    case SEGOPS_OP_MEAN * 3 + SEGOPS_PASS_FORWARD:
    case SEGOPS_OP_MEAN * 3 + SEGOPS_PASS_DOUBLE_BACKWARD:
      ref_sum_like(w, n, s, idx, c, a0, out[0], 1);
      break;
    case SEGOPS_OP_SUM * 3 + SEGOPS_PASS_BACKWARD: /* g_out */
      for (int64_t i = 0; i < n; i++)
        for (int64_t k = 0; k < w; k++) out[0][i * w + k] = a0[idx[i] * w + k];
      break;
    case SEGOPS_OP_MEAN * 3 + SEGOPS_PASS_BACKWARD:
      for (int64_t i = 0; i < n; i++)
        for (int64_t k = 0; k < w; k++) out[0][i * w + k] = a0[idx[i] * w + k] / (double)c[idx[i]];
      break;

    case SEGOPS_OP_DOT * 3 + SEGOPS_PASS_FORWARD: /* x, y */
      zero(out[0], s);
      for (int64_t i = 0; i < n; i++) out[0][idx[i]] += dotw(w, a0, i, a1, i);
      break;
    case SEGOPS_OP_DOT * 3 + SEGOPS_PASS_BACKWARD: /* g_out, x, y */
      for (int64_t i = 0; i < n; i++)
        for (int64_t k = 0; k < w; k++) {
          out[0][i * w + k] = a0[idx[i]] * a2[i * w + k];
          out[1][i * w + k] = a0[idx[i]] * a1[i * w + k];
        }
      break;
    case SEGOPS_OP_DOT * 3 + SEGOPS_PASS_DOUBLE_BACKWARD: /* gg_x, gg_y, g_out, x, y */
      zero(out[0], s);
      for (int64_t i = 0; i < n; i++) {
        out[0][idx[i]] += dotw(w, a0, i, a4, i) + dotw(w, a1, i, a3, i);
        for (int64_t k = 0; k < w; k++) {
          out[1][i * w + k] = a2[idx[i]] * at(a1, i * w + k);
          out[2][i * w + k] = a2[idx[i]] * at(a0, i * w + k);
        }
      }
      break;

    case SEGOPS_OP_MUL * 3 + SEGOPS_PASS_FORWARD: /* x, y */
      for (int64_t i = 0; i < n; i++)
        for (int64_t k = 0; k < w; k++) out[0][i * w + k] = a0[i * w + k] * a1[idx[i]];
      break;
    case SEGOPS_OP_MUL * 3 + SEGOPS_PASS_BACKWARD: /* g_out, x, y */
      zero(out[1], s);
      for (int64_t i = 0; i < n; i++) {
        for (int64_t k = 0; k < w; k++) out[0][i * w + k] = a0[i * w + k] * a2[idx[i]];
        out[1][idx[i]] += dotw(w, a0, i, a1, i);
      }
      break;
    case SEGOPS_OP_MUL * 3 + SEGOPS_PASS_DOUBLE_BACKWARD: /* gg_x, gg_y, g_out, x, y */
      zero(out[2], s);
      for (int64_t i = 0; i < n; i++) {
        for (int64_t k = 0; k < w; k++) {
          out[0][i * w + k] = at(a0, i * w + k) * a4[idx[i]] + at(a1, idx[i]) * a3[i * w + k];
          out[1][i * w + k] = at(a1, idx[i]) * a2[i * w + k];
        }
        out[2][idx[i]] += dotw(w, a0, i, a2, i);
      }
      break;

    case SEGOPS_OP_RMS_NORM * 3 + SEGOPS_PASS_FORWARD: /* x */
      ref_rms(w, n, s, idx, c, a0, r, inv);
      memcpy(out[0], r, (size_t)s * sizeof(double));
      break;
    case SEGOPS_OP_RMS_NORM * 3 + SEGOPS_PASS_BACKWARD: /* g_out, x */
      ref_rms(w, n, s, idx, c, a1, r, inv);
      for (int64_t i = 0; i < n; i++)
        for (int64_t k = 0; k < w; k++) out[0][i * w + k] = a0[idx[i]] * inv[idx[i]] * a1[i * w + k];
      break;
    case SEGOPS_OP_RMS_NORM * 3 + SEGOPS_PASS_DOUBLE_BACKWARD: /* gg_x, g_out, x */
      ref_rms(w, n, s, idx, c, a2, r, inv);
      for (int64_t i = 0; i < n; i++) q[idx[i]] += dotw(w, a0, i, a2, i);
      for (int64_t g = 0; g < s; g++) out[0][g] = q[g] * inv[g];
      for (int64_t i = 0; i < n; i++) {
        int64_t g = idx[i];
        double iv = inv[g], gs = a1[g];
        for (int64_t k = 0; k < w; k++)
          out[1][i * w + k] = gs * iv * at(a0, i * w + k) - gs * iv * iv * iv * (double)c[g] * q[g] * a2[i * w + k];
      }
      break;

    case SEGOPS_OP_MATVEC * 3 + SEGOPS_PASS_FORWARD: /* v, m: out[i][k] = sum_j m[s][j][k] v[i][j] */
      for (int64_t i = 0; i < n; i++)
        for (int k = 0; k < 3; k++) {
          double acc = 0;
          for (int j = 0; j < 3; j++) acc += a1[idx[i] * 9 + j * 3 + k] * a0[i * 3 + j];
          out[0][i * 3 + k] = acc;
        }
      break;
    case SEGOPS_OP_MATVEC * 3 + SEGOPS_PASS_BACKWARD: /* g_out, v, m */
      zero(out[1], s * 9);
      for (int64_t i = 0; i < n; i++)
        for (int j = 0; j < 3; j++) {
          double acc = 0;
          for (int k = 0; k < 3; k++) {
            acc += a2[idx[i] * 9 + j * 3 + k] * a0[i * 3 + k];
            out[1][idx[i] * 9 + j * 3 + k] += a1[i * 3 + j] * a0[i * 3 + k];
          }
          out[0][i * 3 + j] = acc;
        }
      break;
    case SEGOPS_OP_MATVEC * 3 + SEGOPS_PASS_DOUBLE_BACKWARD: /* gg_v, gg_m, g_out, v, m */
      zero(out[2], s * 9);
      for (int64_t i = 0; i < n; i++) {
        int64_t g = idx[i];
        for (int k = 0; k < 3; k++) {
          double acc = 0;
          for (int j = 0; j < 3; j++)
            acc += a4[g * 9 + j * 3 + k] * at(a0, i * 3 + j) + at(a1, g * 9 + j * 3 + k) * a3[i * 3 + j];
          out[0][i * 3 + k] = acc;
        }
        for (int j = 0; j < 3; j++) {
          double acc = 0;
          for (int k = 0; k < 3; k++) {
            acc += at(a1, g * 9 + j * 3 + k) * a2[i * 3 + k];
            out[2][g * 9 + j * 3 + k] += at(a0, i * 3 + j) * a2[i * 3 + k];
          }
          out[1][i * 3 + j] = acc;
        }
      }
      break;
  }
  free(c);
  free(r);
  free(inv);
  free(q);
}

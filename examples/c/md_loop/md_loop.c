/* md_loop.c: a molecular-dynamics loop in C whose energies and forces come from libsegops.
 *
 * Atoms of several molecules, each atom held to its molecule's centre by a harmonic restraint:
 * per-atom energy e_i = k/2 |x_i - c_s|^2 with c_s the centre (segmented_mean), summed per
 * molecule (segmented_sum). Forces by the chain rule, backward through the same functions:
 * segmented_sum's backward hands each atom its molecule's g_out, the displacement's gradient goes
 * back through the centre (segmented_mean's backward of the summed displacement gradients).
 * Velocity Verlet integrates it. Checks: the forces match finite differences of the energy, and
 * the total energy stays constant within 1e-4 relative; exit 1 otherwise.
 *
 *   SEGOPS_URL=http://127.0.0.1:8080 ./md_loop [steps]      (SEGOPS_URL=local: no daemon) */
#include <math.h>
#include <segops.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define K 3.0
#define DT 0.01

typedef struct {
  segops_client *c;
  int n, s;
  segops_array idx;
  double *centre, *disp, *e_atom, *e_mol, *ones, *grad_e, *grad_d, *sum_gd, *grad_c; /* work arrays */
} md;

static int check(int rc, const segops_error *e, const char *what) {
  if (rc) fprintf(stderr, "md_loop: %s: %s (%s)\n", what, e->message, e->name);
  return rc;
}

static segops_array arr(double *p, int rows, int cols) {
  segops_array a = {SEGOPS_F64, cols ? 2 : 1, {rows, cols}, p, (size_t)rows * (cols ? cols : 1) * sizeof(double)};
  return a;
}

/* Energy per molecule into m->e_mol, and the forces on every atom into f (N,3). */
static int energy_and_forces(md *m, const double *x, double *f) {
  segops_error e;
  segops_array ax = arr((double *)x, m->n, 3), ac = arr(m->centre, m->s, 3);
  int rc = segops_segmented_mean_forward(m->c, &ax, &m->idx, m->s, &ac, &e);
  if (check(rc, &e, "centres")) return rc;
  const int32_t *mol = m->idx.data;
  for (int i = 0; i < m->n; i++) {
    double sq = 0;
    for (int j = 0; j < 3; j++) {
      m->disp[3 * i + j] = x[3 * i + j] - m->centre[3 * mol[i] + j];
      sq += m->disp[3 * i + j] * m->disp[3 * i + j];
    }
    m->e_atom[i] = 0.5 * K * sq;
  }
  segops_array ae = arr(m->e_atom, m->n, 0), aE = arr(m->e_mol, m->s, 0);
  rc = segops_segmented_sum_forward(m->c, &ae, &m->idx, m->s, &aE, &e);
  if (check(rc, &e, "energies")) return rc;
  /* Backward of sum(E): dE/de_i = 1 for each atom, through segmented_sum's backward. */
  segops_array g1 = arr(m->ones, m->s, 0), ge = arr(m->grad_e, m->n, 0);
  rc = segops_segmented_sum_backward(m->c, &g1, NULL, &m->idx, m->s, &ge, &e);
  if (check(rc, &e, "energy backward")) return rc;
  for (int i = 0; i < 3 * m->n; i++) m->grad_d[i] = m->grad_e[i / 3] * K * m->disp[i];
  /* d = x - centre: the centre's gradient is minus the summed displacement gradients, and it
   * reaches x through segmented_mean's backward. */
  segops_array gd = arr(m->grad_d, m->n, 3), sgd = arr(m->sum_gd, m->s, 3), gc = arr(m->grad_c, m->n, 3);
  rc = segops_segmented_sum_forward(m->c, &gd, &m->idx, m->s, &sgd, &e);
  if (check(rc, &e, "centre gradient")) return rc;
  for (int k = 0; k < 3 * m->s; k++) m->sum_gd[k] = -m->sum_gd[k];
  rc = segops_segmented_mean_backward(m->c, &sgd, NULL, &m->idx, m->s, &gc, &e);
  if (check(rc, &e, "mean backward")) return rc;
  for (int i = 0; i < 3 * m->n; i++) f[i] = -(m->grad_d[i] + m->grad_c[i]);
  return 0;
}

static double total_energy(const md *m, const double *v) {
  double t = 0;
  for (int k = 0; k < m->s; k++) t += m->e_mol[k];
  for (int i = 0; i < 3 * m->n; i++) t += 0.5 * v[i] * v[i];
  return t;
}

/* The forces against central differences of the total energy at a few coordinates. */
static double fd_error(md *m, double *x, const double *f) {
  double worst = 0, h = 1e-5, *scratch = malloc(sizeof(double) * 3 * (size_t)m->n);
  for (int i = 0; i < 3 * m->n; i += 7) {
    double keep = x[i], ep = 0, em = 0;
    x[i] = keep + h;
    energy_and_forces(m, x, scratch);
    for (int k = 0; k < m->s; k++) ep += m->e_mol[k];
    x[i] = keep - h;
    energy_and_forces(m, x, scratch);
    for (int k = 0; k < m->s; k++) em += m->e_mol[k];
    x[i] = keep;
    double err = fabs(-(ep - em) / (2 * h) - f[i]);
    if (err > worst) worst = err;
  }
  free(scratch);
  return worst;
}

int main(int argc, char **argv) {
  int steps = argc > 1 ? atoi(argv[1]) : 200;
  const int sizes[] = {4, 9, 2, 7, 5};
  md m = {.s = 5};
  for (int k = 0; k < m.s; k++) m.n += sizes[k];
  segops_error e;
  if (segops_open(&m.c, NULL, NULL, &e)) { /* $SEGOPS_URL, else http://127.0.0.1:8080 */
    fprintf(stderr, "md_loop: %s\n", e.message);
    return 1;
  }
  int32_t *mol = malloc(sizeof(int32_t) * (size_t)m.n);
  for (int k = 0, i = 0; k < m.s; k++)
    for (int j = 0; j < sizes[k]; j++) mol[i++] = k;
  m.idx = (segops_array){SEGOPS_I32, 1, {m.n}, mol, 0};
  double **work[] = {&m.centre, &m.disp, &m.e_atom, &m.e_mol, &m.ones, &m.grad_e, &m.grad_d, &m.sum_gd, &m.grad_c};
  for (size_t w = 0; w < sizeof work / sizeof work[0]; w++) *work[w] = segops_alloc(m.c, sizeof(double) * 3 * m.n);
  for (int k = 0; k < m.s; k++) m.ones[k] = 1;
  double *x = malloc(sizeof(double) * 3 * m.n), *v = malloc(sizeof(double) * 3 * m.n),
         *f = malloc(sizeof(double) * 3 * m.n);
  srand(1);
  for (int i = 0; i < 3 * m.n; i++) {
    x[i] = 2.0 * rand() / RAND_MAX - 1;
    v[i] = 0.5 * (2.0 * rand() / RAND_MAX - 1);
  }
  int rc = energy_and_forces(&m, x, f);
  double fd = rc ? INFINITY : fd_error(&m, x, f);
  rc = rc || energy_and_forces(&m, x, f);
  double e0 = total_energy(&m, v), drift = 0;
  for (int step = 0; step < steps && !rc; step++) {
    for (int i = 0; i < 3 * m.n; i++) {
      v[i] += 0.5 * DT * f[i];
      x[i] += DT * v[i];
    }
    rc = energy_and_forces(&m, x, f);
    for (int i = 0; i < 3 * m.n; i++) v[i] += 0.5 * DT * f[i];
    double et = total_energy(&m, v);
    if (fabs(et - e0) / fabs(e0) > drift) drift = fabs(et - e0) / fabs(e0);
    if (step % 50 == 0) printf("step %4d  E_total %.9f\n", step, et);
  }
  printf("transport %s; forces vs finite differences: %.2e; energy drift over %d steps: %.2e\n",
         segops_transport_used(m.c), fd, steps, drift);
  for (size_t w = 0; w < sizeof work / sizeof work[0]; w++) segops_free(m.c, *work[w]);
  free(x);
  free(v);
  free(f);
  free(mol);
  segops_close(m.c);
  return rc || fd > 1e-6 || drift > 1e-4 ? 1 : 0;
}

// pair_segops.cpp: a force loop in C++ in the style of an MD code's pair style (LAMMPS' Pair
// classes): a class whose compute() turns a neighbour list into per-atom energies and forces, with
// the reductions over each atom's neighbours and over molecules done by libsegops.
//
// Lennard-Jones pairs within a cutoff. compute() evaluates each pair once per direction (a full
// neighbour list: pair (i, j) and (j, i)), then
//   per-atom energy  e_i = 1/2 sum_j V(r_ij)           segmented_sum over pairs grouped by i
//   per-atom force   F_i = sum_j -V'(r_ij) r_ij/|r_ij|  segmented_sum of (P,3) pair vectors by i
//   per-molecule E   E_m = sum_{i in m} e_i             segmented_sum over atoms grouped by molecule
// and checks them against a plain double loop: same forces within 1e-12, total force zero.
//
//   SEGOPS_URL=http://127.0.0.1:8080 ./pair_segops      (SEGOPS_URL=local: no daemon)
#include <segops.h>

#include <cmath>
#include <cstdio>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

// Memory from the client: shared with the daemon (never copied) where the native channel is in use.
class Buffer {
 public:
  Buffer(segops_client *c, size_t n) : c_(c), p_(static_cast<double *>(segops_alloc(c, n * sizeof(double)))) {
    if (!p_) throw std::runtime_error("segops_alloc failed");
  }
  ~Buffer() { segops_free(c_, p_); }
  Buffer(const Buffer &) = delete;
  Buffer &operator=(const Buffer &) = delete;
  double *data() const { return p_; }
  double &operator[](size_t i) { return p_[i]; }

 private:
  segops_client *c_;
  double *p_;
};

segops_array f64(double *p, int64_t rows, int64_t cols) {
  segops_array a = {SEGOPS_F64, cols ? 2 : 1, {rows, cols, 0}, p, static_cast<size_t>(rows * (cols ? cols : 1)) * 8};
  return a;
}

segops_array i32(const std::vector<int32_t> &v) {
  segops_array a = {SEGOPS_I32, 1, {static_cast<int64_t>(v.size()), 0, 0}, const_cast<int32_t *>(v.data()), 0};
  return a;
}

}  // namespace

class PairSegops {
 public:
  PairSegops(double epsilon, double sigma, double cutoff) : eps_(epsilon), sigma_(sigma), rc2_(cutoff * cutoff) {
    segops_error e;
    if (segops_open(&client_, nullptr, nullptr, &e)) throw std::runtime_error(e.message);  // $SEGOPS_URL
  }
  ~PairSegops() { segops_close(client_); }

  // Energies per molecule (mol: each atom's molecule, nmol of them) and forces f (N,3) of atoms x
  // (N,3); returns the total energy.
  double compute(const std::vector<double> &x, const std::vector<int32_t> &mol, int nmol, std::vector<double> &f,
                 std::vector<double> &e_mol) {
    const int64_t n = static_cast<int64_t>(x.size() / 3);
    build_neighbours(x, n);
    const int64_t p = static_cast<int64_t>(owner_.size());
    Buffer pair_e(client_, p + 1), pair_f(client_, 3 * p + 1), atom_e(client_, n + 1), atom_f(client_, 3 * n + 1),
        mol_e(client_, nmol + 1);
    for (int64_t k = 0; k < p; k++) {
      double d[3], r2 = 0;
      for (int j = 0; j < 3; j++) {
        d[j] = x[3 * owner_[k] + j] - x[3 * other_[k] + j];
        r2 += d[j] * d[j];
      }
      double s6 = std::pow(sigma_ * sigma_ / r2, 3);
      pair_e[k] = 0.5 * 4 * eps_ * (s6 * s6 - s6);      // half: each pair is listed twice
      double fr = 24 * eps_ * (2 * s6 * s6 - s6) / r2;  // -V'(r)/r
      for (int j = 0; j < 3; j++) pair_f[3 * k + j] = fr * d[j];
    }
    segops_array idx = i32(owner_), pe = f64(pair_e.data(), p, 0), pf = f64(pair_f.data(), p, 3);
    segops_array ae = f64(atom_e.data(), n, 0), af = f64(atom_f.data(), n, 3), me = f64(mol_e.data(), nmol, 0);
    segops_array midx = i32(mol);
    segops_error e;
    if (segops_segmented_sum_forward(client_, &pe, &idx, n, &ae, &e) ||
        segops_segmented_sum_forward(client_, &pf, &idx, n, &af, &e) ||
        segops_segmented_sum_forward(client_, &ae, &midx, nmol, &me, &e))
      throw std::runtime_error(e.message);
    f.assign(atom_f.data(), atom_f.data() + 3 * n);
    e_mol.assign(mol_e.data(), mol_e.data() + nmol);
    double total = 0;
    for (double v : e_mol) total += v;
    return total;
  }

  const char *transport() const { return segops_transport_used(client_); }

 private:
  // A full neighbour list by brute force (a real pair style gets it from the MD code).
  void build_neighbours(const std::vector<double> &x, int64_t n) {
    owner_.clear();
    other_.clear();
    for (int64_t i = 0; i < n; i++)
      for (int64_t j = 0; j < n; j++) {
        double r2 = 0;
        for (int k = 0; k < 3; k++) r2 += (x[3 * i + k] - x[3 * j + k]) * (x[3 * i + k] - x[3 * j + k]);
        if (i != j && r2 < rc2_) {
          owner_.push_back(static_cast<int32_t>(i));
          other_.push_back(static_cast<int32_t>(j));
        }
      }
  }

  segops_client *client_ = nullptr;
  double eps_, sigma_, rc2_;
  std::vector<int32_t> owner_, other_;
};

// The same forces by a plain double loop over pairs.
static std::vector<double> direct_forces(const std::vector<double> &x, double eps, double sigma, double cutoff) {
  const size_t n = x.size() / 3;
  std::vector<double> f(3 * n, 0.0);
  for (size_t i = 0; i < n; i++)
    for (size_t j = 0; j < n; j++) {
      double d[3], r2 = 0;
      for (int k = 0; k < 3; k++) {
        d[k] = x[3 * i + k] - x[3 * j + k];
        r2 += d[k] * d[k];
      }
      if (i == j || r2 >= cutoff * cutoff) continue;
      double s6 = std::pow(sigma * sigma / r2, 3), fr = 24 * eps * (2 * s6 * s6 - s6) / r2;
      for (int k = 0; k < 3; k++) f[3 * i + k] += fr * d[k];
    }
  return f;
}

int main() {
  const int nmol = 6, per = 5;
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> u(0.0, 4.0);
  std::vector<double> x;
  std::vector<int32_t> mol;
  // Atoms on a jittered lattice (no two too close), molecule by molecule.
  for (int m = 0; m < nmol; m++)
    for (int a = 0; a < per; a++) {
      int i = m * per + a;
      x.push_back(1.1 * (i % 4) + 0.1 * u(rng) / 4);
      x.push_back(1.1 * (i / 4 % 4) + 0.1 * u(rng) / 4);
      x.push_back(1.1 * (i / 16) + 0.1 * u(rng) / 4);
      mol.push_back(m);
    }
  try {
    PairSegops pair(1.0, 1.0, 2.5);
    std::vector<double> f, e_mol;
    double energy = pair.compute(x, mol, nmol, f, e_mol);
    std::vector<double> want = direct_forces(x, 1.0, 1.0, 2.5);
    double worst = 0, net[3] = {0, 0, 0};
    for (size_t i = 0; i < f.size(); i++) {
      worst = std::fmax(worst, std::fabs(f[i] - want[i]));
      net[i % 3] += f[i];
    }
    double drift = std::fabs(net[0]) + std::fabs(net[1]) + std::fabs(net[2]);
    std::printf("transport %s; %d atoms, energy %.9f (per molecule:", pair.transport(), nmol * per, energy);
    for (double v : e_mol) std::printf(" %.6f", v);
    std::printf("); forces vs a plain loop: %.2e; net force %.2e\n", worst, drift);
    return worst < 1e-12 && drift < 1e-9 ? 0 : 1;
  } catch (const std::exception &err) {
    std::fprintf(stderr, "pair_segops: %s\n", err.what());
    return 1;
  }
}

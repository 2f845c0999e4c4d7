/* cuda_registry.cuh: the CUDA functions of the op table. Each op's .cu file names the kernel
 * structs of its functions after their ops.def rows, SEGOPS_CUDA_FN(c_name, RED, ELEM) (or
 * SEGOPS_CUDA_FN_RUN(c_name, RUNNER) for a runner of its own); the macro checks the structs'
 * constants against the row at compile time and defines segops_cuda_run_<c_name>, which runs the
 * function for the job's dtype and width. cuda_launch.cu finds a job's runner by its row
 * (segops_cuda_runner): a row whose runner no .cu file defines fails to link. */
#ifndef SEGOPS_CUDA_REGISTRY_CUH
#define SEGOPS_CUDA_REGISTRY_CUH

#include <type_traits>

#include "cuda_runners.cuh"
#include "cuda_wide.cuh"

/* Each row at compile time, as segops_cuda_row_<c_name> (ops.def: the same values as ops.c's). */
#define SEGOPS_FN(o, p, name, vec3, reads, acc1, acc3, nsv)                          \
  struct segops_cuda_row_##name {                                                    \
    static constexpr segops_op op = SEGOPS_OP_##o;                                   \
    static constexpr segops_pass pass = SEGOPS_PASS_##p;                             \
    static constexpr bool vec3_only = (vec3) != 0;                                   \
    static constexpr segops_elem_reads elem_reads = SEGOPS_READS_##reads;            \
    static constexpr int n_acc = (acc1) > (acc3) ? (acc1) : (acc3); /* the widest */ \
    static constexpr int n_segval = (nsv);                                           \
  };
#include "ops.def"
#undef SEGOPS_FN

/* The kernel arguments of a job (cuda_launch.cu): its pointers and the device view of its
 * layout, built first in the job's scratch when the job carries none. What segops_cuda_launch
 * hands the job's runner; a test runs a kernel struct of its own on them (a reduction that is
 * not a sum: tests/cuda/test_cuda_reducer_max.cu). */
cudaError_t segops_cuda_kargs(const segops_cuda_job *job, segops_kargs *a, cudaStream_t st);

/* A function's runner: what segops_cuda_launch calls for a job of its row. */
typedef cudaError_t (*segops_cuda_run_fn)(const segops_cuda_job *job, const segops_kargs *a, cudaStream_t st);
#define SEGOPS_FN(o, p, name, ...)                                                                        \
  cudaError_t segops_cuda_run_##name(const segops_cuda_job *job, const segops_kargs *a, cudaStream_t st); \
  int segops_cuda_wide_##name(void);
#include "ops.def"
#undef SEGOPS_FN

/* What a kernel struct says of itself: a reduction its K accumulators per segment, POST (a post
 * pass) and NSV (the segment values it hands to post); any struct VEC3 = 1 when it is written for
 * rows of width 3 only. */
template <typename OP, typename = void>
struct segops_cuda_vec3 : std::false_type {};
template <typename OP>
struct segops_cuda_vec3<OP, std::void_t<decltype(OP::VEC3)>> : std::integral_constant<bool, OP::VEC3 != 0> {};
template <typename RED>
struct segops_cuda_red_facts {
  static constexpr int K = RED::K, POST = RED::POST, NSV = RED::NSV;
};
template <>
struct segops_cuda_red_facts<void> {
  static constexpr int K = 0, POST = 0, NSV = 0;
};
/* Whether a struct (void: none) is written for width-3 rows exactly when the row is vec3_only. */
template <typename OP, bool VEC3_ONLY>
constexpr bool segops_cuda_width_fits() {
  if constexpr (std::is_void<OP>::value)
    return true;
  else
    return segops_cuda_vec3<OP>::value == VEC3_ONLY;
}

/* Whether a kernel struct (void: none) has run-time-width code (its WIDE, cuda_wide.cuh), and
 * whether a runner runs rows of a run-time width (its WIDE true: run<T, 0>). */
template <typename OP, typename = void>
struct segops_cuda_has_wide : std::false_type {};
template <typename OP>
struct segops_cuda_has_wide<OP, std::void_t<decltype(OP::WIDE)>> : std::true_type {};
template <typename OP>
constexpr bool segops_cuda_wide_fits() {
  if constexpr (std::is_void<OP>::value)
    return true;
  else
    return segops_cuda_has_wide<OP>::value;
}
template <typename RUN>
constexpr bool segops_cuda_runner_wide() {
  if constexpr (segops_cuda_has_wide<RUN>::value)
    return RUN::WIDE != 0;
  else
    return false;
}

/* The runner of a function made of a reduction RED and element outputs ELEM (either void, not
 * both): the segment kernel alone, a gather alone, or both (cuda_runners.cuh); at W = 0 (rows of a
 * run-time width) the kernels of cuda_wide.cuh, when both structs have them. */
template <typename RED, typename ELEM>
struct segops_cuda_kernels {
  static_assert(!(std::is_void<RED>::value && std::is_void<ELEM>::value), "a function has outputs");
  static constexpr int K = segops_cuda_red_facts<RED>::K, POST = segops_cuda_red_facts<RED>::POST,
                       NSV = segops_cuda_red_facts<RED>::NSV;
  static constexpr bool COUNTS = false; /* its gather reads no segment counts */
  static constexpr bool WIDE = segops_cuda_wide_fits<RED>() && segops_cuda_wide_fits<ELEM>();
  template <bool VEC3_ONLY>
  static constexpr bool width_fits() {
    return segops_cuda_width_fits<RED, VEC3_ONLY>() && segops_cuda_width_fits<ELEM, VEC3_ONLY>();
  }
  template <typename T, int W>
  static cudaError_t run(const segops_cuda_job *job, const segops_kargs *a, cudaStream_t st) {
    if constexpr (W == 0)
      return segops_run_wide<T, RED, ELEM>(job, a, st);
    else if constexpr (std::is_void<ELEM>::value)
      return segops_run_seg<T, W, RED>(job, a, st);
    else if constexpr (std::is_void<RED>::value)
      return segops_run_gather<T, W, ELEM>(job, a, st);
    else
      return segops_run_mixed<T, W, RED, ELEM>(job, a, st);
  }
};

/* The compile-time check of a runner against its row: the kernel's constants are the row's. */
template <typename ROW, typename RUN>
constexpr bool segops_cuda_fits() {
  static_assert(RUN::K == ROW::n_acc, "accumulators per segment: the reduction struct's K is not the row's n_acc");
  static_assert(RUN::POST == (ROW::elem_reads == SEGOPS_READS_NORMS),
                "post pass: the reduction struct's POST is not the row's elem_reads == NORMS");
  static_assert(RUN::POST ? RUN::NSV == ROW::n_segval : ROW::n_segval == 0,
                "segment values for post: the reduction struct's NSV is not the row's n_segval");
  static_assert(RUN::COUNTS == (ROW::elem_reads == SEGOPS_READS_COUNTS),
                "segment counts: the runner's COUNTS is not the row's elem_reads == COUNTS");
  static_assert(RUN::template width_fits<true>() || RUN::template width_fits<false>(),
                "width: a function's kernel structs are all written for width 3 (VEC3) or none is");
  static_assert(!ROW::vec3_only || RUN::template width_fits<true>(),
                "width: a vec3_only row needs kernel structs written for width 3 (VEC3)");
  return true;
}

/* Runs RUN for the job's dtype and width: width 3 only for kernels written for it (their structs'
 * VEC3; the backend refuses other widths for them before, cuda_backend.cu); else the constant
 * widths 1 and 3, and any other width (segops_cuda_job_wide) through the runner's W = 0
 * instantiation, which only a runner with WIDE has (the backend refuses such rows for the others:
 * segops_cuda_fn_wide). */
template <bool VEC3_ONLY, typename RUN>
cudaError_t segops_cuda_dispatch(const segops_cuda_job *job, const segops_kargs *a, cudaStream_t st) {
  const bool f64 = job->dtype == SEGOPS_F64;
  if constexpr (VEC3_ONLY) {
    return f64 ? RUN::template run<double, 3>(job, a, st) : RUN::template run<float, 3>(job, a, st);
  } else {
    if (!segops_cuda_job_wide(job))
      return f64 ? (job->width == 3 ? RUN::template run<double, 3>(job, a, st)
                                    : RUN::template run<double, 1>(job, a, st))
                 : (job->width == 3 ? RUN::template run<float, 3>(job, a, st)
                                    : RUN::template run<float, 1>(job, a, st));
    if constexpr (segops_cuda_runner_wide<RUN>())
      return f64 ? RUN::template run<double, 0>(job, a, st) : RUN::template run<float, 0>(job, a, st);
    return cudaErrorNotSupported;
  }
}

/* Defines segops_cuda_run_<name> for ops.def's row `name` (and segops_cuda_wide_<name>, whether
 * it runs rows of a run-time width): RUNNER (a struct with K, POST, NSV, COUNTS, width_fits and
 * run<T, W>, as segops_cuda_kernels, and WIDE when it has run<T, 0>), or the reduction RED and element
 * outputs ELEM of segops_cuda_kernels (void for none). */
#define SEGOPS_CUDA_FN_RUN(name, RUNNER)                                                                   \
  static_assert(segops_cuda_fits<segops_cuda_row_##name, RUNNER>(), #name ": kernels do not fit the row"); \
  cudaError_t segops_cuda_run_##name(const segops_cuda_job *job, const segops_kargs *a, cudaStream_t st) { \
    return segops_cuda_dispatch<!RUNNER::template width_fits<false>(), RUNNER>(job, a, st);                \
  }                                                                                                        \
  int segops_cuda_wide_##name(void) {                                                                      \
    return !RUNNER::template width_fits<true>() && segops_cuda_runner_wide<RUNNER>();                      \
  }
#define SEGOPS_CUDA_FN(name, RED, ELEM)                              \
  typedef segops_cuda_kernels<RED, ELEM> segops_cuda_kernels_##name; \
  SEGOPS_CUDA_FN_RUN(name, segops_cuda_kernels_##name)

#endif

/* cuda_max.cu: segmented_max and segmented_min on the GPU: not yet. The backend refuses them with
 * not_implemented naming the CPU backend before any launch (segops_cuda_shape_supported), so these
 * runners are never reached; they exist because every row of the table needs one (a row without
 * one fails to link), and they fit the rows' facts as the registry checks them. An arg reduction
 * needs the drivers (cuda_kernels.cuh) to combine a (value, index) pair per column, as the CPU
 * backend's do (cpu_phases.h, SEGOPS_CPU_ARGMAX), and post values per column. */
#include "cuda_registry.cuh"

template <typename ROW>
struct segops_cuda_refused {
  static constexpr int K = ROW::n_acc, POST = ROW::elem_reads == SEGOPS_READS_NORMS, NSV = ROW::n_segval;
  static constexpr bool COUNTS = false;
  template <bool VEC3_ONLY>
  static constexpr bool width_fits() {
    return !VEC3_ONLY;
  }
  template <typename T, int W>
  static cudaError_t run(const segops_cuda_job *, const segops_kargs *, cudaStream_t) {
    return cudaErrorNotSupported;
  }
};

SEGOPS_CUDA_FN_RUN(max_forward, segops_cuda_refused<segops_cuda_row_max_forward>)
SEGOPS_CUDA_FN_RUN(max_backward, segops_cuda_refused<segops_cuda_row_max_backward>)
SEGOPS_CUDA_FN_RUN(max_double_backward, segops_cuda_refused<segops_cuda_row_max_double_backward>)
SEGOPS_CUDA_FN_RUN(min_forward, segops_cuda_refused<segops_cuda_row_min_forward>)
SEGOPS_CUDA_FN_RUN(min_backward, segops_cuda_refused<segops_cuda_row_min_backward>)
SEGOPS_CUDA_FN_RUN(min_double_backward, segops_cuda_refused<segops_cuda_row_min_double_backward>)

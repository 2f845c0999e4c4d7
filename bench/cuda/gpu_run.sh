#!/bin/bash
# gpu_run.sh: the GPU machine's steps, run from the repository root after `. .device/env.sh`:
#   bench/cuda/gpu_run.sh build cudatests bench torch ctest sanitizer ncu parity nvalchemi
# (any subset, in that order; default: all but ncu/parity/nvalchemi, the last two needing
# nvalchemi-toolkit-ops and warp-lang: bench/cuda/stage_site.sh stages them here in two parts, carried
# by two calls in a row; the second sources .device/wheels/install.sh before this script).
#   build      Release build for sm_90 in build-gpu
#   cudatests  the CUDA tests (CTest label cuda: conformance_cuda among them) with SEGOPS_REQUIRE_CUDA=1
#   bench      bench_cuda at N = 2^12, 2^17, 2^20, 2^25 (idx files kept for the comparisons)
#   torch      torch's best on the same idx files (bench/cuda/torch_compare.py)
#   ctest      the whole suite with the CUDA backend required
#   sanitizer  compute-sanitizer memcheck and racecheck on the quick conformance run
#   ncu        Nsight Compute (--clock-control none) on warm calls of chosen rows: NCU_ROWS is
#              "log2n layout function dtype" quadruples separated by ',' (layout by number as in
#              bench_cuda --layouts); every kernel of one timed call is profiled
#   parity     tests/cuda/test_nvalchemi_parity.py: segops (CUDA) vs nvalchemiops, every op and pass
#   nvalchemi  nvalchemiops 0.5 itself on the same idx files (bench/cuda/nvalchemi_compare.py)
# Logs go to /tmp/gpu-logs (kept while the machine stays warm, so later calls read the bench's
# TSV files), one file per step, all of them packed into $OUT/gpu-logs.tgz at the end (the device
# tool returns few files). Each step is time-boxed.
set -u
DEST=${OUT:-.}
OUT=/tmp/gpu-logs
mkdir -p "$OUT"
B=build-gpu
SIZES=${SIZES:-12 17 20 25}
IDX=/tmp/segops-idx
STEPS=${*:-build cudatests bench torch ctest sanitizer}
step() { echo "== $1 ($(date +%T))"; }
has() { case " $STEPS " in *" $1 "*) return 0 ;; esac; return 1; }
reps_for() { if [ "$1" -ge 25 ]; then echo 15; else echo 200; fi; }

if has build; then
  step build
  cmake -S . -B $B -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 >"$OUT/build.log" 2>&1
  cmake --build $B -j16 -- -k >>"$OUT/build.log" 2>&1 || echo "build had errors (see build.log)"
  grep -E "error" "$OUT/build.log" | head -5
fi
if has cudatests; then
  step cudatests
  (cd $B && SEGOPS_REQUIRE_CUDA=1 timeout 300 ctest --output-on-failure -j4 -L cuda >"$OUT/cudatests.log" 2>&1)
  grep -E "tests passed|\*\*\*|Failed|^cuda (conformance|determinism)" "$OUT/cudatests.log" | head -20
fi
if has bench; then
  step bench
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv >"$OUT/bench.log" 2>&1
  for k in $SIZES; do
    mkdir -p $IDX/n$k
    timeout 200 $B/bench/cuda/bench_cuda --log2n $k --reps $(reps_for $k) --tsv "$OUT/bench_n$k.tsv" \
      --idx-dir $IDX/n$k >>"$OUT/bench.log" 2>&1
    echo "bench 2^$k rc=$?"
  done
fi
if has torch; then
  step torch
  for k in $SIZES; do
    # 2^25 takes minutes (torch.segment_reduce on one long segment takes seconds per call): 83 of
    # its 144 rows fit in 150 s (session 13), so it gets 420 s and fewer reps, best in a call of its own
    PYTHONUNBUFFERED=1 timeout $(if [ "$k" -ge 25 ]; then echo 420; else echo 150; fi) \
      python3 bench/cuda/torch_compare.py "$OUT/bench_n$k.tsv" $IDX/n$k \
      --reps $(if [ "$k" -ge 25 ]; then echo 3; else echo 5; fi) >"$OUT/torch_n$k.log" 2>&1
    echo "torch 2^$k rc=$? $(tail -1 "$OUT/torch_n$k.log")"
  done
fi
if has ctest; then
  step ctest
  (cd $B && SEGOPS_REQUIRE_CUDA=1 timeout 420 ctest --output-on-failure -j8 -E 'hardening_soak' >"$OUT/ctest.log" 2>&1)
  grep -E "tests passed|\*\*\*|Failed" "$OUT/ctest.log" | head -20
fi
if has sanitizer; then
  step sanitizer
  L="$OUT/sanitizer.log"
  echo "### memcheck conformance --backend cuda (SEGOPS_CUDA_TEST_QUICK=1)" >"$L"
  SEGOPS_CUDA_TEST_QUICK=1 timeout 150 compute-sanitizer --tool memcheck --error-exitcode 9 \
    $B/tests/core/segops_conformance --backend cuda >>"$L" 2>&1
  echo "memcheck conformance rc=$?" | tee -a "$L"
  echo "### memcheck test_cuda_oom" >>"$L"
  timeout 60 compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 9 $B/tests/cuda/test_cuda_oom >>"$L" 2>&1
  echo "memcheck oom rc=$?" | tee -a "$L"
  echo "### racecheck conformance --backend cuda (quick)" >>"$L"
  SEGOPS_CUDA_TEST_QUICK=1 timeout 120 compute-sanitizer --tool racecheck --error-exitcode 9 \
    $B/tests/core/segops_conformance --backend cuda >>"$L" 2>&1
  echo "racecheck conformance rc=$?" | tee -a "$L"
  grep -E "ERROR SUMMARY|RACECHECK SUMMARY|^conformance" "$L"
fi
if has ncu; then
  step ncu
  NCU_ROWS=${NCU_ROWS:-"25 1 mean/forward 32,25 2 sum/forward 32,25 3 sum/forward 32,25 0 mul/double_backward 64,12 1 matvec/double_backward 32"}
  IFS=',' read -r -a NR <<<"$NCU_ROWS"
  for row in "${NR[@]}"; do
    read -r k lay fn dt <<<"$row"
    f="$OUT/ncu_n${k}_l${lay}_${fn//\//_}_f$dt.txt"
    # with --reps 1 bench_cuda makes 4 calls with the layout built in the call, then 4 with it
    # warm (3 warm-ups and the timed one): the last kernels in each file are the timed warm call's
    timeout 240 ncu --clock-control none -k 'regex:seg_kernel|gather_kernel' --section SpeedOfLight --section MemoryWorkloadAnalysis \
      --section Occupancy --section LaunchStats --section SchedulerStats --section WarpStateStats \
      $B/bench/cuda/bench_cuda --log2n "$k" --reps 1 --layouts "$lay" --only "$fn" --dtypes "$dt" \
      --copy-mib 64 >"$f" 2>&1
    echo "ncu 2^$k layout $lay $fn f$dt rc=$? $(grep -c 'Context 1, Stream' "$f") kernels"
  done
fi
if has parity; then
  step parity
  SEGOPS_REQUIRE_CUDA=1 PYTHONUNBUFFERED=1 timeout 200 python3 tests/cuda/test_nvalchemi_parity.py $B/server/segopsd \
    >"$OUT/parity.log" 2>&1
  echo "parity rc=$?"
  tail -4 "$OUT/parity.log"
fi
if has nvalchemi; then
  step nvalchemi
  for k in $SIZES; do
    PYTHONUNBUFFERED=1 timeout 150 python3 bench/cuda/nvalchemi_compare.py "$OUT/bench_n$k.tsv" $IDX/n$k \
      --reps $(if [ $k -ge 25 ]; then echo 7; else echo 50; fi) >"$OUT/nvalchemi_n$k.log" 2>&1
    echo "nvalchemi 2^$k rc=$? $(tail -1 "$OUT/nvalchemi_n$k.log")"
  done
fi
step end
tar czf "$DEST/gpu-logs.tgz" -C /tmp gpu-logs

#!/bin/bash
# gpu_run.sh: one call on the GPU machine: build, the whole CTest suite with the CUDA backend
# required, the GPU benchmark + torch comparison, then compute-sanitizer (memcheck, racecheck) on
# the CUDA tests. Logs go to $OUT (or ./gpu-logs): build.log ctest.log bench.log bench.tsv
# torch.log sanitizer.log. Run from the repository root after `. .device/env.sh`. Each step is
# time-boxed so one hang cannot eat the whole call.
set -u
OUT=$(realpath -m "${OUT:-gpu-logs}")
mkdir -p "$OUT" /tmp/segops-idx
B=build-gpu
step() { echo "== $1 ($(date +%T))"; }
step build
cmake -S . -B $B -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 >"$OUT/build.log" 2>&1
cmake --build $B -j16 -- -k >>"$OUT/build.log" 2>&1 || echo "build had errors (see build.log)"
grep -E "error" "$OUT/build.log" | head -5
step ctest
(cd $B && SEGOPS_REQUIRE_CUDA=1 timeout ${CTEST_TIMEOUT:-240} ctest --output-on-failure -j4 >"$OUT/ctest.log" 2>&1)
grep -E "tests passed|\*\*\*|^cuda (conformance|determinism|limits|oom)|^conformance \(cuda|ran a request|huge request" "$OUT/ctest.log" | head -40
if [ -x $B/bench/cuda/bench_cuda ] && [ "${SKIP_BENCH:-0}" != 1 ]; then
  step bench
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv >"$OUT/bench.log" 2>&1
  timeout 180 $B/bench/cuda/bench_cuda --reps ${REPS:-15} --tsv "$OUT/bench.tsv" --idx-dir /tmp/segops-idx ${E2E:---e2e} >>"$OUT/bench.log" 2>&1
  echo "bench rc=$?"
  step torch
  PYTHONUNBUFFERED=1 timeout ${TORCH_TIMEOUT:-240} python3 bench/cuda/torch_compare.py "$OUT/bench.tsv" /tmp/segops-idx --reps ${TREPS:-7} >"$OUT/torch.log" 2>&1
  echo "torch rc=$?"
  tail -2 "$OUT/torch.log"
fi
if [ "${SKIP_SAN:-0}" != 1 ]; then
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
  SEGOPS_CUDA_TEST_QUICK=1 timeout 90 compute-sanitizer --tool racecheck --error-exitcode 9 \
    $B/tests/core/segops_conformance --backend cuda >>"$L" 2>&1
  echo "racecheck conformance rc=$?" | tee -a "$L"
  grep -E "ERROR SUMMARY|RACECHECK SUMMARY|^conformance" "$L"
fi
step end

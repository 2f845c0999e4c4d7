#!/bin/bash
# gpu_integration.sh: one device call for the whole product on the GPU machine: build, the whole
# CTest suite with the CUDA backend required (the daemon's HTTP and Python client tests then run
# against CUDA), the service benchmark and the many-client batching benchmark with --backend cuda.
# Run from the repository root after `. .device/env.sh`; logs go to $OUT (default ./gpu-logs).
# Each step is time-boxed so that one hang cannot eat the call.
set -u
OUT=$(realpath -m "${OUT:-gpu-logs}")
mkdir -p "$OUT"
B=build-gpu
step() { echo "== $1 ($(date +%T))"; }
step build
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > "$OUT/gpu.txt" 2>&1
cmake -S . -B $B -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 > "$OUT/build.log" 2>&1
timeout ${BUILD_TIMEOUT:-150} cmake --build $B -j16 -- -k >> "$OUT/build.log" 2>&1 || echo "build had errors"
grep -E "error|warning" "$OUT/build.log" | head -10
step ctest
(cd $B && SEGOPS_REQUIRE_CUDA=1 timeout ${CTEST_TIMEOUT:-130} ctest --output-on-failure -j8 \
   -E "${CTEST_EXCLUDE:-hardening_soak|cuda_limits}" > "$OUT/ctest.log" 2>&1)
grep -E "tests passed|\*\*\*|Test +#" "$OUT/ctest.log" | head -60
step service-bench
timeout ${SERVICE_TIMEOUT:-75} bench/http/run.sh --build $B --backend cuda --duration 1.5 --repeat 1 --threads 8 \
  > "$OUT/service.log" 2>&1; echo "service rc=$?"
cat "$OUT/service.log" | tail -15
step many-clients
timeout ${MANY_TIMEOUT:-110} bench/http/many_clients.sh --build $B --backend cuda --duration 1 \
  > "$OUT/many.log" 2>&1; echo "many rc=$?"
cat "$OUT/many.log" | tail -30
step end

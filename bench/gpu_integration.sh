#!/bin/bash
# gpu_integration.sh: one device call for the whole product on the GPU machine: build, the whole
# CTest suite with the CUDA backend required (the daemon's HTTP, OIP, shared-memory and Python
# client tests, torch on CUDA tensors included, then run against CUDA), the worker benchmark (the
# headline number: every transport, W = cores) and the service benchmark with --backend cuda.
# Run from the repository root after `. .device/env.sh`; logs go to $OUT (default ./gpu-logs).
# Each step is time-boxed so that one hang cannot eat the call; the timeouts are env-settable.
set -u
OUT=$(realpath -m "${OUT:-gpu-logs}")
mkdir -p "$OUT"
B=build-gpu
step() { echo "== $1 ($(date +%T))"; }
step build
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > "$OUT/gpu.txt" 2>&1
cmake -S . -B $B -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 -DSEGOPS_PYTHON="$(command -v python3)" \
  > "$OUT/build.log" 2>&1
timeout ${BUILD_TIMEOUT:-140} cmake --build $B -j"$(nproc)" -- -k >> "$OUT/build.log" 2>&1 || echo "build had errors"
grep -E "error|warning" "$OUT/build.log" | head -10
step ctest
(cd $B && SEGOPS_REQUIRE_CUDA=1 timeout ${CTEST_TIMEOUT:-170} ctest --output-on-failure -j8 \
   -E "${CTEST_EXCLUDE:-hardening_soak|cuda_limits|worker_bench}" > "$OUT/ctest.log" 2>&1)
grep -E "tests passed|\*\*\*|Failed|Not Run|Test +#" "$OUT/ctest.log" | grep -v " Passed" | head -40
grep -E "tests passed" "$OUT/ctest.log"
step worker-bench
PYTHONUNBUFFERED=1 timeout ${WORKER_TIMEOUT:-250} python3 bench/worker/worker_bench.py --segopsd $B/server/segopsd \
  --backend cuda --transport "${WORKER_TRANSPORTS:-all}" --workers "$(nproc)" --window "${WORKER_WINDOW:-0.5}" \
  --warmup 0.2 --json "$OUT/worker.json" > "$OUT/worker.log" 2>&1; echo "worker rc=$?"
cat "$OUT/worker.log" | tail -60
if [ "${SERVICE:-1}" = 1 ]; then
  step service-bench
  timeout ${SERVICE_TIMEOUT:-60} bench/http/run.sh --build $B --backend cuda --duration 1 --repeat 1 --threads 8 \
    > "$OUT/service.log" 2>&1; echo "service rc=$?"
  tail -15 "$OUT/service.log"
fi
step end

#!/usr/bin/env bash
# gpu_run.sh: the daemon's checks and benchmarks on the GPU machine, in one device call from the
# repository root, carrying .device (see bench/RESULTS.md):
#   . .device/env.sh && bench/http/gpu_run.sh [--quick]
# 1. builds build-gpu (CUDA on), 2. the HTTP tests (tests/http: every op x pass, status codes,
# batching bit-identity; auto = the CUDA backend there), 3. the service benchmark against the
# echo floor with --backend cuda, 4. issue 6's many-client benchmark (batching off/on).
# Logs go to $OUT (or ./gpu-http-logs).
set -uo pipefail
OUT=${OUT:-gpu-http-logs}
mkdir -p "$OUT"
QUICK=0
[ "${1:-}" = "--quick" ] && QUICK=1
nvidia-smi -L > "$OUT/gpu.txt" 2>&1
cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 > "$OUT/build.log" 2>&1 &&
  cmake --build build-gpu -j"$(nproc)" --target segopsd segopsd-test segops_http_echo segops_http_loadgen \
    test_server_units >> "$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
(cd build-gpu && ctest -R '^http_' --output-on-failure > "../$OUT/http_tests.log" 2>&1)
echo "http tests: $(grep -E 'tests passed' "$OUT/http_tests.log")"
if [ $QUICK = 1 ]; then
  bash bench/http/run.sh --build build-gpu --backend cuda --duration 1 --repeat 1 --threads 8 > "$OUT/bench_http.txt" 2>&1
  bash bench/http/many_clients.sh --build build-gpu --backend cuda --duration 0.5 --clients "1 16 64 256" \
    --fns "segmented_sum/forward segmented_rms_norm/double_backward" > "$OUT/many_clients.txt" 2>&1
else
  bash bench/http/run.sh --build build-gpu --backend cuda --duration 2 --repeat 2 --threads 8 > "$OUT/bench_http.txt" 2>&1
  bash bench/http/many_clients.sh --build build-gpu --backend cuda --duration 1 > "$OUT/many_clients.txt" 2>&1
fi
cat "$OUT/bench_http.txt" "$OUT/many_clients.txt"

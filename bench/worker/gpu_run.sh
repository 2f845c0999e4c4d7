#!/usr/bin/env bash
# gpu_run.sh: issue 10's headline numbers on the GPU machine, in one device call from the
# repository root (carrying .device, see bench/RESULTS.md):
#   . .device/env.sh && bench/worker/gpu_run.sh [--quick]
# 1. builds build-gpu (CUDA on; the daemon and the HTTP bench tools),
# 2. the worker benchmark against `segopsd --backend cuda`: every op, N = 2^10, 2^14, 2^17, 2^20,
#    1 worker and W = nproc workers, transports http, unix and shm (about 6 minutes on 16 cores;
#    --quick: sum and matvec only),
# 3. the service benchmark (bench/http/run.sh --backend cuda, loadgen and wrk, the faster kept).
# Tables and JSON go to $OUT (or ./gpu-worker-logs).
set -uo pipefail
OUT=${OUT:-gpu-worker-logs}
mkdir -p "$OUT"
OPS=sum,dot,mul,mean,rms_norm,matvec
[ "${1:-}" = "--quick" ] && OPS=sum,matvec
PY=${SEGOPS_PYTHON:-python3}
nvidia-smi -L > "$OUT/gpu.txt" 2>&1
cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 > "$OUT/build.log" 2>&1 &&
  cmake --build build-gpu -j"$(nproc)" --target segopsd segops_http_echo segops_http_loadgen >> "$OUT/build.log" 2>&1 ||
  { tail -30 "$OUT/build.log"; exit 1; }
start=$(date +%s)
"$PY" bench/worker/worker_bench.py --segopsd build-gpu/server/segopsd --backend cuda --transport all \
  --ops "$OPS" --window 0.8 --warmup 0.3 --json "$OUT/worker_gpu.json" 2>&1 | tee "$OUT/worker_gpu.txt"
echo "worker benchmark: $(( $(date +%s) - start )) s"
# wrk: the GPU machine reaches no package mirror; without wrk on PATH (e.g. from a .deb carried in
# .device) run.sh uses loadgen alone and says so in its header.
bash bench/http/run.sh --build build-gpu --backend cuda --duration 2 --repeat 2 --threads 8 2>&1 | tee "$OUT/bench_http.txt"

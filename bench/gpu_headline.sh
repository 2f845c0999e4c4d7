#!/bin/bash
# gpu_headline.sh: one short GPU call: build, the headline worker bench (sum, rms_norm, matvec; shm and http),
# the CUDA and shared-memory test subset, and an A/B of the direct copies (SEGOPS_CUDA_DIRECT_COPIES=0).
# Run from the repository root after `. .device/env.sh`; logs go to $OUT (default ./gpu-logs).
set -u
OUT=$(realpath -m "${OUT:-gpu-logs}"); mkdir -p "$OUT"; B=build-gpu
echo "== build $(date +%T)"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/gpu.txt" 2>&1
cmake -S . -B $B -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 -DSEGOPS_PYTHON="$(command -v python3)" > "$OUT/build.log" 2>&1
timeout 100 cmake --build $B -j16 --target segopsd segops_conformance -- -k >> "$OUT/build.log" 2>&1 || echo "build had errors"
grep -E "error" "$OUT/build.log" | head -5
echo "== worker $(date +%T)"
PYTHONUNBUFFERED=1 timeout 140 python3 bench/worker/worker_bench.py --segopsd $B/server/segopsd --backend cuda \
  --transport shm,http --ops sum,rms_norm,matvec --workers 16 --window 0.4 --warmup 0.15 --json "$OUT/worker.json" > "$OUT/worker.log" 2>&1
echo "worker rc=$?"; tail -40 "$OUT/worker.log"
echo "== tests $(date +%T)"
timeout 100 cmake --build $B -j16 -- -k >> "$OUT/build.log" 2>&1 || echo "build (all) had errors"
(cd $B && SEGOPS_REQUIRE_CUDA=1 timeout 45 ctest --output-on-failure -j8 -R 'cuda_|http_shm|python_transport_shm|python_torch$' > "$OUT/ctest.log" 2>&1)
grep -E "tests passed|\*\*\*|Test +#" "$OUT/ctest.log" | head -30
echo "== A/B direct copies off $(date +%T)"
SEGOPS_CUDA_DIRECT_COPIES=0 PYTHONUNBUFFERED=1 timeout 40 python3 bench/worker/worker_bench.py --segopsd $B/server/segopsd --backend cuda \
  --transport shm --ops sum,matvec --sizes 17,20 --workers 16 --window 0.4 --warmup 0.15 --json "$OUT/worker_nodirect.json" > "$OUT/worker_nodirect.log" 2>&1
echo "nodirect rc=$?"; tail -8 "$OUT/worker_nodirect.log"
echo "== end $(date +%T)"

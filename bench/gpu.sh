#!/usr/bin/env bash
# gpu.sh: the test suite and the benchmarks on a GPU machine, one entry. From the repository root:
#   . .device/env.sh && bash bench/gpu.sh [OPTIONS] STEP [ARG...] [STEP [ARG...]]...
# Steps run in the order given, each time-boxed, each building only the targets it needs in
# build-gpu (Release, CUDA for sm_90; configured once, so later calls on a warm machine reuse it):
#   suite                 the whole tree built, the whole CTest suite with SEGOPS_REQUIRE_CUDA=1: the
#                         CUDA tests (-L cuda) first, then the rest
#   sanitize              compute-sanitizer memcheck and racecheck over the conformance harness on the
#                         CUDA backend (its quick case list), memcheck over test_cuda_oom
#   kernels [SIZES]       bench_cuda at the log2 sizes (default "12 17 20 25"), against the copy
#                         bandwidth it measures: TSV and output digests; then torch's best on the same
#                         idx (bench/cuda/torch_compare.py) and nvalchemiops' where it imports
#                         (bench/cuda/nvalchemi_compare.py; .device/wheels/install.sh is sourced when there);
#                         with WIDTHS (e.g. WIDTHS=16,64,256) also bench_cuda --widths WIDTHS (feature rows
#                         (N,F) of the same values, layouts WIDE_LAYOUTS, default 0123) and torch on them
#   compare BASE [SIZES]  BASE: a baseline source tree (a directory, e.g. a git worktree of another
#                         commit, copied into an ignored folder and carried). Builds its bench_cuda and
#                         conformance harness (the harness's digest option taken from this tree), then at
#                         each size (default "12 17 25") runs the baseline, this tree, the baseline and
#                         this tree; prints each function's warm medians side by side with the verdict
#                         (within the larger of 3 % and the baseline's own spread) and checks that every
#                         output is bit-identical (bench_cuda --digest up to 2^DIGEST_MAX elements,
#                         default 25; conformance --digest)
#   worker [ARG...]       bench/worker/worker_bench.py against segopsd --backend cuda (ARGs replace the
#                         defaults: --transport all --window 0.8 --warmup 0.3)
#   service [ARG...]      bench/http/run.sh --backend cuda, then bench/http/many_clients.sh
#   mlip [ARG...]         bench/mlip/mp_step.py, the message-passing training step through segopsd --backend
#                         cuda against plain torch, nproc workers, transports native, local, http: ~1,000
#                         and ~16,000 atoms at F = 32, then ~1,000 atoms at F = 128 (ARGs are added to both)
#   mps [ARG...]          the anchor a user would try instead: the worker step's ops offloaded by nproc
#                         workers, each in its own CUDA context, under NVIDIA MPS (nvidia-cuda-mps-control
#                         -d, started here and quit before the next step; no segopsd runs meanwhile), then
#                         bench/worker/vs_mps.py against the worker step's JSON (run `worker` first; ARGs
#                         replace --window 0.5 --warmup 0.2 --sizes 10,14,17)
#   stepcost [ARG...]     bench/client/step_cost.py: one worker's CPU per step, four ways (ARGs: ops, e.g.
#                         "sum rms_norm matvec"; sizes by SIZES="10 14")
# Options: --out DIR (default $OUT, else bench/out/gpu): summary.txt and gpu-logs.tgz, rewritten after
# every step, so a call cut short still returns what it had; --work DIR (default /tmp/segops-gpu):
# logs, TSVs and idx files, kept while the machine stays warm; --jobs N (default nproc); --help.
# --build-only: every step builds what it needs and runs nothing (checks the builds without a GPU).
# Exit status: 0 when every step passed, 1 when one failed, 2 for bad arguments.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
STEPS="suite sanitize kernels compare worker service stepcost mlip mps"
usage() { sed -n '2,/^set -uo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; }
die() {
  echo "gpu.sh: $*" >&2
  exit 2
}
is_step() { case " $STEPS " in *" $1 "*) return 0 ;; esac; return 1; }
is_sizes() { [[ "$1" =~ ^[0-9]+( [0-9]+)*$ ]]; }

# ---- Arguments: options, then steps with their arguments (checked before anything runs) ----
DEST=${OUT:-$ROOT/bench/out/gpu} WORK=/tmp/segops-gpu JOBS=$(nproc) BUILD_ONLY=0
while [ $# -gt 0 ]; do
  case $1 in
    -h | --help) usage && exit 0 ;;
    --out) [ $# -ge 2 ] || die "--out needs a folder"; DEST=$2 && shift 2 ;;
    --work) [ $# -ge 2 ] || die "--work needs a folder"; WORK=$2 && shift 2 ;;
    --jobs) [[ "${2:-}" =~ ^[1-9][0-9]*$ ]] || die "--jobs needs a number"; JOBS=$2 && shift 2 ;;
    --build-only) BUILD_ONLY=1 && shift ;;
    -*) die "unknown option $1 (see --help)" ;;
    *) break ;;
  esac
done
[ $# -gt 0 ] || die "no step given (see --help)"
[[ -z "${WIDTHS:-}" || "$WIDTHS" =~ ^[0-9]+(,[0-9]+)*$ ]] || die "WIDTHS: comma-separated widths, e.g. 16,64,256"
[[ "${WIDE_LAYOUTS:-0123}" =~ ^[0-3]+$ ]] || die "WIDE_LAYOUTS: layout numbers 0-3, e.g. 013"
PLAN=() # "step|arg|arg..." with | between words
while [ $# -gt 0 ]; do
  is_step "$1" || die "unknown step '$1' (steps: $STEPS)"
  step=$1 args=()
  shift
  while [ $# -gt 0 ] && ! is_step "$1"; do args+=("$1") && shift; done
  case $step in
    suite | sanitize) [ ${#args[@]} -eq 0 ] || die "$step takes no arguments" ;;
    kernels) [ ${#args[@]} -le 1 ] && { [ ${#args[@]} -eq 0 ] || is_sizes "${args[0]}"; } ||
      die "kernels takes one argument, the log2 sizes, e.g. \"12 17 25\"" ;;
    compare)
      [ ${#args[@]} -ge 1 ] && [ ${#args[@]} -le 2 ] || die "compare takes BASE [SIZES]"
      [ -f "${args[0]}/CMakeLists.txt" ] || die "compare: ${args[0]} is not a source tree (no CMakeLists.txt)"
      [ ${#args[@]} -eq 1 ] || is_sizes "${args[1]}" || die "compare: sizes must be log2 numbers, e.g. \"12 17 25\""
      args[0]=$(cd "${args[0]}" && pwd) ;;
  esac
  PLAN+=("$(
    IFS='|'
    echo "$step${args[*]+|${args[*]}}"
  )")
done
[ -f "$ROOT/CMakeLists.txt" ] || die "not a source tree: $ROOT"
mkdir -p "$DEST" "$WORK" || die "cannot create $DEST or $WORK"
DEST=$(cd "$DEST" && pwd) WORK=$(cd "$WORK" && pwd)
B=$ROOT/build-gpu
PY=$(command -v python3)
SUMMARY=$WORK/summary.txt
: >"$SUMMARY"
failed=0

say() { echo "$*" | tee -a "$SUMMARY"; }
# Packs the work folder's logs and tables (not the idx files) into DEST: two files, as the device
# tool returns few.
pack() {
  cp "$SUMMARY" "$DEST/summary.txt"
  tar czf "$DEST/gpu-logs.tgz" -C "$WORK" --exclude=./idx --exclude=./base-src --exclude=./base-build . 2>/dev/null
}
fail() {
  say "FAILED: $*"
  failed=1
}
# build_client SECONDS [TARGET...]: segopsd, the Python package's C extension (segops._native, for
# the native channel and 'local') and TARGETs; SEGOPS_NATIVE_LIB then names the extension for every
# Python step (the source tree's import looks in build/, not in this build folder).
build_client() {
  local t=$1
  shift
  build "$t" segopsd segops_python_ext "$@" || return 1
  [ $BUILD_ONLY = 1 ] && return 0
  local ext
  ext=$(ls "$B"/clients/python/lib/segops/_native*.so 2>/dev/null | head -1)
  [ -n "$ext" ] || { say "no segops._native in $B/clients/python/lib (build.log)" && return 1; }
  export SEGOPS_NATIVE_LIB=$ext
}
# configure [SRC BUILD]: a Release build with CUDA for sm_90, once per build folder.
configure() {
  local src=${1:-$ROOT} dir=${2:-$B}
  if ! grep -q '^CMAKE_CUDA_ARCHITECTURES:' "$dir/CMakeCache.txt" 2>/dev/null; then
    cmake -S "$src" -B "$dir" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 -DSEGOPS_CUDA=ON \
      -DSEGOPS_PYTHON="$PY" >>"$WORK/build.log" 2>&1 || return 1
  fi
}
# build TIMEOUT TARGET...: builds the targets in build-gpu (all of them without targets).
build() {
  local t=$1
  shift
  configure || return 1
  timeout "$t" cmake --build "$B" -j"$JOBS" ${1:+--target "$@"} >>"$WORK/build.log" 2>&1
}
run_step() { # step args...: one step, its exit status
  local step=$1
  shift
  say "== $step $* ($(date +%T))"
  "step_$step" "$@"
}

step_suite() {
  build 420 || { fail "suite: build (build.log)" && return; }
  [ $BUILD_ONLY = 1 ] && return
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader >"$WORK/gpu.txt" 2>&1
  # The CUDA tests first (about 3 minutes on an H100, cuda_determinism the longest), packed before
  # the rest runs, so that a call cut short still returns their verdict.
  local part log rc
  for part in cuda rest; do
    log=$WORK/ctest_$part.log
    (cd "$B" && SEGOPS_REQUIRE_CUDA=1 timeout 480 ctest --output-on-failure -j8 \
      $([ $part = cuda ] && echo "-L cuda" || echo "-LE cuda") ${CTEST_ARGS:-} >"$log" 2>&1)
    rc=$?
    grep -E "tests passed|\(Failed\)|\(Timeout\)|\*\*\*Failed|Not Run" "$log" | sed "s/^/$part: /" | tee -a "$SUMMARY"
    [ $rc = 0 ] || fail "suite: ctest ($part) rc=$rc (ctest_$part.log)"
    pack
  done
}

step_sanitize() {
  build 300 segops_conformance test_cuda_oom || { fail "sanitize: build (build.log)" && return; }
  [ $BUILD_ONLY = 1 ] && return
  local L=$WORK/sanitizer.log tool rc
  : >"$L"
  # memcheck took 101 s on an H100; racecheck had not finished after 190 s there.
  for tool in memcheck racecheck; do
    echo "### $tool conformance --backend cuda (SEGOPS_CUDA_TEST_QUICK=1)" >>"$L"
    SEGOPS_REQUIRE_CUDA=1 SEGOPS_CUDA_TEST_QUICK=1 timeout $([ $tool = memcheck ] && echo 180 || echo 420) \
      compute-sanitizer --tool $tool --error-exitcode 9 \
      "$B/tests/core/segops_conformance" --backend cuda >>"$L" 2>&1
    rc=$?
    say "$tool conformance rc=$rc"
    [ $rc = 0 ] || fail "sanitize: $tool conformance (sanitizer.log)"
  done
  echo "### memcheck test_cuda_oom" >>"$L"
  SEGOPS_REQUIRE_CUDA=1 timeout 90 compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 9 \
    "$B/tests/cuda/test_cuda_oom" >>"$L" 2>&1
  rc=$?
  say "memcheck test_cuda_oom rc=$rc"
  [ $rc = 0 ] || fail "sanitize: memcheck test_cuda_oom (sanitizer.log)"
  grep -E "ERROR SUMMARY|RACECHECK SUMMARY" "$L" | tee -a "$SUMMARY"
}

# Output digests (bench_cuda --digest) up to 2^DIGEST_MAX elements (default 25: the inline element
# outputs from 2^19 and the split past 2^22 run only at such sizes; each output is copied to the host
# and hashed, about a minute per run at 2^25).
DIGEST_MAX=${DIGEST_MAX:-25}
reps_for() { if [ "$1" -ge 25 ]; then echo 15; else echo 200; fi; }

step_kernels() {
  local sizes=${1:-12 17 20 25} k
  build 300 bench_cuda || { fail "kernels: build (build.log)" && return; }
  [ $BUILD_ONLY = 1 ] && return
  for k in $sizes; do
    mkdir -p "$WORK/idx/n$k"
    timeout 400 "$B/bench/cuda/bench_cuda" --log2n "$k" --reps "$(reps_for "$k")" --tsv "$WORK/bench_n$k.tsv" \
      $([ "$k" -le "$DIGEST_MAX" ] && echo "--digest $WORK/bench_n$k.dig") --idx-dir "$WORK/idx/n$k" \
      >"$WORK/bench_n$k.log" 2>&1 ||
      fail "kernels: bench_cuda 2^$k (bench_n$k.log)"
    say "bench_cuda 2^$k: $(head -1 "$WORK/bench_n$k.log")"
    if [ -n "${WIDTHS:-}" ]; then
      mkdir -p "$WORK/idx/w$k"
      timeout 500 "$B/bench/cuda/bench_cuda" --log2n "$k" --reps "$(reps_for "$k")" --widths "$WIDTHS" \
        --layouts "${WIDE_LAYOUTS:-0123}" --tsv "$WORK/bench_w_n$k.tsv" --idx-dir "$WORK/idx/w$k" \
        >"$WORK/bench_w_n$k.log" 2>&1 || fail "kernels: bench_cuda --widths $WIDTHS 2^$k (bench_w_n$k.log)"
      say "bench_cuda --widths $WIDTHS 2^$k: $(grep -c ' w=' "$WORK/bench_w_n$k.log") rows"
    fi
  done
  [ -f .device/wheels/install.sh ] && . .device/wheels/install.sh
  for k in $sizes; do
    [ -f "$WORK/bench_n$k.tsv" ] || continue
    PYTHONUNBUFFERED=1 timeout "$([ "$k" -ge 25 ] && echo 300 || echo 120)" "$PY" bench/cuda/torch_compare.py \
      "$WORK/bench_n$k.tsv" "$WORK/idx/n$k" --reps "$([ "$k" -ge 25 ] && echo 3 || echo 5)" >"$WORK/torch_n$k.log" 2>&1
    say "torch 2^$k rc=$? $(tail -1 "$WORK/torch_n$k.log")"
    if "$PY" -c "import nvalchemiops" 2>/dev/null; then
      PYTHONUNBUFFERED=1 timeout 150 "$PY" bench/cuda/nvalchemi_compare.py "$WORK/bench_n$k.tsv" "$WORK/idx/n$k" \
        --reps "$([ "$k" -ge 25 ] && echo 7 || echo 50)" >"$WORK/nvalchemi_n$k.log" 2>&1
      say "nvalchemiops 2^$k rc=$? $(tail -1 "$WORK/nvalchemi_n$k.log")"
    fi
    [ -n "${WIDTHS:-}" ] && [ -f "$WORK/bench_w_n$k.tsv" ] || continue
    PYTHONUNBUFFERED=1 timeout 300 "$PY" bench/cuda/torch_compare.py "$WORK/bench_w_n$k.tsv" "$WORK/idx/w$k" \
      --reps "$([ "$k" -ge 25 ] && echo 3 || echo 5)" >"$WORK/torch_w_n$k.log" 2>&1
    say "torch --widths 2^$k rc=$? $(tail -1 "$WORK/torch_w_n$k.log")"
  done
}

# The baseline tree's bench_cuda and conformance harness, built from a copy of BASE whose harness
# is this tree's (the digest option; the harness is a test, not the product under comparison).
build_base() {
  local base=$1 src=$WORK/base-src bb=$WORK/base-build conf
  # Built already on this (warm) machine from the same BASE: a later compare call reuses it.
  if [ "$(cat "$bb/.segops-base" 2>/dev/null)" = "$base" ] && [ -n "$(find "$bb" -name bench_cuda -type f 2>/dev/null)" ]; then
    return 0
  fi
  rm -rf "$src" && mkdir -p "$src" || return 1
  (cd "$base" && tar cf - --exclude='./build*' --exclude=./.venv --exclude=./.device --exclude=./bench/out .) |
    tar xf - -C "$src" || return 1
  conf=$(cd "$src" && find . -name conformance.c -path '*tests*' | head -1)
  if [ -n "$conf" ] && ! grep -q -- '--digest' "$src/$conf"; then
    cp "$ROOT/tests/core/conformance.c" "$src/$conf"
    echo "baseline harness: $conf from this tree (for --digest)" >>"$WORK/build.log"
  fi
  configure "$src" "$bb" && timeout 420 cmake --build "$bb" -j"$JOBS" --target bench_cuda segops_conformance \
    >>"$WORK/build.log" 2>&1 && echo "$base" >"$bb/.segops-base"
}

step_compare() {
  local base=$1 sizes=${2:-12 17 25} k r side bin
  build 420 bench_cuda segops_conformance || { fail "compare: build of this tree (build.log)" && return; }
  build_base "$base" || { fail "compare: build of the baseline $base (build.log)" && return; }
  [ -e "$base/.git" ] && say "baseline $base: $(git -C "$base" log -1 --format='%h %s' | cut -c1-80)"
  [ $BUILD_ONLY = 1 ] && return
  local bb=$WORK/base-build base_bench base_conf
  base_bench=$(find "$bb" -name bench_cuda -type f -perm -u+x | head -1)
  base_conf=$(find "$bb" -name segops_conformance -type f -perm -u+x | head -1)
  for k in $sizes; do
    for r in 1 2; do
      for side in base new; do
        [ $side = base ] && bin=$base_bench || bin=$B/bench/cuda/bench_cuda
        timeout 400 "$bin" --log2n "$k" --reps "$(reps_for "$k")" --tsv "$WORK/cmp_${side}${r}_n$k.tsv" \
          $([ $r = 1 ] && [ "$k" -le "$DIGEST_MAX" ] && echo "--digest $WORK/cmp_${side}_n$k.dig") \
          >"$WORK/cmp_${side}${r}_n$k.log" 2>&1 ||
          fail "compare: $side bench_cuda 2^$k round $r (cmp_${side}${r}_n$k.log)"
      done
    done
  done
  for side in base new; do
    [ $side = base ] && bin=$base_conf || bin=$B/tests/core/segops_conformance
    SEGOPS_REQUIRE_CUDA=1 timeout 120 "$bin" --backend cuda --digest "$WORK/cmp_${side}_conformance.dig" \
      >"$WORK/cmp_${side}_conformance.log" 2>&1 || fail "compare: $side conformance (cmp_${side}_conformance.log)"
  done
  "$PY" bench/cuda/ab_compare.py --work "$WORK" --sizes "$sizes" --digest-max "$DIGEST_MAX" >"$WORK/compare.txt" 2>&1
  local rc=$?
  tail -n 25 "$WORK/compare.txt" | tee -a "$SUMMARY"
  [ $rc = 0 ] || fail "compare: a function slower beyond its tolerance, or outputs not bit-identical (compare.txt)"
}

step_worker() {
  build_client 300 || { fail "worker: build (build.log)" && return; }
  [ $BUILD_ONLY = 1 ] && return
  local args=("$@")
  [ ${#args[@]} -gt 0 ] || args=(--transport all --window 0.8 --warmup 0.3)
  PYTHONUNBUFFERED=1 timeout 540 "$PY" bench/worker/worker_bench.py --segopsd "$B/server/segopsd" --backend cuda \
    --json "$WORK/worker.json" "${args[@]}" >"$WORK/worker.log" 2>&1 || fail "worker: rc=$? (worker.log)"
  ! grep -q "is not available here, left out" "$WORK/worker.log" ||
    fail "worker: a transport asked for was left out: $(grep -m1 "left out" "$WORK/worker.log")"
  grep -E "^(###|\|)|^worker_bench: daemon" "$WORK/worker.log" | tee -a "$SUMMARY"
}

step_service() {
  build_client 300 segops_http_echo segops_http_loadgen || { fail "service: build (build.log)" && return; }
  [ $BUILD_ONLY = 1 ] && return
  timeout 240 bash bench/http/run.sh --build "$B" --backend cuda --duration 2 --repeat 2 --threads 8 "$@" \
    >"$WORK/service.log" 2>&1 || fail "service: run.sh (service.log)"
  timeout 240 bash bench/http/many_clients.sh --build "$B" --backend cuda --duration 1 >"$WORK/many_clients.log" 2>&1 ||
    fail "service: many_clients.sh (many_clients.log)"
  cat "$WORK/service.log" "$WORK/many_clients.log" | tail -n 40 | tee -a "$SUMMARY"
}

step_stepcost() {
  build_client 300 || { fail "stepcost: build (build.log)" && return; }
  [ $BUILD_ONLY = 1 ] && return
  local ops=${*:-sum rms_norm matvec} op k mode steps
  for op in $ops; do
    for k in ${SIZES:-10 14}; do
      # enough steps that warm-up (allocator growth, page faults) stays a small part
      steps=$((k >= 17 ? 300 : (k >= 14 ? 1000 : 2000)))
      for mode in --local --fake --fake-http ""; do
        timeout 120 "$PY" bench/client/step_cost.py --segopsd "$B/server/segopsd" --backend cuda --op "$op" \
          --log2n "$k" --steps "$steps" --pin 0 $mode >>"$WORK/stepcost.log" 2>&1 ||
          fail "stepcost: $op 2^$k $mode (stepcost.log)"
      done
    done
  done
  grep -E "CPU per step|per step:" "$WORK/stepcost.log" | tee -a "$SUMMARY"
}

step_mlip() {
  build_client 300 || { fail "mlip: build (build.log)" && return; }
  [ $BUILD_ONLY = 1 ] && return
  local w sizes spec
  w=$(nproc)
  say "mlip: $w workers on all $w cores, segopsd unpinned ($(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1))"
  # ~1,000 atoms F = 32 on every transport first, then ~16,000 atoms and F = 128 over the native channel
  for spec in "1000 32 native,local,http 120" "16000 32 native 150" "1000 128 native 90"; do
    set -- $spec "${@}"
    sizes="a$1_f$2"
    PYTHONUNBUFFERED=1 timeout "$4" "$PY" bench/mlip/mp_step.py --segopsd "$B/server/segopsd" --backend cuda \
      --workers "$w" --atoms "$1" --features "$2" --transport "$3" --window 2 --min-steps 3 \
      --json "$WORK/mlip_$sizes.json" "${@:5}" >"$WORK/mlip_$sizes.log" 2>&1 || fail "mlip: $1 atoms F = $2 rc=$? (mlip_$sizes.log)"
    grep -E "^mp_step|^\| [0-9]" "$WORK/mlip_$sizes.log" | tee -a "$SUMMARY"
    shift 4
    pack
  done
}

# MPS: its control daemon serves every CUDA context made while it runs, so it starts after segopsd's
# rows (worker) and quits before anything else; its pipes and logs stay in the work folder.
step_mps() {
  [ $BUILD_ONLY = 1 ] && { command -v nvidia-cuda-mps-control >/dev/null || say "mps: no nvidia-cuda-mps-control here"; return; }
  [ -f "$WORK/worker.json" ] || { fail "mps: no worker.json (run the worker step first, with --alternatives offload)" && return; }
  local args=("$@") rc
  [ ${#args[@]} -gt 0 ] || args=(--window 0.5 --warmup 0.2 --sizes 10,14,17)
  export CUDA_MPS_PIPE_DIRECTORY=$WORK/mps-pipe CUDA_MPS_LOG_DIRECTORY=$WORK/mps-log
  mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
  nvidia-cuda-mps-control -d || { fail "mps: nvidia-cuda-mps-control -d failed" && return; }
  say "mps: control daemon started; $(nproc) workers offloading, each its own context"
  PYTHONUNBUFFERED=1 timeout 300 "$PY" bench/worker/worker_bench.py --segopsd "$B/server/segopsd" --backend cuda \
    --workers "$(nproc)" --transport none --alternatives offload --json "$WORK/worker_mps.json" "${args[@]}" \
    >"$WORK/worker_mps.log" 2>&1
  rc=$?
  echo quit | nvidia-cuda-mps-control
  unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
  [ $rc = 0 ] || { fail "mps: worker_bench rc=$rc (worker_mps.log)" && return; }
  "$PY" bench/worker/vs_mps.py "$WORK/worker.json" "$WORK/worker_mps.json" >"$WORK/vs_mps.txt" 2>&1 ||
    fail "mps: vs_mps.py (vs_mps.txt)"
  tee -a "$SUMMARY" <"$WORK/vs_mps.txt"
}

cd "$ROOT" || exit 2
say "gpu.sh $(git log -1 --format='%h' 2>/dev/null) on $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)"
for p in "${PLAN[@]}"; do
  IFS='|' read -r -a words <<<"$p"
  run_step "${words[@]}"
  pack
done
say "== end ($(date +%T)): $([ $failed = 0 ] && echo 'every step passed' || echo 'a step FAILED')"
pack
exit $failed

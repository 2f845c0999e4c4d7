#!/usr/bin/env bash
# test.sh: installs what is missing, builds, and runs every test:
#   1. the Release build (CPU backend; CUDA backend compiled when nvcc is found, its GPU tests
#      run with a GPU and are reported SKIPPED without one),
#   2. the same C and HTTP suites under AddressSanitizer + UndefinedBehaviorSanitizer (+ leaks),
#   3. the libFuzzer targets for a bounded time each (clang).
# Prints one closing line "segops: N passed, N failed, N skipped"; exits non-zero on any failure.
# Env: SEGOPS_FUZZ_SECONDS (default 20), SEGOPS_SKIP_ASAN=1, SEGOPS_SKIP_FUZZ=1, CTEST_ARGS.
set -uo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --test || exit 1
# shellcheck disable=SC1091
. .venv/bin/activate

jobs=$(nproc)
results=()
# The Python tests must run on the C extension the build made (tests/python/test_native.py fails
# without it); the "nonative" registrations run them again without it on purpose.
export SEGOPS_REQUIRE_NATIVE=1
failed=0

run_suite() { # name build_dir ctest-args...
  local name=$1 dir=$2
  shift 2
  echo "=== $name: ctest in $dir"
  (cd "$dir" && ctest --output-on-failure -j"$jobs" --output-junit "junit-$name.xml" ${CTEST_ARGS:-} "$@")
  local rc=$?
  [ $rc -eq 0 ] || failed=1
  results+=("$dir/junit-$name.xml")
}

echo "=== release: build"
if scripts/build.sh; then
  run_suite release build -LE timing
else
  echo "release build FAILED"; failed=1
fi

if [ "${SEGOPS_SKIP_ASAN:-0}" != 1 ]; then
  echo "=== sanitizers: build (ASan + UBSan, host code)"
  if SEGOPS_BUILD_DIR=build-asan scripts/build.sh -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSEGOPS_SANITIZE=ON \
      -DSEGOPS_CUDA=OFF -DSEGOPS_BUILD_BENCH=OFF; then
    ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:detect_stack_use_after_return=1 \
    UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
      run_suite asan build-asan -LE 'slow|fuzz|torch|wheel|timing'
  else
    echo "sanitizer build FAILED"; failed=1
  fi
fi

if [ "${SEGOPS_SKIP_FUZZ:-0}" != 1 ] && command -v clang >/dev/null; then
  echo "=== fuzz: build (clang, libFuzzer)"
  # Only the fuzz targets are built here (they compile their own instrumented core and codecs).
  if CC=clang cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSEGOPS_FUZZ=ON \
      -DSEGOPS_FUZZ_SECONDS="${SEGOPS_FUZZ_SECONDS:-20}" -DSEGOPS_CUDA=OFF -DSEGOPS_BUILD_BENCH=OFF \
      -DSEGOPS_PYTHON="$PWD/.venv/bin/python" >/dev/null &&
     cmake --build build-fuzz -j"$jobs" --target fuzz_msgpack fuzz_json fuzz_prepare fuzz_oip fuzz_shm fuzz_native; then
    run_suite fuzz build-fuzz -L fuzz
  else
    echo "fuzz build FAILED"; failed=1
  fi
fi

python3 - "${results[@]}" <<'PY'
import sys, xml.etree.ElementTree as ET
p = f = s = 0
for path in sys.argv[1:]:
    try:
        root = ET.parse(path).getroot()
    except Exception as e:
        print(f"(no results in {path}: {e})"); f += 1; continue
    for tc in root.iter("testcase"):
        st = tc.get("status", "")
        if tc.find("failure") is not None or st == "fail": f += 1
        elif tc.find("skipped") is not None or st in ("notrun", "disabled"): s += 1
        else: p += 1
print(f"segops: {p} passed, {f} failed, {s} skipped")
PY
exit $failed

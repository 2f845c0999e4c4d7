#!/usr/bin/env bash
# build.sh: configures and builds segops into build/ (Release; CUDA backend when nvcc is found).
# Extra arguments go to CMake's configure step, e.g. scripts/build.sh -DSEGOPS_CUDA=OFF.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${SEGOPS_BUILD_DIR:-build}
py=()
[ -x .venv/bin/python ] && py=(-DSEGOPS_PYTHON="$PWD/.venv/bin/python" -DPython3_EXECUTABLE="$PWD/.venv/bin/python")
cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release "${py[@]}" "$@" >/dev/null
cmake --build "$BUILD_DIR" -j"$(nproc)"

#!/usr/bin/env bash
# setup.sh: installs what segops needs and is missing (Debian/Ubuntu, as root or with sudo),
# and, with --test, a Python venv at .venv. Idempotent: a second run installs nothing.
#   scripts/setup.sh          build + run deps (compilers, cmake, libmicrohttpd, msgpack-c, jansson, libcurl)
#   scripts/setup.sh --test   also what the tests need: clang (fuzzing), valgrind, and a venv at .venv
#                             with numpy, msgpack, pytest, torch and the client installed editable
#   scripts/setup.sh --bench  --test plus the benchmarks' load generator (wrk: bench/http/run.sh)
set -euo pipefail
cd "$(dirname "$0")/.."

want_test=0
want_bench=0
case "${1:-}" in
  --test) want_test=1 ;;
  --bench) want_test=1; want_bench=1 ;;
  "") ;;
  -h|--help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0 ;;
  *) echo "setup.sh: unknown option '$1' (--test, --bench or none)" >&2; exit 2 ;;
esac

# libcurl4-openssl-dev: libsegops' HTTP; g++: the C++ example (examples/c) and nvcc's host compiler.
pkgs=(gcc g++ make cmake pkg-config libmicrohttpd-dev libmsgpack-dev libjansson-dev libcurl4-openssl-dev curl
      ca-certificates)
if [ "$want_test" = 1 ]; then
  pkgs+=(python3 clang libclang-rt-dev valgrind procps)
fi
if [ "$want_bench" = 1 ]; then pkgs+=(wrk); fi

installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'; }
# Names that differ between distributions: Debian 12 has libmsgpack-dev, Ubuntu 24.04 libmsgpack-c-dev.
if ! installed libmsgpack-dev && installed libmsgpack-c-dev; then
  pkgs=("${pkgs[@]/libmsgpack-dev/libmsgpack-c-dev}")
fi
missing=()
for p in "${pkgs[@]}"; do
  installed "$p" || missing+=("$p")
done
# A python3 from elsewhere (e.g. pyenv) satisfies python3.
if printf '%s\n' "${missing[@]}" | grep -qx python3 && command -v python3 >/dev/null; then
  missing=("${missing[@]/python3/}")
fi
missing=($(printf '%s\n' "${missing[@]}" | grep -v '^$' || true))

SUDO=""
[ "$(id -u)" = 0 ] || SUDO="sudo"
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  $SUDO apt-get update -qq
  for i in "${!missing[@]}"; do
    if [ "${missing[$i]}" = libmsgpack-dev ] && ! apt-cache show libmsgpack-dev >/dev/null 2>&1; then
      missing[$i]=libmsgpack-c-dev
    fi
  done
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if [ "$want_test" != 1 ]; then
  echo "setup: ok"
  exit 0
fi

# Python venv for the client, tests and benches.
if [ ! -x .venv/bin/python ]; then
  if ! python3 -m venv .venv 2>/dev/null; then
    rm -rf .venv
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends python3-venv >/dev/null
    python3 -m venv .venv
  fi
fi
pip() { .venv/bin/python -m pip -q --disable-pip-version-check "$@"; }
have() { .venv/bin/python -c "import $1" 2>/dev/null; }
have numpy && have msgpack && have pytest && have yaml && have wheel || pip install numpy msgpack pytest pyyaml wheel
# tritonclient: examples/tritonclient_oip.py (skipped without it).
have tritonclient.http || pip install 'tritonclient[http]' || echo "setup: tritonclient not installed; its example and the OIP tests (tests/http/test_oip.py) will be SKIPPED"
# The client's distribution was called "segops" before it became "segops-client": drop the old name.
if .venv/bin/python -m pip show segops 2>/dev/null | grep -q "clients/python"; then pip uninstall -y segops >/dev/null; fi
if [ -f clients/python/pyproject.toml ]; then
  pip install --no-deps -e ./clients/python >/dev/null
fi
if ! have torch && [ "${SEGOPS_NO_TORCH:-0}" != 1 ]; then
  # Torch (optional for the client; its autograd tests need it), from PyPI, which has no CPU-only
  # Linux wheel: every torch 2.x pulls ~2.8 GB of nvidia-* wheels. Where the CUDA 13 toolkit's
  # libraries are on the loader path (this machine kind: /usr/local/cuda-13.0/lib), torch plus
  # four small nvidia wheels the toolkit lacks is enough (~1 GB); otherwise the full set.
  echo "setup: installing torch (for the client's autograd tests)"
  if ldconfig -p 2>/dev/null | grep -q 'libcudart.so.13'; then
    pip install --no-deps torch==2.15.0 nvidia-nccl-cu13==2.30.7 nvidia-cusparselt-cu13==0.8.1 \
      nvidia-nvshmem-cu13==3.7.2 nvidia-cufile==1.17.1.22 >/tmp/segops-torch-pip.log 2>&1 || true
    # (pip then lists the CUDA wheels torch names but the toolkit provides: expected, not shown)
    pip install typing_extensions filelock sympy networkx jinja2 fsspec || true
  fi
  if ! have torch; then
    pip install torch==2.15.0 || echo "setup: torch could not be installed; torch tests will be SKIPPED"
  fi
fi
echo "setup: ok"

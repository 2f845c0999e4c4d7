#!/usr/bin/env bash
# setup.sh: installs what segops needs and is missing (Debian/Ubuntu, as root or with sudo),
# and, with --test, a Python venv at .venv. Idempotent: a second run installs nothing.
#   scripts/setup.sh          build + run deps (compilers, cmake, libmicrohttpd, msgpack-c, jansson, libcurl)
#   scripts/setup.sh --test   also what the tests need: clang (fuzzing), valgrind, and a venv at .venv
#                             with numpy, msgpack, pytest, torch and the client installed editable
#   scripts/setup.sh --bench  --test plus what the benchmarks use: wrk (bench/http/run.sh) and
#                             matplotlib (bench/plot.py)
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
  # python3-dev: the headers the Python client's C extension (segops._native) is compiled against.
  pkgs+=(python3 python3-dev clang libclang-rt-dev valgrind procps)
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
# A python3 from elsewhere (e.g. pyenv) satisfies python3, and python3-dev when it has its headers.
if printf '%s\n' "${missing[@]}" | grep -qx python3 && command -v python3 >/dev/null; then
  missing=("${missing[@]/python3/}")
fi
if printf '%s\n' "${missing[@]}" | grep -qx python3-dev && command -v python3 >/dev/null &&
   python3 -c 'import os, sysconfig, sys; sys.exit(not os.path.exists(sysconfig.get_paths()["include"] + "/Python.h"))'; then
  missing=("${missing[@]/python3-dev/}")
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
# pip, quiet, without the resolver's note about the nvidia-* wheels of a torch installed against the
# CUDA toolkit (below): that "ERROR" is expected there and would only alarm; other errors show.
pip() {
  local err rc=0
  err=$(mktemp)
  .venv/bin/python -m pip -q --disable-pip-version-check "$@" 2>"$err" || rc=$?
  grep -v -e "^ERROR: pip's dependency resolver does not currently" \
    -e "requires nvidia-[A-Za-z0-9_.-]*.*, which is not installed" "$err" >&2 || true
  rm -f "$err"
  return $rc
}
have() { .venv/bin/python -c "import $1" 2>/dev/null; }
have numpy && have msgpack && have pytest && have yaml && have wheel || pip install numpy msgpack pytest pyyaml wheel
# tritonclient: examples/tritonclient_oip.py (skipped without it).
have tritonclient.http || pip install 'tritonclient[http]' || echo "setup: tritonclient not installed; its example and the OIP tests (tests/http/test_oip.py) will be SKIPPED"
# The client's distribution was called "segops" before it became "segops-client": drop the old name.
if .venv/bin/python -m pip show segops 2>/dev/null | grep -q "clients/python"; then pip uninstall -y segops >/dev/null; fi
# The client, editable, with its C extension built in place (once: again only when it is missing).
if [ -f clients/python/pyproject.toml ] && ! .venv/bin/python -c "import segops._native" 2>/dev/null; then
  pip install --no-deps -e ./clients/python >/dev/null
fi
if ! have torch && [ "${SEGOPS_NO_TORCH:-0}" != 1 ]; then
  # Torch (optional for the client; its autograd tests need it). pip's own output goes to a log:
  # installing torch without its nvidia-* wheels makes pip's resolver print an ERROR that lists
  # them, which is expected here and would only alarm.
  log=/tmp/segops-torch-pip.log
  : > "$log"
  if ldconfig -p 2>/dev/null | grep -q 'libcudart.so.13'; then
    # The CUDA 13 toolkit's libraries are on the loader path: torch plus four small nvidia
    # wheels the toolkit lacks is enough (~1 GB instead of ~3 GB of nvidia-* wheels).
    echo "setup: installing torch against this machine's CUDA toolkit (log: $log)"
    pip install --no-deps torch==2.15.0 nvidia-nccl-cu13==2.30.7 nvidia-cusparselt-cu13==0.8.1 \
      nvidia-nvshmem-cu13==3.7.2 nvidia-cufile==1.17.1.22 >>"$log" 2>&1 || true
    pip install typing_extensions filelock sympy networkx jinja2 fsspec >>"$log" 2>&1 || true
  elif [ ! -e /dev/nvidiactl ]; then
    # No GPU: PyTorch's CPU-only wheels (~200 MB) rather than PyPI's, which bring ~3 GB of NVIDIA libraries.
    echo "setup: installing CPU-only torch from PyTorch's CPU index (log: $log)"
    pip install torch==2.15.0 --index-url https://download.pytorch.org/whl/cpu >>"$log" 2>&1 || true
  fi
  if ! have torch; then
    echo "setup: installing torch from PyPI (log: $log)"
    pip install torch==2.15.0 >>"$log" 2>&1 || echo "setup: torch could not be installed ($log); torch tests will be SKIPPED"
  fi
fi
if [ "$want_bench" = 1 ] && ! have matplotlib; then
  # bench/plot.py's figures (a benchmark-only dependency).
  pip install matplotlib || echo "setup: matplotlib not installed; bench/plot.py and CTest bench_plot will be SKIPPED"
fi
echo "setup: ok"

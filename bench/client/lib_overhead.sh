#!/usr/bin/env bash
# lib_overhead.sh: runs bench/client/lib_overhead against a segopsd it starts (CPU backend, one
# compute thread, TCP on port 0 and a unix socket), pinned like the worker benchmark when two cores
# are there: the daemon on CPU 1, the client on CPU 0.
#   bench/client/lib_overhead.sh [BUILD_DIR] [lib_overhead options...]   (default build)
set -euo pipefail
build=${1:-build}
shift || true
dir=$(mktemp -d)
trap 'kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; rm -rf "$dir"' EXIT
pin_d=() pin_c=()
if [ "$(nproc)" -ge 2 ] && command -v taskset >/dev/null; then pin_d=(taskset -c 1) pin_c=(taskset -c 0); fi
"${pin_d[@]}" "$build/server/segopsd" --listen 127.0.0.1:0 --listen "unix:$dir/segops.sock" --backend cpu \
  --threads 1 --log-level error > "$dir/out" &
pid=$!
for _ in $(seq 100); do grep -q "listening on http" "$dir/out" 2>/dev/null && break; sleep 0.1; done
url=$(sed -n 's/^segopsd listening on \(http:[^ ]*\)$/\1/p' "$dir/out")
"${pin_c[@]}" "$build/bench/client/lib_overhead" "$url" "$dir/segops.sock" "$@"

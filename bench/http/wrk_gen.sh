#!/usr/bin/env bash
# wrk_gen.sh: loadgen's command line and one-line output, with wrk sending the bytes (wrk is
# the reference HTTP load generator; the benchmark's floor must be at least as fast).
#   wrk_gen.sh HOST PORT [--fn OP/PASS] [--path P] [--n N] [--vec3] [--segments S]
#              [--connections C] [--duration SEC] [--warmup SEC] [--token T]
# The body comes from `loadgen --dump-body` (same bytes as loadgen sends; $LOADGEN, default the
# segops_http_loadgen next to this build); wrk threads = min(C, cores). wrk takes whole seconds:
# durations are rounded up; a warm-up of 0.5 s or more runs a separate discarded wrk first.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
command -v wrk > /dev/null || { echo "wrk_gen.sh: wrk is not installed (apt-get install -y wrk)" >&2; exit 2; }
LOADGEN=${LOADGEN:-$HERE/../../build/bench/http/segops_http_loadgen}
host=$1 port=$2; shift 2
pass=() conns=1 dur=2 wu=0.3 path="" fn=segmented_sum/forward token=""
while [ $# -gt 0 ]; do
  case "$1" in
    --vec3) pass+=(--vec3); shift ;;
    --n|--segments) pass+=("$1" "$2"); shift 2 ;;
    --fn) fn=$2; pass+=(--fn "$2"); shift 2 ;;
    --path) path=$2; shift 2 ;;
    --connections) conns=$2; shift 2 ;;
    --duration) dur=$2; shift 2 ;;
    --warmup) wu=$2; shift 2 ;;
    --token) token=$2; shift 2 ;;
    *) echo "wrk_gen.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
path=${path:-/v1/$fn}
body=$(mktemp)
trap 'rm -f "$body"' EXIT
"$LOADGEN" "$host" "$port" "${pass[@]}" --dump-body "$body"
threads=$(nproc); [ "$conns" -lt "$threads" ] && threads=$conns
secs() { awk -v d="$1" 'BEGIN { s = int(d); if (s < d) s++; if (s < 1) s = 1; print s }'; }
export SEGOPS_WRK_BODY=$body SEGOPS_WRK_TOKEN=$token
url="http://$host:$port$path"
if awk -v w="$wu" 'BEGIN { exit !(w >= 0.5) }'; then
  wrk -t "$threads" -c "$conns" -d "$(secs "$wu")s" -s "$HERE/wrk_post.lua" "$url" > /dev/null
fi
wrk -t "$threads" -c "$conns" -d "$(secs "$dur")s" --timeout 30s -s "$HERE/wrk_post.lua" "$url" | grep '^rps='

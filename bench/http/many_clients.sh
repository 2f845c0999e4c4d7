#!/usr/bin/env bash
# many_clients.sh: the many-client benchmark. Small requests (N=1024 vec3 float32, 32
# segments) of the forward, backward and double backward of segmented_sum and
# segmented_rms_norm, from 1, 16, 64 and 256 concurrent keep-alive clients, against two daemons:
# dynamic batching off (--max-batch-elements 0) and on (defaults, plus --max-queue-delay-us).
# Reports requests/s, p50/p99 latency, the backend's busy fraction and the mean batch size.
#   bench/http/many_clients.sh [--build DIR] [--duration SEC] [--clients "1 16 64 256"]
#                              [--delay-us US] [--backend auto|cpu|cuda] [--fns "..."]
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD="$ROOT/build" DURATION=2 WARMUP=0.3 CLIENTS="1 16 64 256" DELAY=0 BACKEND=auto
FNS="segmented_sum/forward segmented_sum/backward segmented_sum/double_backward segmented_rms_norm/forward segmented_rms_norm/backward segmented_rms_norm/double_backward"
while [ $# -gt 0 ]; do
  case "$1" in
    --build) BUILD="$2"; shift 2 ;;
    --duration) DURATION="$2"; shift 2 ;;
    --clients) CLIENTS="$2"; shift 2 ;;
    --delay-us) DELAY="$2"; shift 2 ;;
    --backend) BACKEND="$2"; shift 2 ;;
    --fns) FNS="$2"; shift 2 ;;
    -h|--help) sed -n '2,9p' "$0"; exit 0 ;;
    *) echo "many_clients.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
SEGOPSD="$BUILD/server/segopsd" LOADGEN="$BUILD/bench/http/segops_http_loadgen"
for b in "$SEGOPSD" "$LOADGEN"; do [ -x "$b" ] || { echo "many_clients.sh: build $b first" >&2; exit 2; }; done

. "$ROOT/bench/http/servers.sh"
# Used only through start, which runs it in the background: exec keeps $! the daemon's own pid.
segopsd() { exec "$SEGOPSD" --listen 127.0.0.1:0 --backend "$BACKEND" --log-level warn --max-queue 4096 "$@"; }
start off segopsd --max-batch-elements 0
OFF=$PORT
start on segopsd --max-batch-elements 256k --max-queue-delay-us "$DELAY"
ON=$PORT
BACKEND_NAME=$(curl -s "http://127.0.0.1:$ON/v1/info" | sed -n 's/.*"backend":"\([a-z]*\)".*/\1/p')

field() { sed -n "s/.*$1=\([^ ]*\).*/\1/p" <<< "$2"; }
# metric PORT NAME: the value of an unlabelled series, or the sum over a labelled family's series.
metric() {
  curl -s "http://127.0.0.1:$1/metrics" |
    awk -v m="$2" '$1 == m || index($1, m "{") == 1 { s += $2; n++ } END { if (n) printf "%.9f\n", s }'
}
calc() { awk "BEGIN { $1 }"; }

printf '\nmany clients: backend %s, N=1024 vec3 float32, 32 segments, msgpack; %ss per run after %ss;\n' \
  "$BACKEND_NAME" "$DURATION" "$WARMUP"
printf 'batching on = --max-batch-elements 256k, --max-queue-delay-us %s\n\n' "$DELAY"
printf '| function | clients | off req/s | on req/s | on/off | off p50/p99 ms | on p50/p99 ms | off busy | on busy | on mean batch |\n'
printf '|---|---|---|---|---|---|---|---|---|---|\n'
errors=0
for fn in $FNS; do
  for c in $CLIENTS; do
    declare -A R=()
    for mode in off on; do
      port=$OFF; [ $mode = on ] && port=$ON
      b0=$(metric "$port" segops_device_busy_seconds_total); n0=$(metric "$port" segops_batch_size_count)
      s0=$(metric "$port" segops_batch_size_sum); t0=$(date +%s.%N)
      out=$("$LOADGEN" 127.0.0.1 "$port" --fn "$fn" --n 1024 --vec3 --segments 32 --connections "$c" \
            --duration "$DURATION" --warmup "$WARMUP")
      t1=$(date +%s.%N); b1=$(metric "$port" segops_device_busy_seconds_total)
      n1=$(metric "$port" segops_batch_size_count); s1=$(metric "$port" segops_batch_size_sum)
      errors=$((errors + $(field errors "$out")))
      R[$mode.rps]=$(field rps "$out"); R[$mode.p50]=$(field p50_ms "$out"); R[$mode.p99]=$(field p99_ms "$out")
      R[$mode.busy]=$(calc "printf \"%.2f\", ($b1 - $b0) / ($t1 - $t0)")
      R[$mode.batch]=$(calc "d = $n1 - $n0; printf \"%.1f\", (d > 0 ? ($s1 - $s0) / d : 0)")
    done
    printf '| %s | %s | %s | %s | **%s** | %s / %s | %s / %s | %s | %s | %s |\n' "$fn" "$c" "${R[off.rps]}" \
      "${R[on.rps]}" "$(calc "printf \"%.2f\", (${R[off.rps]} > 0 ? ${R[on.rps]} / ${R[off.rps]} : 0)")" \
      "${R[off.p50]}" "${R[off.p99]}" "${R[on.p50]}" "${R[on.p99]}" "${R[off.busy]}" "${R[on.busy]}" "${R[on.batch]}"
    unset R
  done
done
printf '\nbusy = backend busy seconds (summed over workers) / wall seconds of the run. Non-200 answers: %s\n' "$errors"
[ "$errors" -eq 0 ]

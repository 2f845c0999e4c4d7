#!/usr/bin/env bash
# run.sh: the service benchmark. Starts segopsd and the bare libmicrohttpd echo floor on port 0
# with the same HTTP thread count, drives both with the same msgpack requests (tiny: N=64 sum
# forward; large: N=2^20 vec3 float32 sum forward) at 1 and 64 connections, and prints a table
# with segopsd/echo ratios (requests/s for tiny, request-body bytes/s for large).
# Each cell is the best of --repeat runs, echo and segopsd alternating, so that load from other
# processes on a shared machine disturbs both alike and least. --gen picks the load generator:
# loadgen (ours), wrk (wrk_gen.sh: wrk with wrk_post.lua, same bytes), or both (default when wrk
# is installed): each run uses both and keeps the faster, so the floor is never the generator;
# a second table shows both generators against the echo and the sink.
#   bench/http/run.sh [--build DIR] [--duration SEC] [--repeat R] [--threads N] [--gen loadgen|wrk|both]
#                     [--backend auto|cpu|cuda] [--cases tiny,large] [--smoke]
#                     [--segopsd PATH --echo PATH --loadgen PATH]
# segopsd inherits the environment (e.g. SEGOPS_HOST_POOL_BYTES=0 bench/http/run.sh to compare).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD="$ROOT/build" DURATION=2 WARMUP=0.5 THREADS=$(nproc) BACKEND=auto SMOKE=0 REPEAT=3
SEGOPSD="" ECHO="" LOADGEN="" GEN="" CASES="tiny large"
while [ $# -gt 0 ]; do
  case "$1" in
    --build) BUILD="$2"; shift 2 ;;
    --duration) DURATION="$2"; shift 2 ;;
    --repeat) REPEAT="$2"; shift 2 ;;
    --threads) THREADS="$2"; shift 2 ;;
    --backend) BACKEND="$2"; shift 2 ;;
    --smoke) SMOKE=1; shift ;;
    --segopsd) SEGOPSD="$2"; shift 2 ;;
    --echo) ECHO="$2"; shift 2 ;;
    --loadgen) LOADGEN="$2"; shift 2 ;;
    --gen) GEN="$2"; shift 2 ;;
    --cases) CASES="${2//,/ }"; shift 2 ;;
    -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
    *) echo "run.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
SEGOPSD=${SEGOPSD:-$BUILD/server/segopsd}
ECHO=${ECHO:-$BUILD/bench/http/segops_http_echo}
LOADGEN=${LOADGEN:-$BUILD/bench/http/segops_http_loadgen}
for b in "$SEGOPSD" "$ECHO" "$LOADGEN"; do
  [ -x "$b" ] || { echo "run.sh: $b is not built (cmake --build $BUILD)" >&2; exit 2; }
done
if [ -z "$GEN" ]; then command -v wrk > /dev/null && GEN=both || GEN=loadgen; fi
case "$GEN" in
  loadgen) GENS="loadgen" ;; wrk) GENS="wrk" ;; both) GENS="loadgen wrk" ;;
  *) echo "run.sh: --gen must be loadgen, wrk or both" >&2; exit 2 ;;
esac
case " $GENS " in
  *" wrk "*) command -v wrk > /dev/null || { echo "run.sh: --gen $GEN needs wrk on PATH (scripts/setup.sh --bench, or apt-get install -y wrk)" >&2; exit 2; } ;;
esac
export LOADGEN
# gen NAME HOST PORT ARGS...: one run of generator NAME, loadgen's one-line output plus gen=NAME.
gen() {
  local g=$1; shift
  if [ "$g" = wrk ]; then echo "$(bash "$ROOT/bench/http/wrk_gen.sh" "$@") gen=wrk"
  else echo "$("$LOADGEN" "$@") gen=loadgen"; fi
}
LARGE_N=1048576 CONNS="1 64"
LDURATION=$(awk -v d="$DURATION" 'BEGIN { print (d * 3 > 6 ? d * 3 : 6) }') LWARMUP=2
if [ "$SMOKE" = 1 ]; then DURATION=0.5 WARMUP=0.1 LARGE_N=16384 CONNS="1 8" REPEAT=1 LDURATION=0.5 LWARMUP=0.1; fi

. "$ROOT/bench/http/servers.sh"

start segopsd "$SEGOPSD" --listen 127.0.0.1:0 --backend "$BACKEND" --http-threads "$THREADS" \
  --log-level warn --max-queue 4096
SPORT=$PORT
start echo "$ECHO" --threads "$THREADS"
EPORT=$PORT
start sink "$ECHO" --threads "$THREADS" --sink
KPORT=$PORT
BACKEND_NAME=$(curl -s "http://127.0.0.1:$SPORT/v1/info" | sed -n 's/.*"backend":"\([a-z]*\)".*/\1/p')

field() { sed -n "s/.*$1=\([^ ]*\).*/\1/p" <<< "$2"; }
better() { [ -z "$2" ] || awk -v a="$(field rps "$1")" -v b="$(field rps "$2")" 'BEGIN { exit !(a > b) }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "n/a" }'; }

errors=0
printf '\nsegopsd (backend %s) vs bare libmicrohttpd echo, %s HTTP threads, best of %s alternating runs\n' \
  "$BACKEND_NAME" "$THREADS" "$REPEAT"
printf '(tiny: %ss after %ss warm-up; large: %ss after %ss; generators: %s, the faster kept per cell)\n\n' \
  "$DURATION" "$WARMUP" "$LDURATION" "$LWARMUP" "$GENS"
gens_table=""
printf '| case | conns | body bytes | echo req/s | segopsd req/s | req/s ratio | echo p50/p99 ms | segopsd p50/p99 ms | echo body MB/s | sink body MB/s | segopsd body MB/s | bytes/s ratio vs echo | vs sink |\n'
printf '|---|---|---|---|---|---|---|---|---|---|---|---|---|\n'
for kind in $CASES; do
  case $kind in tiny | large) ;; *) echo "run.sh: --cases takes tiny and/or large" >&2; exit 2 ;; esac
  # Large bodies at many connections take seconds each: longer windows, so many complete in them.
  if [ $kind = tiny ]; then args=(--n 64 --segments 8); dur=$DURATION; wu=$WARMUP
  else args=(--n "$LARGE_N" --vec3 --segments 1024); dur=$LDURATION; wu=$LWARMUP; fi
  for c in $CONNS; do
    e="" s="" k=""
    declare -A ge=() gk=()
    for ((r = 0; r < REPEAT; r++)); do
      for g in $GENS; do
        e1=$(gen "$g" 127.0.0.1 "$EPORT" "${args[@]}" --connections "$c" --duration "$dur" --warmup "$wu")
        k1=$(gen "$g" 127.0.0.1 "$KPORT" "${args[@]}" --connections "$c" --duration "$dur" --warmup "$wu")
        s1=$(gen "$g" 127.0.0.1 "$SPORT" "${args[@]}" --connections "$c" --duration "$dur" --warmup "$wu")
        errors=$((errors + $(field errors "$e1") + $(field errors "$k1") + $(field errors "$s1")))
        better "$e1" "$e" && e=$e1
        better "$k1" "$k" && k=$k1
        better "$s1" "$s" && s=$s1
        better "$e1" "${ge[$g]:-}" && ge[$g]=$e1
        better "$k1" "${gk[$g]:-}" && gk[$g]=$k1
      done
    done
    for g in $GENS; do
      gens_table+=$(printf '| %s | %s | %s | %s | %s | %s |' "$kind" "$c" "$g" "$(field rps "${ge[$g]}")" \
        "$(field body_MBps "${ge[$g]}")" "$(field body_MBps "${gk[$g]}")")$'\n'
    done
    for x in "$e" "$k" "$s"; do
      [ "$(field requests "$x")" -gt 0 ] || { echo "run.sh: a run completed no request: $x" >&2; errors=$((errors + 1)); }
    done
    printf '| %s | %s | %s | %s | %s | **%s** | %s / %s | %s / %s | %s | %s | %s | **%s** | %s |\n' "$kind" "$c" \
      "$(field body_bytes "$s")" "$(field rps "$e")" "$(field rps "$s")" "$(ratio "$(field rps "$s")" "$(field rps "$e")")" \
      "$(field p50_ms "$e")" "$(field p99_ms "$e")" "$(field p50_ms "$s")" "$(field p99_ms "$s")" \
      "$(field body_MBps "$e")" "$(field body_MBps "$k")" "$(field body_MBps "$s")" \
      "$(ratio "$(field body_MBps "$s")" "$(field body_MBps "$e")")" "$(ratio "$(field body_MBps "$s")" "$(field body_MBps "$k")")"
  done
done
printf '\nLoad generators against the floors (best of %s; the table above keeps the faster per cell):\n\n' "$REPEAT"
printf '| case | conns | generator | echo req/s | echo body MB/s | sink body MB/s |\n|---|---|---|---|---|---|\n'
printf '%s' "$gens_table"
printf '\naims: tiny req/s ratio >= 0.5 of the echo, large bytes/s ratio >= 0.8 of the sink. The echo also sends every body back;\n'
printf 'the sink (same server, answers "{}") only takes it in, like segopsd, which returns the (S,3) sums.\n'
printf 'Failed runs or non-200 answers: %s\n' "$errors"
[ "$errors" -eq 0 ]

#!/usr/bin/env bash
# load.sh: a curl-only load generator for any segopsd: N requests at concurrency C, reporting
# requests/s, latency percentiles (p50/p90/p99) and the error count (exit status 1 when any
# request did not get 200). Bodies: a tiny built-in one, an example from proto/examples, a
# generated one of N elements (up to 2^20 and beyond), or any file.
set -euo pipefail

usage() {
  cat <<'USAGE'
usage: scripts/load.sh URL [-n REQUESTS] [-c CONCURRENCY] [--op OP/PASS]
                           [--example [json|msgpack] | --size N [--segments S] | --body FILE]
                           [--content-type TYPE] [--token TOKEN]

  URL                  the daemon, e.g. http://127.0.0.1:8080
  -n REQUESTS          total requests (default 1000)
  -c CONCURRENCY       requests in flight at once (default 16)
  --op OP/PASS         function to call with a built-in JSON example body (default
                       segmented_sum/forward); one of: segmented_sum/forward,
                       segmented_sum/backward, segmented_dot/forward, segmented_mul/forward,
                       segmented_mean/forward, segmented_rms_norm/forward, segmented_matvec/forward
  --example [ENC]      send proto/examples/OP.PASS.ENC (ENC json or msgpack; default json):
                       every one of the 24 functions has one
  --size N             generate a body of N elements (scalar layout; vec3 for rms_norm and
                       matvec) in S segments for OP/forward, any of the ops; e.g.
                       --size 1048576 for a real-sized request (JSON, 10-37 MB; JSON has one
                       item per number, so vec3 ops at 2^20 need the daemon's
                       --max-body-items 8M)
  --segments S         segments of a generated body (default N/64, at least 1)
  --body FILE          send this body instead (with --op naming the function it is for)
  --content-type TYPE  Content-Type of --body (default application/json)
  --token TOKEN        bearer token (default: $SEGOPS_TOKEN when set)

Latency is each request's total time as curl measures it (connect to last byte; a new
connection per request with xargs, reused ones with --parallel). Uses `curl --parallel`
(curl >= 7.66), else `xargs -P` with one curl per request.
USAGE
}

URL="" N=1000 C=16 OP="segmented_sum/forward" BODY="" CTYPE="" TOKEN="${SEGOPS_TOKEN:-}"
EXAMPLE="" SIZE="" SEGS=""
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
while [ $# -gt 0 ]; do
  case "$1" in
    -h|--help) usage; exit 0 ;;
    -n) N="$2"; shift 2 ;;
    -c) C="$2"; shift 2 ;;
    --op) OP="$2"; shift 2 ;;
    --body) BODY="$2"; shift 2 ;;
    --example)
      EXAMPLE=json
      if [ $# -gt 1 ] && { [ "$2" = json ] || [ "$2" = msgpack ]; }; then EXAMPLE="$2"; shift; fi
      shift ;;
    --size) SIZE="$2"; shift 2 ;;
    --segments) SEGS="$2"; shift 2 ;;
    --content-type) CTYPE="$2"; shift 2 ;;
    --token) TOKEN="$2"; shift 2 ;;
    -*) echo "load.sh: unknown option $1" >&2; usage >&2; exit 2 ;;
    *) URL="${1%/}"; shift ;;
  esac
done
[ -n "$URL" ] || { usage >&2; exit 2; }
case "$N$C" in *[!0-9]*) echo "load.sh: -n and -c take positive integers" >&2; exit 2 ;; esac
[ "$N" -gt 0 ] && [ "$C" -gt 0 ] || { echo "load.sh: -n and -c must be > 0" >&2; exit 2; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if [ -n "$EXAMPLE" ]; then
  BODY="$ROOT/proto/examples/${OP%/*}.${OP#*/}.$EXAMPLE"
  [ -r "$BODY" ] || { echo "load.sh: no example body $BODY" >&2; exit 2; }
  [ "$EXAMPLE" = msgpack ] && : "${CTYPE:=application/msgpack}"
elif [ -n "$SIZE" ]; then
  case "$SIZE$SEGS" in *[!0-9]*|"") echo "load.sh: --size and --segments take integers" >&2; exit 2 ;; esac
  [ -n "$SEGS" ] || SEGS=$((SIZE / 64 > 0 ? SIZE / 64 : 1))
  [ "$SEGS" -gt 0 ] || { echo "load.sh: --segments must be > 0" >&2; exit 2; }
  case "$OP" in
    segmented_sum/forward | segmented_mean/forward) ARGS="x:E" ;;
    segmented_dot/forward) ARGS="x:E y:E" ;;
    segmented_mul/forward) ARGS="x:E y:G" ;;
    segmented_rms_norm/forward) ARGS="x:E3" ;;
    segmented_matvec/forward) ARGS="v:E3 m:M" ;;
    *) echo "load.sh: --size generates bodies for OP/forward only (got $OP; use --example or --body)" >&2; exit 2 ;;
  esac
  BODY="$tmp/body.json"
  # Random values in [-1, 1); idx sorted, every segment of about N/S elements.
  awk -v n="$SIZE" -v s="$SEGS" -v args="$ARGS" 'BEGIN {
    srand(42); printf "{"; k = split(args, a, " ")
    for (i = 1; i <= k; i++) {
      split(a[i], p, ":"); name = p[1]; kind = p[2]
      cnt = kind == "E" ? n : kind == "E3" ? 3 * n : kind == "G" ? s : 9 * s
      printf "\"%s\":{\"dtype\":\"float64\",\"shape\":", name
      if (kind == "E" ) printf "[%d]", n; else if (kind == "E3") printf "[%d,3]", n
      else if (kind == "G") printf "[%d]", s; else printf "[%d,3,3]", s
      printf ",\"data\":["
      for (j = 0; j < cnt; j++) printf "%s%.6f", (j ? "," : ""), 2 * rand() - 1
      printf "]},"
    }
    printf "\"idx\":{\"dtype\":\"int32\",\"shape\":[%d],\"data\":[", n
    for (j = 0; j < n; j++) printf "%s%d", (j ? "," : ""), int(j * s / n)
    printf "]},\"num_segments\":%d}\n", s
  }' > "$BODY"
elif [ -z "$BODY" ]; then
  BODY="$tmp/body.json"
  case "$OP" in
    segmented_sum/forward) echo '{"x":[1,2,3,4,5,6],"idx":[0,0,1,1,1,2],"num_segments":3}' ;;
    segmented_sum/backward) echo '{"g_out":[1,2],"idx":[0,1,1],"num_segments":2}' ;;
    segmented_dot/forward) echo '{"x":[[1,0,0],[0,2,0]],"y":[[2,3,4],[5,6,7]],"idx":[0,1],"num_segments":2}' ;;
    segmented_mul/forward) echo '{"x":[1,2,3],"y":[2,3],"idx":[0,0,1],"num_segments":2}' ;;
    segmented_mean/forward) echo '{"x":[1,2,3],"idx":[0,0,1],"num_segments":2}' ;;
    segmented_rms_norm/forward) echo '{"x":[[3,4,0],[1,2,2]],"idx":[0,1],"num_segments":2}' ;;
    segmented_matvec/forward) echo '{"v":[[1,0,0]],"m":[[[1,2,0],[0,1,0],[0,0,1]]],"idx":[0],"num_segments":1}' ;;
    *) echo "load.sh: no built-in body for --op $OP (give --body FILE)" >&2; exit 2 ;;
  esac > "$BODY"
fi
[ -r "$BODY" ] || { echo "load.sh: cannot read $BODY" >&2; exit 2; }
: "${CTYPE:=application/json}"
TARGET="$URL/v1/$OP"
AUTH=()
[ -n "$TOKEN" ] && AUTH=(-H "Authorization: Bearer $TOKEN")

codes="$tmp/codes"
start=$(date +%s.%N)
if curl --help all 2>/dev/null | grep -q -- '--parallel-max'; then
  # One config entry per request; `next` separates them so each keeps its own options.
  cfg="$tmp/curl.cfg"
  {
    for ((i = 0; i < N; i++)); do
      printf 'url = "%s"\ndata-binary = "@%s"\nheader = "Content-Type: %s"\n' "$TARGET" "$BODY" "$CTYPE"
      [ -n "$TOKEN" ] && printf 'header = "Authorization: Bearer %s"\n' "$TOKEN"
      printf 'output = "/dev/null"\nwrite-out = "%%{http_code} %%{time_total}\\n"\n'
      if [ "$i" -lt $((N - 1)) ]; then printf 'next\n'; fi
    done
  } > "$cfg"
  curl -s --no-progress-meter --parallel --parallel-immediate --parallel-max "$C" -K "$cfg" > "$codes" 2> "$tmp/err" || true
else
  seq "$N" | xargs -P "$C" -I{} curl -s -o /dev/null -w '%{http_code} %{time_total}\n' "${AUTH[@]}" \
    -H "Content-Type: $CTYPE" --data-binary "@$BODY" "$TARGET" > "$codes" || true
fi
end=$(date +%s.%N)

ok=$(grep -c '^200 ' "$codes" || true)
done_n=$(wc -l < "$codes")
errors=$((N - ok))
secs=$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.3f", b - a }')
rps=$(awk -v n="$done_n" -v s="$secs" 'BEGIN { printf "%.1f", (s > 0 ? n / s : 0) }')
echo "target: $TARGET"
echo "body: $(wc -c < "$BODY" | tr -d ' ') bytes ($CTYPE)"
echo "requests: $N  concurrency: $C  ok: $ok  errors: $errors  seconds: $secs  requests/s: $rps"
# Nearest-rank percentiles of every answered request's time, in milliseconds.
awk '{ print $2 * 1000 }' "$codes" | sort -n | awk '
  { v[NR] = $1 }
  function pct(p) { i = int(p / 100 * NR + 0.999999); if (i < 1) i = 1; return v[i] }
  END { if (NR) printf "latency ms: p50 %.2f  p90 %.2f  p99 %.2f  max %.2f\n", pct(50), pct(90), pct(99), v[NR] }'
if [ "$errors" -gt 0 ]; then
  echo "status codes of the failures:" >&2
  awk '$1 != 200 { print $1 }' "$codes" | sort | uniq -c >&2 || true
  exit 1
fi

#!/usr/bin/env bash
# load.sh: a curl-only load generator for any segopsd: N requests at concurrency C, reporting
# requests/s and the error count (exit status 1 when any request did not get 200).
set -euo pipefail

usage() {
  cat <<'USAGE'
usage: scripts/load.sh URL [-n REQUESTS] [-c CONCURRENCY] [--op OP/PASS] [--body FILE]
                           [--content-type TYPE] [--token TOKEN]

  URL                  the daemon, e.g. http://127.0.0.1:8080
  -n REQUESTS          total requests (default 1000)
  -c CONCURRENCY       requests in flight at once (default 16)
  --op OP/PASS         function to call with a built-in JSON example body (default
                       segmented_sum/forward); one of: segmented_sum/forward,
                       segmented_sum/backward, segmented_dot/forward, segmented_mul/forward,
                       segmented_mean/forward, segmented_rms_norm/forward, segmented_matvec/forward
  --body FILE          send this body instead (with --op naming the function it is for)
  --content-type TYPE  Content-Type of --body (default application/json)
  --token TOKEN        bearer token (default: $SEGOPS_TOKEN when set)

Uses `curl --parallel` (curl >= 7.66), else `xargs -P` with one curl per request.
USAGE
}

URL="" N=1000 C=16 OP="segmented_sum/forward" BODY="" CTYPE="application/json" TOKEN="${SEGOPS_TOKEN:-}"
while [ $# -gt 0 ]; do
  case "$1" in
    -h|--help) usage; exit 0 ;;
    -n) N="$2"; shift 2 ;;
    -c) C="$2"; shift 2 ;;
    --op) OP="$2"; shift 2 ;;
    --body) BODY="$2"; shift 2 ;;
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
if [ -z "$BODY" ]; then
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
      printf 'output = "/dev/null"\nwrite-out = "%%{http_code}\\n"\n'
      if [ "$i" -lt $((N - 1)) ]; then printf 'next\n'; fi
    done
  } > "$cfg"
  curl -s --no-progress-meter --parallel --parallel-immediate --parallel-max "$C" -K "$cfg" > "$codes" 2> "$tmp/err" || true
else
  seq "$N" | xargs -P "$C" -I{} curl -s -o /dev/null -w '%{http_code}\n' "${AUTH[@]}" \
    -H "Content-Type: $CTYPE" --data-binary "@$BODY" "$TARGET" > "$codes" || true
fi
end=$(date +%s.%N)

ok=$(grep -c '^200$' "$codes" || true)
done_n=$(wc -l < "$codes")
errors=$((N - ok))
secs=$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.3f", b - a }')
rps=$(awk -v n="$done_n" -v s="$secs" 'BEGIN { printf "%.1f", (s > 0 ? n / s : 0) }')
echo "target: $TARGET"
echo "requests: $N  concurrency: $C  ok: $ok  errors: $errors  seconds: $secs  requests/s: $rps"
if [ "$errors" -gt 0 ]; then
  echo "status codes of the failures:" >&2
  grep -v '^200$' "$codes" | sort | uniq -c >&2 || true
  exit 1
fi

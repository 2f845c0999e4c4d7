#!/bin/sh
# curl.sh: segopsd from the shell, with JSON and with msgpack bodies.
#   SEGOPS_URL=http://127.0.0.1:8080 sh examples/curl.sh
# Exits non-zero when an answer is not the expected one.
set -eu
URL=${SEGOPS_URL:-http://127.0.0.1:8080}
HERE=$(cd "$(dirname "$0")" && pwd)
BODIES="$HERE/../proto/examples"
fail() { echo "curl.sh: $*" >&2; exit 1; }

# 1. JSON in, JSON out: bare lists, float64 by default.
out=$(curl -sS "$URL/v1/segmented_sum/forward" -H 'Content-Type: application/json' \
      -d '{"x":[1,2,3,4,5,6],"idx":[0,0,1,1,1,2],"num_segments":3}')
echo "sum forward (JSON):       $out"
[ "$out" = '{"out":{"dtype":"float64","shape":[3],"data":[3.0,12.0,6.0]}}' ] || fail "unexpected answer"

# 2. JSON with float32 and a backward: grad_x[i] = g_out[idx[i]].
out=$(curl -sS "$URL/v1/segmented_sum/backward" -H 'Content-Type: application/json' \
      -d '{"dtype":"float32","g_out":[3.5,-1.25],"idx":[0,1,1],"num_segments":2}')
echo "sum backward (JSON, f32): $out"
[ "$out" = '{"grad_x":{"dtype":"float32","shape":[3],"data":[3.5,-1.25,-1.25]}}' ] || fail "unexpected answer"

# 3. A msgpack body (written by proto/examples/make_examples.py), answer as JSON.
out=$(curl -sS "$URL/v1/segmented_sum/forward" -H 'Content-Type: application/msgpack' \
      -H 'Accept: application/json' --data-binary "@$BODIES/segmented_sum.forward.msgpack")
echo "sum forward (msgpack in): $out"
case "$out" in '{"out":{"dtype":"float64"'*) ;; *) fail "unexpected answer" ;; esac

# 4. msgpack in and out: the answer is binary; check its type and size.
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
ctype=$(curl -sS -o "$tmp" -w '%{content_type}' "$URL/v1/segmented_matvec/backward" \
        -H 'Content-Type: application/msgpack' --data-binary "@$BODIES/segmented_matvec.backward.msgpack")
size=$(wc -c < "$tmp")
echo "matvec backward (msgpack in and out): $ctype, $size bytes"
[ "$ctype" = application/msgpack ] && [ "$size" -gt 0 ] || fail "unexpected answer"

# 5. A bad request: a clear error naming the op, the argument and the rule.
code=$(curl -sS -o "$tmp" -w '%{http_code}' "$URL/v1/segmented_mul/forward" -H 'Content-Type: application/json' \
       -d '{"x":[1,2,3,4],"y":[1,2,3],"idx":[0,1,2,3],"num_segments":4}')
echo "bad mul ($code): $(cat "$tmp")"
[ "$code" = 400 ] && grep -q 'num_segments (4) must equal y.shape\[0\] (3)' "$tmp" || fail "unexpected error"
echo "curl.sh: ok"

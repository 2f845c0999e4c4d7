# servers.sh: sourced by the bench scripts: starts servers on port 0 in the background, reads
# their port from the "listening on http://HOST:PORT" line, and stops them all on exit.
tmp=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$tmp"
}
trap cleanup EXIT

# start NAME COMMAND...: runs COMMAND in the background and sets PORT once it listens. Call it
# directly, not in $(...): a subshell would keep the pid from the cleanup and leak the server.
start() {
  local name=$1; shift
  "$@" > "$tmp/$name.out" 2> "$tmp/$name.err" &
  pids+=($!)
  for _ in $(seq 200); do
    if grep -q "listening on http://" "$tmp/$name.out" 2>/dev/null; then
      PORT=$(sed -n 's/.*listening on http:\/\/[^:]*:\([0-9]*\).*/\1/p' "$tmp/$name.out" | head -1)
      return 0
    fi
    sleep 0.05
  done
  echo "$(basename "$0"): $name did not start: $(cat "$tmp/$name.err")" >&2
  exit 1
}

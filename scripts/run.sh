#!/usr/bin/env bash
# run.sh: installs what is missing, builds (showing its progress), and starts segopsd in the
# foreground. Arguments go to segopsd (default: --listen 127.0.0.1:8080, --backend auto; --help
# lists every option). Installing may need root (sudo); the daemon does not: under sudo it runs as
# the user who called sudo (proto/API.md, Shared memory).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
log=$(mktemp /tmp/segops-build.XXXXXX.log)
echo "run.sh: building into build/ (a minute or two the first time; log: $log)"
# The build's own lines go to the log; the terminal gets one line that counts up.
if ! scripts/build.sh 2>&1 | tee "$log" |
  awk '/^\[ *[0-9]+%\]/ { match($0, /[0-9]+%/); printf "\r  built %s ", substr($0, RSTART, RLENGTH); fflush() }
       END { printf "\r  built        \r" }'; then
  echo
  echo "run.sh: the build failed; its last lines:" >&2
  tail -n 30 "$log" >&2
  exit 1
fi
rm -f "$log"
echo "run.sh: starting build/server/segopsd $*"
if [ "$(id -u)" = 0 ] && [ -n "${SUDO_UID:-}" ] && [ "${SUDO_UID}" != 0 ] &&
  setpriv --reuid="$SUDO_UID" --regid="${SUDO_GID:-$SUDO_UID}" --init-groups true 2>/dev/null; then
  exec setpriv --reuid="$SUDO_UID" --regid="${SUDO_GID:-$SUDO_UID}" --init-groups build/server/segopsd "$@"
fi
exec build/server/segopsd "$@"

#!/usr/bin/env bash
# run.sh: installs what is missing, builds, and starts segopsd in the foreground.
# Arguments go to segopsd (default: --listen 127.0.0.1:8080, --backend auto).
# Installing may need root (sudo); the daemon does not: under sudo it runs as the user who called
# sudo (proto/API.md, Shared memory).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh >/dev/null
if [ "$(id -u)" = 0 ] && [ -n "${SUDO_UID:-}" ] && [ "${SUDO_UID}" != 0 ] &&
   setpriv --reuid="$SUDO_UID" --regid="${SUDO_GID:-$SUDO_UID}" --init-groups true 2>/dev/null; then
  exec setpriv --reuid="$SUDO_UID" --regid="${SUDO_GID:-$SUDO_UID}" --init-groups build/server/segopsd "$@"
fi
exec build/server/segopsd "$@"

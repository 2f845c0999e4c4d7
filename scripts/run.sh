#!/usr/bin/env bash
# run.sh: installs what is missing, builds, and starts segopsd in the foreground.
# Arguments go to segopsd (default: --listen 127.0.0.1:8080, --backend auto).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh >/dev/null
exec build/server/segopsd "$@"

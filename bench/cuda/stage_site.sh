#!/bin/bash
# stage_site.sh: run here, from the repository root, before the GPU calls that need nvalchemiops
# (gpu_run.sh parity, nvalchemi), for a GPU host without network access whose call carries at most 64 MiB;
# warp-lang's wheel alone is 149 MB (four 48 MiB parts, so four warm calls in a row). This stages
# the wheels' files as installed (examples and tests left out) in one xz tarball, 99 MB, cut into
# two parts: .device/wheels/part1 and part2 (git-ignored), and .device/wheels/install.sh.
#   bash bench/cuda/stage_site.sh [warp-lang==1.19.0 nvalchemi-toolkit-ops==0.5.0]
# Then two calls back to back (the machine stays warm ~30 s between them), each starting with
# ". .device/env.sh" (it gathers the carried parts into /tmp/segops-wheels), the first carrying
# .device/wheels/part1 and the second .device/wheels/part2, both .device/wheels/install.sh; in the
# second, ". .device/wheels/install.sh" unpacks into /tmp/site and sets PYTHONPATH. For
# example `gpu_run.sh build bench ctest sanitizer` in the first and `parity nvalchemi` in the second.
set -euo pipefail
[ "${1:-}" = "-h" ] || [ "${1:-}" = "--help" ] && { sed -n 2,12p "$0"; exit 0; }
[ -f CMakeLists.txt ] || { echo "run from the repository root" >&2; exit 2; }
specs=("$@")
[ ${#specs[@]} -gt 0 ] || specs=(warp-lang==1.19.0 nvalchemi-toolkit-ops==0.5.0)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
  -d "$tmp/dl" "${specs[@]}"
mkdir -p "$tmp/site"
for w in "$tmp"/dl/*.whl; do python3 -m zipfile -e "$w" "$tmp/site"; done
tar cf - -C "$tmp/site" --exclude='warp/examples' --exclude='warp/tests' . | xz -9 -T0 > "$tmp/site.tar.xz"
grep -qxF '/.device/' .git/info/exclude 2>/dev/null || echo '/.device/' >> .git/info/exclude
rm -rf .device/wheels && mkdir -p .device/wheels/part1 .device/wheels/part2
split -n 2 -d -a 1 "$tmp/site.tar.xz" .device/wheels/site.xz.
mv .device/wheels/site.xz.0 .device/wheels/part1/ && mv .device/wheels/site.xz.1 .device/wheels/part2/
for p in .device/wheels/part1 .device/wheels/part2; do # a call carries 64 MiB with the .debs
  [ "$(du -sb "$p" | cut -f1)" -le $((60 << 20)) ] || { echo "stage_site.sh: $p is over 60 MiB" >&2; exit 1; }
done
(cd "$tmp" && sha256sum site.tar.xz) | awk '{print $1"  /tmp/segops-wheels/site.tar.xz"}' > .device/wheels/part1/site.sha256
cat > .device/wheels/install.sh <<'EOF'
# Sourced on the GPU host once part1 and part2 were carried (made by bench/cuda/stage_site.sh).
W=/tmp/segops-wheels
if [ ! -e /tmp/site/.done ]; then
  cat "$W"/site.xz.0 "$W"/site.xz.1 > "$W"/site.tar.xz || return 1
  sha256sum -c --quiet "$W"/site.sha256 || { echo "wheel parts incomplete: carry part1 and part2"; return 1; }
  mkdir -p /tmp/site && xz -dc "$W"/site.tar.xz | tar x -C /tmp/site && touch /tmp/site/.done
fi
export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
EOF
du -sh .device/wheels/part1 .device/wheels/part2

#!/usr/bin/env bash
# env_ab.sh: A/B of daemon settings given by environment (e.g. how the CUDA workers wait for the
# GPU, SEGOPS_CUDA_WAIT / SEGOPS_CUDA_WAIT_POLL_US, or how many there are, SEGOPS_CUDA_LANES),
# through the worker benchmark, on a GPU host after a build:
#   . .device/env.sh && VARIANTS="base SEGOPS_CUDA_WAIT=block SEGOPS_CUDA_LANES=8,SEGOPS_CUDA_WAIT=block" \
#     ROUNDS=2 bash bench/worker/env_ab.sh
# A variant is `base` (the defaults) or NAME=VALUE[,NAME=VALUE...] given to the daemon. Rounds
# alternate the variants so drift hits them alike. OPS, SIZES, WORKERS, TRANSPORT, WINDOW pick the
# cells; BACKEND (cuda) and B (build-gpu) the daemon. Each run's table and JSON go to $LOGS
# (default bench/out/env_ab), then a summary: per cell, each variant's W-worker steps/s, one
# worker's step latency and the daemon's CPU per step, medians over the rounds.
set -uo pipefail
VARIANTS=${VARIANTS:-"base SEGOPS_CUDA_WAIT=block"}
ROUNDS=${ROUNDS:-2}
OPS=${OPS:-sum,rms_norm,matvec}
SIZES=${SIZES:-10,14,17}
WORKERS=${WORKERS:-$(nproc)}
TRANSPORT=${TRANSPORT:-shm}
WINDOW=${WINDOW:-0.4}
B=${B:-build-gpu}
BACKEND=${BACKEND:-cuda}
LOGS=${LOGS:-bench/out/env_ab}
PY=${SEGOPS_PYTHON:-python3}
mkdir -p "$LOGS"
for r in $(seq 1 "$ROUNDS"); do
  for v in $VARIANTS; do
    tag="$(echo "$v" | tr -c 'A-Za-z0-9=,\n' '_' | sed 's/SEGOPS_//g')_r$r"
    envs=()
    if [ "$v" != base ]; then
      IFS=',' read -r -a kv <<<"$v"
      for e in "${kv[@]}"; do envs+=(--daemon-env "$e"); done
    fi
    echo "== $tag ($(date +%T))"
    timeout 300 "$PY" bench/worker/worker_bench.py --segopsd "$B/server/segopsd" --backend "$BACKEND" \
      --transport "$TRANSPORT" --ops "$OPS" --sizes "$SIZES" --workers "$WORKERS" --window "$WINDOW" \
      --warmup 0.15 "${envs[@]}" --json "$LOGS/$tag.json" > "$LOGS/$tag.txt" 2>&1
    echo "rc=$? $(grep -c 'shm\|http\|unix' "$LOGS/$tag.txt") lines"
  done
done
"$PY" - "$LOGS" $VARIANTS <<'PY'
import glob, json, os, statistics, sys
logs, variants = sys.argv[1], sys.argv[2:]
# each run's JSON records the daemon environment it was given: that, not the file name, says
# which variant it ran
want = {v: ({} if v == "base" else dict(kv.split("=", 1) for kv in v.split(","))) for v in variants}
cells = {}
for f in sorted(glob.glob(os.path.join(logs, "*_r*.json"))):
    run = json.load(open(f))
    for v in variants:
        if run.get("daemon_env") == want[v]:
            for row in run["rows"]:
                key = (row["op"].replace("segmented_", ""), row["log2n"], row["transport"])
                cells.setdefault(key, {}).setdefault(v, []).append(row)
med = lambda rows, k: statistics.median(r[k] for r in rows)
print("| op | N | transport | " + " | ".join(f"{v}: W steps/s, 1w ms, daemon µs/step" for v in variants) + " | W steps/s vs " + variants[0] + " |")
print("|---|---|---|" + "---|" * (len(variants) + 1))
for key in sorted(cells, key=lambda k: (k[0], k[1])):
    c = cells[key]
    if not all(v in c for v in variants):
        continue
    base = med(c[variants[0]], "remote_sps")
    parts = [f"{med(c[v], 'remote_sps'):,.0f}, {med(c[v], 'remote_ms'):.3f}, {med(c[v], 'daemon_cpu_us'):.0f}" for v in variants]
    rel = " / ".join(f"{med(c[v], 'remote_sps') / base:.2f}" for v in variants[1:])
    print(f"| {key[0]} | 2^{key[1]} | {key[2]} | " + " | ".join(parts) + f" | {rel} |")
PY

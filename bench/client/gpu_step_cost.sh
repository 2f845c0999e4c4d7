#!/bin/bash
# gpu_step_cost.sh: one worker's CPU per training step on this host, four ways, for the ops and
# sizes given (bench/client/step_cost.py): the step in plain torch (local), through segops.torch
# with every daemon answer replayed (fake: torch's autograd and the client's Python alone), with
# only the socket exchange replayed (fake-http: the client's HTTP and region code too), and the
# real exchange with the daemon (shared memory). Run from the repository root after building
# segopsd into $B:
#   B=build-gpu BACKEND=cuda OPS="sum rms_norm matvec" SIZES="10 14" bash bench/client/gpu_step_cost.sh
set -u
B=${B:-build}
BACKEND=${BACKEND:-cpu}
OPS=${OPS:-sum rms_norm matvec}
SIZES=${SIZES:-10 14}
PY=${PY:-python3}
echo "host: $(nproc) cores; backend $BACKEND; $(date -u +%FT%TZ)"
for op in $OPS; do
  for k in $SIZES; do
    # enough steps that warm-up (allocator growth, page faults) stays a small part: 2000 at 2^10,
    # 1000 up to 2^16, 300 beyond (matvec 2^17 takes ~40 ms a step locally)
    steps=$(( k >= 17 ? 300 : (k >= 14 ? 1000 : 2000) ))
    for mode in --local --fake --fake-http ""; do
      # the client on CPU 0 (pinned after it starts the daemon, which keeps every CPU)
      timeout 120 $PY bench/client/step_cost.py --segopsd "$B/server/segopsd" --backend "$BACKEND" \
        --op "$op" --log2n "$k" --steps "$steps" --pin 0 $mode 2>&1 | grep -E "CPU per step|per step:|rror" || echo "  ($op 2^$k $mode failed)"
    done
  done
done

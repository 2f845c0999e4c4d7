#!/bin/bash
# gpu_variants.sh: builds seg_kernel variants (launch bounds, tiles per warp of the tile role) into
# build-<name> and times each with bench_cuda on float32 subsets, in one GPU call from the
# repository root after `. .device/env.sh`:
#   V="a:4:3:4 b:6:3:4" bash bench/cuda/gpu_variants.sh     # name:minblocks:minblocks_wide:tiles_per_warp
# The TSVs go to $OUT/v.tgz. tiles_per_warp 0 keeps the rule by N of cuda_layout.cu.
set -u
DEST=${OUT:-.}
V=${V:-"a:4:3:4 b:6:3:4 c:8:4:4 d:6:3:32 e:8:4:1"}
for v in $V; do
  IFS=: read n mb mbw tpw <<<"$v"
  ( cmake -S . -B build-$n -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 \
      -DCMAKE_CUDA_FLAGS="-DSEGOPS_SEG_MINB=$mb -DSEGOPS_SEG_MINB_WIDE=$mbw -DSEGOPS_TILES_PER_WARP=$tpw" > /tmp/cfg-$n.log 2>&1 &&
    cmake --build build-$n -j4 --target bench_cuda > /tmp/build-$n.log 2>&1; echo "built $n rc=$?" ) &
done
wait
mkdir -p /tmp/idx
for v in $V; do
  IFS=: read n mb mbw tpw <<<"$v"
  echo "######## variant $n: minblocks $mb/$mbw, tiles/warp $tpw"
  for spec in "25 012 10" "20 0123 50" "17 0123 100" "12 012 100"; do
    read k lay reps <<<"$spec"
    mkdir -p /tmp/idx/$n$k
    timeout 120 build-$n/bench/cuda/bench_cuda --log2n $k --reps $reps --layouts $lay --dtypes 32 \
      --tsv /tmp/v$n-$k.tsv --idx-dir /tmp/idx/$n$k > /tmp/v$n-$k.log 2>&1 || echo "bench $n $k failed"
    python3 bench/cuda/compare_tsv.py /tmp/v$n-$k.tsv | sed -n '1p;4,7p'
  done
done
tar czf "$DEST/v.tgz" -C /tmp $(cd /tmp && ls v*.tsv)

#!/bin/bash
# gpu_variants.sh: builds bench_cuda with compile-time variants of the CUDA backend into
# build-<name> and times each on subsets of the rows, in one GPU call from the repository root after
# `. .device/env.sh`. Variants are "name:FLAGS" separated by '|', FLAGS passed as CMAKE_CUDA_FLAGS:
#   V='a:|b:-DSEGOPS_CUDA_SPLIT_N=1048576' bash bench/cuda/gpu_variants.sh
# Knobs (see backends/cuda/cuda_kernels.cuh and cuda_launch.cu): SEGOPS_SEG_MINB,
# SEGOPS_SEG_MINB_WIDE, SEGOPS_TILES_PER_WARP, SEGOPS_CHUNK_SOLO, SEGOPS_CHUNK_ROWS,
# SEGOPS_COMBINE_ROWS, SEGOPS_CUDA_SPLIT_N, SEGOPS_CUDA_TILE, SEGOPS_GATHER_STAGE, SEGOPS_STAGE_MIN_N,
# SEGOPS_GATHER_LAST, SEGOPS_PDL, SEGOPS_CUDA_IE_N, SEGOPS_CUDA_IP_N, SEGOPS_COPY_GATHER. SPECS: "log2n layouts reps" triples separated by ','; LAYOUTS by number
# (0 seg32, 1 powerlaw, 2 S=1, 3 seg32-unsorted). The TSVs go to $OUT/v.tgz; the runs alternate
# variant by variant within each size, ROUNDS times, so drift of the machine hits all alike. Each
# first-round run up to 2^20 also hashes every output of its rows (bench_cuda --digest); the end
# says, per variant, whether its outputs are bit-identical to the first variant's (DIGEST_MAX: up to
# 2^DIGEST_MAX, default 20). DTYPES: 32 (default), 64 or 32,64. ONLY: bench_cuda --only (a substring
# of the functions' names, e.g. rms_norm).
set -u
DEST=${OUT:-.}
V=${V:-"a:"}
SPECS=${SPECS:-"25 12 10,20 12 50,17 12 100,12 12 100"}
ROUNDS=${ROUNDS:-1}
DTYPES=${DTYPES:-32}
DIGEST_MAX=${DIGEST_MAX:-20}
ONLY=${ONLY:-}
IFS='|' read -r -a VS <<<"$V"
for v in "${VS[@]}"; do
  n=${v%%:*} f=${v#*:}
  ( cmake -S . -B build-$n -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 -DSEGOPS_BUILD_TESTS=OFF \
      "-DCMAKE_CUDA_FLAGS=$f" > /tmp/cfg-$n.log 2>&1 &&
    cmake --build build-$n -j8 --target bench_cuda > /tmp/build-$n.log 2>&1; echo "built $n rc=$? ($f)" ) &
done
wait
mkdir -p /tmp/idx
IFS=',' read -r -a SP <<<"$SPECS"
for r in $(seq 1 "$ROUNDS"); do
  for spec in "${SP[@]}"; do
    read -r k lay reps <<<"$spec"
    mkdir -p /tmp/idx/n$k
    for v in "${VS[@]}"; do
      n=${v%%:*}
      timeout 150 build-$n/bench/cuda/bench_cuda --log2n "$k" --reps "$reps" --layouts "$lay" --dtypes "$DTYPES" \
        ${ONLY:+--only "$ONLY"} $(if [ "$r" = 1 ] && [ "$k" -le "$DIGEST_MAX" ]; then echo "--digest /tmp/v$n-$k-r1.dig"; fi) --tsv /tmp/v$n-$k-r$r.tsv --idx-dir /tmp/idx/n$k > /tmp/v$n-$k-r$r.log 2>&1 || echo "bench $n $k failed"
      echo "variant $n 2^$k round $r: $(awk -F'\t' 'NR>1{s+=$10; c++} END{printf "sum of warm ms %.4f over %d rows", s, c}' /tmp/v$n-$k-r$r.tsv)"
    done
  done
done
first=${VS[0]%%:*}
for v in "${VS[@]:1}"; do
  n=${v%%:*}
  for spec in "${SP[@]}"; do
    read -r k _ <<<"$spec"
    [ "$k" -le "$DIGEST_MAX" ] || continue
    if cmp -s /tmp/v$first-$k-r1.dig /tmp/v$n-$k-r1.dig; then same=identical; else same=DIFFERENT; fi
    echo "outputs of $n vs $first at 2^$k: $same ($(wc -l < /tmp/v$n-$k-r1.dig) outputs)"
  done
done
# this run's files only (/tmp may hold other variants' from an earlier run on the same machine)
tar czf "$DEST/v.tgz" -C /tmp $(cd /tmp && for v in "${VS[@]}"; do ls "v${v%%:*}"-*-r*.tsv "v${v%%:*}"-*-r1.dig 2>/dev/null; done)

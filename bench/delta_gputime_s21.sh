#!/usr/bin/env bash
# Twenty-first session: chunk_kda fwd and chunk_gdn fwd against FLA 0.6.0 at the six default shapes with --gpu-time
# (each cell also timed GPU-only: host time hidden behind a sleep kernel), with the record call's FLA autotune decisions
# (.carry/fla-autotune.tgz). FLA's small cells moved by up to 1.8x between processes under the primary timer; the
# GPU-only columns say how much of that is host time.
#   carry [".carry/bin.tar.xz", ".carry/fla-autotune.tgz", ".whl"]
set -u
source bench/delta_record_lib.sh
R=$PWD
setup_side
for op in chunk_kda chunk_gdn; do
  left=$((440 - SECONDS)); [ $left -lt 30 ] && break
  timeout $left python3 bench/fla_side_by_side.py --append --gpu-time --budget-s 0.3 --out $OUT/side_gputime_h200 --ops $op \
    --modes fwd --varlen-tokens 0 >> /tmp/side.log 2>&1; echo "$op fwd rc=$? at ${SECONDS}s"
done
grep -E '^\||eomean' $OUT/side_gputime_h200.md | cut -c1-260
echo "total ${SECONDS}s"

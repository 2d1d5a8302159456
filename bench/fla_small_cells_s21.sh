#!/usr/bin/env bash
# Twenty-first session: FLA's forward at B4_T2048_H16_D128 and B8_T1024_H8_D64 re-timed with its autotuning done alone
# (fresh Triton cache, one process per op, nothing else on the GPU). In the record call FLA's autotune ran in parallel
# processes beside the correctness jobs and its KDA B4_T2048 cell came out at 1.568 ms (0.795 in the eighteenth
# session's record, 1.513 in the anchors). Found: the spread stays with the autotune alone (1.199 ms), and
# bench/delta_gputime_s21.sh then showed it is FLA's host time (0.504 ms GPU-only), not its config choice.
#   carry [".carry/bin.tar.xz", ".whl"]
set -u
source bench/delta_record_lib.sh
R=$PWD
setup_side
rm -rf /tmp/triton-cache && mkdir -p /tmp/triton-cache
for op in chunk_kda chunk_gdn; do
  left=$((560 - SECONDS)); [ $left -lt 30 ] && break
  timeout $left python3 bench/fla_side_by_side.py --append --budget-s 0.3 --out $OUT/side_small_h200 --ops $op --modes fwd \
    --shapes B4_T2048_H16_D128,B8_T1024_H8_D64 --varlen-tokens 0 >> /tmp/side.log 2>&1; echo "$op fwd rc=$? at ${SECONDS}s"
done
grep -E '^\|' $OUT/side_small_h200.md | cut -c1-200
echo "total ${SECONDS}s"

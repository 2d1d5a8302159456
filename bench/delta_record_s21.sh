#!/usr/bin/env bash
# Twenty-first session's record, one device call: main's forwards against FLA 0.6.0 (chunk_kda fwd and chunk_gdn fwd,
# FLA under no-grad: it refuses GDN's backward on this Triton) at the six default shapes and the varlen set, do_bench
# timer, same seeded inputs, each op in its own process with nothing else on the GPU; beside it the correctness jobs of
# bench/delta_record_setup.sh (GPU unit tests, both gates' CUDA cases, the forward and backward checks). FLA's autotune
# runs first, in parallel with the correctness jobs (bench/fla_autotune_warm.sh), so the timed processes compile only
# the chosen configs. The backward kernels are those of the eighteenth session's record (its fwdbwd rows stand).
#   carry [".carry/bin.tar.xz", ".carry/base.tar.xz", ".whl"]
source bench/delta_record_setup.sh
FLA_WARM_JOBS="chunk_kda fwd;chunk_gdn fwd" bash bench/fla_autotune_warm.sh 300 > /tmp/warm.log 2>&1
echo "autotune: $(grep -E 'rc=|decisions' /tmp/warm.log | tr '\n' ' ') at ${SECONDS}s"
wait
correctness_summary | tee -a $C
setup_fla
S="python3 bench/fla_side_by_side.py --append --budget-s 0.3 --out $OUT/side_delta_h200"
for op in chunk_kda chunk_gdn; do
  left=$((580 - SECONDS)); [ $left -lt 30 ] && break
  timeout $left $S --ops $op --modes fwd >> /tmp/side.log 2>&1; echo "$op fwd rc=$? at ${SECONDS}s"
done
tar -czf $OUT/side-log.tgz -C / tmp/side.log tmp/warm.log
grep -E '^\||eomean' $OUT/side_delta_h200.md 2>/dev/null | cut -c1-200
echo "total ${SECONDS}s"

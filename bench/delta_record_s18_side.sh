#!/usr/bin/env bash
# The eighteenth session's record, part 2: chunk_kda fwdbwd and fwd and chunk_gdn fwd (FLA under no-grad: it refuses
# GDN's backward on this Triton) against FLA 0.6.0 at the six default shapes and the varlen set, in one process per
# op / mode, one run, do_bench timer, same seeded inputs; then lina's chunk_gdn fwdbwd alone. FLA's autotune decisions
# come from .carry/fla-autotune.tgz (bench/fla_autotune_warm.sh, call 1 of this session), so its chosen configs are
# compiled, not searched, inside the call; the timing does not include compilation either way (warm-up first).
#   bash bench/delta_record_s18_side.sh   carry [".carry/bin.tar.xz", ".whl", ".carry/fla-autotune.tgz"]
set -u
source bench/delta_record_lib.sh
R=$PWD
mkdir -p /tmp/l && tar -xJf $R/.carry/bin.tar.xz -C /tmp/l
BIN=/tmp/l/bin
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,driver_version,memory.total --format=csv,noheader | tee $OUT/machine.txt
setup_fla
tar -xzf $R/.carry/fla-autotune.tgz -C /tmp
S="python3 bench/fla_side_by_side.py --append --budget-s 0.3 --out $OUT/side_delta_h200"
for job in "chunk_kda fwdbwd" "chunk_gdn fwd" "chunk_kda fwd"; do
  set -- $job
  left=$((560 - SECONDS)); [ $left -lt 30 ] && break
  timeout $left $S --ops $1 --modes $2 >> /tmp/side.log 2>&1; echo "$job rc=$? at ${SECONDS}s"
done
left=$((585 - SECONDS))
[ $left -gt 20 ] && { timeout $left $S --impls lina --ops chunk_gdn --modes fwdbwd >> /tmp/side.log 2>&1; echo "chunk_gdn fwdbwd (lina) rc=$? at ${SECONDS}s"; }
tar -czf $OUT/side-log.tgz -C / tmp/side.log
grep -E '^\||eomean' $OUT/side_delta_h200.md 2>/dev/null | cut -c1-200
echo "total ${SECONDS}s"

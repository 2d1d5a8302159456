#!/usr/bin/env bash
# chunk_kda fwdbwd vs FLA 0.6.0 (do_bench timer, same process, FLA's autotune from scratch) at the default shapes the
# fifteenth and seventeenth sessions' records did not reach (B4_T4096_H64_D128, then B8_T1024_H8_D64), as many as the
# call's time allows. DIR holds bin.tar.xz (bin/{lina, liblina_c.so, SHA} of the commit to measure); FLA's wheel in .whl.
#   bash bench/delta_side_kda_fwdbwd_s17.sh .carry/s17e   carry [".carry/s17e", ".whl"]
set -u
R=$PWD
source bench/delta_record_lib.sh
mkdir -p /tmp/l && tar -xJf "${1:?DIR}/bin.tar.xz" -C /tmp/l
BIN=/tmp/l/bin
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,driver_version --format=csv,noheader | tee $OUT/machine.txt
setup_fla
S="python3 bench/fla_side_by_side.py --append --budget-s 0.3 --varlen-tokens 0 --out $OUT/side_kda_fwdbwd_h200"
for sh in B4_T4096_H64_D128 B8_T1024_H8_D64; do
  left=$((330 - SECONDS)); [ $left -lt 60 ] && break
  timeout $left $S --ops chunk_kda --modes fwdbwd --shapes $sh >> /tmp/side.log 2>&1; echo "kda fwdbwd $sh rc=$? at ${SECONDS}s"
done
cp /tmp/side.log $OUT/side.log
grep -E '^\||eomean' $OUT/side_kda_fwdbwd_h200.md 2>/dev/null | cut -c1-220
echo "total ${SECONDS}s"

#!/usr/bin/env bash
# The eighteenth session's last call: lina verify fwdbwd of chunk_kda and chunk_gdn at the bwd2 loops' four contract
# cells (profile/<op>-bwd2/contract.json) against their baseline 4060e44 (the commit before the K = 256 fused
# post_qk), full gate included. Binaries at HEAD (.carry/bin.tar.xz), the base lina (.carry/base.tar.xz), the bundle.
#   bash bench/delta_verify_s18.sh   carry [".carry/bin.tar.xz", ".carry/base.tar.xz", ".carry/lina.bundle"]
set -u
source bench/delta_record_lib.sh
R=$PWD
mkdir -p /tmp/l /tmp/b && tar -xJf $R/.carry/bin.tar.xz -C /tmp/l && tar -xJf $R/.carry/base.tar.xz -C /tmp/b
BIN=/tmp/l/bin
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,driver_version --format=csv,noheader | tee $OUT/machine.txt
echo "lina $(cat $BIN/SHA), base $(cat /tmp/b/bin/SHA)"
setup_verify_repo
for op in chunk_kda chunk_gdn; do
  timeout 140 $BIN/lina verify --op $op --base $(cat /tmp/b/bin/SHA) --base-exe /tmp/b/bin/lina --repo /tmp/vr --modes fwdbwd \
    --shapes B1_T8192_H96_D128,B4_T2048_H16_D128,B8_T1024_H8_D64,B8_T2048_H32_D256 --rounds 2 --json $OUT/verify_${op}_bwd2.json > /tmp/v_$op.log 2>&1
  echo "verify $op rc=$? at ${SECONDS}s"; grep -vE '^round ' /tmp/v_$op.log | grep -E "geomean|full gate|repeatable|B[0-9]_T" | tail -8
done
echo "total ${SECONDS}s"

#!/usr/bin/env bash
# Nineteenth session: T' as one bf16 plane too (kTPlanes = 1, an uncommitted build in .carry/tp1.tar.xz) against
# 3823f02 (Q' one plane, T' hi + lo; .carry/bin.tar.xz): forward checks of both (errors side by side), both gates'
# CUDA cases with the one-plane T', kernel-only forward times alternating; then the KDA lina verify --modes fwd of
# 3823f02 against 29e0ffd that the first call could not bring back. Outputs in one tarball.
#   carry [".carry/bin.tar.xz", ".carry/base.tar.xz", ".carry/tp1.tar.xz", ".carry/lina.bundle"]
set -u
source bench/delta_record_lib.sh
R=$PWD
mkdir -p /tmp/l /tmp/b /tmp/o && tar -xJf $R/.carry/bin.tar.xz -C /tmp/l && tar -xJf $R/.carry/base.tar.xz -C /tmp/b && tar -xJf $R/.carry/tp1.tar.xz -C /tmp
BIN=/tmp/l/bin T=/tmp/tp1 O=/tmp/o
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,driver_version --format=csv,noheader | tee $O/machine.txt
timeout 150 $T/lina_cuda_delta_check --no-time > $O/check_tp1.txt 2>&1
echo "check tp1 rc=$? $(grep -c ' PASS ' $O/check_tp1.txt) PASS $(grep -c ' FAIL ' $O/check_tp1.txt) FAIL at ${SECONDS}s" | tee $O/summary.txt
for g in kda gdn; do
  timeout 200 $T/lina_chunk_${g}_gate --gtest_filter='*Cuda*' > $O/gate_tp1_$g.txt 2>&1
  echo "gate tp1 $g rc=$? $(grep -E '^\[  (PASSED|FAILED) ' $O/gate_tp1_$g.txt | tr '\n' ' ') at ${SECONDS}s" | tee -a $O/summary.txt
  grep -E 'FAILED  \]' $O/gate_tp1_$g.txt | head -20 | tee -a $O/summary.txt
done
for r in 1 2; do for b in new tp1; do for op in gdn kda; do
  d=$BIN; [ $b = tp1 ] && d=$T
  echo "r$r $b $op: $(timeout 90 $d/lina_cuda_delta_check --no-check --op $op 2>&1 | grep ' ms ' | awk '{print $2, $3}' | tr '\n' ';')"
done; done; done 2>&1 | tee $O/whole.txt
setup_verify_repo
timeout 150 $BIN/lina verify --op chunk_kda --base $(cat /tmp/b/bin/SHA) --base-exe /tmp/b/bin/lina --repo /tmp/vr --modes fwd \
  --shapes B1_T8192_H96_D128,B4_T2048_H16_D128,B8_T1024_H8_D64,B8_T2048_H32_D256 --rounds 2 --json $O/verify_chunk_kda_fwd.json > $O/verify_kda.log 2>&1
echo "verify kda rc=$? at ${SECONDS}s"; grep -vE '^round ' $O/verify_kda.log | grep -E "geomean|full gate|repeatable|x \[" | tail -8
tar -czf $OUT/out.tgz -C /tmp o
echo "total ${SECONDS}s"

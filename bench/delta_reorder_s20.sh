#!/usr/bin/env bash
# Twentieth session, one device call: (1) lina verify --modes fwd of chunk_gdn for the state-kernel Q' (5fbb14d, binA)
# against b403601, the JSON of its revert row; (2) the reordered state kernel (store_o under batch 1, next loads under
# v_new; bin) against b403601: forward checks, kernel-only forward times alternating (two rounds, both ops), stages at
# B1, then lina verify --modes fwd of both ops at the opt2 contract cells when GDN's B1 time is lower.
#   carry [".carry/bin.tar.xz", ".carry/binA.tar.xz", ".carry/base.tar.xz", ".carry/lina.bundle"]
set -u
source bench/delta_record_lib.sh
R=$PWD
mkdir -p /tmp/l /tmp/b && tar -xJf $R/.carry/bin.tar.xz -C /tmp/l && tar -xJf $R/.carry/binA.tar.xz -C /tmp/l && tar -xJf $R/.carry/base.tar.xz -C /tmp/b
BIN=/tmp/l/bin
CELLS=B1_T8192_H96_D128,B4_T2048_H16_D128,B8_T1024_H8_D64,B8_T2048_H32_D256
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,driver_version --format=csv,noheader | tee $OUT/machine.txt
echo "lina $(cat $BIN/SHA), A $(cat /tmp/l/binA/SHA), base $(cat /tmp/b/bin/SHA)" | tee -a $OUT/machine.txt
timeout 100 $BIN/lina_cuda_delta_check --no-time > /tmp/check.txt 2>&1
echo "check new rc=$? $(grep -c ' PASS ' /tmp/check.txt) PASS $(grep -c ' FAIL ' /tmp/check.txt) FAIL at ${SECONDS}s"
for r in 1 2; do for b in base new; do for op in gdn kda; do
  d=$BIN; [ $b = base ] && d=/tmp/b/bin
  echo "r$r $b $op: $(timeout 90 $d/lina_cuda_delta_check --no-check --op $op 2>&1 | grep ' ms ' | awk '{print $2, $3}' | tr '\n' ';')"
done; done; done 2>&1 | tee $OUT/whole.txt
for b in base new; do for op in gdn kda; do
  d=$BIN; [ $b = base ] && d=/tmp/b/bin
  echo "$b $op B1 stages: $(LINA_DELTA_FWD_STAGES=1 timeout 60 $d/lina_cuda_delta_check --no-check --op $op --shape 0 2>&1 | grep stages | tail -1)"
done; done 2>&1 | tee $OUT/stages.txt
setup_verify_repo
timeout 150 /tmp/l/binA/lina verify --op chunk_gdn --base $(cat /tmp/b/bin/SHA) --base-exe /tmp/b/bin/lina --repo /tmp/vr --modes fwd \
  --shapes $CELLS --rounds 2 --json $OUT/verify_A_chunk_gdn_fwd.json > /tmp/vA.log 2>&1
echo "verify A chunk_gdn rc=$? at ${SECONDS}s"; grep -vE '^round ' /tmp/vA.log | grep -E "geomean|full gate|FAIL" | tail -3
new=$(grep '^r2 new gdn' $OUT/whole.txt | grep -o 'B1_T8192_H96_D128 [0-9.]*' | awk '{print $2}')
old=$(grep '^r2 base gdn' $OUT/whole.txt | grep -o 'B1_T8192_H96_D128 [0-9.]*' | awk '{print $2}')
if awk "BEGIN{exit !($new < $old)}"; then
  for op in chunk_gdn chunk_kda; do
    timeout 170 $BIN/lina verify --op $op --base $(cat /tmp/b/bin/SHA) --base-exe /tmp/b/bin/lina --repo /tmp/vr --modes fwd \
      --shapes $CELLS --rounds 2 --json $OUT/verify_${op}_fwd.json > /tmp/v.log 2>&1
    echo "verify $op rc=$? at ${SECONDS}s"; grep -vE '^round ' /tmp/v.log | grep -E "geomean|full gate|FAIL" | tail -3
  done
else echo "B1 not faster ($new vs $old): no verify of the reorder"; fi
echo "total ${SECONDS}s"

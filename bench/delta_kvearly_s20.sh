#!/usr/bin/env bash
# Twentieth session, one device call: the state kernel with chunk ci + 1's chunk-parity tiles (GDN k, v; KDA v)
# issued while chunk ci's batch 1 runs (bin) against b403601: forward checks, kernel-only forward times alternating
# (two rounds, both ops), stages at B1, then lina verify --modes fwd of both ops at the opt2 contract cells (full
# gates included) when GDN's B1 time is lower, and memcheck / racecheck on small cases.
#   carry [".carry/bin.tar.xz", ".carry/base.tar.xz", ".carry/lina.bundle"]
set -u
source bench/delta_record_lib.sh
R=$PWD
mkdir -p /tmp/l /tmp/b && tar -xJf $R/.carry/bin.tar.xz -C /tmp/l && tar -xJf $R/.carry/base.tar.xz -C /tmp/b
BIN=/tmp/l/bin
CELLS=B1_T8192_H96_D128,B4_T2048_H16_D128,B8_T1024_H8_D64,B8_T2048_H32_D256
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,driver_version --format=csv,noheader | tee $OUT/machine.txt
echo "lina $(cat $BIN/SHA), base $(cat /tmp/b/bin/SHA)" | tee -a $OUT/machine.txt
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
new=$(grep '^r2 new gdn' $OUT/whole.txt | grep -o 'B1_T8192_H96_D128 [0-9.]*' | awk '{print $2}')
old=$(grep '^r2 base gdn' $OUT/whole.txt | grep -o 'B1_T8192_H96_D128 [0-9.]*' | awk '{print $2}')
if awk "BEGIN{exit !($new < $old)}"; then
  setup_verify_repo
  for op in chunk_gdn chunk_kda; do
    timeout 170 $BIN/lina verify --op $op --base $(cat /tmp/b/bin/SHA) --base-exe /tmp/b/bin/lina --repo /tmp/vr --modes fwd \
      --shapes $CELLS --rounds 2 --json $OUT/verify_${op}_fwd.json > /tmp/v.log 2>&1
    echo "verify $op rc=$? at ${SECONDS}s"; grep -vE '^round ' /tmp/v.log | grep -E "geomean|full gate|FAIL" | tail -3
  done
  for m in "gdn T1 H2" "gdn T300 varlen H2 HV4 D128" "kda T300 varlen" "gdn T300 varlen H1 HV2 D256"; do for t in memcheck racecheck; do
    timeout 100 compute-sanitizer --tool $t $BIN/lina_cuda_delta_check --no-time --match "$m" > /tmp/san.log 2>&1
    echo "$m $t rc=$? $(grep -c ' PASS ' /tmp/san.log) PASS $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' /tmp/san.log | tail -1)"
  done; done 2>&1 | tee $OUT/sanitize.txt
else echo "B1 not faster ($new vs $old): no verify"; fi
echo "total ${SECONDS}s"

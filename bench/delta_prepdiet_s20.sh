#!/usr/bin/env bash
# Twentieth session, one device call: the preps' instruction diet (merge operands stored tf32-rounded, the KDA prep's
# gated tiles as 16-byte pieces; bin) against b403601: forward checks of both builds (the outputs' bit hashes must
# match: the values are unchanged), kernel-only forward times alternating (two rounds, both ops), stages at B1, then
# lina verify --modes fwd of both ops at the opt2 contract cells (full gates) and memcheck / racecheck on small cases.
#   carry [".carry/bin.tar.xz", ".carry/base.tar.xz", ".carry/lina.bundle"]
set -u
source bench/delta_record_lib.sh
R=$PWD
mkdir -p /tmp/l /tmp/b && tar -xJf $R/.carry/bin.tar.xz -C /tmp/l && tar -xJf $R/.carry/base.tar.xz -C /tmp/b
BIN=/tmp/l/bin
CELLS=B1_T8192_H96_D128,B4_T2048_H16_D128,B8_T1024_H8_D64,B8_T2048_H32_D256
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,driver_version --format=csv,noheader | tee $OUT/machine.txt
echo "lina $(cat $BIN/SHA), base $(cat /tmp/b/bin/SHA)" | tee -a $OUT/machine.txt
for b in new base; do
  d=$BIN; [ $b = base ] && d=/tmp/b/bin
  timeout 100 $d/lina_cuda_delta_check --no-time > /tmp/check_$b.txt 2>&1
  echo "check $b rc=$? $(grep -c ' PASS ' /tmp/check_$b.txt) PASS $(grep -c ' FAIL ' /tmp/check_$b.txt) FAIL at ${SECONDS}s"
done
echo "bit hashes differing: $(diff <(grep -o 'bits .*' /tmp/check_new.txt) <(grep -o 'bits .*' /tmp/check_base.txt) | grep -c '^<')"
for r in 1 2; do for b in base new; do for op in gdn kda; do
  d=$BIN; [ $b = base ] && d=/tmp/b/bin
  echo "r$r $b $op: $(timeout 90 $d/lina_cuda_delta_check --no-check --op $op 2>&1 | grep ' ms ' | awk '{print $2, $3}' | tr '\n' ';')"
done; done; done 2>&1 | tee $OUT/whole.txt
for b in base new; do for op in gdn kda; do
  d=$BIN; [ $b = base ] && d=/tmp/b/bin
  echo "$b $op B1 stages: $(LINA_DELTA_FWD_STAGES=1 timeout 60 $d/lina_cuda_delta_check --no-check --op $op --shape 0 2>&1 | grep stages | tail -1)"
done; done 2>&1 | tee $OUT/stages.txt
setup_verify_repo
for op in chunk_kda chunk_gdn; do
  timeout 170 $BIN/lina verify --op $op --base $(cat /tmp/b/bin/SHA) --base-exe /tmp/b/bin/lina --repo /tmp/vr --modes fwd \
    --shapes $CELLS --rounds 2 --json $OUT/verify_${op}_fwd.json > /tmp/v.log 2>&1
  echo "verify $op rc=$? at ${SECONDS}s"; grep -vE '^round ' /tmp/v.log | grep -E "geomean|full gate|FAIL" | tail -3
done
for m in "kda T300 varlen" "gdn T300 varlen H2 HV4 D128" "gdn T100 H1 HV4 D64"; do for t in memcheck racecheck; do
  timeout 100 compute-sanitizer --tool $t $BIN/lina_cuda_delta_check --no-time --match "$m" > /tmp/san.log 2>&1
  echo "$m $t rc=$? $(grep -c ' PASS ' /tmp/san.log) PASS $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' /tmp/san.log | tail -1)"
done; done 2>&1 | tee $OUT/sanitize.txt
echo "total ${SECONDS}s"

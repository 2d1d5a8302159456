#!/usr/bin/env bash
# Nineteenth session, one device call: the delta forward with Q' and v_new as one bf16 plane in o (kQPlanes = 1)
# against its parent 29e0ffd (hi + lo). Forward checks of both builds (errors side by side), kernel-only forward
# times alternating (six shapes, both ops, three rounds; stage split at B1), memcheck / racecheck of the new forward
# on small cases, then lina verify --modes fwd of both ops at the opt2 contract cells (full gate included).
#   carry [".carry/bin.tar.xz", ".carry/base.tar.xz", ".carry/lina.bundle"]; bash bench/delta_qplanes_s19.sh
set -u
source bench/delta_record_lib.sh
R=$PWD
mkdir -p /tmp/l /tmp/b && tar -xJf $R/.carry/bin.tar.xz -C /tmp/l && tar -xJf $R/.carry/base.tar.xz -C /tmp/b
BIN=/tmp/l/bin
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,driver_version --format=csv,noheader | tee $OUT/machine.txt
echo "lina $(cat $BIN/SHA), base $(cat /tmp/b/bin/SHA)" | tee -a $OUT/machine.txt
for b in new base; do
  d=$BIN; [ $b = base ] && d=/tmp/b/bin
  timeout 150 $d/lina_cuda_delta_check --no-time > $OUT/check_$b.txt 2>&1
  echo "check $b rc=$? $(grep -c ' PASS ' $OUT/check_$b.txt) PASS $(grep -c ' FAIL ' $OUT/check_$b.txt) FAIL at ${SECONDS}s"
done
for r in 1 2 3; do for b in base new; do for op in gdn kda; do
  d=$BIN; [ $b = base ] && d=/tmp/b/bin
  echo "r$r $b $op: $(timeout 90 $d/lina_cuda_delta_check --no-check --op $op 2>&1 | grep ' ms ' | awk '{print $2, $3}' | tr '\n' ';')"
done; done; done 2>&1 | tee $OUT/whole.txt
for b in base new; do for op in gdn kda; do
  d=$BIN; [ $b = base ] && d=/tmp/b/bin
  echo "$b $op B1 stages: $(LINA_DELTA_FWD_STAGES=1 timeout 60 $d/lina_cuda_delta_check --no-check --op $op --shape 0 2>&1 | grep stages | tail -2 | tr '\n' ';')"
done; done 2>&1 | tee $OUT/stages.txt
for m in "gdn T1 H2" "gdn T300 varlen H2 HV4 D128" "kda T300 varlen" "gdn T300 varlen H1 HV2 D256"; do for t in memcheck racecheck; do
  timeout 100 compute-sanitizer --tool $t $BIN/lina_cuda_delta_check --no-time --match "$m" > /tmp/san.log 2>&1
  echo "$m $t rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' /tmp/san.log | tail -1)"
done; done 2>&1 | tee $OUT/sanitize.txt
echo "correctness + times ${SECONDS}s"
setup_verify_repo
for op in chunk_gdn chunk_kda; do
  timeout 150 $BIN/lina verify --op $op --base $(cat /tmp/b/bin/SHA) --base-exe /tmp/b/bin/lina --repo /tmp/vr --modes fwd \
    --shapes B1_T8192_H96_D128,B4_T2048_H16_D128,B8_T1024_H8_D64,B8_T2048_H32_D256 --rounds 2 --json $OUT/verify_${op}_fwd.json > $OUT/verify_$op.log 2>&1
  echo "verify $op rc=$? at ${SECONDS}s"; grep -vE '^round ' $OUT/verify_$op.log | grep -E "geomean|full gate|repeatable|B[0-9]_T|FAIL" | tail -8
done
echo "total ${SECONDS}s"

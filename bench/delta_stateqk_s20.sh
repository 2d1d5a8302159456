#!/usr/bin/env bash
# Twentieth session, one device call: GDN's Q' formed in the state kernel at K <= 128 (kStateQk; the prep reads no q,
# writes no Q', four CTAs per SM at K = 128) against its parent b403601. Forward checks of both builds, kernel-only
# forward times alternating (six shapes, three rounds GDN, one KDA: its kernels are unchanged), the stage split at B1,
# lina verify --modes fwd of chunk_gdn at the opt2 contract cells (full gate included), then memcheck / racecheck /
# initcheck of the new forward on small GDN cases (K = 64, 128, varlen, GVA).
#   carry [".carry/bin.tar.xz", ".carry/base.tar.xz", ".carry/lina.bundle"]; bash bench/delta_stateqk_s20.sh
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
  [ $op = kda ] && [ $r -gt 1 ] && continue
  d=$BIN; [ $b = base ] && d=/tmp/b/bin
  echo "r$r $b $op: $(timeout 90 $d/lina_cuda_delta_check --no-check --op $op 2>&1 | grep ' ms ' | awk '{print $2, $3}' | tr '\n' ';')"
done; done; done 2>&1 | tee $OUT/whole.txt
for b in base new; do
  d=$BIN; [ $b = base ] && d=/tmp/b/bin
  echo "$b gdn B1 stages: $(LINA_DELTA_FWD_STAGES=1 timeout 60 $d/lina_cuda_delta_check --no-check --op gdn --shape 0 2>&1 | grep stages | tail -2 | tr '\n' ';')"
done 2>&1 | tee $OUT/stages.txt
echo "correctness + times ${SECONDS}s"
setup_verify_repo
timeout 200 $BIN/lina verify --op chunk_gdn --base $(cat /tmp/b/bin/SHA) --base-exe /tmp/b/bin/lina --repo /tmp/vr --modes fwd \
  --shapes B1_T8192_H96_D128,B4_T2048_H16_D128,B8_T1024_H8_D64,B8_T2048_H32_D256 --rounds 2 --json $OUT/verify_chunk_gdn_fwd.json > $OUT/verify_chunk_gdn.log 2>&1
echo "verify chunk_gdn rc=$? at ${SECONDS}s"; grep -vE '^round ' $OUT/verify_chunk_gdn.log | grep -E "geomean|full gate|repeatable|B[0-9]_T|FAIL" | tail -8
for m in "gdn T1 H2" "gdn T100 H1 HV4 D64" "gdn T300 varlen H2 HV4 D128"; do for t in memcheck racecheck initcheck; do
  [ $t = initcheck ] && [ "$m" = "gdn T100 H1 HV4 D64" ] && continue
  timeout 100 compute-sanitizer --tool $t $BIN/lina_cuda_delta_check --no-time --match "$m" > /tmp/san.log 2>&1
  echo "$m $t rc=$? $(grep -c ' PASS ' /tmp/san.log) PASS $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' /tmp/san.log | tail -1)"
done; done 2>&1 | tee $OUT/sanitize.txt
echo "total ${SECONDS}s"

#!/usr/bin/env bash
# One device call for the K = 256 backward (seventeenth session, branch bwd-k256): DIR holds new_bwd_check.xz (the
# branch's lina_cuda_delta_bwd_check) and base_bwd_check.xz (main's). The new program's checks (all cases, D256 among
# them), compute-sanitizer memcheck / racecheck / synccheck of the D256 cases, stage times at B8_T2048_H32_D256, then
# kernel-only forward + backward times of both programs in alternating rounds (K <= 128 unchanged?); text to $OUT.
#   bash bench/delta_bwd_k256_ab.sh .carry/s17b
set -u
C=$(cd "${1:?DIR}" && pwd)
cd "$C" && for f in *.xz; do xz -d -k -f "$f"; done; chmod +x *_check
timeout 240 ./new_bwd_check --no-time > $OUT/checks.txt 2>&1
echo "checks rc=$? $(grep -c ' PASS$' $OUT/checks.txt) PASS $(grep -c 'FAIL' $OUT/checks.txt) FAIL"; grep -E 'FAIL|ERROR|D256|K256|ALL CHECKS|FAILED' $OUT/checks.txt | cut -c1-240
for t in memcheck racecheck synccheck; do for m in "gdn T100 H1 HV2 D256" "kda T130 H2 HV2 D256" "kda varlen H1 HV2 D256" "gdn T64 H1 HV1 D256 f32"; do
  timeout 100 compute-sanitizer --tool $t ./new_bwd_check --no-time --small --match "$m" > /tmp/san.log 2>&1
  echo "$t [$m] rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' /tmp/san.log | tail -1)"; grep -m3 -E 'Invalid|Race|Barrier|hazard' /tmp/san.log
done; done 2>&1 | tee $OUT/sanitize.txt
for op in kda gdn; do for sh in 0 5; do echo "stages $op $sh: $(LINA_DELTA_BWD_STAGES=1 timeout 60 ./new_bwd_check --no-check --op $op --shape $sh 2>&1 | grep stages | tail -1)"; done; done 2>&1 | tee $OUT/stages.txt
for r in 1 2; do for b in base new; do echo "== $b"; timeout 150 ./${b}_bwd_check --no-check 2>&1 | grep -E ' ms |unsupported'; done; done 2>&1 | tee $OUT/times.txt
echo "total ${SECONDS}s"

#!/usr/bin/env bash
# Measured on 82ffb0e (the prefetch, reverted after this A/B: grad_k +19 %, chunk_prep +9 % at KDA B1_T8192_H96_D128).
# One device call: chunk_prep_v2's and grad_k_v2's L2 prefetch of the next CTA's rows, on (default) against off
# (LINA_DELTA_BWD_L2PF=0) in one binary: the checks, memcheck / racecheck on two small cases, then stage times and
# kernel-only times at B1_T8192_H96_D128, B2_T16384_H16_D128, B4_T4096_H64_D128 and B8_T2048_H32_D256, both ops,
# two alternating rounds. DIR holds new_bwd_check.xz.
#   bash bench/delta_bwd_l2pf_ab.sh .carry/s18g
set -u
C=$(cd "${1:?DIR}" && pwd)
cd "$C" && xz -d -k -f new_bwd_check.xz && chmod +x new_bwd_check
OUT=/tmp timeout 200 ./new_bwd_check --no-time > $OUT/checks.txt 2>&1
echo "bwd checks rc=$? $(grep -c ' PASS$' $OUT/checks.txt) PASS $(grep -c 'FAIL' $OUT/checks.txt) FAIL"; grep -E 'FAIL|ALL CHECKS' $OUT/checks.txt | cut -c1-200
for t in memcheck racecheck; do for m in "kda varlen" "gdn T100 H1 HV2 D256"; do
  OUT=/tmp timeout 100 compute-sanitizer --tool $t ./new_bwd_check --no-time --small --match "$m" > /tmp/san.log 2>&1
  echo "$t [$m] rc=$? $(grep -c ' PASS$' /tmp/san.log) PASS $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' /tmp/san.log | tail -1)"; done; done 2>&1 | tee $OUT/sanitize.txt
for r in 1 2; do for pf in 0 1; do for sh in 0 1 3 5; do for op in kda gdn; do
  echo "pf$pf $op $sh: $(OUT=/tmp LINA_DELTA_BWD_L2PF=$pf LINA_DELTA_BWD_STAGES=1 timeout 60 ./new_bwd_check --no-check --op $op --shape $sh 2>&1 | grep -E 'stages|_D' | tail -2 | sed -E 's/delta_bwd stages \(ms\): //; s/ +/ /g' | tr '\n' ' ')"
done; done; done; done 2>&1 | tee $OUT/times.txt
echo "total ${SECONDS}s"

#!/usr/bin/env bash
# One device call: the K = 256 fused post_qk (grad_k_v2's CTA pair swapping its row dots) against main (d22dc20's
# kernels). DIR holds new_bwd_check.xz, main_bwd_check.xz and the two delta gate binaries of the new build (xz).
# The new program's checks, both gates' CUDA cases, memcheck / racecheck / synccheck on three D256 cases with G = 1,
# then stage and kernel-only times at B1_T8192_H96_D128 (K = 128: expected unchanged) and B8_T2048_H32_D256 of both
# programs, both ops, two alternating rounds.
#   bash bench/delta_bwd_k256_postqk_ab.sh .carry/s18h
set -u
C=$(cd "${1:?DIR}" && pwd)
cd "$C" && for f in *.xz; do xz -d -k -f "$f"; done; chmod +x *_check lina_chunk_*_gate
OUT=/tmp timeout 200 ./new_bwd_check --no-time > $OUT/checks.txt 2>&1
echo "bwd checks rc=$? $(grep -c ' PASS$' $OUT/checks.txt) PASS $(grep -c 'FAIL' $OUT/checks.txt) FAIL"; grep -E 'FAIL|ALL CHECKS' $OUT/checks.txt | cut -c1-200
for g in kda gdn; do timeout 200 ./lina_chunk_${g}_gate --gtest_filter='*Cuda*' > /tmp/g.log 2>&1; echo "gate $g rc=$? $(grep -E '^\[  (PASSED|FAILED) ' /tmp/g.log | tr '\n' ' ')"; grep -A9 'Bwd.*D256' /tmp/g.log | grep -E 'dq |dk |OK|FAILED' | cut -c1-120; done | tee $OUT/gates.txt
for t in memcheck racecheck synccheck; do for m in "kda T130 H2 HV2 D256" "gdn varlen H2 HV2 D256" "gdn T64 H1 HV1 D256 f32"; do
  OUT=/tmp timeout 100 compute-sanitizer --tool $t ./new_bwd_check --no-time --small --match "$m" > /tmp/san.log 2>&1
  echo "$t [$m] rc=$? $(grep -c ' PASS$' /tmp/san.log) PASS $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' /tmp/san.log | tail -1)"; done; done 2>&1 | tee $OUT/sanitize.txt
for r in 1 2; do for b in main new; do for sh in 0 5; do for op in kda gdn; do
  echo "$b $op $sh: $(OUT=/tmp LINA_DELTA_BWD_STAGES=1 timeout 60 ./${b}_bwd_check --no-check --op $op --shape $sh 2>&1 | grep -E 'stages|_D' | tail -2 | sed -E 's/delta_bwd stages \(ms\): //; s/ +/ /g' | tr '\n' ' ')"
done; done; done; done 2>&1 | tee $OUT/times.txt
echo "total ${SECONDS}s"

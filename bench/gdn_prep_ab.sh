#!/usr/bin/env bash
# A/B of a GDN-prep branch against main (sixteenth session: branches gdn-prep-tma, the q / k loads by TMA, and
# gdn-prep-n128, q k^T and k k^T as one N = 128 wgmma with a balanced epilogue; both compiled, NOT run on a GPU; the
# item's load issue and the epilogue measured 650-1,300 and 2,050 cycles in device call 7). One device call: DIR holds
# xz-compressed lina_cuda_delta_check builds of main (base_fwd_check) and of the branch (new_fwd_check). Forward checks
# (all 29: the GDN cases cover varlen with a zero-length sequence, partial chunks, T = 1, D64 / D256), prep / state
# times alternating (also the one-CTA-per-head prep), whole-forward timing, memcheck / racecheck / synccheck on the GDN
# cases; text to $OUT.
#   build: ninja -C build tests/lina_cuda_delta_check in each tree, strip, xz into DIR
#   bash bench/gdn_prep_ab.sh .carry/DIR
set -u
C=$(cd "${1:?DIR}" && pwd)
cd "$C" && for f in *.xz; do xz -d -k -f "$f"; done; chmod +x *_check
timeout 120 ./new_fwd_check --no-time > /tmp/ck.log 2>&1; echo "check new rc=$? $(grep -c ' PASS ' /tmp/ck.log) PASS $(grep -c ' FAIL ' /tmp/ck.log) FAIL" | tee $OUT/checks.txt
grep -E '^gdn|FAIL|ERROR' /tmp/ck.log | sed -E 's/ +bits.*//' | tee -a $OUT/checks.txt
for r in 1 2; do for b in base new; do for sh in 0 3; do
  echo "$b shape $sh: $(LINA_DELTA_FWD_STAGES=1 timeout 60 ./${b}_fwd_check --no-check --op gdn --shape $sh 2>&1 | grep stages | tail -3 | sed 's/delta_fwd stages (ms)://' | tr '\n' ';')"
  echo "$b wgseq shape $sh: $(LINA_DELTA_GDN_PREP=wgseq LINA_DELTA_FWD_STAGES=1 timeout 60 ./${b}_fwd_check --no-check --op gdn --shape $sh 2>&1 | grep stages | tail -1 | sed 's/delta_fwd stages (ms)://')"
done; done; done 2>&1 | tee $OUT/stages.txt
for r in 1 2 3; do for b in base new; do
  echo "$b: $(timeout 90 ./${b}_fwd_check --no-check --op gdn 2>&1 | grep ' ms ' | awk '{print $2, $3}' | tr '\n' ';')"
done; done 2>&1 | tee $OUT/whole.txt
for m in "gdn T1 H2" "gdn T100 H1 HV4 D64" "gdn T300 varlen H2 HV4 D128" "gdn T4500 varlen" "gdn T300 varlen H1 HV2 D256"; do for t in memcheck racecheck synccheck; do
  timeout 150 compute-sanitizer --tool $t ./new_fwd_check --no-time --match "$m" > /tmp/san.log 2>&1
  echo "$m $t rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' /tmp/san.log | tail -1)"
done; done 2>&1 | tee $OUT/sanitize.txt
echo "total ${SECONDS}s"

#!/usr/bin/env bash
# One device call for the seventeenth session's start: the GDN prep variants of the sixteenth session's branches
# (compiled, not run: gdn-prep-tma 0cd94f9, gdn-prep-n128 c048587, gdn-prep-tma-n128 e7eed78) against main, each a
# lina_cuda_delta_check build whose chunk_delta_fwd.cu object comes from its branch (the rest from main 6900c66):
# DIR holds base / tma / n128 / both _fwd_check.xz (.carry/s17a was built that way). Forward checks of every variant
# (29 cases each), compute-sanitizer memcheck / racecheck / synccheck of the GDN cases per variant, then prep / state
# times (persistent and one CTA per head) and whole-forward GDN timing in alternating rounds; text to $OUT.
#   bash bench/gdn_prep_variants_ab.sh .carry/s17a
set -u
C=$(cd "${1:?DIR}" && pwd)
cd "$C" && for f in *.xz; do xz -d -k -f "$f"; done; chmod +x *_check
V="base tma n128 both"
for b in $V; do
  timeout 120 ./${b}_fwd_check --no-time > /tmp/ck_$b.log 2>&1
  echo "check $b rc=$? $(grep -c ' PASS ' /tmp/ck_$b.log) PASS $(grep -c ' FAIL ' /tmp/ck_$b.log) FAIL"; grep -E ' FAIL |ERROR' /tmp/ck_$b.log | head -5
done 2>&1 | tee $OUT/checks.txt
for b in tma n128 both; do for m in "gdn T1 H2" "gdn T100 H1 HV4 D64" "gdn T300 varlen H2 HV4 D128" "gdn T300 varlen H1 HV2 D256"; do for t in memcheck racecheck synccheck; do
  timeout 100 compute-sanitizer --tool $t ./${b}_fwd_check --no-time --match "$m" > /tmp/san.log 2>&1
  echo "$b [$m] $t rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' /tmp/san.log | tail -1)"
done; done; done 2>&1 | tee $OUT/sanitize.txt
for r in 1 2; do for b in $V; do for sh in 0 3; do
  echo "$b shape $sh: $(LINA_DELTA_FWD_STAGES=1 timeout 60 ./${b}_fwd_check --no-check --op gdn --shape $sh 2>&1 | grep stages | tail -3 | sed 's/delta_fwd stages (ms)://' | tr '\n' ';')"
done
  echo "$b wgseq shape 0: $(LINA_DELTA_GDN_PREP=wgseq LINA_DELTA_FWD_STAGES=1 timeout 60 ./${b}_fwd_check --no-check --op gdn --shape 0 2>&1 | grep stages | tail -1 | sed 's/delta_fwd stages (ms)://')"
done; done 2>&1 | tee $OUT/stages.txt
for r in 1 2; do for b in $V; do
  echo "$b: $(timeout 90 ./${b}_fwd_check --no-check --op gdn 2>&1 | grep ' ms ' | awk '{print $2, $3}' | tr '\n' ';')"
done; done 2>&1 | tee $OUT/whole.txt
echo "total ${SECONDS}s"

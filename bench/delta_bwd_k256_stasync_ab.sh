#!/usr/bin/env bash
# One device call: the K = 256 state passes' partial-sum exchange by st.async (branch bwd-k256-stasync) against main's
# release / acquire mbarrier arrivals (MEMBAR.ALL.GPU every chunk). DIR holds new_bwd_check.xz and main_bwd_check.xz.
# The new program's checks (all), memcheck / racecheck / synccheck of two D256 cases, then stage times and kernel-only
# times at B8_T2048_H32_D256 of both programs, alternating.
#   bash bench/delta_bwd_k256_stasync_ab.sh .carry/s17c
set -u
C=$(cd "${1:?DIR}" && pwd)
cd "$C" && for f in *.xz; do xz -d -k -f "$f"; done; chmod +x *_check
timeout 200 ./new_bwd_check --no-time > $OUT/checks.txt 2>&1
echo "bwd checks rc=$? $(grep -c ' PASS$' $OUT/checks.txt) PASS $(grep -c 'FAIL' $OUT/checks.txt) FAIL"; grep -E 'FAIL|ERROR|ALL CHECKS|FAILED' $OUT/checks.txt | cut -c1-200
for t in memcheck racecheck synccheck; do for m in "gdn T100 H1 HV2 D256" "kda T130 H2 HV2 D256"; do
  timeout 100 compute-sanitizer --tool $t ./new_bwd_check --no-time --small --match "$m" > /tmp/san.log 2>&1
  echo "$t [$m] rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' /tmp/san.log | tail -1)"; done; done 2>&1 | tee $OUT/sanitize.txt
for r in 1 2; do for b in main new; do for op in kda gdn; do
  echo "$b $op: $(LINA_DELTA_BWD_STAGES=1 timeout 60 ./${b}_bwd_check --no-check --op $op --shape 5 2>&1 | grep -E 'stages|D256' | tail -2 | tr '\n' ' ')"
done; done; done 2>&1 | tee $OUT/times.txt
echo "total ${SECONDS}s"

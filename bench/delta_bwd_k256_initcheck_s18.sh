#!/usr/bin/env bash
# One device call: compute-sanitizer initcheck and synccheck on the bf16 D256 backward cases (the eighteenth session's
# inline q / k rows; memcheck / racecheck ran in the record's call). DIR holds new_bwd_check.xz.
#   bash bench/delta_bwd_k256_initcheck_s18.sh .carry/s18e
set -u
C=$(cd "${1:?DIR}" && pwd)
cd "$C" && xz -d -k -f new_bwd_check.xz && chmod +x new_bwd_check
for t in initcheck synccheck; do for m in "gdn T100 H1 HV2 D256" "kda T130 H2 HV2 D256" "kda T90 H1 HV2 D256 no-l2" "kda varlen H1 HV2 D256 given m1000"; do
  OUT=/tmp timeout 120 compute-sanitizer --tool $t ./new_bwd_check --no-time --small --match "$m" > /tmp/s.log 2>&1
  echo "$t [$m] rc=$? $(grep -c ' PASS$' /tmp/s.log) PASS $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' /tmp/s.log | tail -1)"; done; done 2>&1 | tee $OUT/sanitize.txt
echo "total ${SECONDS}s"

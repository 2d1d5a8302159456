#!/usr/bin/env bash
# One device call: both delta gates' CUDA cases (the eighteenth session added two D256 cases to each), then
# compute-sanitizer memcheck / racecheck on the D256 cases. DIR holds the two gate binaries (xz).
#   bash bench/delta_gate_d256_s18.sh .carry/s18f
set -u
C=$(cd "${1:?DIR}" && pwd)
cd "$C" && for f in *.xz; do xz -d -k -f "$f"; done; chmod +x lina_chunk_*_gate
for g in kda gdn; do
  timeout 200 ./lina_chunk_${g}_gate --gtest_filter='*Cuda*' > $OUT/gate_$g.txt 2>&1
  echo "gate $g rc=$? $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' $OUT/gate_$g.txt | tr '\n' ' ')"; grep -E 'FAILED  \]|D256' $OUT/gate_$g.txt | grep -E 'OK|FAILED' | cut -c1-160
  for t in memcheck racecheck; do
    timeout 150 compute-sanitizer --tool $t ./lina_chunk_${g}_gate --gtest_filter='*Cuda*D256*' > /tmp/s.log 2>&1
    echo "$t $g D256 rc=$? $(grep -E '^\[  PASSED' /tmp/s.log) $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' /tmp/s.log | tail -1)"
  done
done 2>&1 | tee $OUT/summary.txt
echo "total ${SECONDS}s"

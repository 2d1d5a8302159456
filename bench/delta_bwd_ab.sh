#!/usr/bin/env bash
# One device call's A/B of the delta backward (the fourteenth session's calls 2 and 4): DIR holds xz-compressed,
# stripped base_check / new_check (lina_cuda_delta_bwd_check of two commits) and kda_gate / gdn_gate of the new
# commit. Checks, both gates' CUDA cases, stage times and the whole backward alternating base / new, and
# compute-sanitizer (racecheck, initcheck, memcheck) on --small; text to $OUT.
#   bash bench/delta_bwd_ab.sh .carry/s14d
set -u
C=$(cd "${1:?DIR}" && pwd)
cd "$C" && for f in *.xz; do xz -d -k -f "$f"; done; chmod +x *_check *_gate
OUT=/tmp timeout 150 ./new_check --no-time > $OUT/check_new.log 2>&1; echo "check new rc=$? $(grep -c ' PASS$' $OUT/check_new.log) PASS $(grep -c ' FAIL$' $OUT/check_new.log) FAIL"
grep -E "FAIL|worst" $OUT/check_new.log | head -12
timeout 200 ./kda_gate --gtest_filter='*Cuda*' > /tmp/gk.log 2>&1 &
timeout 200 ./gdn_gate --gtest_filter='*Cuda*' > /tmp/gg.log 2>&1 &
st() { OUT=/tmp LINA_DELTA_BWD_STAGES=1 timeout 30 ./$1 --no-check --op $2 --shape $3 2>&1 | grep -E 'stages' | tail -1 | sed 's/delta_bwd stages (ms)://; s/post_qk.*//'; }
wait
for f in gk gg; do echo "gate $f: $(grep -E '^\[  (PASSED|FAILED) ' /tmp/$f.log | tr '\n' ' ')"; grep -E '^\[  FAILED  \]' /tmp/$f.log | head -5; done | tee $OUT/gates.txt
for r in 1 2; do for b in base_check new_check; do for op in kda gdn; do for sh in 0 3; do echo "$b $op $sh: $(st $b $op $sh)"; done; done; done; done | tee $OUT/stages.txt
for b in base_check new_check base_check new_check; do echo "$b: $(OUT=/tmp timeout 90 ./$b --no-check 2>&1 | grep ' ms ' | grep -oE '^(kda|gdn) +B[0-9_TDH]+ .*bwd +[0-9.]+ ms' | sed -E 's/ +fwd +[0-9.]+ ms//; s/fwd\+bwd.*//' | tr '\n' ';')"; done | tee $OUT/whole.txt
for t in racecheck initcheck memcheck; do timeout 150 compute-sanitizer --tool $t ./new_check --small --no-time > /tmp/san_$t.log 2>&1; echo "$t rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' /tmp/san_$t.log | tail -1)"; done | tee $OUT/sanitize.txt
echo "total ${SECONDS}s"

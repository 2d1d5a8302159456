#!/bin/bash
# dbwd-grad verification (branch dbwd-grad): grad_v2 / grad_k_v2 (stages D1 / D2 of the delta backward)
# and prep_qk_v2 / post_qk_v2 (P / E1) against the checks, the gates' CUDA cases, memcheck + racecheck,
# then timings of the whole backward with the knobs unset (v2, the default) and "old"
# (LINA_DELTA_BWD_GRAD=old LINA_DELTA_BWD_QK=old: grad_v / grad_k_tc / prep_qk / post_qk), same
# binary, plus per-stage times (LINA_DELTA_BWD_STAGES=1) at KDA shape 0 (B1_T8192_H96_D128), 4
# (B8_T1024_H8_D64) and GDN shape 0. LINA_DELTA_BWD_GRAD=v3 (grad_v3: two CTAs per SM over K halves,
# opt-in) is checked (checks, memcheck, racecheck) and timed per stage too.
# Call: run tool, command "bash .carry/dbwd-grad/run.sh", carry [".carry/dbwd-grad"], timeout_s 180.
# Tracked copy of .carry/dbwd-grad/run.sh (B = the folder holding the xz-compressed binaries).
# Returns checks.txt, gates.txt, sanitize.txt, time.txt, stages.txt under $OUT. Optional steps are
# skipped past 165 s; the compact summary goes to stdout.
B=${B:-.carry/dbwd-grad}; L=$OUT; T=/tmp/dbwdg; mkdir -p $T
(cd $B && xz -d -f -T4 *.xz && chmod +x lina_*)
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
CK=$B/lina_cuda_delta_bwd_check
# correctness, in parallel (the checks' host references use the CPU; the sanitizers and gates run v2)
OUT=$T timeout 70 $CK --no-time > $T/check_v2.txt 2>&1 &
OUT=$T LINA_DELTA_BWD_GRAD=old LINA_DELTA_BWD_QK=old timeout 70 $CK --no-time > $T/check_old.txt 2>&1 &
OUT=$T LINA_DELTA_BWD_GRAD=v3 timeout 70 $CK --no-time > $T/check_v3.txt 2>&1 &
timeout 70 $B/lina_chunk_kda_gate --gtest_filter='*Cuda*' > $T/gate_kda.txt 2>&1 &
timeout 70 $B/lina_chunk_gdn_gate --gtest_filter='*Cuda*' > $T/gate_gdn.txt 2>&1 &
OUT=$T timeout 85 $CS --tool memcheck $CK --small --no-time > $T/memcheck.txt 2>&1 &
OUT=$T timeout 85 $CS --tool racecheck $CK --small --no-time > $T/racecheck.txt 2>&1 &
OUT=$T LINA_DELTA_BWD_GRAD=v3 timeout 85 $CS --tool memcheck $CK --small --no-time > $T/memcheck_v3.txt 2>&1 &
OUT=$T LINA_DELTA_BWD_GRAD=v3 timeout 85 $CS --tool racecheck $CK --small --no-time > $T/racecheck_v3.txt 2>&1 &
wait
for f in check_v2 check_old check_v3; do echo "=== $f"; cat $T/$f.txt; done > $L/checks.txt
for f in gate_kda gate_gdn; do echo "=== $f"; cat $T/$f.txt; done > $L/gates.txt
for f in memcheck racecheck memcheck_v3 racecheck_v3; do echo "=== $f"; tail -6 $T/$f.txt; done > $L/sanitize.txt
left() { echo $(( 165 - SECONDS )); }
# timings, serial (the GPU to itself); priority order, each bounded by the time left
tm() {  # name grad-value timeout args...
  local n=$1 v=$2 to=$3; shift 3
  local l=$(left); [ $l -lt 5 ] && { echo "=== $n skipped (time)"; return; }; [ $to -gt $l ] && to=$l
  echo "=== $n (LINA_DELTA_BWD_GRAD, _QK = $v) $*"
  OUT=$T LINA_DELTA_BWD_GRAD=$v LINA_DELTA_BWD_QK=$v timeout $to $CK --no-check "$@" 2>&1; echo "rc=$?"
}
st() {
  local n=$1 v=$2; shift 2
  local l=$(left); [ $l -lt 5 ] && { echo "=== $n skipped (time)"; return; }; local to=10; [ $to -gt $l ] && to=$l
  echo "=== $n (LINA_DELTA_BWD_GRAD, _QK = $v) $*"
  OUT=$T LINA_DELTA_BWD_GRAD=$v LINA_DELTA_BWD_QK=$v LINA_DELTA_BWD_STAGES=1 timeout $to $CK --no-check "$@" 2>&1
}
st "stages v2 kda 0" "" --op kda --shape 0 >> $L/stages.txt
st "stages old kda 0" old --op kda --shape 0 >> $L/stages.txt
st "stages v3 kda 0" v3 --op kda --shape 0 >> $L/stages.txt
st "stages v2 kda 4" "" --op kda --shape 4 >> $L/stages.txt
st "stages old kda 4" old --op kda --shape 4 >> $L/stages.txt
st "stages v3 kda 4" v3 --op kda --shape 4 >> $L/stages.txt
st "stages v2 gdn 0" "" --op gdn --shape 0 >> $L/stages.txt
st "stages old gdn 0" old --op gdn --shape 0 >> $L/stages.txt
st "stages v3 gdn 0" v3 --op gdn --shape 0 >> $L/stages.txt
tm "timing v2" "" 30 >> $L/time.txt
tm "timing old" old 30 >> $L/time.txt
echo "total ${SECONDS}s" >> $L/time.txt
for f in check_v2 check_old check_v3; do  # compact: counts, failures, the summary line (details in checks.txt)
  echo "=== $f: $(grep -c ' PASS$' $T/$f.txt) PASS, $(grep -c ' FAIL$' $T/$f.txt) FAIL"
  grep -h " FAIL$\|ERROR\|(nan)\|ALL CHECKS\|FAILED" $T/$f.txt | cut -c1-200 | head -8
done
grep -h "=== \|hazard\|ERROR SUMMARY\|RACECHECK" $L/sanitize.txt | cut -c1-200
grep -h "=== \|PASSED\|FAILED" $L/gates.txt | head
grep -h "=== \|bwd \|rc=\|total" $L/time.txt | cut -c1-220
# per stage run: its last stage line (every timed call prints one)
awk '/^===/{if(l)print l; print; l=""} /delta_bwd stages/{l=$0} END{if(l)print l}' $L/stages.txt | cut -c1-240

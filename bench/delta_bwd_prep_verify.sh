#!/bin/bash
# Historical (eighth session, device call 3): LINA_DELTA_BWD_PREP and chunk_prep_tc were removed after this
# run measured chunk_prep_v2 faster at both K; today the knob is ignored and every variant runs v2.
# dbwd-prep verification (branch dbwd-prep): chunk_prep_v2 (stage A of the delta backward) against the
# checks, the gates' CUDA cases, memcheck + racecheck, then timings of the whole backward with
# LINA_DELTA_BWD_PREP unset (v2 at K = 128, SIMT at K = 64), =old (the previous chunk_prep_tc / SIMT) and
# =v2 (v2 at K = 64 too), all in the same binary, plus per-stage times.
# Call: run tool, command "bash .carry/dbwd-prep/run.sh", carry [".carry/dbwd-prep"], timeout_s 180.
# Tracked copy of .carry/dbwd-prep/run.sh (B = the folder holding the xz-compressed binaries).
# Returns checks.txt, gates.txt, sanitize.txt, time.txt, stages.txt under $OUT. Optional steps are
# skipped past 150 s so the whole script stays under ~170 s.
B=${B:-.carry/dbwd-prep}; L=$OUT; T=/tmp/dbwdp; mkdir -p $T
(cd $B && xz -d -f -T4 *.xz && chmod +x lina_*)
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
CK=$B/lina_cuda_delta_bwd_check
# correctness, in parallel (the checks' host references use the CPU; the sanitizers run v2 at both K)
OUT=$T timeout 70 $CK --no-time > $T/check_v2.txt 2>&1 &
OUT=$T LINA_DELTA_BWD_PREP=v2 timeout 70 $CK --no-time > $T/check_v2all.txt 2>&1 &
OUT=$T LINA_DELTA_BWD_PREP=old timeout 70 $CK --no-time > $T/check_old.txt 2>&1 &
timeout 70 $B/lina_chunk_kda_gate --gtest_filter='*Cuda*' > $T/gate_kda.txt 2>&1 &
timeout 70 $B/lina_chunk_gdn_gate --gtest_filter='*Cuda*' > $T/gate_gdn.txt 2>&1 &
OUT=$T LINA_DELTA_BWD_PREP=v2 timeout 70 $CS --tool memcheck $CK --small --no-time > $T/memcheck.txt 2>&1 &
OUT=$T LINA_DELTA_BWD_PREP=v2 timeout 70 $CS --tool racecheck $CK --small --no-time > $T/racecheck.txt 2>&1 &
wait
for f in check_v2 check_v2all check_old; do echo "=== $f"; cat $T/$f.txt; done > $L/checks.txt
for f in gate_kda gate_gdn; do echo "=== $f"; cat $T/$f.txt; done > $L/gates.txt
for f in memcheck racecheck; do echo "=== $f (LINA_DELTA_BWD_PREP=v2)"; tail -6 $T/$f.txt; done > $L/sanitize.txt
left() { echo $(( 165 - SECONDS )); }
# timings, serial (the GPU to itself); priority order, each bounded by the time left
tm() {  # name prep-value timeout args...
  local n=$1 v=$2 to=$3; shift 3
  local l=$(left); [ $l -lt 5 ] && { echo "=== $n skipped (time)"; return; }; [ $to -gt $l ] && to=$l
  echo "=== $n (LINA_DELTA_BWD_PREP=$v) $*"
  OUT=$T LINA_DELTA_BWD_PREP=$v timeout $to $CK --no-check "$@" 2>&1; echo "rc=$?"
}
st() {
  local n=$1 v=$2; shift 2
  local l=$(left); [ $l -lt 5 ] && { echo "=== $n skipped (time)"; return; }; local to=10; [ $to -gt $l ] && to=$l
  echo "=== $n (LINA_DELTA_BWD_PREP=$v) $*"
  OUT=$T LINA_DELTA_BWD_PREP=$v LINA_DELTA_BWD_STAGES=1 timeout $to $CK --no-check "$@" 2>&1
}
tm "timing default" "" 35 >> $L/time.txt
tm "timing old" old 35 >> $L/time.txt
st "stages default kda 0" "" --op kda --shape 0 >> $L/stages.txt
st "stages old kda 0" old --op kda --shape 0 >> $L/stages.txt
st "stages default gdn 0" "" --op gdn --shape 0 >> $L/stages.txt
st "stages old gdn 0" old --op gdn --shape 0 >> $L/stages.txt
st "stages v2 kda 4" v2 --op kda --shape 4 >> $L/stages.txt
st "stages default kda 4" "" --op kda --shape 4 >> $L/stages.txt
tm "timing v2 shape 4" v2 12 --shape 4 >> $L/time.txt
echo "total ${SECONDS}s" >> $L/time.txt
for f in check_v2 check_v2all check_old; do  # compact: counts, failures, the summary line (details in checks.txt)
  echo "=== $f: $(grep -c ' PASS$' $T/$f.txt) PASS, $(grep -c ' FAIL$' $T/$f.txt) FAIL"
  grep -h " FAIL$\|ERROR\|(nan)\|ALL CHECKS\|FAILED" $T/$f.txt | cut -c1-200 | head -8
done
grep -h "=== \|hazard\|ERROR SUMMARY\|RACECHECK" $L/sanitize.txt | cut -c1-200
grep -h "=== \|PASSED\|FAILED" $L/gates.txt | head
grep -h "=== \|bwd \|rc=\|total" $L/time.txt | cut -c1-220
# per stage run: its last stage line (every timed call prints one)
awk '/^===/{if(l)print l; print; l=""} /delta_bwd stages/{l=$0} END{if(l)print l}' $L/stages.txt | cut -c1-240

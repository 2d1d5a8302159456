#!/bin/bash
# dbwd-state verification (branch dbwd-state): the wgmma state passes of the delta backward
# (state_fwd_wg_kernel / state_bwd_wg_kernel, ops/delta/cuda/delta_bwd_state_wg.cuh) against the checks,
# the gates' CUDA cases, memcheck + racecheck, then timings of the whole backward with the new kernels
# and with LINA_DELTA_BWD_STATE=mma (the old mma.sync state passes) in the same binary, and per-stage
# times (LINA_DELTA_BWD_STAGES=1) of both at KDA shape 0 (B1_T8192_H96_D128), shape 4 (B8_T1024_H8_D64)
# and GDN shape 0.
# Call: run tool, command "bash .carry/dbwd-state/run.sh", carry [".carry/dbwd-state"], timeout_s 180.
# Tracked copy of .carry/dbwd-state/run.sh (B = the folder holding the xz-compressed binaries).
# Returns checks.txt, gates.txt, sanitize.txt, time.txt, stages.txt under $OUT (worst case ~167 s).
B=${B:-.carry/dbwd-state}; L=$OUT; T=/tmp/dbwds; mkdir -p $T
(cd $B && xz -d -f -T4 *.xz && chmod +x lina_*)
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
# correctness, in parallel
OUT=$T timeout 75 $B/lina_cuda_delta_bwd_check --no-time > $T/check_wg.txt 2>&1 &
OUT=$T LINA_DELTA_BWD_STATE=mma timeout 75 $B/lina_cuda_delta_bwd_check --no-time > $T/check_mma.txt 2>&1 &
timeout 75 $B/lina_chunk_kda_gate --gtest_filter='*Cuda*' > $T/gate_kda.txt 2>&1 &
timeout 75 $B/lina_chunk_gdn_gate --gtest_filter='*Cuda*' > $T/gate_gdn.txt 2>&1 &
OUT=$T timeout 75 $CS --tool memcheck $B/lina_cuda_delta_bwd_check --small --no-time > $T/memcheck.txt 2>&1 &
OUT=$T timeout 75 $CS --tool racecheck $B/lina_cuda_delta_bwd_check --small --no-time > $T/racecheck.txt 2>&1 &
wait
for f in check_wg check_mma; do echo "=== $f"; cat $T/$f.txt; done > $L/checks.txt
for f in gate_kda gate_gdn; do echo "=== $f"; cat $T/$f.txt; done > $L/gates.txt
for f in memcheck racecheck; do echo "=== $f"; tail -8 $T/$f.txt; done > $L/sanitize.txt
# timings, serial (the GPU to itself)
for v in wg:wg mma:mma; do
  n=${v%%:*}; s=${v#*:}
  echo "=== timing $n" >> $L/time.txt
  OUT=$T LINA_DELTA_BWD_STATE=$s timeout 28 $B/lina_cuda_delta_bwd_check --no-check >> $L/time.txt 2>&1; echo "rc=$?" >> $L/time.txt
  for a in "kda 0" "kda 4" "gdn 0"; do
    echo "=== stages $n $a" >> $L/stages.txt
    OUT=$T LINA_DELTA_BWD_STATE=$s LINA_DELTA_BWD_STAGES=1 timeout 6 $B/lina_cuda_delta_bwd_check --no-check --op ${a% *} --shape ${a#* } >> $L/stages.txt 2>&1
  done
done
grep -h "=== \|FAIL\|PASS\|hazard\|ERROR SUMMARY\|RACECHECK\|refused" $L/checks.txt $L/sanitize.txt | cut -c1-200 | head -50
grep -h "=== \|PASSED\|FAILED" $L/gates.txt | head
grep -h "=== \|bwd \|stages" $L/time.txt $L/stages.txt | cut -c1-220 | awk '/=== stages/{print; n=0; next} /delta_bwd stages/{if (n++ < 2) print; next} {print}'

#!/bin/bash
# dbwd-next verification (branch dbwd-next): tensor-core chunk_prep / grad_k against the checks, the
# gates' CUDA cases, memcheck + racecheck, then timings of the whole backward with the new kernels and
# with LINA_DELTA_BWD_SIMT=1 (the old SIMT chunk_prep / grad_k) in the same binary.
# Call: run tool, command "bash .carry/dbwd-next/run.sh", carry [".carry/dbwd-next"], timeout_s 180.
# Tracked copy of .carry/dbwd-next/run.sh (B = the folder holding the xz-compressed binaries).
# Returns checks.txt, gates.txt, sanitize.txt, time.txt, stages.txt under $OUT.
B=${B:-.carry/dbwd-next}; L=$OUT; T=/tmp/dbwdn; mkdir -p $T
(cd $B && xz -d -f -T4 *.xz && chmod +x lina_*)
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
# correctness, in parallel (each ~30-60 s alone)
OUT=$T timeout 75 $B/lina_cuda_delta_bwd_check --no-time > $T/check_tc.txt 2>&1 &
OUT=$T LINA_DELTA_BWD_SIMT=1 timeout 75 $B/lina_cuda_delta_bwd_check --no-time > $T/check_simt.txt 2>&1 &
timeout 75 $B/lina_chunk_kda_gate --gtest_filter='*Cuda*' > $T/gate_kda.txt 2>&1 &
timeout 75 $B/lina_chunk_gdn_gate --gtest_filter='*Cuda*' > $T/gate_gdn.txt 2>&1 &
OUT=$T timeout 75 $CS --tool memcheck $B/lina_cuda_delta_bwd_check --small --no-time > $T/memcheck.txt 2>&1 &
OUT=$T timeout 75 $CS --tool racecheck $B/lina_cuda_delta_bwd_check --small --no-time > $T/racecheck.txt 2>&1 &
wait
for f in check_tc check_simt; do echo "=== $f"; cat $T/$f.txt; done > $L/checks.txt
for f in gate_kda gate_gdn; do echo "=== $f"; cat $T/$f.txt; done > $L/gates.txt
for f in memcheck racecheck; do echo "=== $f"; tail -6 $T/$f.txt; done > $L/sanitize.txt
# timings, serial (the GPU to itself)
for v in tc:0 simt:1; do
  n=${v%%:*}; s=${v#*:}
  echo "=== timing $n" >> $L/time.txt
  OUT=$T LINA_DELTA_BWD_SIMT=$s timeout 35 $B/lina_cuda_delta_bwd_check --no-check >> $L/time.txt 2>&1; echo "rc=$?" >> $L/time.txt
  echo "=== stages $n" >> $L/stages.txt
  OUT=$T LINA_DELTA_BWD_SIMT=$s LINA_DELTA_BWD_STAGES=1 timeout 10 $B/lina_cuda_delta_bwd_check --no-check --op kda --shape 0 >> $L/stages.txt 2>&1
  OUT=$T LINA_DELTA_BWD_SIMT=$s LINA_DELTA_BWD_STAGES=1 timeout 10 $B/lina_cuda_delta_bwd_check --no-check --op kda --shape 4 >> $L/stages.txt 2>&1
done
grep -h "=== \|FAIL\|PASS\|hazard\|ERROR SUMMARY\|RACECHECK\|refused" $L/checks.txt $L/sanitize.txt | cut -c1-200 | head -40
grep -h "=== \|PASSED\|FAILED" $L/gates.txt | head
grep -h "=== \|bwd \|stages" $L/time.txt $L/stages.txt | cut -c1-200

#!/usr/bin/env bash
# Tracked copy of .carry/s9h/run.sh. Call: run tool, command "bash .carry/s9h/run.sh", carry [".carry/bin.tar.xz", ".carry/s9h"], timeout_s 200.
# s9h: sanitizers at the final HEAD's binaries (.carry/bin.tar.xz, 7ef94ab): racecheck, memcheck and
# initcheck of the delta forward check program (all 25 cases incl. multi-item) and of both gates' CUDA
# forward cases.
set -u
R=$PWD; mkdir -p /tmp/l && tar -xJf $R/.carry/bin.tar.xz -C /tmp/l; BIN=/tmp/l/bin
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
for t in racecheck memcheck initcheck; do
  OUT=/tmp timeout 200 $CS --tool $t $BIN/lina_cuda_delta_check --no-time > /tmp/ck_$t.txt 2>&1 &
  for op in kda gdn; do timeout 150 $CS --tool $t $BIN/lina_chunk_${op}_gate --gtest_filter='*Cuda*Fwd*' > /tmp/g_${op}_$t.txt 2>&1 & done
done
wait
for t in racecheck memcheck initcheck; do
  echo "=== check program $t: $(grep -c ' PASS' /tmp/ck_$t.txt) PASS; $(grep 'ALL CHECKS\|FAILED' /tmp/ck_$t.txt | head -1); $(tail -1 /tmp/ck_$t.txt)"
  for op in kda gdn; do echo "=== gate $op $t: $(grep '^\[  PASSED\|^\[  FAILED' /tmp/g_${op}_$t.txt | head -1); $(tail -1 /tmp/g_${op}_$t.txt)"; done
done | tee $OUT/sanitize.txt

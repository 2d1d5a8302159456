#!/usr/bin/env bash
# The sixteenth session's record (the forward changed: the GDN prep on one warpgroup, the two-level inverse merges).
# Run on the device from the repository root with the binaries at HEAD (.carry/bin.tar.xz), the base lina
# (.carry/base.tar.xz: 5a668b2, the fifteenth session's start, whose forward, common, harness and CLI sources equal the session start
# dc1ec4a's), a bundle of the repository and FLA's wheel: GPU unit tests, both gates' CUDA cases, the delta forward and
# backward checks, forward sanitizers (memcheck, racecheck, synccheck, initcheck), prep / state times, kernel-only
# forward times, lina verify of both forwards against the base, then chunk_gdn / chunk_kda forward vs FLA 0.6.0
# (do_bench timer and GPU-only column, same process, FLA's autotune from scratch) at the six shapes and the varlen set.
#   bash bench/delta_record_s16.sh   carry [".carry/bin.tar.xz", ".carry/base.tar.xz", ".carry/lina.bundle", ".whl"]
set -u
R=$PWD
mkdir -p /tmp/l /tmp/b && tar -xJf $R/.carry/bin.tar.xz -C /tmp/l && tar -xJf $R/.carry/base.tar.xz -C /tmp/b
BIN=/tmp/l/bin; C=$OUT/correct.txt
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,driver_version,memory.total --format=csv,noheader | tee $OUT/machine.txt
echo "lina $(cat $BIN/SHA), base $(cat /tmp/b/bin/SHA)" | tee $C
LD_LIBRARY_PATH=$BIN timeout 150 $BIN/lina_unit_tests --gtest_filter='*Cuda*' --gtest_brief=1 > /tmp/unit.log 2>&1 &
timeout 150 $BIN/lina_chunk_kda_gate --gtest_filter='*Cuda*' > /tmp/gk.log 2>&1 &
timeout 150 $BIN/lina_chunk_gdn_gate --gtest_filter='*Cuda*' > /tmp/gg.log 2>&1 &
OUT=/tmp timeout 150 $BIN/lina_cuda_delta_bwd_check --no-time > /tmp/ck.log 2>&1 &
OUT=/tmp timeout 150 $BIN/lina_cuda_delta_check --no-time > /tmp/fck.log 2>&1 &
(for t in memcheck racecheck synccheck initcheck; do for m in "gdn T300 varlen H2 HV4 D128" "gdn T100 H1 HV4 D64" "gdn T300 varlen H1 HV2 D256" "kda T300 varlen H2 HV4 D128 lb"; do
   OUT=/tmp timeout 100 compute-sanitizer --tool $t $BIN/lina_cuda_delta_check --no-time --match "$m" > /tmp/fsan.log 2>&1
   echo "fwd $t [$m] rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' /tmp/fsan.log | tail -1)"; done; done > /tmp/san.txt) &
wait
{ echo "unit *Cuda*: $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' /tmp/unit.log | tr '\n' ' ')"
  for f in gk gg; do echo "gate $f: $(grep -E '^\[  (PASSED|FAILED) ' /tmp/$f.log | tr '\n' ' ')"; done
  echo "delta_bwd_check: $(grep -c ' PASS$' /tmp/ck.log) PASS, $(grep -c ' FAIL$' /tmp/ck.log) FAIL; $(grep 'ALL CHECKS\|FAILED' /tmp/ck.log)"
  echo "delta_check (forward): $(grep -c '  PASS ' /tmp/fck.log) PASS; $(tail -1 /tmp/fck.log)"
  cat /tmp/san.txt
  for op in gdn kda; do for sh in 0 1 2 3 4 5; do echo "fwd stages $op $sh $(OUT=/tmp LINA_DELTA_FWD_STAGES=1 timeout 30 $BIN/lina_cuda_delta_check --no-check --op $op --shape $sh 2>&1 | grep stages | tail -1)"; done; done
  for r in 1 2; do OUT=/tmp timeout 60 $BIN/lina_cuda_delta_check --no-check 2>&1 | grep " ms "; done
} >> $C 2>&1
cp /tmp/fck.log $OUT/delta_check.log
head -14 $C
echo "correctness ${SECONDS}s"
rm -rf /tmp/vr && git clone -q $R/.carry/lina.bundle /tmp/vr
v() {  # op tag
  timeout 120 $BIN/lina verify --op $1 --base $(cat /tmp/b/bin/SHA) --base-exe /tmp/b/bin/lina --repo /tmp/vr --modes fwd --shapes B1_T8192_H96_D128,B4_T2048_H16_D128,B8_T1024_H8_D64 --rounds 2 --json $OUT/verify_$2.json >> /tmp/verify.log 2>&1
  echo "verify $2 rc=$?"; grep -vE '^round ' /tmp/verify.log | grep -E "geomean|full gate|refused" | tail -3
}
v chunk_gdn gdn-fwd | tee -a $C
v chunk_kda kda-fwd | tee -a $C
echo "verify done ${SECONDS}s"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site $R/.whl/*.whl
mkdir -p /tmp/triton-cache
export PYTHONPATH=/tmp/site TRITON_CACHE_DIR=/tmp/triton-cache LINA_LIB=$BIN/liblina_c.so PYTHONUNBUFFERED=1 LINA_GIT_SHA=$(cat $BIN/SHA)
S="python3 bench/fla_side_by_side.py --append --budget-s 0.3 --out $OUT/side_delta_fwd_h200"
left=$((575 - SECONDS)); timeout $left $S --ops chunk_gdn,chunk_kda --modes fwd --gpu-time > /tmp/side.log 2>&1; echo "fwd side-by-side rc=$? at ${SECONDS}s"
tar -czf $OUT/verify-and-logs.tgz -C / tmp/verify.log tmp/side.log $(cd / && ls tmp/unit.log tmp/gk.log tmp/gg.log tmp/ck.log 2>/dev/null) -C $OUT $(cd $OUT && ls verify_*.json delta_check.log 2>/dev/null) 2>/dev/null &&
  (cd $OUT && rm -f verify_*.json delta_check.log)
grep -E '^\||eomean' $OUT/side_delta_fwd_h200.md 2>/dev/null | cut -c1-220
echo "total ${SECONDS}s"

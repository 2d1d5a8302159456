#!/usr/bin/env bash
# Tracked copy: bench/delta_record_s10.sh. Call: run tool, command "bash .carry/s10/record.sh", carry
# [".carry/bin.tar.xz", ".carry/base.tar.xz", ".carry/lina.bundle", ".carry/s10", ".whl", ".carry/fla-autotune.tgz"], timeout_s 590.
# The tenth session's backward record at HEAD (.carry/bin.tar.xz): GPU unit tests, both gates' CUDA cases,
# the delta backward checks and stage times; lina verify fwdbwd of chunk_kda and chunk_gdn against aa0ca00
# (the session start; .carry/base.tar.xz); chunk_kda / chunk_gdn fwdbwd vs FLA (do_bench timer) at the
# shapes FLA's autotune allows in the time (B1_T8192_H96_D128 first: its autotune is carried).
set -u
R=$PWD
mkdir -p /tmp/l /tmp/b && tar -xJf $R/.carry/bin.tar.xz -C /tmp/l && tar -xJf $R/.carry/base.tar.xz -C /tmp/b
BIN=/tmp/l/bin; C=$OUT/correct.txt
echo "lina $(cat $BIN/SHA), base $(cat /tmp/b/bin/SHA)" | tee $C
LD_LIBRARY_PATH=$BIN timeout 120 $BIN/lina_unit_tests --gtest_filter='*Cuda*' --gtest_brief=1 > /tmp/unit.log 2>&1 &
timeout 120 $BIN/lina_chunk_kda_gate --gtest_filter='*Cuda*' > /tmp/gk.log 2>&1 &
timeout 120 $BIN/lina_chunk_gdn_gate --gtest_filter='*Cuda*' > /tmp/gg.log 2>&1 &
OUT=/tmp timeout 120 $BIN/lina_cuda_delta_bwd_check --no-time > /tmp/ck.log 2>&1 &
wait
{ echo "unit *Cuda*: $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' /tmp/unit.log | tr '\n' ' ')"
  for f in gk gg; do echo "gate $f: $(grep -E '^\[  (PASSED|FAILED) ' /tmp/$f.log | tr '\n' ' ')"; done
  echo "delta_bwd_check: $(grep -c ' PASS$' /tmp/ck.log) PASS, $(grep -c ' FAIL$' /tmp/ck.log) FAIL; $(grep 'ALL CHECKS\|FAILED' /tmp/ck.log)"
  grep -E "worst|err ratio" /tmp/ck.log | head -20
  for op in kda gdn; do for sh in 0 1 2 3 4; do echo "stages $op $sh $(OUT=/tmp LINA_DELTA_BWD_STAGES=1 timeout 20 $BIN/lina_cuda_delta_bwd_check --no-check --op $op --shape $sh 2>&1 | grep stages | tail -1)"; done; done
  OUT=/tmp timeout 60 $BIN/lina_cuda_delta_bwd_check --no-check 2>&1 | grep " ms "
} >> $C 2>&1
cat $C | head -8
rm -rf /tmp/vr && git clone -q $R/.carry/lina.bundle /tmp/vr
v() {  # op tag
  timeout 150 $BIN/lina verify --op $1 --base $(cat /tmp/b/bin/SHA) --base-exe /tmp/b/bin/lina --repo /tmp/vr --modes fwdbwd --shapes B1_T8192_H96_D128,B4_T2048_H16_D128,B8_T1024_H8_D64 --rounds 2 --json $OUT/verify_$2.json >> /tmp/verify.log 2>&1
  echo "verify $2 rc=$?"; grep -vE '^round ' /tmp/verify.log | grep -E "geomean|full gate" | tail -2
}
v chunk_kda kda-fwdbwd | tee -a $C
v chunk_gdn gdn-fwdbwd | tee -a $C
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site $R/.whl/*.whl
mkdir -p /tmp/triton-cache && tar -xzf $R/.carry/fla-autotune.tgz -C /tmp
export PYTHONPATH=/tmp/site TRITON_CACHE_DIR=/tmp/triton-cache LINA_LIB=$BIN/liblina_c.so PYTHONUNBUFFERED=1 LINA_GIT_SHA=$(cat $BIN/SHA)
S="python3 bench/fla_side_by_side.py --append --budget-s 0.3 --out $OUT/side_delta_bwd_h200"
timeout 60 $S --ops chunk_kda --modes fwdbwd --shapes B1_T8192_H96_D128 --varlen-tokens 0 > $OUT/side.log 2>&1; echo "kda fwdbwd B1 rc=$?"
timeout 40 $S --ops chunk_gdn --modes fwdbwd --shapes B1_T8192_H96_D128 --varlen-tokens 0 >> $OUT/side.log 2>&1; echo "gdn fwdbwd B1 rc=$?"
timeout 120 $S --ops chunk_kda --modes fwdbwd --shapes B4_T2048_H16_D128,B2_T16384_H16_D128 --varlen-tokens 0 >> $OUT/side.log 2>&1; echo "kda fwdbwd B4/B2 rc=$?"
left=$((400 - SECONDS)); [ $left -gt 60 ] && { timeout $((left - 20)) $S --ops chunk_kda --modes fwdbwd --shapes B4_T4096_H64_D128 --varlen-tokens 0 >> $OUT/side.log 2>&1; echo "kda fwdbwd B4_T4096 rc=$?"; }
tar -czf $OUT/fla-autotune.tgz -C /tmp triton-cache
grep -E '^\||eomean' $OUT/side_delta_bwd_h200.md | cut -c1-220
echo "total ${SECONDS}s"

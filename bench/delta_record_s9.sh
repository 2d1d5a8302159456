#!/usr/bin/env bash
# Tracked copy of .carry/s9f/run.sh. Call: run tool, command "bash .carry/s9f/run.sh", carry
# [".carry/bin.tar.xz", ".carry/base.tar.xz", ".carry/lina.bundle", ".carry/s9f", ".whl", ".carry/fla-autotune.tgz"], timeout_s 590.
# s9f: the ninth session's record at HEAD (.carry/bin.tar.xz, bin/ + SHA): GPU unit tests; chunk_kda /
# chunk_gdn vs FLA with the do_bench timer (fwd + GPU-only columns at the six shapes and the varlen
# longtail set; KDA fwd+bwd vs FLA at B1_T8192_H96 where FLA's autotune is carried; lina-only fwd+bwd
# elsewhere); lina verify of both forwards against the session start (.carry/base.tar.xz).
set -u
R=$PWD
mkdir -p /tmp/l /tmp/b && tar -xJf $R/.carry/bin.tar.xz -C /tmp/l && tar -xJf $R/.carry/base.tar.xz -C /tmp/b
BIN=/tmp/l/bin
echo "lina $(cat $BIN/SHA), base $(cat /tmp/b/bin/SHA)"
LD_LIBRARY_PATH=$BIN timeout 120 $BIN/lina_unit_tests --gtest_filter='*Cuda*' --gtest_brief=1 > $OUT/unit.log 2>&1
echo "unit *Cuda* rc=$? $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' $OUT/unit.log | tr '\n' ' ')"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site $R/.whl/*.whl
mkdir -p /tmp/triton-cache && tar -xzf $R/.carry/fla-autotune.tgz -C /tmp
export PYTHONPATH=/tmp/site TRITON_CACHE_DIR=/tmp/triton-cache LINA_LIB=$BIN/liblina_c.so PYTHONUNBUFFERED=1 LINA_GIT_SHA=$(cat $BIN/SHA)
S="python3 bench/fla_side_by_side.py --append --budget-s 0.3 --out $OUT/side_delta_h200"
timeout 230 $S --ops chunk_kda,chunk_gdn --modes fwd --gpu-time > $OUT/side.log 2>&1; echo "fwd rc=$?"
timeout 60 $S --ops chunk_kda --modes fwdbwd --shapes B1_T8192_H96_D128 --varlen-tokens 0 >> $OUT/side.log 2>&1; echo "kda fwdbwd B1 rc=$?"
timeout 70 $S --impls lina --ops chunk_kda,chunk_gdn --modes fwdbwd --shapes B2_T16384_H16_D128,B4_T2048_H16_D128,B4_T4096_H64_D128,B8_T1024_H8_D64 --varlen-tokens 0 >> $OUT/side.log 2>&1; echo "fwdbwd lina rc=$?"
grep -E '^\||eomean|Machine|Primary' $OUT/side_delta_h200.md | cut -c1-250
rm -rf /tmp/vr && git clone -q $R/.carry/lina.bundle /tmp/vr
v() {  # op modes shapes tag
  timeout 100 $BIN/lina verify --op $1 --base $(cat /tmp/b/bin/SHA) --base-exe /tmp/b/bin/lina --repo /tmp/vr --modes $2 --shapes $3 --rounds 2 --json $OUT/verify_$4.json >> $OUT/verify.log 2>&1
  echo "verify $4 rc=$?"; grep -vE '^round ' $OUT/verify.log | grep -E "gate|geomean|faster|slower|same|noise|B[0-9]" | tail -6
}
C3=B1_T8192_H96_D128,B4_T2048_H16_D128,B8_T1024_H8_D64
v chunk_gdn fwd $C3 gdn-fwd
v chunk_kda fwd $C3 kda-fwd

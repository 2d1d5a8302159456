#!/usr/bin/env bash
# Tracked copy of .carry/s9g/run.sh. Call: run tool, command "bash .carry/s9g/run.sh", carry
# [".carry/bin.tar.xz", ".carry/base.tar.xz", ".carry/lina.bundle", ".carry/s9g", ".whl", ".carry/fla-autotune.tgz", ".carry/gthin/old.tar.xz"], timeout_s 590.
# s9g: the ninth session's final record at HEAD (.carry/bin.tar.xz): GPU unit tests; the shared inverse
# helpers (HEAD) vs aa76f61 (.carry/gthin/old.tar.xz) kernel-only; chunk_kda / chunk_gdn vs FLA (do_bench
# timer, fwd + GPU-only columns, KDA fwd+bwd at B1 where FLA's autotune is carried); lina verify of both
# forwards against 6f9b25b (run 22's lina; .carry/base.tar.xz).
set -u
R=$PWD
mkdir -p /tmp/l /tmp/b /tmp/o && tar -xJf $R/.carry/bin.tar.xz -C /tmp/l && tar -xJf $R/.carry/base.tar.xz -C /tmp/b && tar -xJf $R/.carry/gthin/old.tar.xz -C /tmp/o
BIN=/tmp/l/bin
echo "lina $(cat $BIN/SHA), base $(cat /tmp/b/bin/SHA)"
LD_LIBRARY_PATH=$BIN timeout 120 $BIN/lina_unit_tests --gtest_filter='*Cuda*' --gtest_brief=1 > $OUT/unit.log 2>&1
echo "unit *Cuda* rc=$? $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' $OUT/unit.log | tr '\n' ' ')"
for r in 1 2; do
  echo "=== head run $r"; timeout 40 $BIN/lina_cuda_delta_check --no-check 2>&1 | grep "^gdn\|^kda"
  echo "=== aa76f61 run $r"; timeout 40 /tmp/o/bin/lina_cuda_delta_check --no-check 2>&1 | grep "^gdn\|^kda"
done > $OUT/ab.txt
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site $R/.whl/*.whl
mkdir -p /tmp/triton-cache && tar -xzf $R/.carry/fla-autotune.tgz -C /tmp
export PYTHONPATH=/tmp/site TRITON_CACHE_DIR=/tmp/triton-cache LINA_LIB=$BIN/liblina_c.so PYTHONUNBUFFERED=1 LINA_GIT_SHA=$(cat $BIN/SHA)
S="python3 bench/fla_side_by_side.py --append --budget-s 0.3 --out $OUT/side_delta_h200"
timeout 200 $S --ops chunk_kda,chunk_gdn --modes fwd --gpu-time > $OUT/side.log 2>&1; echo "fwd rc=$?"
timeout 50 $S --ops chunk_kda --modes fwdbwd --shapes B1_T8192_H96_D128 --varlen-tokens 0 >> $OUT/side.log 2>&1; echo "kda fwdbwd B1 rc=$?"
grep -E '^\||eomean' $OUT/side_delta_h200.md | cut -c1-200
rm -rf /tmp/vr && git clone -q $R/.carry/lina.bundle /tmp/vr
v() {  # op modes shapes tag
  timeout 80 $BIN/lina verify --op $1 --base $(cat /tmp/b/bin/SHA) --base-exe /tmp/b/bin/lina --repo /tmp/vr --modes $2 --shapes $3 --rounds 2 --json $OUT/verify_$4.json >> $OUT/verify.log 2>&1
  echo "verify $4 rc=$?"; grep -vE '^round ' $OUT/verify.log | grep -E "geomean|full gate" | tail -2
}
C3=B1_T8192_H96_D128,B4_T2048_H16_D128,B8_T1024_H8_D64
v chunk_gdn fwd $C3 gdn-fwd
v chunk_kda fwd $C3 kda-fwd
grep -A40 "=== head run 1" $OUT/ab.txt | head -0

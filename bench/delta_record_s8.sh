#!/usr/bin/env bash
# Tracked copy of .carry/s8f/run.sh. Call: run tool, command "bash .carry/s8f/run.sh", carry
# [".carry/bin.tar.xz", ".carry/s8f", ".whl", ".carry/fla-autotune.tgz"], timeout_s 540.
# s8f: chunk_kda / chunk_gdn record (issue 5) with the do_bench timer: fwd (+ GPU-only columns) at the six
# shapes and the varlen longtail set; fwd+bwd (KDA vs FLA at B1_T8192_H96, where FLA's autotune is carried;
# lina only elsewhere; GDN lina only: FLA refuses that backward). Binaries: .carry/bin.tar.xz (bin/ + SHA).
set -u
R=$PWD
mkdir -p /tmp/l && tar -xJf $R/.carry/bin.tar.xz -C /tmp/l
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site $R/.whl/*.whl
mkdir -p /tmp/triton-cache && tar -xzf $R/.carry/fla-autotune.tgz -C /tmp
export PYTHONPATH=/tmp/site TRITON_CACHE_DIR=/tmp/triton-cache LINA_LIB=/tmp/l/bin/liblina_c.so PYTHONUNBUFFERED=1 LINA_GIT_SHA=$(cat /tmp/l/bin/SHA)
echo "lina $LINA_GIT_SHA"
S="python3 bench/fla_side_by_side.py --append --budget-s 0.3 --out $OUT/side_delta_h200"
timeout 230 $S --ops chunk_kda,chunk_gdn --modes fwd --gpu-time > $OUT/side.log 2>&1; echo "fwd rc=$?"
timeout 60 $S --ops chunk_kda --modes fwdbwd --shapes B1_T8192_H96_D128 --varlen-tokens 0 >> $OUT/side.log 2>&1; echo "kda fwdbwd B1 rc=$?"
timeout 90 $S --impls lina --ops chunk_kda --modes fwdbwd --shapes B2_T16384_H16_D128,B4_T2048_H16_D128,B4_T4096_H64_D128,B8_T1024_H8_D64 --varlen-tokens 0 >> $OUT/side.log 2>&1; echo "kda fwdbwd lina rc=$?"
timeout 90 $S --ops chunk_gdn --modes fwdbwd --shapes B1_T8192_H96_D128,B2_T16384_H16_D128,B4_T2048_H16_D128,B4_T4096_H64_D128,B8_T1024_H8_D64 --varlen-tokens 0 >> $OUT/side.log 2>&1; echo "gdn fwdbwd rc=$?"
grep -E '^\||eomean|Machine|Primary' $OUT/side_delta_h200.md | cut -c1-250

#!/usr/bin/env bash
# Tracked copy of .carry/s8b/run.sh (the folder holds lib.tar.xz: bin/liblina_c.so + SHA). Call: run tool,
# command "bash .carry/s8b/run.sh", carry [".carry/s8b", ".whl", ".carry/fla-autotune.tgz"], timeout_s 560.
# s8b: the chunk_gla record for issue 4 with the do_bench timer: fwd (+ GPU-only columns) and fwd+bwd at
# the six shapes and the varlen longtail set; then the old synced timer on the fwd rows (method comparison).
set -u
R=$PWD
mkdir -p /tmp/l && tar -xJf $R/.carry/s8b/lib.tar.xz -C /tmp/l
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site $R/.whl/*.whl
mkdir -p /tmp/triton-cache && tar -xzf $R/.carry/fla-autotune.tgz -C /tmp
export PYTHONPATH=/tmp/site TRITON_CACHE_DIR=/tmp/triton-cache LINA_LIB=/tmp/l/bin/liblina_c.so PYTHONUNBUFFERED=1 LINA_GIT_SHA=$(git rev-parse HEAD 2>/dev/null || echo unknown)
echo "lib built at $(cat /tmp/l/bin/SHA), tree at $LINA_GIT_SHA"
S="python3 bench/fla_side_by_side.py --append --budget-s 0.3 --out $OUT/side_gla_h200"
timeout 170 $S --ops chunk_gla --modes fwd --gpu-time > $OUT/side.log 2>&1; echo "fwd rc=$?"
timeout 100 $S --ops chunk_gla --modes fwdbwd --varlen-tokens 0 >> $OUT/side.log 2>&1; echo "fwdbwd rc=$?"
timeout 200 $S --ops chunk_gla --modes fwdbwd --shapes "" --varlen-tokens 32768 >> $OUT/side.log 2>&1; echo "varlen fwdbwd rc=$?"
(cd /tmp && find triton-cache -name "*.autotune.json" | tar -czf $OUT/fla-autotune-s8.tgz -T -)
timeout 60 python3 bench/fla_side_by_side.py --timer synced --budget-s 0.2 --out $OUT/side_gla_synced_h200 --ops chunk_gla --modes fwd --varlen-tokens 0 >> $OUT/side.log 2>&1; echo "synced rc=$?"
grep -E '^\||eomean|Machine|Command|Primary' $OUT/side_gla_h200.md | cut -c1-260
grep -E '^\| chunk' $OUT/side_gla_synced_h200.md | cut -c1-120

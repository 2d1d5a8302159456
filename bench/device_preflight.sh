#!/usr/bin/env bash
# One device call: what the GPU machine has, and FLA's Triton autotune cache warmed for later runs.
# Usage (device): bash bench/device_preflight.sh OPS   (e.g. chunk_gla); outputs under $OUT.
set -u
ops="${1:-chunk_gla}"
{
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,memory.total --format=csv
  nvcc --version | tail -1; cmake --version | head -1; which ncu compute-sanitizer
  python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"
  ls /usr/include/gtest /usr/lib/x86_64-linux-gnu/libgtest* 2>/dev/null | head -3
  grep -h "GOOGLETEST_VERSION\|set(GOOGLETEST_VERSION" -r /usr/src/googletest/CMakeLists.txt 2>/dev/null | head -2
} > "$OUT/env.txt" 2>&1
cat "$OUT/env.txt"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
export TRITON_CACHE_DIR=/tmp/triton-cache
mkdir -p "$TRITON_CACHE_DIR"
[ -f .carry/triton-cache.tgz ] && tar -xzf .carry/triton-cache.tgz -C /tmp
PYTHONUNBUFFERED=1 timeout 480 python3 bench/fla_side_by_side.py --impls fla --ops "$ops" --out "$OUT/fla_only" 2>&1 | tail -40
tar -czf "$OUT/triton-cache.tgz" -C /tmp triton-cache
ls -la "$OUT"

#!/usr/bin/env bash
# Configures and builds lina into ${LINA_BUILD_DIR:-build} (CUDA backend when nvcc is present).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
[ -x /usr/local/cuda/bin/nvcc ] && export PATH="/usr/local/cuda/bin:$PATH"
build="${LINA_BUILD_DIR:-build}"
echo "build: configuring $build (the CUDA backend where nvcc is found)"
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release ${LINA_CMAKE_ARGS:-} >/dev/null
echo "build: compiling (a first CUDA build takes minutes; ninja prints [done/total] per file)"
cmake --build "$build" -j "$(nproc)"

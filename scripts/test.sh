#!/usr/bin/env bash
# Builds lina and runs every test through ctest (GPU cases skip themselves without a GPU).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
ctest --test-dir "${LINA_BUILD_DIR:-build}" --output-on-failure -j "$(nproc)" "$@"
bash scripts/test-sanitizers.sh

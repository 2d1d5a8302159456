#!/usr/bin/env bash
# Builds lina and runs every test: ctest (GPU cases skip themselves without a GPU), the installed packages,
# and the sanitizer + fuzz run of the host code.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
ctest --test-dir "${LINA_BUILD_DIR:-build}" --output-on-failure -j "$(nproc)" "$@"
bash scripts/test-package.sh     # the CMake package, the pip-installed wheel and tests/python (docs/install.md)
bash scripts/test-sanitizers.sh  # ASan + UBSan unit tests and the libFuzzer targets (tests/fuzz)

#!/usr/bin/env bash
# Builds lina if needed, then runs `lina ARGS...` (for example: verify --op chunk_gla).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh >/dev/null
exec "${LINA_BUILD_DIR:-build}/cli/lina" "$@"

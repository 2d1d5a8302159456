#!/usr/bin/env bash
# Builds lina if needed, then runs `lina ARGS...` (for example: verify --op chunk_gla). The build's
# progress goes to stderr, so lina's own stdout (a table, JSON) stays clean for pipes.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh >&2
exec "${LINA_BUILD_DIR:-build}/cli/lina" "$@"

#!/usr/bin/env bash
# SASS instructions per kernel of a CUDA binary whose mangled name matches a regex (the instruction-cache budget
# of the big delta backward kernels: docs/kernels/chunk_delta_bwd.md). cuobjdump from the CUDA toolkit (or the
# PyPI package nvidia-cuda-cuobjdump).   bash bench/sass_count.sh BINARY 'grad_k_v2|grad_v4'
set -euo pipefail
cuobjdump -sass "$1" | awk -v pat="${2:-.}" '/Function :/ { name = $3 } /^ +\/\*[0-9a-f]+\*\/ / { n[name]++ }
  END { for (f in n) if (f ~ pat) print n[f], f }' | sort -k2

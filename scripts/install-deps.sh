#!/usr/bin/env bash
# Installs what lina builds with: Debian packages (apt-get) and, where nvcc is present, the
# CUTLASS/CuTe headers from the PyPI package nvidia-cutlass. Idempotent; quiet when all is there.
set -euo pipefail
debs=(cmake ninja-build g++ git libgtest-dev nlohmann-json3-dev libcli11-dev libfmt-dev python3 chromium)
missing=()
for d in "${debs[@]}"; do dpkg -s "$d" >/dev/null 2>&1 || missing+=("$d"); done
if [ ${#missing[@]} -gt 0 ]; then
  echo "install-deps: apt-get install ${missing[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
if command -v nvcc >/dev/null 2>&1 || [ -x /usr/local/cuda/bin/nvcc ]; then
  if ! python3 -c "import importlib.util as u, sys; sys.exit(0 if u.find_spec('cutlass_library') else 1)" 2>/dev/null; then
    echo "install-deps: pip install nvidia-cutlass (CUTLASS/CuTe headers)"
    python3 -m pip install -q --disable-pip-version-check nvidia-cutlass==4.2.0.0 2>&1 | grep -v "WARNING: Running pip as" || true
  fi
fi

#!/usr/bin/env bash
# Tests lina as an installed package (docs/install.md), CPU only:
#   (a) the CMake package: `cmake --install` of the built ${LINA_BUILD_DIR:-build} into a temporary
#       prefix, then tests/package/consumer (find_package(lina), one op against lina::reference);
#   (b) the Python package: a fresh venv with torch, `pip install --no-build-isolation .` of this
#       clone without the CUDA backend, then tests/package/smoke_test.py, the pytest suite tests/python
#       and the CPU smokes of bench/train_fla_models.py and bench/gen_fla_models.py.
# Run by scripts/test.sh after the build; LINA_PACKAGE_SKIP_WHEEL=1 runs (a) alone.
set -euo pipefail
cd "$(dirname "$0")/.."
repo="$PWD"
build="${LINA_BUILD_DIR:-build}"
torch_spec="${LINA_PACKAGE_TORCH:-torch==2.11.0}"  # the GPU machine's torch
version="$(sed -n 's/^project(lina VERSION \([0-9.]*\).*/\1/p' CMakeLists.txt)"
say() { echo "test-package: $* ($((SECONDS))s)"; }

if [ ! -f "$build/CMakeCache.txt" ]; then
  echo "test-package: no build in '$build' (LINA_BUILD_DIR): run scripts/build.sh first" >&2
  exit 2
fi
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
# The wheel build compiles the CPU library again (a clean build dir): share the compiler cache.
if command -v ccache >/dev/null 2>&1; then export CMAKE_CXX_COMPILER_LAUNCHER=ccache; fi

say "installing $build into a temporary prefix"
cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
# Only the package's files: the library, its headers and CMake files (and lina/_C.so where the
# build has the PyTorch extension); never tests nor tools.
unexpected="$(cd "$tmp/prefix" && find . \( -type f -o -type l \) | grep -Ev '^\./(include/lina/[a-z_]+\.h|lib/liblina\.so(\.[0-9.]+)?|lib/cmake/lina/lina[A-Za-z-]*\.cmake|lina/_C\.so)$' || true)"
if [ -n "$unexpected" ]; then
  echo "test-package: FAIL: cmake --install installed files outside the package:" >&2
  echo "$unexpected" >&2
  exit 1
fi

say "building tests/package/consumer against it (find_package(lina ${version%.*}))"
cmake -S tests/package/consumer -B "$tmp/consumer" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$tmp/prefix" >/dev/null
cmake --build "$tmp/consumer" >/dev/null
"$tmp/consumer/lina_consumer"

if [ "${LINA_PACKAGE_SKIP_WHEEL:-0}" = 1 ]; then
  say "ok (wheel skipped: LINA_PACKAGE_SKIP_WHEEL=1)"
  exit 0
fi

# Debian's python3 makes venvs only with python3-venv (ensurepip), which install-deps.sh does not list.
if ! python3 -c "import ensurepip" >/dev/null 2>&1; then
  say "python3 cannot make a venv (no ensurepip): apt-get install python3-venv"
  sudo=""; [ "$(id -u)" -ne 0 ] && sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends python3-venv >/dev/null
fi
say "creating a venv and installing $torch_spec (a download of a few GB)"
python3 -m venv "$tmp/venv"
pip=("$tmp/venv/bin/python" -m pip --disable-pip-version-check)
"${pip[@]}" install -q "$torch_spec" numpy "scikit-build-core>=0.10"

say "pip install --no-build-isolation . (CUDA backend off; cmake and ninja output follow)"
# pip -v shows the build; of its many lines, CMake's lina lines and ninja's [done/total] lines pass.
set +e
"${pip[@]}" install -v --no-build-isolation -C cmake.define.LINA_WITH_CUDA=OFF "$repo" 2>&1 \
  | tee "$tmp/pip-install.log" | grep --line-buffered -E '^ *(\[[0-9]+/[0-9]+\] |-- lina|\*\*\* )'
pip_rc=${PIPESTATUS[0]}
set -e
if [ "$pip_rc" -ne 0 ]; then
  echo "test-package: FAIL: pip install of the repository exited with $pip_rc; its last lines:" >&2
  tail -n 40 "$tmp/pip-install.log" >&2
  exit 1
fi

say "smoke test of the installed package"
(cd "$tmp" && "$tmp/venv/bin/python" "$repo/tests/package/smoke_test.py" "$version")

# The Python suite on the installed package (CPU backend; its CUDA cases skip themselves), with FLA 0.6.0 for
# the backend tests, and the FLA-model training bench's CPU smoke (docs/pytorch.md).
say "installing pytest, flash-linear-attention 0.6.0 and accelerate"
"${pip[@]}" install -q pytest "flash-linear-attention==0.6.0" accelerate
say "pytest tests/python"
(cd "$tmp" && "$tmp/venv/bin/python" -m pytest -q -p no:cacheprovider "$repo/tests/python")
say "lina train-bench's CPU smoke (bench/train_fla_models.py --cpu-smoke)"
(cd "$tmp" && "$tmp/venv/bin/python" "$repo/bench/train_fla_models.py" --cpu-smoke | grep '^{')
say "lina gen-bench's CPU smoke (bench/gen_fla_models.py --cpu-smoke)"
(cd "$tmp" && "$tmp/venv/bin/python" "$repo/bench/gen_fla_models.py" --cpu-smoke | grep '^{')
say "ok"

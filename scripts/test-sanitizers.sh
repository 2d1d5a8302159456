#!/usr/bin/env bash
# The host code under AddressSanitizer + UBSan: a CPU-only clang build in ${LINA_ASAN_BUILD_DIR:-build-asan},
# its unit tests (left out: the gate suites, the fault-injection tests that run them whole, and the test
# that builds a baseline from source; each takes minutes under the sanitizers and runs uninstrumented
# in scripts/test.sh), then each libFuzzer target of tests/fuzz for
# ${LINA_FUZZ_SECONDS:-20} s from its seed corpus (new inputs go to a scratch folder, never the tree).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
# clang 16: libFuzzer, and lambdas that capture structured bindings (C++20), which clang 14 refuses.
cxx="${LINA_SANITIZER_CXX:-clang++-16}"
if ! command -v "$cxx" >/dev/null 2>&1; then
  echo "test-sanitizers: apt-get install clang-16 libclang-rt-16-dev (libFuzzer and the sanitizer runtimes)"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends clang-16 libclang-rt-16-dev >/dev/null
fi
build="${LINA_ASAN_BUILD_DIR:-build-asan}"
seconds="${LINA_FUZZ_SECONDS:-20}"
# -O1: sanitized code at a usable speed; line tables only: the reports' stacks name file and line, and
# the build skips full debug info; the CUDA backend is not host code.
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_CXX_FLAGS=-O1 \
  -DCMAKE_CXX_FLAGS_DEBUG=-gline-tables-only \
  -DLINA_WITH_CUDA=OFF -DLINA_FUZZ=ON ${LINA_CMAKE_ARGS:-} >/dev/null
echo "test-sanitizers: building $build ($cxx, -fsanitize=address,undefined, libFuzzer targets)"
cmake --build "$build" -j "$(nproc)"
# Any report fails the run; leaks included.
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=0:halt_on_error=1:strict_string_checks=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
ctest --test-dir "$build" --output-on-failure -j "$(nproc)" -E '^(chunk_(gla|kda|gdn)_gate|BaselineRepo\.BuildsAnEarlierCommit|Ops/GateFaultInjection\.)'
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
for target in npy_reader result_file_reader gate_k_parser shape_parser; do
  mkdir -p "$work/$target"
  echo "test-sanitizers: fuzzing $target for ${seconds} s"
  if ! "$build/tests/fuzz/lina_fuzz_$target" -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=10 \
      -print_final_stats=1 -artifact_prefix="$work/$target-" "$work/$target" "tests/fuzz/corpus/$target" >"$work/$target.log" 2>&1; then
    tail -n 60 "$work/$target.log"
    # the input's first lines (head closes the pipe early: that is not the failure being reported)
    for a in "$work/$target-"*; do [ -f "$a" ] && { echo "crashing input $a:"; od -c "$a" | head -n 20 || true; }; done
    exit 1
  fi
  grep -E "^(Done|stat::number_of_executed_units)" "$work/$target.log" || tail -n 3 "$work/$target.log"
done
echo "test-sanitizers: ok"

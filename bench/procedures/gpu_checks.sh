#!/usr/bin/env bash
# Runs the correctness jobs that need a GPU and counts their results: the unit tests that need one
# (*Cuda*: the CUDA run engine, ceilings, the workspace pool), each gate suite's CUDA cases, and the CUDA
# check programs of tests/cuda (the `gpu` ctests; here run directly, so a flat --bin folder works too).
set -euo pipefail
# shellcheck source=bench/procedures/common.sh
source "$(dirname "$0")/common.sh"

USAGE="usage: bench/procedures/gpu_checks.sh --out DIR [--ops LIST] [--steps LIST] [--build DIR | --bin DIR] [--timeout S] [--dry-run]
  --ops      comma list (default chunk_gla,chunk_kda,chunk_gdn): their gate suites and check programs
  --steps    comma list of unit, gates, checks (default all three)
  --build / --bin  where lina_unit_tests, the gate suites and the checks are: BUILD/tests (default build/) or one flat folder
  --timeout  seconds per executable (default 600)
Writes DIR/checks.txt (one line per executable: rc and counts), DIR/logs/*.log and the gates' gtest JSON;
exit 1 when any executable failed."

OPS="chunk_gla,chunk_kda,chunk_gdn" STEPS="unit,gates,checks"
STEP_TIMEOUT=600
while [ $# -gt 0 ]; do
  case "$1" in
    --ops) need_value "$1" "$@"; OPS="$2"; shift 2 ;;
    --steps) need_value "$1" "$@"; STEPS="$2"; shift 2 ;;
    *) parse_common_flag "$@"; shift "$TAKEN" ;;
  esac
done
for s in $(split_list "$STEPS"); do
  case "$s" in unit | gates | checks) ;; *) die "--steps: got '$s', expected unit, gates or checks" ;; esac
done
gla=0 delta=0
for op in $(split_list "$OPS"); do
  case "$op" in chunk_gla) gla=1 ;; chunk_kda | chunk_gdn) delta=1 ;; *) die "--ops: got '$op', expected chunk_gla, chunk_kda or chunk_gdn" ;; esac
done
require_out
has_step() { [[ ",$STEPS," == *",$1,"* ]]; }
# the unit tests link liblina_c.so; a flat --bin folder has it beside them
LD_LIBRARY_PATH="$(dirname "$(lina_lib)")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export LD_LIBRARY_PATH

record_machine
[ "$DRY_RUN" = 1 ] || : >"$OUT_DIR/checks.txt"
failed=0
# line NAME RC LOG: the summary line of one executable
line() {
  [ "$2" = 0 ] || failed=1
  [ "$DRY_RUN" = 1 ] && return 0
  local counts
  counts="$(grep -E '^\[  (PASSED|FAILED|SKIPPED) |ALL PASSED|ALL CHECKS PASSED|^FAILED|SKIPPED: ' "$3" | tr '\n' ' ' || true)"
  echo "$1 rc=$2 | $(grep -c ' PASS\b' "$3" || true) PASS lines, $(grep -c ' FAIL\b' "$3" || true) FAIL lines | $counts" |
    tee -a "$OUT_DIR/checks.txt"
}

if has_step unit; then
  say "unit tests that need a GPU"
  exe="$(test_exe lina_unit_tests)"
  require_file "$exe" "lina_unit_tests"
  rc=0
  run_logged "$OUT_DIR/logs/unit_cuda.log" "$exe" --gtest_filter='*Cuda*' --gtest_brief=1 || rc=$?
  line unit_cuda "$rc" "$OUT_DIR/logs/unit_cuda.log"
fi
if has_step gates; then
  for op in $(split_list "$OPS"); do
    say "gate $op: CUDA cases"
    exe="$(test_exe "lina_${op}_gate")"
    require_file "$exe" "the $op gate suite"
    rc=0
    run_logged "$OUT_DIR/logs/gate_$op.log" "$exe" --gtest_filter='*Cuda*' --gtest_brief=1 \
      "--gtest_output=json:$OUT_DIR/logs/gate_$op.json" || rc=$?
    line "gate_$op" "$rc" "$OUT_DIR/logs/gate_$op.log"
  done
fi
if has_step checks; then
  checks=()
  [ "$gla" = 0 ] || checks+=(lina_cuda_gla_check lina_cuda_gla_bwd_check)
  [ "$delta" = 0 ] || checks+=(lina_cuda_delta_check lina_cuda_delta_bwd_check)
  for c in "${checks[@]}"; do
    say "$c"
    exe="$(test_exe "$c")"
    require_file "$exe" "$c"
    rc=0
    run_logged "$OUT_DIR/logs/$c.log" "$exe" || rc=$?
    line "$c" "$rc" "$OUT_DIR/logs/$c.log"
  done
fi
exit "$failed"

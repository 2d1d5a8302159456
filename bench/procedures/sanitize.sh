#!/usr/bin/env bash
# Runs NVIDIA's compute-sanitizer tools over lina's CUDA kernels at small shapes: the gate suites' CUDA
# cases (one partial chunk, T = 1, varlen with an empty sequence, a short varlen) and the CUDA check
# programs' small cases (tests/cuda: the GLA forward and backward with --small, the delta forward, the
# delta backward with --small). A tool's finding makes the run exit 9 (--error-exitcode), so every line
# of the summary says rc=0 or names what failed.
set -euo pipefail
# shellcheck source=bench/procedures/common.sh
source "$(dirname "$0")/common.sh"

DEFAULT_GATE_FILTER='*Cuda*T63_*:*Cuda*T1_*:*Cuda*varlen_zero*:*Cuda*T15_*'
USAGE="usage: bench/procedures/sanitize.sh --out DIR [--tools LIST] [--ops LIST] [--targets LIST] [--gate-filter FILTER]
         [--match TEXT] [--sanitizer PATH] [--build DIR | --bin DIR] [--timeout S] [--dry-run]
  --tools        comma list (default memcheck,racecheck,initcheck,synccheck)
  --ops          comma list (default chunk_gla,chunk_kda,chunk_gdn); chunk_gla selects the GLA checks,
                 chunk_kda / chunk_gdn the delta checks
  --targets      gates and/or checks (default gates,checks)
  --gate-filter  gtest filter of the gate cases (default $DEFAULT_GATE_FILTER)
  --match        only the delta checks' cases whose name contains TEXT (e.g. 'V-tile pairs', 'D256')
  --sanitizer    the compute-sanitizer executable (default: on PATH, else /usr/local/cuda/bin)
  --build / --bin  where the gate suites and checks are: BUILD/tests (default build/) or one flat folder
  --timeout      seconds per run (default 300)
Writes DIR/sanitize.txt (one line per tool and target) and DIR/logs/san_TOOL_TARGET.log; exit 1 when any run failed."

TOOLS="memcheck,racecheck,initcheck,synccheck" OPS="chunk_gla,chunk_kda,chunk_gdn" TARGETS="gates,checks"
GATE_FILTER="$DEFAULT_GATE_FILTER" MATCH="" SANITIZER=""
STEP_TIMEOUT=300
while [ $# -gt 0 ]; do
  case "$1" in
    --tools) need_value "$1" "$@"; TOOLS="$2"; shift 2 ;;
    --ops) need_value "$1" "$@"; OPS="$2"; shift 2 ;;
    --targets) need_value "$1" "$@"; TARGETS="$2"; shift 2 ;;
    --gate-filter) need_value "$1" "$@"; GATE_FILTER="$2"; shift 2 ;;
    --match) need_value "$1" "$@"; MATCH="$2"; shift 2 ;;
    --sanitizer) need_value "$1" "$@"; SANITIZER="$2"; shift 2 ;;
    *) parse_common_flag "$@"; shift "$TAKEN" ;;
  esac
done
for t in $(split_list "$TOOLS"); do
  case "$t" in memcheck | racecheck | initcheck | synccheck) ;; *) die "--tools: got '$t', expected memcheck, racecheck, initcheck or synccheck" ;; esac
done
for t in $(split_list "$TARGETS"); do
  case "$t" in gates | checks) ;; *) die "--targets: got '$t', expected gates or checks" ;; esac
done
gla=0 delta=0
for op in $(split_list "$OPS"); do
  case "$op" in chunk_gla) gla=1 ;; chunk_kda | chunk_gdn) delta=1 ;; *) die "--ops: got '$op', expected chunk_gla, chunk_kda or chunk_gdn" ;; esac
done
require_out
if [ -z "$SANITIZER" ]; then SANITIZER="$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)"; fi
require_tool "$SANITIZER" "compute-sanitizer (--sanitizer)"

# One (target name, command...) per line of work; a target's command is its executable and arguments.
jobs=()
add_job() { jobs+=("$(quoted "$@")"); }
if [[ ",$TARGETS," == *,gates,* ]]; then
  for op in $(split_list "$OPS"); do
    exe="$(test_exe "lina_${op}_gate")"
    require_file "$exe" "the $op gate suite"
    add_job "gate_$op" "$exe" "--gtest_filter=$GATE_FILTER" --gtest_brief=1
  done
fi
if [[ ",$TARGETS," == *,checks,* ]]; then
  match_args=()
  [ -z "$MATCH" ] || match_args=(--match "$MATCH")
  if [ "$gla" = 1 ]; then
    for c in lina_cuda_gla_check lina_cuda_gla_bwd_check; do require_file "$(test_exe "$c")" "$c"; done
    add_job gla_fwd_check "$(test_exe lina_cuda_gla_check)" --small
    add_job gla_bwd_check "$(test_exe lina_cuda_gla_bwd_check)" --small
  fi
  if [ "$delta" = 1 ]; then
    for c in lina_cuda_delta_check lina_cuda_delta_bwd_check; do require_file "$(test_exe "$c")" "$c"; done
    add_job delta_fwd_check "$(test_exe lina_cuda_delta_check)" "${match_args[@]}"
    add_job delta_bwd_check "$(test_exe lina_cuda_delta_bwd_check)" --small "${match_args[@]}"
  fi
fi
[ "${#jobs[@]}" -gt 0 ] || die "nothing to run: --targets '$TARGETS' with --ops '$OPS'"

[ "$DRY_RUN" = 1 ] || : >"$OUT_DIR/sanitize.txt"
failed=0
for tool in $(split_list "$TOOLS"); do
  say "compute-sanitizer --tool $tool"
  for j in "${jobs[@]}"; do
    eval "cmd=($j)"  # the job's words, as quoted by add_job
    # shellcheck disable=SC2154  # cmd is set by the eval above
    name="${cmd[0]}" log="$OUT_DIR/logs/san_${tool}_${cmd[0]}.log"
    rc=0
    run_logged "$log" "$SANITIZER" --tool "$tool" --error-exitcode 9 --print-limit 20 "${cmd[@]:1}" || rc=$?
    [ "$rc" = 0 ] || failed=1
    [ "$DRY_RUN" = 1 ] && continue
    summary="$(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$log" | tail -1 || true)"
    result="$(grep -E '^\[  (PASSED|FAILED|SKIPPED) |ALL PASSED|ALL CHECKS PASSED|^FAILED|SKIPPED: ' "$log" | tr '\n' ' ' || true)"
    echo "$tool $name rc=$rc | $summary | $result" | tee -a "$OUT_DIR/sanitize.txt"
  done
done
exit "$failed"

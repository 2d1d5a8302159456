#!/usr/bin/env bash
# Profiles an op's kernels with Nsight Compute: `lina profile` (every kernel in the timed calls, candidate
# and optionally a base ref side by side: duration, DRAM throughput, stall mix), and with --hot-lines one
# kernel's source counters (ncu on `lina run`, one launch) reduced by bench/ncu_hot_lines.py to its hottest
# source lines or to the samples per line range of a source file. The kernels are linked into the lina
# executable, so its -lineinfo build is what the source lines come from.
set -euo pipefail
# shellcheck source=bench/procedures/common.sh
source "$(dirname "$0")/common.sh"

USAGE="usage: bench/procedures/profile.sh --op OP --out DIR [--modes LIST] [--shapes LIST] [--base REF] [--base-binary PATH]
         [--set full|source] [--launch-count N] [--ncu PATH] [--hot-lines KERNEL_REGEX [--launch-skip N] [--top N]
         [--ranges 'FILE A-B:NAME ...']] [--no-lina-profile] [--build DIR | --bin DIR] [--timeout S] [--dry-run]
  --op              chunk_gla, chunk_kda or chunk_gdn
  --modes           default fwd
  --shapes          default B4_T2048_H16_D128 (--hot-lines profiles the first mode and shape)
  --base            also profile this git ref (lina builds it into its cache); --base-binary: a lina built from it
  --set             ncu section set for lina profile (default full)
  --launch-count    kernels profiled per side by lina profile (default 64; 0: all timed launches)
  --ncu             the ncu executable (default: ncu on PATH)
  --hot-lines       a kernel-name regex: that kernel's source counters, DIR/hot.ncu-rep, DIR/hot_lines.txt
  --launch-skip     matching launches skipped before the one profiled (default 0)
  --top             hottest source lines listed (default 25)
  --ranges          FILE and A-B:NAME line ranges, passed to ncu_hot_lines.py --ranges: DIR/hot_ranges.txt
  --no-lina-profile only the --hot-lines step
  --build / --bin   the candidate: BUILD/cli/lina (default build/) or one flat folder
Writes DIR/profile/ (lina profile: head.ncu-rep, head.csv, base.* with a base), DIR/logs/, DIR/machine.txt."

OP="" MODES="fwd" SHAPES="B4_T2048_H16_D128" BASE="" BASE_BINARY="" SET="full" LAUNCH_COUNT="" NCU="ncu" HOT=""
LAUNCH_SKIP=0 TOP=25 RANGES="" LINA_PROFILE=1
while [ $# -gt 0 ]; do
  case "$1" in
    --op) need_value "$1" "$@"; OP="$2"; shift 2 ;;
    --modes) need_value "$1" "$@"; MODES="$2"; shift 2 ;;
    --shapes) need_value "$1" "$@"; SHAPES="$2"; shift 2 ;;
    --base) need_value "$1" "$@"; BASE="$2"; shift 2 ;;
    --base-binary) need_value "$1" "$@"; BASE_BINARY="$2"; shift 2 ;;
    --set) need_value "$1" "$@"; SET="$2"; shift 2 ;;
    --launch-count) need_value "$1" "$@"; LAUNCH_COUNT="$2"; shift 2 ;;
    --ncu) need_value "$1" "$@"; NCU="$2"; shift 2 ;;
    --hot-lines) need_value "$1" "$@"; HOT="$2"; shift 2 ;;
    --launch-skip) need_value "$1" "$@"; LAUNCH_SKIP="$2"; shift 2 ;;
    --top) need_value "$1" "$@"; TOP="$2"; shift 2 ;;
    --ranges) need_value "$1" "$@"; RANGES="$2"; shift 2 ;;
    --no-lina-profile) LINA_PROFILE=0; shift ;;
    *) parse_common_flag "$@"; shift "$TAKEN" ;;
  esac
done
[ -n "$OP" ] || die "--op is required (chunk_gla, chunk_kda or chunk_gdn)"
case "$SET" in full | source) ;; *) die "--set: got '$SET', expected full or source" ;; esac
[[ "$LAUNCH_SKIP" =~ ^[0-9]+$ ]] || die "--launch-skip: got '$LAUNCH_SKIP', expected a whole number"
[[ "$TOP" =~ ^[1-9][0-9]*$ ]] || die "--top: got '$TOP', expected a positive whole number"
if [ -z "$HOT" ] && [ -n "$RANGES" ]; then die "--ranges needs --hot-lines KERNEL_REGEX"; fi
if [ "$LINA_PROFILE" = 0 ] && [ -z "$HOT" ]; then die "--no-lina-profile leaves nothing to do without --hot-lines"; fi
require_out
LINA="$(lina_exe)"
require_file "$LINA" "the candidate's lina"

record_machine
if [ "$LINA_PROFILE" = 1 ]; then
  say "lina profile $OP ($MODES; $SHAPES)"
  args=(profile --op "$OP" --modes "$MODES" --shapes "$SHAPES" --set "$SET" --ncu "$NCU" --out "$OUT_DIR/profile")
  [ -z "$BASE" ] || args+=(--base "$BASE")
  [ -z "$BASE_BINARY" ] || args+=(--base-binary "$BASE_BINARY")
  [ -z "$LAUNCH_COUNT" ] || args+=(--launch-count "$LAUNCH_COUNT")
  rc=0
  run_logged "$OUT_DIR/logs/lina_profile.log" "$LINA" "${args[@]}" || rc=$?
  echo "lina profile rc=$rc"
  note_status "$rc"
  [ "$DRY_RUN" = 1 ] || tail -30 "$OUT_DIR/logs/lina_profile.log"
fi

if [ -n "$HOT" ]; then
  mode="$(split_list "$MODES" | head -1)" shape="$(split_list "$SHAPES" | head -1)"
  say "source counters of $HOT ($OP $mode $shape, launch $LAUNCH_SKIP of the timed calls)"
  sections=()
  for s in SpeedOfLight WarpStateStats InstructionStats SchedulerStats Occupancy LaunchStats MemoryWorkloadAnalysis SourceCounters; do
    sections+=(--section "$s")
  done
  rc=0
  run_logged "$OUT_DIR/logs/hot_ncu.log" "$NCU" --nvtx --nvtx-include "lina:timed:$OP:$mode:$shape/" --clock-control none \
    --kernel-name "regex:$HOT" --launch-skip "$LAUNCH_SKIP" --launch-count 1 --import-source yes "${sections[@]}" -f \
    -o "$OUT_DIR/hot" "$LINA" run --op "$OP" --modes "$mode" --shapes "$shape" --no-base --json "$OUT_DIR/logs/hot_run.json" || rc=$?
  echo "ncu rc=$rc"
  note_status "$rc"
  if [ "$rc" = 0 ]; then
    run_logged "$OUT_DIR/hot_details.txt" "$NCU" --import "$OUT_DIR/hot.ncu-rep" || note_status $?
    run_logged "$OUT_DIR/hot_source.csv" "$NCU" --import "$OUT_DIR/hot.ncu-rep" --page source --csv --print-source sass || note_status $?
    run_logged "$OUT_DIR/hot_lines.txt" python3 "$REPO_ROOT/bench/ncu_hot_lines.py" "$OUT_DIR/hot_source.csv" "$LINA" "$HOT" \
      --top "$TOP" || note_status $?
    if [ -n "$RANGES" ]; then
      read -r -a range_args <<<"$RANGES"
      run_logged "$OUT_DIR/hot_ranges.txt" python3 "$REPO_ROOT/bench/ncu_hot_lines.py" "$OUT_DIR/hot_source.csv" "$LINA" "$HOT" \
        --ranges "${range_args[@]}" || note_status $?
    fi
    if [ "$DRY_RUN" = 0 ]; then
      grep -E 'Duration|Issue Slots Busy|DRAM Throughput|Warp Cycles Per Issued|Eligible Warps|Registers Per|Achieved Occupancy' \
        "$OUT_DIR/hot_details.txt" | head -12 || true
      head -40 "$OUT_DIR/hot_lines.txt"
    fi
  fi
fi
exit "$STATUS"

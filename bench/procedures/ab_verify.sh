#!/usr/bin/env bash
# A/B of two commits: `lina verify` of the candidate build against a base ref (the base built into lina's
# cache, or an already-built base lina), full gate first, alternating rounds, same seeded inputs; then,
# with --loop-direction, the optimisation loop's row for that attempt (`lina loop log`). With --base-checks,
# also the delta forward check programs of both builds, and how many outputs' bit hashes differ (for a
# change that should only move work between threads).
set -euo pipefail
# shellcheck source=bench/procedures/common.sh
source "$(dirname "$0")/common.sh"

USAGE="usage: bench/procedures/ab_verify.sh --op LIST --base REF --out DIR [--modes LIST] [--shapes LIST] [--rounds N]
         [--base-exe PATH] [--repo DIR] [--gate-k EXPR] [--threshold PCT] [--fail-on-regression] [--safe-gate on|off]
         [--loop-direction TEXT [--loop NAME] [--decision keep|revert|floor] [--profile REP] [--bound TEXT]]
         [--base-checks DIR] [--build DIR | --bin DIR] [--timeout S] [--dry-run]
  --op             chunk_gla, chunk_kda, chunk_gdn; a comma list verifies each in turn
  --base           the base git ref (a SHA, a branch, HEAD~1); with --base-exe, the SHA that lina reports
  --modes          passed to lina run (default fwd; e.g. fwd,fwdbwd)
  --shapes         default B1_T8192_H96_D128,B4_T2048_H16_D128,B8_T1024_H8_D64
  --rounds         alternating candidate / base rounds (default 2)
  --base-exe       a lina already built from --base (no build)
  --repo           the checkout that resolves --base (default: this one)
  --gate-k, --threshold, --fail-on-regression, --safe-gate   passed to lina verify
  --loop-direction one line: what the candidate changed; adds the row to profile/<op>-<loop>/ via lina loop log
  --loop, --decision, --profile, --bound        passed to lina loop log
  --base-checks    a folder with the base build's lina_cuda_delta_check: both builds' forward checks, bit hashes
  --build / --bin  the candidate: BUILD/cli/lina (default build/) or one flat folder
  --timeout        seconds per step (default: none)
Writes DIR/verify_OP.json (lina.bench/1), DIR/logs/verify_OP.log, DIR/machine.txt, DIR/checks.txt with
--base-checks; exit status: lina verify's (the first that failed), else 0."

OPS="" BASE="" MODES="fwd" SHAPES="B1_T8192_H96_D128,B4_T2048_H16_D128,B8_T1024_H8_D64" ROUNDS=2 BASE_EXE="" REPO=""
GATE_K="" SAFE_GATE="" THRESHOLD="" FAIL_ON_REG=0 DIRECTION="" LOOP="" DECISION="" PROFILE="" BOUND="" BASE_CHECKS=""
while [ $# -gt 0 ]; do
  case "$1" in
    --op) need_value "$1" "$@"; OPS="$2"; shift 2 ;;
    --base) need_value "$1" "$@"; BASE="$2"; shift 2 ;;
    --modes) need_value "$1" "$@"; MODES="$2"; shift 2 ;;
    --shapes) need_value "$1" "$@"; SHAPES="$2"; shift 2 ;;
    --rounds) need_value "$1" "$@"; ROUNDS="$2"; shift 2 ;;
    --base-exe) need_value "$1" "$@"; BASE_EXE="$2"; shift 2 ;;
    --repo) need_value "$1" "$@"; REPO="$2"; shift 2 ;;
    --gate-k) need_value "$1" "$@"; GATE_K="$2"; shift 2 ;;
    --safe-gate) need_value "$1" "$@"; SAFE_GATE="$2"; shift 2 ;;
    --threshold) need_value "$1" "$@"; THRESHOLD="$2"; shift 2 ;;
    --fail-on-regression) FAIL_ON_REG=1; shift ;;
    --loop-direction) need_value "$1" "$@"; DIRECTION="$2"; shift 2 ;;
    --loop) need_value "$1" "$@"; LOOP="$2"; shift 2 ;;
    --decision) need_value "$1" "$@"; DECISION="$2"; shift 2 ;;
    --profile) need_value "$1" "$@"; PROFILE="$2"; shift 2 ;;
    --bound) need_value "$1" "$@"; BOUND="$2"; shift 2 ;;
    --base-checks) need_value "$1" "$@"; BASE_CHECKS="$2"; shift 2 ;;
    *) parse_common_flag "$@"; shift "$TAKEN" ;;
  esac
done
[ -n "$OPS" ] || die "--op is required (chunk_gla, chunk_kda or chunk_gdn)"
[ -n "$BASE" ] || die "--base REF is required (the commit to compare against)"
[[ "$ROUNDS" =~ ^[1-9][0-9]*$ ]] || die "--rounds: got '$ROUNDS', expected a positive whole number"
if [ -z "$DIRECTION" ] && [ -n "$LOOP$DECISION$PROFILE$BOUND" ]; then
  die "--loop, --decision, --profile and --bound need --loop-direction"
fi
require_out
LINA="$(lina_exe)"
require_file "$LINA" "the candidate's lina"
[ -z "$BASE_EXE" ] || require_file "$BASE_EXE" "--base-exe"
[ -n "$REPO" ] || REPO="$REPO_ROOT"

record_machine
for op in $(split_list "$OPS"); do
  say "verify $op against $BASE ($MODES; $SHAPES; $ROUNDS rounds)"
  # lina verify takes the modes as separate words (--shapes as a comma list)
  mapfile -t modes < <(split_list "$MODES")
  args=(verify --op "$op" --base "$BASE" --repo "$REPO" --modes "${modes[@]}" --shapes "$SHAPES" --rounds "$ROUNDS"
        --json "$OUT_DIR/verify_$op.json")
  [ -z "$BASE_EXE" ] || args+=(--base-exe "$BASE_EXE")
  [ -z "$GATE_K" ] || args+=(--gate-k "$GATE_K")
  [ -z "$SAFE_GATE" ] || args+=(--safe-gate "$SAFE_GATE")
  [ -z "$THRESHOLD" ] || args+=(--threshold "$THRESHOLD")
  [ "$FAIL_ON_REG" = 0 ] || args+=(--fail-on-regression)
  rc=0
  run_logged "$OUT_DIR/logs/verify_$op.log" "$LINA" "${args[@]}" || rc=$?
  echo "verify $op rc=$rc"
  # the summary lines (the per-round lines stay in the log)
  [ "$DRY_RUN" = 1 ] || grep -vE '^round ' "$OUT_DIR/logs/verify_$op.log" | tail -25 || true
  if [ "$rc" != 0 ]; then
    note_status "$rc"
    continue  # no loop row for an attempt the gate or the baseline refused
  fi
  if [ -n "$DIRECTION" ]; then
    say "loop row for $op"
    largs=(loop log --op "$op" --repo "$REPO" --direction "$DIRECTION" --from "$OUT_DIR/verify_$op.json")
    [ -z "$LOOP" ] || largs+=(--loop "$LOOP")
    [ -z "$DECISION" ] || largs+=(--decision "$DECISION")
    [ -z "$PROFILE" ] || largs+=(--profile "$PROFILE")
    [ -z "$BOUND" ] || largs+=(--bound "$BOUND")
    rc=0
    run "$LINA" "${largs[@]}" || rc=$?
    echo "loop log $op rc=$rc"
    note_status "$rc"
  fi
done

if [ -n "$BASE_CHECKS" ]; then
  say "delta forward checks of both builds, bit hashes"
  new_check="$(test_exe lina_cuda_delta_check)" base_check="$BASE_CHECKS/lina_cuda_delta_check"
  require_file "$new_check" "the candidate's lina_cuda_delta_check"
  require_file "$base_check" "--base-checks' lina_cuda_delta_check"
  rc_new=0 rc_base=0
  run_logged "$OUT_DIR/logs/check_new.log" "$new_check" || rc_new=$?
  run_logged "$OUT_DIR/logs/check_base.log" "$base_check" || rc_base=$?
  if [ "$DRY_RUN" = 0 ]; then
    {
      echo "candidate rc=$rc_new $(grep -c ' PASS ' "$OUT_DIR/logs/check_new.log" || true) PASS $(grep -c ' FAIL ' "$OUT_DIR/logs/check_new.log" || true) FAIL"
      echo "base rc=$rc_base $(grep -c ' PASS ' "$OUT_DIR/logs/check_base.log" || true) PASS $(grep -c ' FAIL ' "$OUT_DIR/logs/check_base.log" || true) FAIL"
      echo "outputs whose bit hashes differ: $(diff <(grep -o 'bits .*' "$OUT_DIR/logs/check_new.log") <(grep -o 'bits .*' "$OUT_DIR/logs/check_base.log") | grep -c '^<' || true)"
    } | tee "$OUT_DIR/checks.txt"
  fi
  note_status "$rc_new"
fi
exit "$STATUS"

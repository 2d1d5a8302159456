#!/usr/bin/env bash
# Records lina against FLA (and FlashKDA, FlashInfer, FlashQLA where installed and named in --impls): same
# seeded inputs, same timer (do_bench, FLA's runner) and, by default, a second GPU-only timing of every cell
# (host time hidden behind a sleep kernel), through `python -m lina.bench` (python/lina/bench) on lina's torch
# extension, one process per op with nothing else on the GPU. FLA's Triton autotuning can
# be paid first in parallel processes (--warm-autotune; those timings are not figures) and its decisions
# kept (--save-autotune) or reused (--load-autotune), so timed processes compile only the chosen configs.
set -euo pipefail
# shellcheck source=bench/procedures/common.sh
source "$(dirname "$0")/common.sh"

USAGE="usage: bench/procedures/side_by_side.sh --out DIR [--ops LIST] [--modes LIST] [--shapes LIST] [--varlen-tokens N]
         [--impls LIST] [--baseline NAME] [--gate precomputed|in_kernel] [--torch-lib PATH]
         [--budget-s S] [--no-gpu-time] [--name NAME] [--git-sha SHA] [--fla-site DIR]
         [--triton-cache DIR] [--load-autotune TGZ] [--warm-autotune] [--save-autotune]
         [--build DIR | --bin DIR] [--timeout S] [--dry-run]
  --ops            comma list (default chunk_gla,chunk_kda,chunk_gdn); each op runs in its own process
  --modes          fwd, fwdbwd and/or infer (the forward without grad: forward-only peers' fwd), comma list (default fwd)
  --shapes         comma list of BATCH_T_H_D names (default: FLA's six default shapes); '' for none
  --varlen-tokens  the longtail varlen set's total tokens at H16_D128 (default 32768; 0: none)
  --impls          comma list of lina, fla, flashkda, flashinfer, flashqla (default lina,fla); lina alone times
                   lina without a comparison; a peer that is not installed is listed as not run, with its reason
  --baseline       the implementation the speedups are against (default fla)
  --gate           chunk_kda's gate: precomputed (default) or in_kernel (FLA's KDA layer; FlashKDA needs it)
  --torch-lib      lina's PyTorch extension _C.so (default: BIN/_C.so with --bin, else BUILD/bindings/torch/_C.so;
                   \$LINA_TORCH_LIB when set)
  --budget-s       time budget per cell and timer (default 0.3)
  --no-gpu-time    the do_bench timer only (default: both timers)
  --name           file prefix under --out (default side_by_side): NAME.json (lina.bench/1), NAME.md
  --git-sha        the commit lina was built from, recorded in the JSON (default: git HEAD of this checkout)
  --fla-site       a folder holding FLA and Triton (prepended to PYTHONPATH); default: the installed ones
  --triton-cache   TRITON_CACHE_DIR for the FLA processes (default: DIR/triton-cache with the autotune flags,
                   else Triton's own)
  --load-autotune  a .tgz of FLA autotune decisions (*.autotune.json, from --save-autotune) unpacked into the cache
  --warm-autotune  first one FLA-only process per op and mode, in parallel, to pay Triton's autotuning
  --save-autotune  afterwards the cache's autotune decisions as DIR/fla-autotune.tgz (a few KB)
  --build / --bin  where _C.so is: BUILD/bindings/torch (default build/) or one flat folder
  --timeout        seconds per process (default: none)
Writes DIR/NAME.json, DIR/NAME.md, DIR/machine.txt and DIR/logs/*.log; prints the table."

OPS="chunk_gla,chunk_kda,chunk_gdn" MODES="fwd" SHAPES_SET=0 SHAPES="" VARLEN=32768 IMPLS="lina,fla" BUDGET=0.3
BASELINE="fla" GATE="precomputed" TORCH_LIB="${LINA_TORCH_LIB:-}"
GPU_TIME=1 NAME="side_by_side" GIT_SHA="" FLA_SITE="" TRITON_CACHE="" LOAD_AUTOTUNE="" WARM=0 SAVE_AUTOTUNE=0
while [ $# -gt 0 ]; do
  case "$1" in
    --ops) need_value "$1" "$@"; OPS="$2"; shift 2 ;;
    --modes) need_value "$1" "$@"; MODES="$2"; shift 2 ;;
    --shapes) [ $# -ge 2 ] || die "--shapes needs a value (see --help)"; SHAPES="$2"; SHAPES_SET=1; shift 2 ;;
    --varlen-tokens) need_value "$1" "$@"; VARLEN="$2"; shift 2 ;;
    --impls) need_value "$1" "$@"; IMPLS="$2"; shift 2 ;;
    --baseline) need_value "$1" "$@"; BASELINE="$2"; shift 2 ;;
    --gate) need_value "$1" "$@"; GATE="$2"; shift 2 ;;
    --torch-lib) need_value "$1" "$@"; TORCH_LIB="$2"; shift 2 ;;
    --budget-s) need_value "$1" "$@"; BUDGET="$2"; shift 2 ;;
    --no-gpu-time) GPU_TIME=0; shift ;;
    --name) need_value "$1" "$@"; NAME="$2"; shift 2 ;;
    --git-sha) need_value "$1" "$@"; GIT_SHA="$2"; shift 2 ;;
    --fla-site) need_value "$1" "$@"; FLA_SITE="$2"; shift 2 ;;
    --triton-cache) need_value "$1" "$@"; TRITON_CACHE="$2"; shift 2 ;;
    --load-autotune) need_value "$1" "$@"; LOAD_AUTOTUNE="$2"; shift 2 ;;
    --warm-autotune) WARM=1; shift ;;
    --save-autotune) SAVE_AUTOTUNE=1; shift ;;
    *) parse_common_flag "$@"; shift "$TAKEN" ;;
  esac
done
require_out
[[ "$VARLEN" =~ ^[0-9]+$ ]] || die "--varlen-tokens: got '$VARLEN', expected a whole number of tokens"
for m in $(split_list "$MODES"); do
  [ "$m" = fwd ] || [ "$m" = fwdbwd ] || [ "$m" = infer ] || die "--modes: got '$m', expected fwd, fwdbwd or infer"
done
for op in $(split_list "$OPS"); do
  case "$op" in chunk_gla | chunk_kda | chunk_gdn) ;; *) die "--ops: got '$op', expected chunk_gla, chunk_kda or chunk_gdn" ;; esac
done
for i in $(split_list "$IMPLS") "$BASELINE"; do
  case "$i" in lina | fla | flashkda | flashinfer | flashqla) ;; *) die "--impls / --baseline: got '$i', expected lina, fla, flashkda, flashinfer or flashqla" ;; esac
done
case "$GATE" in precomputed | in_kernel) ;; *) die "--gate: got '$GATE', expected precomputed or in_kernel" ;; esac
[ -z "$LOAD_AUTOTUNE" ] || [ "$DRY_RUN" = 1 ] || [ -f "$LOAD_AUTOTUNE" ] || die "--load-autotune: no file at $LOAD_AUTOTUNE"

if [ -z "$TORCH_LIB" ]; then
  if [ -n "$BIN_DIR" ]; then TORCH_LIB="$BIN_DIR/_C.so"; else TORCH_LIB="$BUILD_DIR/bindings/torch/_C.so"; fi
fi
require_file "$TORCH_LIB" "lina's PyTorch extension _C.so (a build with LINA_BUILD_TORCH; --torch-lib PATH)"
if [ -z "$GIT_SHA" ]; then GIT_SHA="$(git -C "$REPO_ROOT" rev-parse HEAD 2>/dev/null || echo unknown)"; fi
if [ -z "$TRITON_CACHE" ] && { [ -n "$LOAD_AUTOTUNE" ] || [ "$SAVE_AUTOTUNE" = 1 ]; }; then TRITON_CACHE="$OUT_DIR/triton-cache"; fi
export PYTHONUNBUFFERED=1
# lina.bench from this tree, on the extension at TORCH_LIB (python/lina/_library.py reads LINA_TORCH_LIB)
export LINA_TORCH_LIB="$TORCH_LIB"
export PYTHONPATH="$REPO_ROOT/python${PYTHONPATH:+:$PYTHONPATH}"
if [ -n "$FLA_SITE" ]; then export PYTHONPATH="$FLA_SITE:$PYTHONPATH"; fi
printf '+ export LINA_TORCH_LIB=%s PYTHONPATH=%s\n' "$LINA_TORCH_LIB" "$PYTHONPATH"
if [ -n "$TRITON_CACHE" ]; then
  export TRITON_CACHE_DIR="$TRITON_CACHE"
  [ "$DRY_RUN" = 1 ] || mkdir -p "$TRITON_CACHE_DIR"
fi
SIDE=(python3 -m lina.bench --git-sha "$GIT_SHA" --gate "$GATE")
SHAPE_ARGS=()
[ "$SHAPES_SET" = 1 ] && SHAPE_ARGS=(--shapes "$SHAPES")

record_machine
if [ -n "$LOAD_AUTOTUNE" ]; then
  say "FLA autotune decisions from $LOAD_AUTOTUNE"
  run tar -xzf "$LOAD_AUTOTUNE" -C "$TRITON_CACHE_DIR" --strip-components=1
fi

if [ "$WARM" = 1 ]; then
  # One process per op and mode (Triton compiles configs serially within a process); they share the GPU,
  # so what they print is not a measurement.
  say "FLA autotuning, one process per op and mode (not timed)"
  pids=()
  for op in $(split_list "$OPS"); do for m in $(split_list "$MODES"); do
    run_logged "$OUT_DIR/logs/warm_${op}_$m.log" "${SIDE[@]}" --impls fla --baseline fla --ops "$op" --modes "$m" "${SHAPE_ARGS[@]}" \
      --varlen-tokens "$VARLEN" --min-samples 3 --budget-s 0.1 --out "$OUT_DIR/logs/warm_${op}_$m" &
    pids+=($!)
  done; done
  for p in "${pids[@]}"; do wait "$p" || echo "warm-up process $p exited $? (see $OUT_DIR/logs/warm_*.log)"; done
fi

GPU_ARGS=()
[ "$GPU_TIME" = 1 ] && GPU_ARGS=(--gpu-time)
for op in $(split_list "$OPS"); do
  say "side by side: $op ($MODES)"
  rc=0
  run_logged "$OUT_DIR/logs/side_$op.log" "${SIDE[@]}" --append --impls "$IMPLS" --baseline "$BASELINE" --budget-s "$BUDGET" --out "$OUT_DIR/$NAME" \
    --ops "$op" --modes "$MODES" "${SHAPE_ARGS[@]}" --varlen-tokens "$VARLEN" "${GPU_ARGS[@]}" || rc=$?
  echo "$op rc=$rc"
  note_status "$rc"
done

if [ "$SAVE_AUTOTUNE" = 1 ]; then
  say "FLA autotune decisions -> $OUT_DIR/fla-autotune.tgz"
  if [ "$DRY_RUN" = 1 ]; then
    echo "+ (cd $TRITON_CACHE_DIR/.. && find $(basename "$TRITON_CACHE_DIR") -name '*.autotune.json' | tar -czf $OUT_DIR/fla-autotune.tgz -T -)"
  else
    (cd "$TRITON_CACHE_DIR/.." && find "$(basename "$TRITON_CACHE_DIR")" -name '*.autotune.json' | tar -czf "$OUT_DIR/fla-autotune.tgz" -T -)
    echo "autotune decisions: $(tar -tzf "$OUT_DIR/fla-autotune.tgz" | grep -c 'autotune.json$' || true)"
  fi
fi
if [ "$DRY_RUN" = 0 ] && [ -f "$OUT_DIR/$NAME.md" ]; then cat "$OUT_DIR/$NAME.md"; fi
exit "$STATUS"

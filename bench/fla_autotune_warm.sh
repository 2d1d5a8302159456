#!/usr/bin/env bash
# One device call that pays FLA's Triton autotuning once and returns only its decisions.
# Each op/mode runs in its own process (Triton compiles configs serially within a process, so separate
# processes use the machine's cores); only the `*.autotune.json` files (the chosen config per kernel
# and key) are returned, a few KB, so later runs compile just the chosen configs. Timings printed
# here are NOT benchmark figures: the processes share the GPU. Later timed runs run alone.
#   device: bash bench/fla_autotune_warm.sh [SECONDS]   (carry .whl, and .carry/fla-autotune.tgz if any)
#   e.g. FLA_WARM_JOBS="chunk_gla fwdbwd B8_T2048_H32_D256;chunk_kda fwd varlen" bash bench/fla_autotune_warm.sh 300
set -u
limit="${1:-420}"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site TRITON_CACHE_DIR=/tmp/triton-cache PYTHONUNBUFFERED=1
mkdir -p "$TRITON_CACHE_DIR" "$OUT/warm"
[ -f .carry/fla-autotune.tgz ] && tar -xzf .carry/fla-autotune.tgz -C /tmp
# One process per job "OP MODE [SHAPES [VARLEN_TOKENS]]" (FLA_WARM_JOBS: jobs separated by ';').
IFS=';' read -r -a jobs <<< "${FLA_WARM_JOBS:-chunk_gla fwd;chunk_kda fwd;chunk_gdn fwd;chunk_gla fwdbwd;chunk_kda fwdbwd}"
for j in "${jobs[@]}"; do
  set -- $j
  shapes=() tag="$1_$2"
  [ $# -ge 3 ] && shapes=(--shapes "$3") tag="${tag}_$3"
  [ "${3:-}" = varlen ] && shapes=(--shapes "" --varlen-tokens "${4:-32768}")
  [ $# -ge 3 ] && [ "$3" != varlen ] && shapes+=(--varlen-tokens 0)
  ( s=$(date +%s); timeout "$limit" python3 bench/fla_side_by_side.py --impls fla --ops "$1" --modes "$2" "${shapes[@]}" \
      --min-samples 3 --budget-s 0.1 --out "$OUT/warm/$tag" > "$OUT/warm/$tag.log" 2>&1
    echo "$j rc=$? $(( $(date +%s) - s ))s" >> "$OUT/warm/summary.txt" ) &
done
wait
cat "$OUT/warm/summary.txt"
n=$(cd /tmp && find triton-cache -name '*.autotune.json' | tee /tmp/autotune.list | wc -l)
echo "autotune decisions: $n"
(cd /tmp && tar -czf "$OUT/fla-autotune.tgz" -T /tmp/autotune.list)
tar -czf "$OUT/warm.tgz" -C "$OUT" warm && rm -rf "$OUT/warm"
ls -la "$OUT"

#!/usr/bin/env bash
# One device call that judges branch glafwd-d256-prep (chunk_gla forward K = 256: prep + state kernels),
# whose binaries were built and staged without a GPU (modelled on glafwd-v5-k64's glafwd_branch_verify.sh).
#   here:   bash bench/glafwd_d256_verify.sh --stage   (build, strip, xz into /work/main/.carry/glafwd-d256-prep/)
#   device: bash .carry/glafwd-d256-prep/glafwd_d256_verify.sh .carry/glafwd-d256-prep [full]
#           (carry [".carry/glafwd-d256-prep"]; quick: steps capped at 175 s in all, timeout_s 180; full adds the sanitizers and an
#           ncu split of prep vs state at B8_T2048_H32_D256: timeout_s 480)
# Quick: --small checks (incl. the D256 varlen / steep split / mixed split cases), the bench shapes with the
# branch default, B8_T2048_H32_D256 with LINA_GLA_FWD_VERSION=4 (v4 <256,64>) in the same binary, CUDA gate
# cases. Logs -> $OUT, summary printed.
set -u
if [ "${1:-}" = "--stage" ]; then
  set -e
  W="$(cd "$(dirname "$0")/.." && pwd)"
  C=/work/main/.carry/glafwd-d256-prep
  ninja -C "$W/build" -j1 lina_cuda_gla_check lina_chunk_gla_gate
  mkdir -p "$C"
  rm -f "$C"/lina_*
  for b in lina_cuda_gla_check lina_chunk_gla_gate; do
    strip -o "$C/$b" "$W/build/tests/$b"
    xz -9 -f -T1 "$C/$b"
  done
  cp "$W/bench/glafwd_d256_verify.sh" "$C/"
  du -sh "$C"
  exit 0
fi
D="${1:?folder with lina_cuda_gla_check.xz and lina_chunk_gla_gate.xz}"
MODE="${2:-quick}"
L="$OUT"
(cd "$D" && for f in *.xz; do [ -f "$f" ] && xz -d -f -T4 "$f"; done; chmod +x lina_*)
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv,noheader
timeout 40 "$D/lina_cuda_gla_check" --small > "$L/small.log" 2>&1; echo "small rc=$?"
timeout 70 "$D/lina_cuda_gla_check" --bench > "$L/bench_new.log" 2>&1; echo "bench (branch default) rc=$?"
LINA_GLA_FWD_VERSION=4 timeout 25 "$D/lina_cuda_gla_check" --bench B8_T2048_H32_D256 > "$L/bench_v4_d256.log" 2>&1; echo "bench D256 (v4) rc=$?"
timeout 40 "$D/lina_chunk_gla_gate" --gtest_filter='*Cuda*' --gtest_brief=1 > "$L/gate.log" 2>&1; echo "gate rc=$?"
if [ "$MODE" = full ]; then
  S="compute-sanitizer --error-exitcode 9 --print-limit 20"
  for t in racecheck memcheck initcheck synccheck; do
    timeout 75 $S --tool $t "$D/lina_cuda_gla_check" --small > "$L/san_$t.log" 2>&1; echo "$t rc=$?"
  done
  if command -v ncu > /dev/null; then  # per-kernel time of prep vs state (first call of each)
    timeout 90 ncu --kernel-name regex:d256 --launch-skip 0 --launch-count 4 --section SpeedOfLight \
      "$D/lina_cuda_gla_check" --bench B8_T2048_H32_D256 > "$L/ncu_d256.log" 2>&1; echo "ncu rc=$?"
    grep -E 'chunk_gla_fwd_d256|Duration|DRAM Throughput|Compute \(SM\)' "$L/ncu_d256.log" | head -24
  fi
fi
grep -h -E 'FAIL|ALL PASSED|SUMMARY|PASSED|ran: cuda chunk_gla_fwd_d256' "$L"/*.log | sort | uniq -c
for f in bench_new bench_v4_d256; do echo "== $f"; grep -A8 '^shape' "$L/$f.log"; done

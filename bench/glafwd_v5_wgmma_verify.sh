#!/usr/bin/env bash
# One device call that judges branch glafwd-v5-wgmma (chunk_gla forward K = 128: chunk_gla_fwd_wg128, v5 with
# wgmma consumer warpgroups), whose binaries were built and staged without a GPU.
#   here:   bash bench/glafwd_v5_wgmma_verify.sh --stage   (build, strip, xz into /work/main/.carry/glafwd-v5-wgmma/)
#   device: bash .carry/glafwd-v5-wgmma/glafwd_v5_wgmma_verify.sh .carry/glafwd-v5-wgmma [full]
#           (carry [".carry/glafwd-v5-wgmma"]; quick: steps capped at 165 s in all, timeout_s 180;
#           `full` instead runs racecheck / memcheck / initcheck / synccheck on --small: capped at 360 s, timeout_s 400)
# Quick: --small (starts with the wgmma glue self-test, which names a wrong descriptor / swizzle / fragment
# layout), --small again with LINA_GLA_FWD_VERSION=6 (since the merge: wg128 with the producers' mma.sync
# A; the default has A by wgmma), the four K = 128 bench shapes timed default vs VERSION=5 (the mma.sync
# v5) vs 6 in the same process
# (LINA_GLA_BENCH_AB=5,6: default, 5, 6, default, 5, 6), the gate's CUDA cases. Logs -> $OUT, summary printed.
set -u
if [ "${1:-}" = "--stage" ]; then
  exec bash "$(dirname "$0")/stage_carry.sh" glafwd-v5-wgmma "$0" lina_cuda_gla_check lina_chunk_gla_gate
fi
D="${1:?folder with lina_cuda_gla_check.xz and lina_chunk_gla_gate.xz}"
MODE="${2:-quick}"
L="$OUT"
(cd "$D" && for f in *.xz; do [ -f "$f" ] && xz -d -f -T4 "$f"; done; chmod +x lina_*)
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv,noheader
K128="B1_T8192_H96_D128,B2_T16384_H16_D128,B4_T2048_H16_D128,B4_T4096_H64_D128"
if [ "$MODE" != full ]; then
timeout 40 "$D/lina_cuda_gla_check" --small > "$L/small.log" 2>&1; echo "small rc=$?"
grep -m1 'wgmma glue self-test' "$L/small.log"
LINA_GLA_FWD_VERSION=6 timeout 35 "$D/lina_cuda_gla_check" --small > "$L/small_v6.log" 2>&1; echo "small (VERSION=6, A by wgmma) rc=$?"
LINA_GLA_BENCH_AB=5,6 timeout 60 "$D/lina_cuda_gla_check" --bench "$K128" > "$L/bench_ab.log" 2>&1; echo "bench A/B rc=$?"
timeout 30 "$D/lina_chunk_gla_gate" --gtest_filter='*Cuda*' --gtest_brief=1 > "$L/gate.log" 2>&1; echo "gate rc=$?"
else
  S="compute-sanitizer --error-exitcode 9 --print-limit 20"
  for t in racecheck memcheck initcheck synccheck; do
    timeout 90 $S --tool $t "$D/lina_cuda_gla_check" --small > "$L/san_$t.log" 2>&1; echo "$t rc=$?"
    grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$L/san_$t.log" | tail -2
  done
fi
grep -h -E 'FAIL|ALL PASSED|SUMMARY|PASSED' "$L"/*.log | sort | uniq -c
[ "$MODE" = full ] && exit 0
grep -h 'ran: cuda chunk_gla_fwd_wg128' "$L"/small*.log | sort | uniq -c
echo "== A/B (ms; ratio = VERSION=N time / default time: 5 = mma.sync v5, 6 = wg128 with A by wgmma)"
grep '^\[ab\]' "$L/bench_ab.log"
grep -A6 '^shape' "$L/bench_ab.log"

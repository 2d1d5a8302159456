#!/usr/bin/env bash
# One device call that judges branch glafwd-d256-wgmma (chunk_gla forward K = 256: the wgmma state kernel
# chunk_gla_fwd_d256_state_wg; the mma.sync state kernel it replaced is in git history; v4 <256,64> (LINA_GLA_FWD_VERSION=4) runs in the same
# binary), built and staged without a GPU.
#   here:   bash bench/glafwd_d256_verify.sh --stage   (ninja -j1, strip, xz into /work/main/.carry/glafwd-d256-wgmma/)
#   device: bash .carry/glafwd-d256-wgmma/glafwd_d256_verify.sh .carry/glafwd-d256-wgmma [full]
#           (carry [".carry/glafwd-d256-wgmma"]; quick: steps capped at ~160 s in all, timeout_s 180;
#            full: compute-sanitizer racecheck / memcheck / initcheck / synccheck on --small, --small with the
#            mma.sync kernel, an ncu split of prep vs state: steps capped at ~385 s, timeout_s 400)
# Quick: --small (starts with the D256 layout self-test: o GEMM / A @ v / state update isolated, error
# maps on failure), B8_T2048_H32_D256 with the wgmma kernel, the mma.sync kernel, the wgmma kernel again
# (A / B / A in one binary), the gate's CUDA cases. Logs -> $OUT, summary printed.
set -u
if [ "${1:-}" = "--stage" ]; then
  exec bash "$(dirname "$0")/stage_carry.sh" glafwd-d256-wgmma "$0" lina_cuda_gla_check lina_chunk_gla_gate
fi
D="${1:?folder with lina_cuda_gla_check.xz and lina_chunk_gla_gate.xz}"
MODE="${2:-quick}"
L="$OUT"
S=B8_T2048_H32_D256
(cd "$D" && for f in *.xz; do [ -f "$f" ] && xz -d -f -T4 "$f"; done; chmod +x lina_*)
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv,noheader
if [ "$MODE" != full ]; then
  timeout 40 "$D/lina_cuda_gla_check" --small > "$L/small.log" 2>&1; echo "small rc=$?"
  grep -A6 'layout self-test' "$L/small.log" | grep -v '^\[gla fwd\] T=1' | head -40
  timeout 25 "$D/lina_cuda_gla_check" --bench $S > "$L/bench_wg.log" 2>&1; echo "bench $S (wgmma) rc=$?"
  LINA_GLA_FWD_VERSION=4 timeout 25 "$D/lina_cuda_gla_check" --bench $S > "$L/bench_v4.log" 2>&1; echo "bench $S (v4 <256,64>) rc=$?"
  timeout 25 "$D/lina_cuda_gla_check" --bench $S > "$L/bench_wg2.log" 2>&1; echo "bench $S (wgmma again) rc=$?"
  timeout 40 "$D/lina_chunk_gla_gate" --gtest_filter='*Cuda*' --gtest_brief=1 > "$L/gate.log" 2>&1; echo "gate rc=$?"
  grep -h -E 'FAIL|ALL PASSED|PASSED|exception|CUDA error' "$L"/*.log | sort | uniq -c
  grep -h 'ran: cuda chunk_gla_fwd_d256' "$L"/*.log | sort | uniq -c
  for f in bench_wg bench_v4 bench_wg2; do echo "== $f"; grep -E 'ran:|vs GPU ref' "$L/$f.log" | head -3; grep -A2 '^shape' "$L/$f.log"; done
else
  SAN="compute-sanitizer --error-exitcode 9 --print-limit 20"
  for t in racecheck memcheck initcheck synccheck; do
    timeout 70 $SAN --tool $t "$D/lina_cuda_gla_check" --small > "$L/san_$t.log" 2>&1; echo "$t rc=$?"
    grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|FAILED|ALL PASSED' "$L/san_$t.log" | head -3
  done
  if command -v ncu > /dev/null; then  # prep vs state time (the check call and the first timed call of each kernel choice)
    timeout 30 ncu --kernel-name regex:d256 --launch-count 4 --section SpeedOfLight \
      "$D/lina_cuda_gla_check" --bench $S > "$L/ncu_wg.log" 2>&1; echo "ncu (wgmma) rc=$?"
    for f in ncu_wg; do echo "== $f"; grep -E '  chunk_gla_fwd_d256|d256_state|d256_prep|Duration|DRAM Throughput|Compute \(SM\) Throughput' "$L/$f.log" | head -16; done
  fi
fi

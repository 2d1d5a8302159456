#!/usr/bin/env bash
# One device call that judges a GLA forward branch whose binaries were staged without a GPU:
# checks (--small), the bench shapes with the branch's default and with LINA_GLA_FWD_VERSION=4 (v4) in the
# same binary, the CUDA gate cases, racecheck / memcheck / initcheck on --small. Logs -> $OUT, summary printed.
#   here:   build lina_cuda_gla_check and lina_chunk_gla_gate, strip, xz into .carry/<branch>/
#   device: bash bench/glafwd_branch_verify.sh .carry/<branch>   (carry [".carry/<branch>"], timeout_s 420)
set -u
D="${1:?folder with lina_cuda_gla_check.xz and lina_chunk_gla_gate.xz}"
L="$OUT"
(cd "$D" && for f in *.xz; do [ -f "$f" ] && xz -d -f -T4 "$f"; done; chmod +x lina_*)
S="compute-sanitizer --error-exitcode 9 --print-limit 20"
timeout 60 "$D/lina_cuda_gla_check" --small > "$L/small.log" 2>&1; echo "small rc=$?"
timeout 90 "$D/lina_cuda_gla_check" --bench > "$L/bench_new.log" 2>&1; echo "bench (branch default) rc=$?"
LINA_GLA_FWD_VERSION=4 timeout 90 "$D/lina_cuda_gla_check" --bench > "$L/bench_v4.log" 2>&1; echo "bench (v4) rc=$?"
timeout 60 "$D/lina_chunk_gla_gate" --gtest_filter='*Cuda*' --gtest_brief=1 > "$L/gate.log" 2>&1; echo "gate rc=$?"
for t in racecheck memcheck initcheck; do
  timeout 120 $S --tool $t "$D/lina_cuda_gla_check" --small > "$L/san_$t.log" 2>&1; echo "$t rc=$?"
done
grep -h -E 'FAIL|ALL PASSED|SUMMARY|PASSED' "$L"/*.log | sort | uniq -c
for f in bench_new bench_v4; do echo "== $f"; grep -A8 '^shape' "$L/$f.log"; done

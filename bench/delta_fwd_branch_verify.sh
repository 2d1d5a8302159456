#!/usr/bin/env bash
# One device call that judges a delta-forward branch whose binaries were staged without a GPU:
# lina_cuda_delta_check (checks + timings) with the branch default and with LINA_DELTA_STATE_VC=64 (the
# 64-column state tiles everywhere) in the same binary, the KDA / GDN gates' CUDA cases, racecheck /
# memcheck / initcheck on the checks. Logs -> $OUT, summary printed.
#   here:   build lina_cuda_delta_check, lina_chunk_kda_gate, lina_chunk_gdn_gate; strip; xz into .carry/<branch>/
#   device: bash bench/delta_fwd_branch_verify.sh .carry/<branch>   (carry [".carry/<branch>"], timeout_s 480)
set -u
D="${1:?folder with the xz-compressed binaries}"
L="$OUT"
(cd "$D" && for f in *.xz; do [ -f "$f" ] && xz -d -f -T4 "$f"; done; chmod +x lina_*)
S="compute-sanitizer --error-exitcode 9 --print-limit 20"
timeout 120 "$D/lina_cuda_delta_check" > "$L/check_new.log" 2>&1; echo "check+time (branch default) rc=$?"
LINA_DELTA_STATE_VC=64 timeout 120 "$D/lina_cuda_delta_check" > "$L/check_vc64.log" 2>&1; echo "check+time (VC=64) rc=$?"
for op in kda gdn; do
  timeout 90 "$D/lina_chunk_${op}_gate" --gtest_filter='*Cuda*' --gtest_brief=1 > "$L/gate_$op.log" 2>&1; echo "gate $op rc=$?"
done
for t in racecheck memcheck; do
  timeout 150 $S --tool $t "$D/lina_cuda_delta_check" --no-time > "$L/san_$t.log" 2>&1; echo "$t rc=$?"
done
grep -h -E 'FAIL|ALL CHECKS|SUMMARY|PASSED' "$L"/*.log | sort | uniq -c
for f in check_new check_vc64; do echo "== $f"; grep -E ' ms ' "$L/$f.log" | tail -12; done

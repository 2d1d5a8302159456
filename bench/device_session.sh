#!/usr/bin/env bash
# One GPU-machine call that records what a session's notes need: build from a git bundle (so that
# baselines resolve real SHAs), gate suites with their counts, `lina run --op all`, `lina verify`
# against a base ref, `lina profile`. Each step has its own time limit and its log under $OUT.
#   here:   git bundle create .carry/lina.bundle HEAD main && ...run tool: bash bench/device_session.sh BASE_SHA
set -u
base="${1:?base sha}"
steps="${2:-build,gate,run,verify,profile}"
log() { echo "== $(date +%T) $*"; }
has() { [[ ",$steps," == *",$1,"* ]]; }
rm -rf /tmp/lina && git clone -q .carry/lina.bundle /tmp/lina && cd /tmp/lina && git checkout -q main
export LINA_CACHE_DIR=/tmp/lina-cache
if has build; then
  log build
  (cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null && timeout 240 ninja -C build -j16 lina lina_chunk_gla_gate lina_chunk_kda_gate lina_chunk_gdn_gate) > "$OUT/build.log" 2>&1
  tail -2 "$OUT/build.log"
fi
L=build/cli/lina
if has gate; then
  for op in chunk_gla chunk_kda chunk_gdn; do
    log "gate $op"
    timeout 40 build/tests/lina_${op}_gate --gtest_filter='*Cuda*' --gtest_brief=1 --gtest_output=json:"$OUT/gate_${op}.json" > "$OUT/gate_${op}.log" 2>&1
    echo "rc=$? $(grep -cE '^\[  PASSED|OK \]' "$OUT/gate_${op}.log") ; $(tail -4 "$OUT/gate_${op}.log" | tr '\n' ' ')"
  done
fi
if has run; then
  log "run --op all"
  timeout 120 $L run --op all --modes fwd --time-budget 0.5 --json "$OUT/run_all_h200.json" > "$OUT/run_all.log" 2>&1; echo "rc=$?"
  tail -25 "$OUT/run_all.log"
fi
if has verify; then
  log "verify chunk_gla --base $base"
  timeout 120 $L verify --op chunk_gla --base "$base" --modes fwd --shapes B4_T2048_H16_D128,B8_T1024_H8_D64 --rounds 2 --json "$OUT/verify_gla.json" > "$OUT/verify_gla.log" 2>&1; echo "rc=$?"
  tail -30 "$OUT/verify_gla.log"
fi
if has profile; then
  log "profile chunk_gla"
  timeout 70 $L profile --op chunk_gla --modes fwd --shapes B4_T2048_H16_D128 --out profile/h200 > "$OUT/profile_gla.log" 2>&1; echo "rc=$?"
  tail -25 "$OUT/profile_gla.log"
fi
log done

#!/usr/bin/env bash
# One GPU-machine call that records what a session's notes need: build from a git bundle (so that
# baselines resolve real SHAs), gate suites with their counts, compute-sanitizer over the CUDA gate
# cases, `lina run --op all`, lina vs FLA side by side, `lina verify` against a base ref, `lina
# profile`. Each step has its own time limit and its log under $OUT (at most 8 files come back, so
# logs are bundled into one tarball at the end; the tables are also printed).
#   here:   git bundle create .carry/lina.bundle main
#   device: bash bench/device_session.sh BASE_SHA [STEPS]  (carry .carry/lina.bundle, and for `side`
#           .whl + .carry/fla-autotune.tgz from bench/fla_autotune_warm.sh)
set -u
base="${1:?base sha}"
steps="${2:-build,gate,sanitize,run,side,verify,profile}"
repo=$PWD
log() { echo "== $(date +%T) $*"; }
has() { [[ ",$steps," == *",$1,"* ]]; }
L=build/cli/lina
mkdir -p "$OUT/logs"
if [ ! -x /tmp/lina/$L ] || has build; then
  rm -rf /tmp/lina && git clone -q .carry/lina.bundle /tmp/lina && git -C /tmp/lina checkout -q main
fi
cd /tmp/lina
export LINA_CACHE_DIR=/tmp/lina-cache
if has build || [ ! -x $L ]; then
  log "build $(git rev-parse --short HEAD)"
  (cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DLINA_WITH_CUDA=ON >/dev/null &&
   timeout 300 ninja -C build -j16 lina lina_c lina_chunk_gla_gate lina_chunk_kda_gate lina_chunk_gdn_gate) > "$OUT/logs/build.log" 2>&1
  echo "build rc=$?"; grep -E "spill|lmem|error" "$OUT/logs/build.log" | head
fi
if has gate; then
  for op in chunk_gla chunk_kda chunk_gdn; do
    timeout 120 build/tests/lina_${op}_gate --gtest_filter='*Cuda*' --gtest_brief=1 --gtest_output=json:"$OUT/logs/gate_${op}.json" > "$OUT/logs/gate_${op}.log" 2>&1
    rc=$?
    python3 - "$OUT/logs/gate_${op}.json" "$op" "$rc" <<'PY'
import json, sys
try:
    d = json.load(open(sys.argv[1]))
except Exception as e:
    print(sys.argv[2], "rc", sys.argv[3], "no json:", e); sys.exit()
c = {"pass": 0, "fail": 0, "skip": 0}
bad = []
for s in d["testsuites"]:
    for t in s["testsuite"]:
        if t.get("result") == "SKIPPED" or t.get("status") == "NOTRUN": c["skip"] += 1
        elif t.get("failures"): c["fail"] += 1; bad.append(s["name"] + "." + t["name"] + ": " + t["failures"][0]["failure"].split("\n")[0][:160])
        else: c["pass"] += 1
print(f"gate {sys.argv[2]} rc={sys.argv[3]} pass={c['pass']} fail={c['fail']} skip={c['skip']}")
for b in bad: print("  FAIL", b)
PY
  done
fi
if has sanitize; then
  # Small CUDA gate cases under each tool (the gate's shapes are already small; T <= 2048).
  for tool in memcheck racecheck initcheck; do
    for op in chunk_gla chunk_kda chunk_gdn; do
      f='*Cuda*T63*:*Cuda*T1_*:*Cuda*varlen*'
      [ $tool = memcheck ] && f='*Cuda*'
      timeout 150 compute-sanitizer --tool $tool --error-exitcode 9 --print-limit 20 \
        build/tests/lina_${op}_gate --gtest_filter="$f" --gtest_brief=1 > "$OUT/logs/san_${tool}_${op}.log" 2>&1
      echo "sanitize $tool $op rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/logs/san_${tool}_${op}.log" | tail -1) $(grep -cE '^\[       OK|^\[  SKIPPED' "$OUT/logs/san_${tool}_${op}.log") cases"
    done
  done
fi
if has run; then
  log "run --op all"
  timeout 200 $L run --op all --modes fwd,fwdbwd --time-budget 0.3 --json "$OUT/run_all_h200.json" > "$OUT/logs/run_all.log" 2>&1; echo "rc=$?"
  tail -45 "$OUT/logs/run_all.log"
fi
if has side; then
  log "lina vs FLA side by side"
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site "$repo"/.whl/*.whl
  mkdir -p /tmp/triton-cache && [ -f "$repo/.carry/fla-autotune.tgz" ] && tar -xzf "$repo/.carry/fla-autotune.tgz" -C /tmp
  PYTHONPATH=/tmp/site TRITON_CACHE_DIR=/tmp/triton-cache LINA_LIB=$PWD/build/bindings/liblina_c.so PYTHONUNBUFFERED=1 \
    LINA_GIT_SHA=$(git rev-parse HEAD) timeout "${SIDE_S:-240}" python3 bench/fla_side_by_side.py \
    --ops "${SIDE_OPS:-chunk_gla,chunk_kda,chunk_gdn}" --modes ${SIDE_MODES:-fwd} --budget-s 0.5 \
    --out "$OUT/side_by_side_h200" > "$OUT/logs/side.log" 2>&1; echo "rc=$?"
  tail -40 "$OUT/logs/side.log"
fi
if has verify; then
  log "verify ${VERIFY_OP:-chunk_gla} --base $base"
  timeout 240 $L verify --op "${VERIFY_OP:-chunk_gla}" --base "$base" --modes fwd --shapes B4_T2048_H16_D128,B8_T1024_H8_D64 --rounds 2 --json "$OUT/verify.json" > "$OUT/logs/verify.log" 2>&1; echo "rc=$?"
  tail -30 "$OUT/logs/verify.log"
fi
if has profile; then
  log "profile chunk_gla"
  timeout 90 $L profile --op chunk_gla --modes fwd --shapes B4_T2048_H16_D128 --out profile/h200 > "$OUT/logs/profile_gla.log" 2>&1; echo "rc=$?"
  tail -25 "$OUT/logs/profile_gla.log"
fi
tar -czf "$OUT/logs.tgz" -C "$OUT" logs && rm -rf "$OUT/logs"
log done

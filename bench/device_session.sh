#!/usr/bin/env bash
# One GPU-machine call that records what a session's notes need: build from a git bundle (so that
# baselines resolve real SHAs), gate suites with their counts, compute-sanitizer over the CUDA gate
# cases, `lina run --op all`, lina vs FLA side by side, `lina verify` against a base ref, `lina
# profile`. Each step has its own time limit and its log under $OUT (at most 8 files come back, so
# logs are bundled into one tarball at the end; the tables are also printed).
#   here:   git bundle create .carry/lina.bundle main   (also what `verify` resolves --base and HEAD in)
#   device: bash bench/device_session.sh BASE_SHA [STEPS]  (carry .carry/lina.bundle, and for `side`
#           .whl + .carry/fla-autotune.tgz from bench/fla_autotune_warm.sh)
set -u
base="${1:?base sha}"
steps="${2:-build,gate,unit,variant,checks,probe,side,sanitize,run,verify,profile}"
repo=$PWD
log() { echo "== $(date +%T) $*"; }
has() { [[ ",$steps," == *",$1,"* ]]; }
mkdir -p "$OUT/logs"
# Binaries built on the development machine (sm_90a, cudart static) and carried as .carry/bin.tar.xz
# (a folder bin/ with lina, liblina_c.so, the gate suites, lina_unit_tests and SHA): no build here.
for v in bin binb base; do
  [ -f "$repo/.carry/$v.tar.xz" ] && mkdir -p /tmp/lina-$v && tar -xJf "$repo/.carry/$v.tar.xz" -C /tmp/lina-$v
done
if [ -x /tmp/lina-bin/bin/lina_chunk_gla_gate ]; then
  BIN=/tmp/lina-bin/bin GATE=$BIN LIB=$BIN/liblina_c.so L=$BIN/lina SHA=$(cat "$BIN/SHA" 2>/dev/null)
  log "carried binaries of $SHA"
else
  if [ ! -x /tmp/lina/build/cli/lina ] || has build; then
    rm -rf /tmp/lina && git clone -q .carry/lina.bundle /tmp/lina && git -C /tmp/lina checkout -q main
  fi
  cd /tmp/lina
  log "build $(git rev-parse --short HEAD)"
  (cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DLINA_WITH_CUDA=ON >/dev/null &&
   timeout 300 ninja -C build -j16 lina lina_c lina_chunk_gla_gate lina_chunk_kda_gate lina_chunk_gdn_gate) > "$OUT/logs/build.log" 2>&1
  echo "build rc=$?"; grep -E "spill|lmem|error" "$OUT/logs/build.log" | head
  GATE=$PWD/build/tests LIB=$PWD/build/bindings/liblina_c.so L=$PWD/build/cli/lina SHA=$(git rev-parse HEAD)
fi
cd "$repo"
export LINA_CACHE_DIR=/tmp/lina-cache
if has gate; then
  for op in chunk_gla chunk_kda chunk_gdn; do
    timeout 120 $GATE/lina_${op}_gate --gtest_filter='*Cuda*' --gtest_brief=1 --gtest_output=json:"$OUT/logs/gate_${op}.json" > "$OUT/logs/gate_${op}.log" 2>&1
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
if has unit; then
  # The unit tests that need a GPU (they skip on CI): the CUDA run engine, ceilings, the workspace pool.
  LD_LIBRARY_PATH=$GATE:${LD_LIBRARY_PATH:-} timeout 120 $GATE/lina_unit_tests --gtest_filter='*Cuda*' --gtest_brief=1 > "$OUT/logs/unit_cuda.log" 2>&1
  echo "unit *Cuda* rc=$? $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "$OUT/logs/unit_cuda.log" | tr '\n' ' ')"
fi
if has sanitize; then
  # Small CUDA gate cases (one partial chunk, T = 1, varlen with an empty sequence) under each tool.
  f='*Cuda*T63_*:*Cuda*T1_*:*Cuda*varlen_zero*:*Cuda*T15_*'
  for tool in ${SAN_TOOLS:-memcheck racecheck initcheck}; do
    for op in ${SAN_OPS:-chunk_gla chunk_kda chunk_gdn}; do
      timeout "${SAN_S:-60}" compute-sanitizer --tool $tool --error-exitcode 9 --print-limit 20 \
        $GATE/lina_${op}_gate --gtest_filter="$f" --gtest_brief=1 > "$OUT/logs/san_${tool}_${op}.log" 2>&1
      echo "sanitize $tool $op rc=$? | $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/logs/san_${tool}_${op}.log" | tail -1) | $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "$OUT/logs/san_${tool}_${op}.log" | tr '\n' ' ')"
    done
  done
fi
if has checks; then
  # The standalone CUDA check programs (tests/cuda): numerics of every kernel variant, then timings.
  for c in ${CHECKS:-gla delta}; do
    timeout "${CHECK_S:-90}" $GATE/lina_cuda_${c}_check > "$OUT/logs/check_${c}.log" 2>&1
    echo "check $c rc=$? ($(grep -c 'FAIL' "$OUT/logs/check_${c}.log") lines with FAIL)"; grep 'FAIL' "$OUT/logs/check_${c}.log" | head -5
    tail -${CHECK_TAIL:-14} "$OUT/logs/check_${c}.log"
  done
fi
if has probe; then
  # Host time inside the event-timed interval (bench/host_overhead_probe.py).
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site "$repo"/.whl/*.whl
  mkdir -p /tmp/triton-cache && [ -f "$repo/.carry/fla-autotune.tgz" ] && tar -xzf "$repo/.carry/fla-autotune.tgz" -C /tmp
  PYTHONPATH=/tmp/site TRITON_CACHE_DIR=/tmp/triton-cache LINA_LIB=$LIB timeout "${PROBE_S:-120}" python3 bench/host_overhead_probe.py \
    --ops "${PROBE_OPS:-chunk_gla}" --shapes "${PROBE_SHAPES:-B8_T1024_H8_D64,B4_T2048_H16_D128}" --json "$OUT/host_probe.json" 2>&1 | tail -20
fi
# Timing steps below run alone: wait for a background job (e.g. FLA autotuning) that wrote its pid.
if [ -f "$OUT/bg.pid" ]; then
  log "waiting for background pid $(cat "$OUT/bg.pid")"
  while kill -0 "$(cat "$OUT/bg.pid")" 2>/dev/null; do sleep 2; done
  rm -f "$OUT/bg.pid"
fi
# A candidate variant (same tree plus one change) carried in .carry/binb: its gate, then its timings.
BINB=/tmp/lina-binb/bin
if [ -x "$BINB/lina_chunk_gla_gate" ] && has variant; then
  timeout 120 $BINB/lina_chunk_gla_gate --gtest_filter='*Cuda*' --gtest_brief=1 > "$OUT/logs/gate_varb.log" 2>&1
  echo "variant B gate chunk_gla rc=$? $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "$OUT/logs/gate_varb.log" | tr '\n' ' ')"
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
  side() {  # one invocation; rows accumulate in one JSON (--append)
    PYTHONPATH=/tmp/site TRITON_CACHE_DIR=/tmp/triton-cache LINA_LIB=$LIB PYTHONUNBUFFERED=1 LINA_GIT_SHA=$SHA \
      timeout "$1" python3 bench/fla_side_by_side.py --append --budget-s 0.3 --out "$OUT/side_by_side_h200" "${@:2}" >> "$OUT/logs/side.log" 2>&1
    echo "side rc=$? ${*:2}"
  }
  # FLA's autotune decisions are carried for: every fwd shape and varlen set, GLA fwdbwd at the six
  # shapes, KDA fwdbwd at B1_T8192_H96. Elsewhere only lina is timed (no speedup claimed).
  # The forward rows also get the GPU-only columns (--gpu-time: about twice the time; SIDE_GPU_TIME=0
  # skips them). At small shapes the event-timed numbers of both sides are mostly host time (sixth
  # session: GDN D64 read 4.77x FLA by events and 0.89x on the GPU), so a record carries both.
  gt=""; [ "${SIDE_GPU_TIME:-1}" = 1 ] && gt=--gpu-time
  side "${SIDE_FWD_S:-240}" --ops chunk_gla,chunk_kda,chunk_gdn --modes fwd --varlen-tokens 0 $gt
  side 90 --ops chunk_gla --modes fwdbwd --varlen-tokens 0
  side 200 --ops chunk_gla --modes fwdbwd --shapes "" --varlen-tokens 32768  # FLA autotunes its bwd here unless carried
  if [ "${SIDE_SET:-full}" = full ]; then  # quick: skips the delta backward rows (minutes of SIMT kernels)
    side 40 --ops chunk_kda --modes fwdbwd --shapes B1_T8192_H96_D128 --varlen-tokens 0
    side 60 --ops chunk_gdn --modes fwdbwd --varlen-tokens 0  # FLA refuses this backward: lina rows only
    side 60 --impls lina --ops chunk_kda --modes fwdbwd --shapes B2_T16384_H16_D128,B4_T2048_H16_D128,B4_T4096_H64_D128,B8_T2048_H32_D256,B8_T1024_H8_D64 --varlen-tokens 0
  fi
  side "${SIDE_VARLEN_S:-150}" --ops chunk_gla,chunk_kda,chunk_gdn --modes fwd --shapes "" --varlen-tokens 32768 $gt
  cat "$OUT/side_by_side_h200.md"
  if [ -x "$BINB/lina_chunk_gla_gate" ] && has variant; then
    LIB=$BINB/liblina_c.so SHA=$(cat "$BINB/SHA" 2>/dev/null)
    PYTHONPATH=/tmp/site LINA_LIB=$LIB PYTHONUNBUFFERED=1 LINA_GIT_SHA=$SHA timeout 90 python3 bench/fla_side_by_side.py \
      --impls lina --ops chunk_gla --modes fwdbwd --varlen-tokens 0 --budget-s 0.3 --out "$OUT/side_varb" >> "$OUT/logs/side.log" 2>&1
    echo "variant B side rc=$?"; grep "lina-cuda" "$OUT/logs/side.log" | tail -6
  fi
fi
if has verify; then
  # The baseline: a `lina` built elsewhere from $base, carried as .carry/base.tar.xz (--base-exe).
  bexe=/tmp/lina-base/bin/lina
  # The machine's copy of the repository may not know this session's commits (the fifth session's
  # `--base cf1be53` was refused as an unknown ref): resolve refs in a clone of .carry/lina.bundle.
  vrepo="$repo"
  if [ -f "$repo/.carry/lina.bundle" ] && rm -rf /tmp/lina-verify-repo && git clone -q "$repo/.carry/lina.bundle" /tmp/lina-verify-repo 2>/dev/null; then
    vrepo=/tmp/lina-verify-repo
  fi
  for op in ${VERIFY_OPS:-chunk_gla}; do
    log "verify $op --base $base"
    timeout "${VERIFY_S:-240}" $L verify --op "$op" --base "$base" ${bexe:+$([ -x $bexe ] && echo --base-exe $bexe)} --repo "$vrepo" \
      --modes "${VERIFY_MODES:-fwd}" --shapes "${VERIFY_SHAPES:-B1_T8192_H96_D128,B4_T2048_H16_D128,B8_T1024_H8_D64}" --rounds 2 \
      --json "$OUT/verify_$op.json" > "$OUT/logs/verify_$op.log" 2>&1; echo "rc=$?"
    grep -vE '^round ' "$OUT/logs/verify_$op.log" | tail -${VERIFY_TAIL:-22}
  done
fi
if has profile; then
  for op in ${PROFILE_OPS:-chunk_gla}; do
    log "profile $op"
    # one tarball per op (head.ncu-rep, head.csv, side_by_side.txt): at most 8 files come back from $OUT
    timeout "${PROFILE_S:-90}" $L profile --op "$op" --modes fwd --shapes "${PROFILE_SHAPES:-B4_T2048_H16_D128}" --out /tmp/profile_$op > "$OUT/logs/profile_$op.log" 2>&1; echo "rc=$?"
    tail -25 "$OUT/logs/profile_$op.log"
    [ -d /tmp/profile_$op ] && tar -czf "$OUT/profile_$op.tgz" -C /tmp profile_$op
  done
fi
tar -czf "$OUT/logs.tgz" -C "$OUT" logs && rm -rf "$OUT/logs"
log done

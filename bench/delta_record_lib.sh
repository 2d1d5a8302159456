# Functions of the delta records on the device (sourced; they use R, BIN, OUT): verify against the base lina, FLA's
# environment, the correctness summary. bench/delta_record_setup.sh sources this file.
# lina verify of OP in MODES against the base (three cells, two rounds), JSON as $OUT/verify_TAG.json, log /tmp/verify.log
#   verify_op OP MODES TAG SECONDS   (after setup_verify_repo)
setup_verify_repo() { rm -rf /tmp/vr && git clone -q $R/.carry/lina.bundle /tmp/vr; }
verify_op() {
  timeout $4 $BIN/lina verify --op $1 --base $(cat /tmp/b/bin/SHA) --base-exe /tmp/b/bin/lina --repo /tmp/vr --modes $2 --shapes B1_T8192_H96_D128,B4_T2048_H16_D128,B8_T1024_H8_D64 --rounds 2 --json $OUT/verify_$3.json >> /tmp/verify.log 2>&1
  echo "verify $3 rc=$?"; grep -vE '^round ' /tmp/verify.log | grep -E "geomean|full gate|refused" | tail -3
}
# After the correctness jobs: the first N lines of $C, then lina verify of each OP:MODES:TAG against the base (120 s each)
#   verify_after_correctness N OP:MODES:TAG ...
verify_after_correctness() {
  head -$1 $C
  echo "correctness ${SECONDS}s"
  shift
  setup_verify_repo
  for spec in "$@"; do IFS=: read -r op modes tag <<< "$spec"; verify_op $op $modes $tag 120 | tee -a $C; done
  echo "verify done ${SECONDS}s"
}
# FLA 0.6.0 from the carried wheel into /tmp/site, and the environment bench/fla_side_by_side.py runs in
setup_fla() {
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site $R/.whl/*.whl
  mkdir -p /tmp/triton-cache
  export PYTHONPATH=/tmp/site TRITON_CACHE_DIR=/tmp/triton-cache LINA_LIB=$BIN/liblina_c.so PYTHONUNBUFFERED=1 LINA_GIT_SHA=$(cat $BIN/SHA)
}
# A side-by-side call's start: lina's binaries (.carry/bin.tar.xz) into $BIN = /tmp/l/bin, the machine line, FLA's
# environment (setup_fla), and FLA's autotune decisions when .carry/fla-autotune.tgz is carried
setup_side() {
  mkdir -p /tmp/l && tar -xJf $R/.carry/bin.tar.xz -C /tmp/l
  BIN=/tmp/l/bin
  nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,driver_version --format=csv,noheader | tee $OUT/machine.txt
  setup_fla
  [ -f $R/.carry/fla-autotune.tgz ] && tar -xzf $R/.carry/fla-autotune.tgz -C /tmp
  return 0
}
# The correctness jobs' summary lines (after `wait`), then /tmp/san.txt (the caller's sanitizer lines)
correctness_summary() {
  echo "unit *Cuda*: $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' /tmp/unit.log | tr '\n' ' ')"
  for f in gk gg; do echo "gate $f: $(grep -E '^\[  (PASSED|FAILED) ' /tmp/$f.log | tr '\n' ' ')"; done
  echo "delta_bwd_check: $(grep -c ' PASS$' /tmp/ck.log) PASS, $(grep -c ' FAIL$' /tmp/ck.log) FAIL; $(grep 'ALL CHECKS\|FAILED' /tmp/ck.log)"
  echo "delta_check (forward): $(grep -c '  PASS ' /tmp/fck.log) PASS; $(tail -1 /tmp/fck.log)"
  cat /tmp/san.txt
}

# ---- Forward A/B calls (twentieth session): a new build (.carry/bin.tar.xz -> $BIN = /tmp/l/bin) against a base build
# (.carry/base.tar.xz -> /tmp/b/bin), each a bin/ folder with lina, lina_cuda_delta_check, the gates and SHA.
CELLS_FWD=B1_T8192_H96_D128,B4_T2048_H16_D128,B8_T1024_H8_D64,B8_T2048_H32_D256  # the opt2 loops' contract cells
fwd_ab_setup() {
  mkdir -p /tmp/l /tmp/b && tar -xJf $R/.carry/bin.tar.xz -C /tmp/l && tar -xJf $R/.carry/base.tar.xz -C /tmp/b
  BIN=/tmp/l/bin
  nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,driver_version --format=csv,noheader | tee $OUT/machine.txt
  echo "lina $(cat $BIN/SHA), base $(cat /tmp/b/bin/SHA)" | tee -a $OUT/machine.txt
}
bin_of() { if [ "$1" = base ]; then echo /tmp/b/bin; else echo $BIN; fi; }
# fwd_checks BUILD...: the forward checks of each build; with both, how many outputs' bit hashes differ
fwd_checks() {
  for b in "$@"; do
    timeout 150 $(bin_of $b)/lina_cuda_delta_check --no-time > /tmp/check_$b.txt 2>&1
    echo "check $b rc=$? $(grep -c ' PASS ' /tmp/check_$b.txt) PASS $(grep -c ' FAIL ' /tmp/check_$b.txt) FAIL at ${SECONDS}s"
  done
  [ $# -eq 2 ] && echo "bit hashes differing: $(diff <(grep -o 'bits .*' /tmp/check_$1.txt) <(grep -o 'bits .*' /tmp/check_$2.txt) | grep -c '^<')"
  return 0
}
# fwd_times ROUNDS "OPS" [KDA_ROUNDS]: kernel-only forward times of the six shapes, base and new alternating, into
# $OUT/whole.txt (KDA only in its first KDA_ROUNDS rounds, default all)
fwd_times() {
  for r in $(seq 1 $1); do for b in base new; do for op in $2; do
    [ $op = kda ] && [ $r -gt ${3:-$1} ] && continue
    echo "r$r $b $op: $(timeout 90 $(bin_of $b)/lina_cuda_delta_check --no-check --op $op 2>&1 | grep ' ms ' | awk '{print $2, $3}' | tr '\n' ';')"
  done; done; done 2>&1 | tee $OUT/whole.txt
}
# fwd_stages "OPS": the prep / state split at B1 of each build
fwd_stages() {
  for b in base new; do for op in $1; do
    echo "$b $op B1 stages: $(LINA_DELTA_FWD_STAGES=1 timeout 60 $(bin_of $b)/lina_cuda_delta_check --no-check --op $op --shape 0 2>&1 | grep stages | tail -1)"
  done; done 2>&1 | tee $OUT/stages.txt
}
# b1_faster OP ROUND: whether the new build's B1 time in round ROUND of $OUT/whole.txt is below the base's
b1_faster() {
  local n o
  n=$(grep "^r$2 new $1" $OUT/whole.txt | grep -o 'B1_T8192_H96_D128 [0-9.]*' | awk '{print $2}')
  o=$(grep "^r$2 base $1" $OUT/whole.txt | grep -o 'B1_T8192_H96_D128 [0-9.]*' | awk '{print $2}')
  echo "B1 $1: new $n, base $o"
  awk "BEGIN{exit !($n < $o)}"
}
# fwd_verify EXE OP...: lina verify --modes fwd of EXE (the new build's lina, or another's) against the base at the
# contract cells, two rounds, full gate; JSON as $OUT/verify_OP_fwd.json (a repo clone from the bundle first)
fwd_verify() {
  local exe=$1; shift
  [ -n "${VR_READY:-}" ] || { setup_verify_repo; VR_READY=1; }  # a fresh clone per script: a warm machine keeps /tmp
  for op in "$@"; do
    timeout 200 $exe verify --op $op --base $(cat /tmp/b/bin/SHA) --base-exe /tmp/b/bin/lina --repo /tmp/vr --modes fwd \
      --shapes $CELLS_FWD --rounds 2 --json $OUT/verify_${op}_fwd.json > /tmp/v_$op.log 2>&1
    echo "verify $op rc=$? at ${SECONDS}s"; grep -vE '^round ' /tmp/v_$op.log | grep -E "geomean|full gate|FAIL|no gate suite" | tail -3
  done
}
# fwd_sanitize "TOOLS" CASE...: compute-sanitizer TOOLS on the new build's checks whose names contain CASE
fwd_sanitize() {
  local tools=$1; shift
  for m in "$@"; do for t in $tools; do
    timeout 100 compute-sanitizer --tool $t $BIN/lina_cuda_delta_check --no-time --match "$m" > /tmp/san.log 2>&1
    echo "$m $t rc=$? $(grep -c ' PASS ' /tmp/san.log) PASS $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' /tmp/san.log | tail -1)"
  done; done 2>&1 | tee $OUT/sanitize.txt
}

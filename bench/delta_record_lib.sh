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
# The correctness jobs' summary lines (after `wait`), then /tmp/san.txt (the caller's sanitizer lines)
correctness_summary() {
  echo "unit *Cuda*: $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' /tmp/unit.log | tr '\n' ' ')"
  for f in gk gg; do echo "gate $f: $(grep -E '^\[  (PASSED|FAILED) ' /tmp/$f.log | tr '\n' ' ')"; done
  echo "delta_bwd_check: $(grep -c ' PASS$' /tmp/ck.log) PASS, $(grep -c ' FAIL$' /tmp/ck.log) FAIL; $(grep 'ALL CHECKS\|FAILED' /tmp/ck.log)"
  echo "delta_check (forward): $(grep -c '  PASS ' /tmp/fck.log) PASS; $(tail -1 /tmp/fck.log)"
  cat /tmp/san.txt
}

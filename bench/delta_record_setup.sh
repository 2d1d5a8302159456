# Sourced by the delta records (bench/delta_record.sh, bench/delta_record_s16.sh) on the device, from the repository
# root: unpacks the binaries at HEAD (.carry/bin.tar.xz) and the base lina (.carry/base.tar.xz), records the machine line
# and starts the correctness jobs in the background (GPU unit tests, both gates' CUDA cases, the delta backward and
# forward checks; logs in /tmp). Sets R, BIN and C (the correctness text under $OUT); the caller waits.
set -u
R=$PWD
mkdir -p /tmp/l /tmp/b && tar -xJf $R/.carry/bin.tar.xz -C /tmp/l && tar -xJf $R/.carry/base.tar.xz -C /tmp/b
BIN=/tmp/l/bin; C=$OUT/correct.txt
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,driver_version,memory.total --format=csv,noheader | tee $OUT/machine.txt
echo "lina $(cat $BIN/SHA), base $(cat /tmp/b/bin/SHA)" | tee $C
LD_LIBRARY_PATH=$BIN timeout 150 $BIN/lina_unit_tests --gtest_filter='*Cuda*' --gtest_brief=1 > /tmp/unit.log 2>&1 &
timeout 150 $BIN/lina_chunk_kda_gate --gtest_filter='*Cuda*' > /tmp/gk.log 2>&1 &
timeout 150 $BIN/lina_chunk_gdn_gate --gtest_filter='*Cuda*' > /tmp/gg.log 2>&1 &
OUT=/tmp timeout 150 $BIN/lina_cuda_delta_bwd_check --no-time > /tmp/ck.log 2>&1 &
OUT=/tmp timeout 150 $BIN/lina_cuda_delta_check --no-time > /tmp/fck.log 2>&1 &
# lina verify of OP in MODES against the base (three cells, two rounds), JSON as $OUT/verify_TAG.json, log /tmp/verify.log
#   verify_op OP MODES TAG SECONDS   (after setup_verify_repo)
setup_verify_repo() { rm -rf /tmp/vr && git clone -q $R/.carry/lina.bundle /tmp/vr; }
verify_op() {
  timeout $4 $BIN/lina verify --op $1 --base $(cat /tmp/b/bin/SHA) --base-exe /tmp/b/bin/lina --repo /tmp/vr --modes $2 --shapes B1_T8192_H96_D128,B4_T2048_H16_D128,B8_T1024_H8_D64 --rounds 2 --json $OUT/verify_$3.json >> /tmp/verify.log 2>&1
  echo "verify $3 rc=$?"; grep -vE '^round ' /tmp/verify.log | grep -E "geomean|full gate|refused" | tail -3
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

#!/usr/bin/env bash
# The delta ops' record of a session (the fourteenth session's, first). It replaces the thirteenth session's
# bench/delta_record_s13.sh (git show 5b600e8:bench/delta_record_s13.sh) and adds the forward checks;
# bench/delta_record_s10.sh is the tenth to twelfth sessions' script. Run on the device from the repository root with the binaries at HEAD
# (.carry/bin.tar.xz), the session start's lina (.carry/base.tar.xz), a bundle of the repository and FLA's wheel: GPU unit tests, both gates'
# CUDA cases, the delta forward and backward checks, sanitizers (backward: four tools on --small; forward: memcheck
# and racecheck on the V-tile-pair cases), stage times, kernel-only forward and backward times; lina verify fwdbwd of
# chunk_kda and chunk_gdn against the session start (.carry/base.tar.xz); chunk_kda fwdbwd vs FLA 0.6.0
# (do_bench timer, same process) with FLA's autotune from scratch (no cache was carried), B1_T8192_H96_D128 first.
#   bash bench/delta_record.sh   carry [".carry/bin.tar.xz", ".carry/base.tar.xz", ".carry/lina.bundle", ".whl"]
source bench/delta_record_setup.sh  # R, BIN, C; the correctness jobs in the background
(for t in memcheck racecheck synccheck initcheck; do OUT=/tmp timeout 150 compute-sanitizer --tool $t $BIN/lina_cuda_delta_bwd_check --small --no-time > /tmp/san_$t.log 2>&1; echo "bwd $t rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' /tmp/san_$t.log | tail -1)"; done > /tmp/san.txt
 for t in memcheck racecheck; do OUT=/tmp timeout 150 compute-sanitizer --tool $t $BIN/lina_cuda_delta_check --no-time --match pairs > /tmp/fsan_$t.log 2>&1; echo "fwd (V-tile pairs) $t rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' /tmp/fsan_$t.log | tail -1)"; done >> /tmp/san.txt) &
wait
{ correctness_summary
  for op in kda gdn; do for sh in 0 1 2 3; do echo "stages $op $sh $(OUT=/tmp LINA_DELTA_BWD_STAGES=1 timeout 20 $BIN/lina_cuda_delta_bwd_check --no-check --op $op --shape $sh 2>&1 | grep stages | tail -1)"; done; done
  OUT=/tmp timeout 60 $BIN/lina_cuda_delta_bwd_check --no-check 2>&1 | grep " ms "
  OUT=/tmp timeout 60 $BIN/lina_cuda_delta_check --no-check 2>&1 | grep " ms "
} >> $C 2>&1
cp /tmp/ck.log $OUT/delta_bwd_check.log; cp /tmp/fck.log $OUT/delta_check.log
cat $C | head -12
echo "correctness ${SECONDS}s"
setup_verify_repo
verify_op chunk_kda fwdbwd kda-fwdbwd 150 | tee -a $C
verify_op chunk_gdn fwdbwd gdn-fwdbwd 150 | tee -a $C
cp /tmp/verify.log $OUT/verify.log
echo "verify done ${SECONDS}s"
setup_fla
S="python3 bench/fla_side_by_side.py --append --budget-s 0.3 --out $OUT/side_delta_bwd_h200"
left=$((560 - SECONDS)); timeout $left $S --ops chunk_kda --modes fwdbwd --shapes B1_T8192_H96_D128 --varlen-tokens 0 > $OUT/side.log 2>&1; echo "kda fwdbwd B1 rc=$? at ${SECONDS}s"
left=$((560 - SECONDS)); [ $left -gt 40 ] && { timeout $left $S --ops chunk_kda --modes fwdbwd --shapes B4_T2048_H16_D128,B2_T16384_H16_D128,B4_T4096_H64_D128 --varlen-tokens 0 >> $OUT/side.log 2>&1; echo "kda fwdbwd rest rc=$? at ${SECONDS}s"; }
tar -czf /tmp/fla-autotune.tgz -C /tmp triton-cache
# the device returns at most 8 files from $OUT (the thirteenth session's record wrote 10 and lost one JSON): the
# verify JSONs and logs travel as one tarball; FLA's autotune cache only under the 16 MiB per-file limit
tar -czf $OUT/verify-and-logs.tgz -C $OUT $(cd $OUT && ls verify_*.json verify.log delta_bwd_check.log delta_check.log side.log 2>/dev/null) &&
  (cd $OUT && rm -f verify_*.json verify.log delta_bwd_check.log delta_check.log side.log)
[ $(stat -c %s /tmp/fla-autotune.tgz) -lt $((15 << 20)) ] && cp /tmp/fla-autotune.tgz $OUT/
grep -E '^\||eomean' $OUT/side_delta_bwd_h200.md | cut -c1-220
echo "total ${SECONDS}s"

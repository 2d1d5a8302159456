#!/usr/bin/env bash
# The seventeenth session's forward record (the GDN prep's q / k by TMA tensor maps, merged from gdn-prep-tma). Run on
# the device from the repository root with the binaries at HEAD (.carry/bin.tar.xz), the base lina (.carry/base.tar.xz:
# 30ccb97, the session start), a bundle of the repository and FLA's wheel: GPU unit tests, both gates' CUDA cases, the
# delta forward and backward checks, forward sanitizers on the GDN cases (memcheck, racecheck, synccheck, initcheck),
# prep / state times, kernel-only forward times, lina verify of chunk_gdn fwd against the base, then chunk_gdn forward vs
# FLA 0.6.0 (do_bench timer and GPU-only column, same process, FLA's autotune from scratch) at the six shapes and the
# varlen set.
#   bash bench/delta_record_s17.sh   carry [".carry/bin.tar.xz", ".carry/base.tar.xz", ".carry/lina.bundle", ".whl"]
source bench/delta_record_setup.sh  # R, BIN, C; the correctness jobs in the background
(for t in memcheck racecheck synccheck initcheck; do for m in "gdn T300 varlen H2 HV4 D128" "gdn T100 H1 HV4 D64" "gdn T300 varlen H1 HV2 D256"; do
   OUT=/tmp timeout 100 compute-sanitizer --tool $t $BIN/lina_cuda_delta_check --no-time --match "$m" > /tmp/fsan.log 2>&1
   echo "fwd $t [$m] rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' /tmp/fsan.log | tail -1)"; done; done > /tmp/san.txt) &
wait
{ correctness_summary
  for sh in 0 1 2 3 4 5; do echo "fwd stages gdn $sh $(OUT=/tmp LINA_DELTA_FWD_STAGES=1 timeout 30 $BIN/lina_cuda_delta_check --no-check --op gdn --shape $sh 2>&1 | grep stages | tail -1)"; done
  for r in 1 2; do OUT=/tmp timeout 60 $BIN/lina_cuda_delta_check --no-check --op gdn 2>&1 | grep " ms "; done
} >> $C 2>&1
cp /tmp/fck.log $OUT/delta_check.log
verify_after_correctness 14 chunk_gdn:fwd:gdn-fwd
setup_fla
S="python3 bench/fla_side_by_side.py --append --budget-s 0.3 --out $OUT/side_gdn_fwd_h200"
left=$((575 - SECONDS)); timeout $left $S --ops chunk_gdn --modes fwd --gpu-time > /tmp/side.log 2>&1; echo "fwd side-by-side rc=$? at ${SECONDS}s"
tar -czf $OUT/verify-and-logs.tgz -C / tmp/verify.log tmp/side.log $(cd / && ls tmp/unit.log tmp/gk.log tmp/gg.log tmp/ck.log 2>/dev/null) -C $OUT $(cd $OUT && ls delta_check.log 2>/dev/null) 2>/dev/null &&
  (cd $OUT && rm -f delta_check.log)
grep -E '^\||eomean' $OUT/side_gdn_fwd_h200.md 2>/dev/null | cut -c1-220
echo "total ${SECONDS}s"

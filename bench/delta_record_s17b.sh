#!/usr/bin/env bash
# The seventeenth session's closing record: main with the GDN prep's TMA loads (K >= 128; cp.async at K = 64) and the
# K = 256 backward. Run on the device from the repository root with the binaries at HEAD (.carry/bin.tar.xz), the
# session start's lina (.carry/base.tar.xz: 30ccb97), a bundle of the repository and FLA's wheel: GPU unit tests, both
# gates' CUDA cases, the delta forward and backward checks (no sanitizers: calls 1-3 ran them on every changed kernel),
# lina verify of chunk_gdn fwd against the session start on a cool GPU, then chunk_kda fwdbwd vs FLA 0.6.0 (do_bench
# timer, same process, FLA's autotune from scratch) at the three default shapes the fifteenth session's record did not
# have (D256 first: the new backward), as many as the call's time allows.
#   bash bench/delta_record_s17b.sh   carry [".carry/bin.tar.xz", ".carry/base.tar.xz", ".carry/lina.bundle", ".whl"]
source bench/delta_record_setup.sh  # R, BIN, C; the correctness jobs in the background
echo > /tmp/san.txt
wait
correctness_summary >> $C 2>&1
cp /tmp/ck.log $OUT/delta_bwd_check.log
verify_after_correctness 8 chunk_gdn:fwd:gdn-fwd
setup_fla
S="python3 bench/fla_side_by_side.py --append --budget-s 0.3 --varlen-tokens 0 --out $OUT/side_kda_fwdbwd_h200"
for sh in B8_T2048_H32_D256 B8_T1024_H8_D64 B4_T4096_H64_D128; do
  left=$((570 - SECONDS)); [ $left -lt 60 ] && break
  timeout $left $S --ops chunk_kda --modes fwdbwd --shapes $sh >> /tmp/side.log 2>&1; echo "kda fwdbwd $sh rc=$? at ${SECONDS}s"
done
tar -czf $OUT/verify-and-logs.tgz -C / tmp/verify.log tmp/side.log $(cd / && ls tmp/unit.log tmp/gk.log tmp/gg.log tmp/fck.log 2>/dev/null) -C $OUT $(cd $OUT && ls delta_bwd_check.log 2>/dev/null) 2>/dev/null &&
  (cd $OUT && rm -f delta_bwd_check.log)
grep -E '^\||eomean' $OUT/side_kda_fwdbwd_h200.md 2>/dev/null | cut -c1-220
echo "total ${SECONDS}s"

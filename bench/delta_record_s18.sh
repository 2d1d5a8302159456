#!/usr/bin/env bash
# The eighteenth session's record, part 1 (correctness and verify; part 2 is bench/delta_record_s18_side.sh): main with
# the K = 256 backward's q / k l2norm folded into chunk_prep_v2 (no prep_qk there). Run on the device from the
# repository root with the binaries at HEAD (.carry/bin.tar.xz), the base lina (.carry/base.tar.xz: d22dc20, the
# commit before the change) and a bundle of the repository: GPU unit tests, both gates' CUDA cases, the delta forward
# and backward checks, memcheck / racecheck of the three bf16 D256 backward cases, the D256 backward's stage times,
# then lina verify fwdbwd of both ops at B8_T2048_H32_D256 (the only cell whose kernels changed) against the base.
# Last, as the call's time allows, chunk_kda fwdbwd against FLA again with --gpu-time (FLA's autotune decisions carried).
#   bash bench/delta_record_s18.sh   carry [".carry/bin.tar.xz", ".carry/base.tar.xz", ".carry/lina.bundle", ".whl",
#                                           ".carry/fla-autotune.tgz"]
source bench/delta_record_setup.sh  # R, BIN, C; the correctness jobs in the background
wait
for t in memcheck racecheck; do for m in "gdn T100 H1 HV2 D256" "kda T130 H2 HV2 D256" "kda T90 H1 HV2 D256 no-l2"; do
  OUT=/tmp timeout 100 compute-sanitizer --tool $t $BIN/lina_cuda_delta_bwd_check --no-time --small --match "$m" > /tmp/s.log 2>&1
  echo "$t [$m] rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' /tmp/s.log | tail -1)"; done; done > /tmp/san.txt 2>&1
correctness_summary >> $C 2>&1
cp /tmp/ck.log $OUT/delta_bwd_check.log
head -20 $C
for op in kda gdn; do
  echo "$op D256: $(OUT=/tmp LINA_DELTA_BWD_STAGES=1 timeout 60 $BIN/lina_cuda_delta_bwd_check --no-check --op $op --shape 5 2>&1 | grep -E 'stages|D256' | tail -2 | tr '\n' ' ')"
done | tee -a $C
setup_verify_repo
for op in chunk_kda chunk_gdn; do
  timeout 150 $BIN/lina verify --op $op --base $(cat /tmp/b/bin/SHA) --base-exe /tmp/b/bin/lina --repo /tmp/vr --modes fwdbwd \
    --shapes B8_T2048_H32_D256 --rounds 2 --json $OUT/verify_${op}_D256.json >> /tmp/verify.log 2>&1
  echo "verify $op rc=$?"; grep -vE '^round ' /tmp/verify.log | grep -E "geomean|full gate|refused" | tail -3
done 2>&1 | tee -a $C
# a second FLA comparison of chunk_kda fwdbwd (the 1.8x bar), with the GPU-only columns beside do_bench's
setup_fla
tar -xzf $R/.carry/fla-autotune.tgz -C /tmp
left=$((585 - SECONDS))
[ $left -gt 60 ] && { timeout $left python3 bench/fla_side_by_side.py --budget-s 0.3 --gpu-time --ops chunk_kda --modes fwdbwd \
  --out $OUT/side_kda_fwdbwd_gputime_h200 > /tmp/side.log 2>&1; echo "kda fwdbwd --gpu-time rc=$? at ${SECONDS}s"; }
grep -E 'eomean' $OUT/side_kda_fwdbwd_gputime_h200.md 2>/dev/null
tar -czf $OUT/logs.tgz -C / tmp/verify.log $(cd / && ls tmp/side.log tmp/unit.log tmp/gk.log tmp/gg.log tmp/fck.log 2>/dev/null) -C $OUT delta_bwd_check.log && rm -f $OUT/delta_bwd_check.log
echo "total ${SECONDS}s"

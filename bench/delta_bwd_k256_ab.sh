#!/usr/bin/env bash
# One device call for the K = 256 backward (seventeenth session, branch bwd-k256) and the GDN prep's K = 64 loads
# (branch gdn-prep-tma-k64). DIR holds new_bwd_check.xz (the branch's lina_cuda_delta_bwd_check; its K <= 128 kernels
# have main's SASS, so only the new program is timed), tma_fwd_check.xz (main's lina_cuda_delta_check) and
# k64_fwd_check.xz. Backward: all checks (D256 among them), memcheck / racecheck / synccheck of D256 cases, stage times,
# kernel-only times. Forward: the k64 build's GDN checks and sanitizers, GDN times of both in alternating rounds.
#   bash bench/delta_bwd_k256_ab.sh .carry/s17b
set -u
C=$(cd "${1:?DIR}" && pwd)
cd "$C" && for f in *.xz; do xz -d -k -f "$f"; done; chmod +x *_check
timeout 240 ./new_bwd_check --no-time > $OUT/checks.txt 2>&1
echo "bwd checks rc=$? $(grep -c ' PASS$' $OUT/checks.txt) PASS $(grep -c 'FAIL' $OUT/checks.txt) FAIL"; grep -E 'FAIL|ERROR|D256|K256|D96|ALL CHECKS|FAILED' $OUT/checks.txt | cut -c1-260
for t in memcheck racecheck synccheck; do for m in "gdn T100 H1 HV2 D256" "kda T130 H2 HV2 D256" "kda varlen H1 HV2 D256"; do
  timeout 100 compute-sanitizer --tool $t ./new_bwd_check --no-time --small --match "$m" > /tmp/san.log 2>&1
  echo "bwd $t [$m] rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' /tmp/san.log | tail -1)"; grep -m3 -E 'Invalid|Race|Barrier|hazard|FAIL' /tmp/san.log
done; done 2>&1 | tee $OUT/sanitize.txt
for op in kda gdn; do echo "stages $op D256: $(LINA_DELTA_BWD_STAGES=1 timeout 60 ./new_bwd_check --no-check --op $op --shape 5 2>&1 | grep stages | tail -1)"; done 2>&1 | tee $OUT/stages.txt
timeout 150 ./new_bwd_check --no-check 2>&1 | grep -E ' ms |unsupported' | tee $OUT/times.txt
timeout 120 ./k64_fwd_check --no-time --match gdn > /tmp/fck.log 2>&1; echo "fwd k64 gdn checks rc=$? $(grep -c ' PASS ' /tmp/fck.log) PASS $(grep -c ' FAIL ' /tmp/fck.log) FAIL" | tee $OUT/fwd.txt
for t in memcheck racecheck; do timeout 100 compute-sanitizer --tool $t ./k64_fwd_check --no-time --match "gdn T100 H1 HV4 D64" > /tmp/san.log 2>&1
  echo "fwd k64 $t rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' /tmp/san.log | tail -1)"; done 2>&1 | tee -a $OUT/fwd.txt
for r in 1 2 3; do for b in tma k64; do echo "$b: $(timeout 90 ./${b}_fwd_check --no-check --op gdn 2>&1 | grep ' ms ' | awk '{print $2, $3}' | tr '\n' ';')"; done; done 2>&1 | tee -a $OUT/fwd.txt
echo "total ${SECONDS}s"

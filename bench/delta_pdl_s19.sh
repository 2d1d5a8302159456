#!/usr/bin/env bash
# Nineteenth session: the delta forward's state kernel launched as the prep's programmatic dependent (.carry/pdl.tar.xz)
# against 3823f02 (.carry/bin.tar.xz, the one-plane Q' forward without PDL): forward checks, both gates' CUDA cases,
# memcheck on two cases, kernel-only forward times alternating (three rounds), lina verify --modes fwd of both ops at
# the opt2 contract cells against 3823f02. Outputs in one tarball.
#   carry [".carry/bin.tar.xz", ".carry/pdl.tar.xz", ".carry/lina.bundle"]; bash bench/delta_pdl_s19.sh
set -u
source bench/delta_record_lib.sh
R=$PWD
mkdir -p /tmp/b /tmp/p /tmp/o && tar -xJf $R/.carry/bin.tar.xz -C /tmp/b && tar -xJf $R/.carry/pdl.tar.xz -C /tmp/p
N=/tmp/p/bin B=/tmp/b/bin O=/tmp/o
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,driver_version --format=csv,noheader | tee $O/machine.txt
echo "new $(cat $N/SHA) base $(cat $B/SHA)" | tee -a $O/machine.txt
timeout 150 $N/lina_cuda_delta_check --no-time > $O/check_pdl.txt 2>&1
echo "check pdl rc=$? $(grep -c ' PASS ' $O/check_pdl.txt) PASS $(grep -c ' FAIL ' $O/check_pdl.txt) FAIL at ${SECONDS}s" | tee $O/summary.txt
for g in kda gdn; do
  timeout 200 $N/lina_chunk_${g}_gate --gtest_filter='*Cuda*' > $O/gate_$g.txt 2>&1
  echo "gate $g rc=$? $(grep -E '^\[  (PASSED|FAILED) ' $O/gate_$g.txt | tr '\n' ' ') at ${SECONDS}s" | tee -a $O/summary.txt
done
for m in "gdn T300 varlen H2 HV4 D128" "kda T300 varlen H2 HV4 D128 lb"; do
  timeout 100 compute-sanitizer --tool memcheck $N/lina_cuda_delta_check --no-time --match "$m" > /tmp/san.log 2>&1
  echo "$m memcheck rc=$? $(grep -E 'ERROR SUMMARY' /tmp/san.log | tail -1)" | tee -a $O/summary.txt
done
for r in 1 2 3; do for b in base pdl; do for op in gdn kda; do
  d=$N; [ $b = base ] && d=$B
  echo "r$r $b $op: $(timeout 90 $d/lina_cuda_delta_check --no-check --op $op 2>&1 | grep ' ms ' | awk '{print $2, $3}' | tr '\n' ';')"
done; done; done 2>&1 | tee $O/whole.txt
rm -rf /tmp/vr && git clone -q $R/.carry/lina.bundle /tmp/vr
for op in chunk_gdn chunk_kda; do
  timeout 150 $N/lina verify --op $op --base $(cat $B/SHA) --base-exe $B/lina --repo /tmp/vr --modes fwd \
    --shapes B1_T8192_H96_D128,B4_T2048_H16_D128,B8_T1024_H8_D64,B8_T2048_H32_D256 --rounds 2 --json $O/verify_${op}_fwd.json > $O/verify_$op.log 2>&1
  echo "verify $op rc=$? at ${SECONDS}s"; grep -vE '^round ' $O/verify_$op.log | grep -E "geomean|full gate|repeatable|x \[" | tail -8
done
tar -czf $OUT/out.tgz -C /tmp o
echo "total ${SECONDS}s"

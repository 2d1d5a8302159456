#!/usr/bin/env bash
# Twenty-first session, one device call: the numbers behind the forward bars' bound at B1_T8192_H96_D128.
# 1. main's forward split into prep / state (B1, and B2_T16384_H16 where every state CTA has an SM to itself);
# 2. the GDN prep alone on a fused kernel's timeline (LINA_DELTA_GDN_PREP=wgseq: one warpgroup per head, chunks in
#    order): the pace a fused kernel's prep warpgroup sets;
# 3. the state kernels at a 192-register cap (K = 128; the register budget of two state warpgroups beside a prep
#    warpgroup): a build of lina_cuda_delta_check with __maxnreg__(192) (.carry/cap192.tar.xz), its checks and times;
# 4. Nsight Compute on the wgseq prep (B1) and the GDN state kernel alone on its SMs (B2_T16384_H16): issue slots,
#    warp states, occupancy.
#   carry [".carry/main_check.tar.xz" (main's lina_cuda_delta_check, bin/ + SHA), ".carry/cap192.tar.xz"]
set -u
R=$PWD
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,driver_version --format=csv,noheader | tee $OUT/machine.txt
mkdir -p /tmp/c /tmp/m && tar -xJf $R/.carry/cap192.tar.xz -C /tmp/c && tar -xJf $R/.carry/main_check.tar.xz -C /tmp/m
M=/tmp/m/bin/lina_cuda_delta_check X=/tmp/c/bin/lina_cuda_delta_check
echo "main $(cat /tmp/m/bin/SHA), variant $(cat /tmp/c/bin/SHA)" | tee -a $OUT/machine.txt
timeout 150 $X --no-time > /tmp/check_cap.txt 2>&1
echo "cap192 checks rc=$? $(grep -c ' PASS ' /tmp/check_cap.txt) PASS $(grep -c ' FAIL ' /tmp/check_cap.txt) FAIL at ${SECONDS}s"
timeout 150 $M --no-time > /tmp/check_main.txt 2>&1
echo "main checks rc=$? $(grep -c ' PASS ' /tmp/check_main.txt) PASS; bit hashes differing: $(diff <(grep -o 'bits .*' /tmp/check_main.txt) <(grep -o 'bits .*' /tmp/check_cap.txt) | grep -c '^<')"
stages() { LINA_DELTA_FWD_STAGES=1 timeout 60 "$@" 2>&1 | grep stages | tail -1; }
{
for r in 1 2; do for b in main cap192; do for op in gdn kda; do
  e=$M; [ $b = cap192 ] && e=$X
  echo "r$r $b $op: $(timeout 90 $e --no-check --op $op 2>&1 | grep ' ms ' | awk '{print $2, $3}' | tr '\n' ';')"
done; done; done
for b in main cap192; do for op in gdn kda; do for sh in 0 1; do
  e=$M; [ $b = cap192 ] && e=$X
  echo "$b $op shape $sh stages: $(stages $e --no-check --op $op --shape $sh)"
done; done; done
for r in 1 2; do echo "main gdn wgseq B1 stages: $(LINA_DELTA_GDN_PREP=wgseq stages $M --no-check --op gdn --shape 0)"; done
} 2>&1 | tee $OUT/times.txt
echo "times done at ${SECONDS}s"
S="--section SpeedOfLight --section WarpStateStats --section SchedulerStats --section Occupancy --section LaunchStats"
rm -f /tmp/wgseq.ncu-rep /tmp/gstate.ncu-rep
LINA_DELTA_GDN_PREP=wgseq timeout 150 ncu --kernel-name regex:gdn_wg_prep --launch-skip 1 --launch-count 1 $S -o /tmp/wgseq \
  $M --no-check --op gdn --shape 0 > /tmp/ncu1.txt 2>&1; echo "ncu wgseq rc=$? at ${SECONDS}s"
timeout 150 ncu --kernel-name regex:delta_thin_state --launch-skip 1 --launch-count 1 $S -o /tmp/gstate \
  $M --no-check --op gdn --shape 1 > /tmp/ncu2.txt 2>&1; echo "ncu state rc=$? at ${SECONDS}s"
for f in wgseq gstate; do ncu --import /tmp/$f.ncu-rep > $OUT/ncu_$f.txt 2>&1; done
for f in wgseq gstate; do echo "== $f"; grep -E 'Duration|SM Frequency|Issue Slots Busy|DRAM Throughput|Warp Cycles Per Issued|Eligible Warps|One or More Eligible|Registers Per|Achieved Occupancy|Grid Size|Block Size' $OUT/ncu_$f.txt | head -14; done
grep -h -A30 'Section: Warp State' $OUT/ncu_wgseq.txt | head -30
echo "total ${SECONDS}s"

#!/usr/bin/env bash
# Twentieth session, one device call: Nsight Compute on the KDA forward prep (kda_prep_kernel<128>) at
# B1_T8192_H96_D128 with source counters, from a -lineinfo build of lina_cuda_delta_check (DIR/*.xz): speed of
# light, warp states, instruction mix, then the stall samples per prep stage (bench/ncu_hot_lines.py --ranges over
# chunk_delta_fwd.cu's stage comments) and the hottest 25 source lines.
#   bash bench/ncu_kda_prep_s20.sh .carry/ncu
set -u
R=$PWD
C=$(cd "${1:?DIR}" && pwd)
cd "$C" && xz -d -k -f lina_cuda_delta_check.xz && chmod +x lina_cuda_delta_check
S="--section SpeedOfLight --section WarpStateStats --section InstructionStats --section SchedulerStats --section Occupancy --section MemoryWorkloadAnalysis --section SourceCounters"
timeout 300 ncu --kernel-name regex:kda_prep_kernel --launch-skip 2 --launch-count 1 --import-source yes $S -o /tmp/kp \
  ./lina_cuda_delta_check --no-check --op kda --shape 0 > /tmp/ncu_run.txt 2>&1
echo "ncu rc=$? at ${SECONDS}s"
ncu --import /tmp/kp.ncu-rep > $OUT/ncu_kda_prep.txt 2>&1
ncu --import /tmp/kp.ncu-rep --page source --csv --print-source sass > /tmp/sass.csv 2>/dev/null
F=chunk_delta_fwd.cu
python3 $R/bench/ncu_hot_lines.py /tmp/sass.csv ./lina_cuda_delta_check kda_prep_kernel --ranges $F 255-345:inverse_helpers 346-403:item_start 404-466:S0_cumsum 467-485:S1_l2norm 486-649:S2 650-677:S3a_qeb 678-680:S3b_merges 681-710:S4 > $OUT/ranges.txt 2>&1
python3 $R/bench/ncu_hot_lines.py /tmp/sass.csv ./lina_cuda_delta_check kda_prep_kernel --top 25 > $OUT/hot.txt 2>&1
grep -E 'Duration|Issue Slots Busy|DRAM Throughput|Warp Cycles Per Issued|Eligible Warps|Registers Per|Achieved Occupancy' $OUT/ncu_kda_prep.txt | head -12
head -30 $OUT/ranges.txt
echo "total ${SECONDS}s"

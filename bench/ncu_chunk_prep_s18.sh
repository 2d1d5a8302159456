#!/usr/bin/env bash
# One device call: Nsight Compute on chunk_prep_v2 (the backward's stage A), new (HEAD: K = 256 normalises q / k
# inline) and main's (d22dc20: fp32 q_n / k_n from prep_qk) at B8_T2048_H32_D256 (KDA), and HEAD's at K = 128
# B1_T8192_H96_D128 (KDA): speed of light, warp states (stall reasons incl. no_instruction), instruction stats,
# scheduler, launch / occupancy. DIR holds new_bwd_check.xz and main_bwd_check.xz.
#   bash bench/ncu_chunk_prep_s18.sh .carry/s18d
set -u
C=$(cd "${1:?DIR}" && pwd)
cd "$C" && for f in *.xz; do xz -d -k -f "$f"; done; chmod +x *_check
S="--section SpeedOfLight --section WarpStateStats --section InstructionStats --section SchedulerStats --section LaunchStats --section Occupancy --section MemoryWorkloadAnalysis"
for job in "new 5" "main 5" "new 0"; do
  set -- $job
  OUT=/tmp timeout 150 ncu --kernel-name regex:chunk_prep_v2 --launch-skip 2 --launch-count 1 $S ./$1_bwd_check --no-check --op kda --shape $2 > $OUT/ncu_$1_shape$2.txt 2>&1
  echo "$job rc=$? $(grep -E 'Duration|No Instruction|Issue Slots Busy' $OUT/ncu_$1_shape$2.txt | head -3 | tr -s ' ' | tr '\n' ';')"
done
echo "total ${SECONDS}s"

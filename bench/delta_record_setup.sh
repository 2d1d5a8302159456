# Sourced by the delta records (bench/delta_record.sh, bench/delta_record_s16.sh) on the device, from the repository
# root: unpacks the binaries at HEAD (.carry/bin.tar.xz) and the base lina (.carry/base.tar.xz), records the machine line
# and starts the correctness jobs in the background (GPU unit tests, both gates' CUDA cases, the delta backward and
# forward checks; logs in /tmp). Sets R, BIN and C (the correctness text under $OUT); the caller waits. The functions it
# offers come from bench/delta_record_lib.sh.
set -u
source bench/delta_record_lib.sh
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

#!/usr/bin/env bash
# The sixteenth session's chunk_kda forward against FLA 0.6.0 (the record's side-by-side, bench/delta_record_s16.sh, ran out
# of time after two KDA cells): do_bench timer and GPU-only column, six shapes and the varlen set, FLA's autotune from
# scratch. Binaries at HEAD from .carry/bin.tar.xz.
#   bash bench/delta_side_kda_fwd_s16.sh   carry [".carry/bin.tar.xz", ".whl"]
set -u
R=$PWD
mkdir -p /tmp/l && tar -xJf $R/.carry/bin.tar.xz -C /tmp/l
BIN=/tmp/l/bin
source bench/delta_record_lib.sh
setup_fla
timeout 420 python3 bench/fla_side_by_side.py --append --budget-s 0.3 --out $OUT/side_kda_fwd_h200 --ops chunk_kda --modes fwd --gpu-time > $OUT/side.log 2>&1
echo "kda fwd side-by-side rc=$? at ${SECONDS}s"
grep -E '^\||eomean' $OUT/side_kda_fwd_h200.md | cut -c1-220

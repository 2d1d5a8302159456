#!/usr/bin/env bash
# Twenty-first session's record, second call: chunk_gdn fwd on the varlen set against FLA 0.6.0 (the first call's last
# process ran out of time there), with the first call's FLA autotune decisions (.carry/fla-autotune.tgz).
#   carry [".carry/bin.tar.xz", ".carry/fla-autotune.tgz", ".whl"]
set -u
source bench/delta_record_lib.sh
R=$PWD
setup_side
timeout 400 python3 bench/fla_side_by_side.py --budget-s 0.3 --out $OUT/side_gdn_varlen_h200 --ops chunk_gdn --modes fwd \
  --shapes "" --varlen-tokens 32768 > /tmp/side.log 2>&1; echo "chunk_gdn fwd varlen rc=$? at ${SECONDS}s"
tail -5 /tmp/side.log
grep -E '^\|' $OUT/side_gdn_varlen_h200.md | cut -c1-200
echo "total ${SECONDS}s"

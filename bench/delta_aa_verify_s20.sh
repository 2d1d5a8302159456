#!/usr/bin/env bash
# Twentieth session, call 9: the two-level verify interval on the device: lina verify --modes fwd of chunk_gdn, main
# (kernels = b403601's, the rounds-then-samples bootstrap) against b403601, two rounds: an A/A comparison whose every
# cell should be noise.
#   carry [".carry/bin.tar.xz", ".carry/base.tar.xz", ".carry/lina.bundle"]
set -u
source bench/delta_record_lib.sh
R=$PWD
fwd_ab_setup
fwd_verify $BIN/lina chunk_gdn
grep -E '^chunk_gdn' /tmp/v_chunk_gdn.log
echo "total ${SECONDS}s"

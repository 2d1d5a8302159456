#!/usr/bin/env bash
# Twentieth session, call 8: an A/A run of the forward A/B procedure (main after the session's reverts, whose kernels
# are b403601's, against b403601): the outputs' bit hashes must all match, and lina verify must call every cell
# within noise. Calibrates the noise the session's verdicts were read against, and exercises delta_record_lib.sh's
# forward A/B functions.
#   carry [".carry/bin.tar.xz", ".carry/base.tar.xz", ".carry/lina.bundle"]
set -u
source bench/delta_record_lib.sh
R=$PWD
fwd_ab_setup
fwd_checks new base
fwd_times 2 "gdn kda"
fwd_verify $BIN/lina chunk_gdn chunk_kda
echo "total ${SECONDS}s"

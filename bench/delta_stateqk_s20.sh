#!/usr/bin/env bash
# Twentieth session, call 1: GDN's Q' formed in the state kernel at K <= 128 (kStateQk, 5fbb14d: the prep reads no q,
# writes no Q', four CTAs per SM at K = 128) against its parent b403601: forward checks of both builds, kernel-only
# times alternating (three rounds GDN, one KDA), the stage split at B1, lina verify --modes fwd of chunk_gdn, then
# memcheck / racecheck / initcheck of the new forward on small GDN cases. (As run, the verify found no gate binary:
# bin/ must carry lina_chunk_gdn_gate; call 3 ran it.)
#   carry [".carry/bin.tar.xz", ".carry/base.tar.xz", ".carry/lina.bundle"]; bash bench/delta_stateqk_s20.sh
set -u
source bench/delta_record_lib.sh
R=$PWD
fwd_ab_setup
fwd_checks new base
fwd_times 3 "gdn kda" 1
fwd_stages gdn
echo "correctness + times ${SECONDS}s"
fwd_verify $BIN/lina chunk_gdn
fwd_sanitize "memcheck racecheck initcheck" "gdn T1 H2" "gdn T100 H1 HV4 D64" "gdn T300 varlen H2 HV4 D128"
echo "total ${SECONDS}s"

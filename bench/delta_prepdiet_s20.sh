#!/usr/bin/env bash
# Twentieth session, call 7: the preps' instruction diet (83ca2cf: merge operands stored tf32-rounded, the KDA prep's
# gated tiles as 16-byte pieces; bin) against b403601: forward checks of both builds (the outputs' bit hashes must
# match: the values are unchanged), kernel-only times alternating (two rounds, both ops), stages at B1, lina verify
# --modes fwd of both ops (full gates), memcheck / racecheck on small cases.
#   carry [".carry/bin.tar.xz", ".carry/base.tar.xz", ".carry/lina.bundle"]
set -u
source bench/delta_record_lib.sh
R=$PWD
fwd_ab_setup
fwd_checks new base
fwd_times 2 "gdn kda"
fwd_stages "gdn kda"
fwd_verify $BIN/lina chunk_kda chunk_gdn
fwd_sanitize "memcheck racecheck" "kda T300 varlen" "gdn T300 varlen H2 HV4 D128" "gdn T100 H1 HV4 D64"
echo "total ${SECONDS}s"

#!/usr/bin/env bash
# Twentieth session, call 4: the state kernel with chunk ci + 1's chunk-parity tiles (GDN k, v; KDA v) issued while
# chunk ci's batch 1 runs (f908f27; bin) against b403601: forward checks, kernel-only times alternating (two rounds,
# both ops), stages at B1, then lina verify of both ops and memcheck / racecheck when GDN's B1 time is lower.
#   carry [".carry/bin.tar.xz", ".carry/base.tar.xz", ".carry/lina.bundle"]
set -u
source bench/delta_record_lib.sh
R=$PWD
fwd_ab_setup
fwd_checks new
fwd_times 2 "gdn kda"
fwd_stages "gdn kda"
if b1_faster gdn 2; then
  fwd_verify $BIN/lina chunk_gdn chunk_kda
  fwd_sanitize "memcheck racecheck" "gdn T1 H2" "gdn T300 varlen H2 HV4 D128" "kda T300 varlen" "gdn T300 varlen H1 HV2 D256"
else echo "no verify"; fi
echo "total ${SECONDS}s"

#!/usr/bin/env bash
# Twentieth session, call 3: (1) lina verify --modes fwd of chunk_gdn for the state-kernel Q' (5fbb14d, binA) against
# b403601, the JSON of its revert row; (2) the reordered state kernel (31f40e2: store_o under batch 1, next loads under
# v_new; bin) against b403601: forward checks, kernel-only times alternating (two rounds, both ops), stages at B1, and
# lina verify of both ops when GDN's B1 time is lower.
#   carry [".carry/bin.tar.xz", ".carry/binA.tar.xz", ".carry/base.tar.xz", ".carry/lina.bundle"]
set -u
source bench/delta_record_lib.sh
R=$PWD
fwd_ab_setup
tar -xJf $R/.carry/binA.tar.xz -C /tmp/l && echo "A $(cat /tmp/l/binA/SHA)" | tee -a $OUT/machine.txt
fwd_checks new
fwd_times 2 "gdn kda"
fwd_stages "gdn kda"
OUT_MAIN=$OUT; OUT=/tmp/vA && mkdir -p $OUT && fwd_verify /tmp/l/binA/lina chunk_gdn && cp $OUT/verify_chunk_gdn_fwd.json $OUT_MAIN/verify_A_chunk_gdn_fwd.json; OUT=$OUT_MAIN
if b1_faster gdn 2; then fwd_verify $BIN/lina chunk_gdn chunk_kda; else echo "no verify of the reorder"; fi
echo "total ${SECONDS}s"

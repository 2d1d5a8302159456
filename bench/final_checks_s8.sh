#!/usr/bin/env bash
# Tracked copy of .carry/s8g/run.sh (base82.tar.xz: a lina built at 82b3480). Call: run tool, command
# "bash .carry/s8g/run.sh", carry [".carry/bin.tar.xz", ".carry/base.tar.xz", ".carry/lina.bundle", ".carry/s8g"], timeout_s 560.
# s8g: final checks at HEAD (.carry/bin.tar.xz): GPU unit tests, initcheck of the delta check programs'
# small cases, and lina verify rows: GDN fwd / KDA + GDN fwdbwd vs 2b9800b (session start), GLA fwd vs
# 82b3480 (before the seventh session's GLA changes; loop contract cells).
set -u
R=$PWD
mkdir -p /tmp/lina-bin /tmp/b2 /tmp/b82 && tar -xJf $R/.carry/bin.tar.xz -C /tmp/lina-bin && tar -xJf $R/.carry/base.tar.xz -C /tmp/b2 && tar -xJf $R/.carry/s8g/base82.tar.xz -C /tmp/b82
BIN=/tmp/lina-bin/bin; L=$BIN/lina
echo "candidate $(cat $BIN/SHA), bases $(cat /tmp/b2/bin/SHA) $(cat /tmp/b82/bin/SHA)"
rm -rf /tmp/vr && git clone -q $R/.carry/lina.bundle /tmp/vr
LD_LIBRARY_PATH=$BIN timeout 120 $BIN/lina_unit_tests --gtest_filter='*Cuda*' --gtest_brief=1 > $OUT/unit.log 2>&1
echo "unit *Cuda* rc=$? $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' $OUT/unit.log | tr '\n' ' ')"
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
{ timeout 100 $CS --tool initcheck $BIN/lina_cuda_delta_bwd_check --small --no-time 2>&1 | tail -4
  timeout 60 $CS --tool initcheck $BIN/lina_chunk_gdn_gate --gtest_filter='*Cuda*Fwd*' --gtest_brief=1 2>&1 | tail -3; } > $OUT/initcheck.log
grep -E "SUMMARY|PASSED|FAILED|ALL CHECKS" $OUT/initcheck.log
v() {  # op base exe modes shapes tag
  timeout 240 $L verify --op $1 --base $2 --base-exe $3 --repo /tmp/vr --modes $4 --shapes $5 --rounds 2 --json $OUT/verify_$6.json >> $OUT/verify.log 2>&1
  echo "verify $6 rc=$?"; grep -vE '^round ' $OUT/verify.log | grep -E "gate|geomean|faster|slower|same|noise|B[0-9]" | tail -8
}
C3=B1_T8192_H96_D128,B4_T2048_H16_D128,B8_T1024_H8_D64
v chunk_gdn $(cat /tmp/b2/bin/SHA) /tmp/b2/bin/lina fwd $C3 gdn-fwd
v chunk_kda $(cat /tmp/b2/bin/SHA) /tmp/b2/bin/lina fwdbwd $C3 kda-fwdbwd
v chunk_gdn $(cat /tmp/b2/bin/SHA) /tmp/b2/bin/lina fwdbwd $C3 gdn-fwdbwd
v chunk_gla $(cat /tmp/b82/bin/SHA) /tmp/b82/bin/lina fwd $C3 gla-fwd

#!/usr/bin/env bash
# Device calls 1-2 of the sixteenth session: the one-warpgroup GDN prep (ops/delta/cuda/gdn_prep_wg.cuh) against
# gdn_thin_prep_kernel in one binary of the working tree before the old kernel was removed (LINA_DELTA_GDN_PREP =
# "" / wg / wgseq selected them then; after the removal "wg" is the default and only "wgseq" remains): checks, prep and
# state times (LINA_DELTA_FWD_STAGES), whole-forward timing, compute-sanitizer on the new kernels; text to $OUT.
#   bash bench/gdn_prep_wg_probe.sh .carry/s16a     (DIR holds new_fwd_check.xz: lina_cuda_delta_check)
set -u
C=$(cd "${1:?DIR}" && pwd)
cd "$C" && for f in *.xz; do xz -d -k -f "$f"; done; chmod +x *_check
X=./new_fwd_check
for v in base wg wgseq; do
  e=$v; [ $v = base ] && e=
  LINA_DELTA_GDN_PREP=$e timeout 120 $X --no-time --match gdn > /tmp/ck_$v.log 2>&1
  echo "check $v rc=$? $(grep -c ' PASS ' /tmp/ck_$v.log) PASS $(grep -c ' FAIL ' /tmp/ck_$v.log) FAIL"; grep -E 'FAIL|ERROR' /tmp/ck_$v.log | head -5
  grep -E 'D128' /tmp/ck_$v.log | sed -E 's/ +bits.*//' | head -8
done 2>&1 | tee $OUT/checks.txt
for r in 1 2; do for v in base wg wgseq; do for sh in 0 3 1; do
  e=$v; [ $v = base ] && e=
  echo "$v shape $sh: $(LINA_DELTA_GDN_PREP=$e LINA_DELTA_FWD_STAGES=1 timeout 60 $X --no-check --op gdn --shape $sh 2>&1 | grep stages | tail -5 | sed 's/delta_fwd stages (ms)://' | tr '\n' ';')"
done; done; done 2>&1 | tee $OUT/stages.txt
for r in 1 2; do for v in base wg wgseq; do
  e=$v; [ $v = base ] && e=
  echo "$v: $(LINA_DELTA_GDN_PREP=$e timeout 90 $X --no-check --op gdn 2>&1 | grep ' ms ' | awk '{print $2, $3}' | tr '\n' ';')"
done; done 2>&1 | tee $OUT/whole.txt
for v in wg wgseq; do for t in racecheck memcheck; do
  LINA_DELTA_GDN_PREP=$v timeout 150 compute-sanitizer --tool $t $X --no-time --match "gdn T300 varlen H2 HV4 D128" > /tmp/san_${v}_$t.log 2>&1
  echo "$v $t rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' /tmp/san_${v}_$t.log | tail -1)"
done; done 2>&1 | tee $OUT/sanitize.txt
echo "total ${SECONDS}s" | tee -a $OUT/sanitize.txt

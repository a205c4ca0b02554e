#!/bin/bash
# Why the staged integer kernel lost: staged without programmatic launch (CMV_SPQR_PDL=0,
# prep + ordinary launch from the sm_80 module) against unstaged; ncu durations of the prep,
# the staged and the unstaged kernels alone.
cd gpu-variants/sq3
xz -dkf cmv-bench.xz; chmod +x cmv-bench
SH=11008x4096,28672x8192,8192x28672
i=0
for v in "1 0" "0 1" "1 1"; do
  set -- $v; i=$((i+1)); S=$(date +%s)
  CMV_SPQR_I8_STAGED=$1 CMV_SPQR_PDL=$2 timeout 100 ./cmv-bench --suites spqr --spqr-batches 1 --shapes $SH --out-dir /tmp/s$i > /tmp/b$i.log 2>&1; echo "run$i staged=$1 pdl=$2 rc=$? $(( $(date +%s)-S ))s"
  echo "=== run$i staged=$1 pdl=$2" >> $OUT/bench.log; grep -E "ceiling|i8 .*b1:" /tmp/b$i.log >> $OUT/bench.log
done
grep -E "===|i8 " $OUT/bench.log | awk '{print $1,$2,$3,$4,$5,$6}'
for st in 1 0; do S=$(date +%s)
CMV_SPQR_I8_STAGED=$st timeout 100 ncu --kernel-name regex:"cmv_spqr_(csr_i8|prep_i8)" --launch-skip 20 --launch-count 8 --metrics gpu__time_duration.sum,sm__cycles_elapsed.avg.per_second,smsp__inst_executed.sum ./cmv-bench --suites spqr --spqr-batches 1 --shapes 28672x8192 --timing events --out-dir /tmp/n$st > $OUT/ncu-$st.log 2>&1; echo "ncu$st rc=$? $(( $(date +%s)-S ))s"
grep -E "cmv_spqr|duration|inst_executed|per_second" $OUT/ncu-$st.log | head -24
done
true

#!/bin/bash
# SpQR integer kernel of one vector with the inputs staged once per product (cmv_spqr_prep_i8 +
# cmv_spqr_*_i8s_b1, programmatic launch): GPU tests, memcheck, A-B-A-B against staging in
# every block (CMV_SPQR_I8_STAGED=0), same binary.
cd gpu-variants/sq2
for f in *.xz; do xz -dkf $f; done; chmod +x cmv-bench spqr_gpu
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
S=$(date +%s); timeout 150 ./spqr_gpu > $OUT/tests.log 2>&1; echo "tests rc=$? $(( $(date +%s)-S ))s"; grep -E "test result|panicked|FAILED|SKIPPED" $OUT/tests.log | head -5
S=$(date +%s); timeout 120 compute-sanitizer --tool memcheck ./spqr_gpu staged_integer > $OUT/memcheck.log 2>&1; echo "memcheck rc=$? $(( $(date +%s)-S ))s"; tail -1 $OUT/memcheck.log
i=0
for v in "1 4096x4096,11008x4096,28672x8192,8192x28672" "0 4096x4096,11008x4096,28672x8192,8192x28672" "1 28672x8192,8192x28672" "0 28672x8192,8192x28672"; do
  set -- $v; i=$((i+1)); S=$(date +%s)
  CMV_SPQR_I8_STAGED=$1 timeout 110 ./cmv-bench --suites spqr --spqr-batches 1 --shapes $2 --out-dir /tmp/s$i > /tmp/b$i.log 2>&1; echo "run$i staged=$1 rc=$? $(( $(date +%s)-S ))s"
  echo "=== run$i staged=$1" >> $OUT/bench.log; grep -E "ceiling|b1:" /tmp/b$i.log >> $OUT/bench.log
done
grep -E "===|i8 " $OUT/bench.log | awk '{print $1,$2,$3,$4,$5,$6}'
true

#!/bin/bash
# SBVR ring kernels (branch wip/sbvr-ring, b175a5f): their GPU test, memcheck of it, then
# B-A-B of CMV_SBVR_RING=1 against the default at one vector, n = 4.
cd gpu-variants/rg1
for f in *.xz; do xz -dkf $f; done; chmod +x cmv-bench sbvr_gpu
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
S=$(date +%s); timeout 30 ./sbvr_gpu ring_kernels > $OUT/tests.log 2>&1; echo "tests rc=$? $(( $(date +%s)-S ))s"; grep -E "test result|panicked|FAILED|differs|rel err" $OUT/tests.log | head -5
S=$(date +%s); timeout 40 compute-sanitizer --tool memcheck ./sbvr_gpu ring_kernels > $OUT/memcheck.log 2>&1; echo "memcheck rc=$? $(( $(date +%s)-S ))s"; tail -1 $OUT/memcheck.log
i=0; for v in ring base ring; do i=$((i+1)); S=$(date +%s)
  if [ $v = ring ]; then export CMV_SBVR_RING=1; else unset CMV_SBVR_RING; fi
  timeout 35 ./cmv-bench --suites sbvr --variants n4 --shapes 11008x4096,14336x4096,4096x14336 --batches 1 --out-dir /tmp/s$i > /tmp/b$i.log 2>&1; echo "run$i $v rc=$? $(( $(date +%s)-S ))s"
  echo "=== run$i $v" >> $OUT/bench.log; grep -E "ceiling|b1:" /tmp/b$i.log >> $OUT/bench.log
done
grep -E "===|b1:" $OUT/bench.log | cut -c1-120
true

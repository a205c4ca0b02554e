#!/bin/bash
# VQ programmatic tensor-core GEMV (f371d6b: the chain test without the bit-equality check).
# GPU tests, memcheck of the chain test and of the reference test, racecheck of the chain test;
# then the row-group rule under the programmatic launch: default, mma2, mma4 at batches 1,8,9,16.
T0=$(date +%s); cd gpu-variants/vq2
for f in *.xz; do xz -dkf $f; done; chmod +x cmv-bench vq_gpu
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
S=$(date +%s); timeout 90 ./vq_gpu > $OUT/vq-tests.log 2>&1; echo "vq tests rc=$? $(( $(date +%s)-S ))s"; grep -E "^test |test result|panicked|FAILED" $OUT/vq-tests.log | head -12
for t in a_chain_of_layers the_kernel_matches_the_reference; do
S=$(date +%s); timeout 150 compute-sanitizer --tool memcheck ./vq_gpu $t > /tmp/mc.log 2>&1; echo "memcheck $t rc=$? $(( $(date +%s)-S ))s"; grep -E "test result|ERROR SUMMARY" /tmp/mc.log | tail -2; (echo "== memcheck $t"; grep -E "test result|ERROR SUMMARY" /tmp/mc.log) >> $OUT/sanitizer.log
done
S=$(date +%s); timeout 120 compute-sanitizer --tool racecheck ./vq_gpu a_chain_of_layers > /tmp/rc.log 2>&1; echo "racecheck chain rc=$? $(( $(date +%s)-S ))s"; grep -E "test result|RACECHECK SUMMARY|ERROR SUMMARY" /tmp/rc.log | tail -2; (echo "== racecheck chain"; grep -E "test result|SUMMARY" /tmp/rc.log) >> $OUT/sanitizer.log
SH=11008x4096,14336x4096,4096x14336,28672x8192
for i in 1 2; do S=$(date +%s)
  [ $(( $(date +%s)-T0 )) -gt 430 ] && { echo "skip rg run$i: time"; continue; }
  timeout 100 ./cmv-bench --suites vq --variants gptvq2 --vq-kernels mma2,mma4 --batches 1,8,9,16 --shapes $SH --out-dir /tmp/r$i > /tmp/r$i.log 2>&1; echo "rg run$i rc=$? $(( $(date +%s)-S ))s"
  echo "=== rg run$i" >> $OUT/rowgroups.log; grep -E "ceiling|^vq .* [0-9]+ +2\.[0-9]+ " /tmp/r$i.log >> $OUT/rowgroups.log
done
cp /tmp/r1.log $OUT/rg-run1-full.log
grep -E "===|^vq " $OUT/rowgroups.log | awk '{print $2,$3,$4,$6,$8,$9,$10}'
true

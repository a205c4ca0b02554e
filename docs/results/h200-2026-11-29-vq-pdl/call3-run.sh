#!/bin/bash
# VQ row groups per warp under the programmatic launch (build of 0f91fc4 = 83e63e2's code):
# default (auto), mma2, mma4 at batches 1-8 at the three small shapes, two runs; then
# 4096x14336 alone at 8 and 9 vectors (the default was slower than both explicit row-group
# counts there in call 2).
T0=$(date +%s); cd gpu-variants/vq3
for f in *.xz; do xz -dkf $f; done; chmod +x cmv-bench
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
SH=11008x4096,14336x4096,4096x14336
for i in 1 2; do S=$(date +%s)
  timeout 150 ./cmv-bench --suites vq --variants gptvq2 --vq-kernels mma2,mma4 --batches 1,2,3,4,5,6,7,8 --shapes $SH --out-dir /tmp/r$i > /tmp/r$i.log 2>&1; echo "rg run$i rc=$? $(( $(date +%s)-S ))s"
  echo "=== rg run$i" >> $OUT/rowgroups.log; grep -E "ceiling|^vq " /tmp/r$i.log >> $OUT/rowgroups.log
done
cp /tmp/r1.log $OUT/rg-run1-full.log
for i in 3 4; do S=$(date +%s)
  timeout 60 ./cmv-bench --suites vq --variants gptvq2 --vq-kernels mma4,mma2 --batches 8,9 --shapes 4096x14336 --out-dir /tmp/r$i > /tmp/r$i.log 2>&1; echo "odd run$i rc=$? $(( $(date +%s)-S ))s"
  echo "=== odd run$i" >> $OUT/rowgroups.log; grep -E "ceiling|^vq " /tmp/r$i.log >> $OUT/rowgroups.log
done
grep -E "===|^vq +gptvq2\S* +[0-9]+x[0-9]+ +[0-9]+ +2\.[0-9]+ " $OUT/rowgroups.log | awk '{print $2,$3,$4,$6,$8,$10}'
true

#!/bin/bash
# SBVR n = 4: which way at 1-4 vectors on an H200 with the programmatic launches (build
# d938d63, SBVR as main 2c25b27). Way::for_batch takes binary MMA at 1-2, int8 from 3
# (measured before the programmatic launch). Default rows plus --sbvr-ways mma,i8; two runs.
T0=$(date +%s); cd gpu-variants/sw1
for f in *.xz; do xz -dkf $f; done; chmod +x cmv-bench
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
SH=11008x4096,14336x4096,4096x14336,28672x8192
for i in 1 2; do S=$(date +%s)
  [ $(( $(date +%s)-T0 )) -gt 330 ] && { echo "skip run$i: time"; continue; }
  timeout 200 ./cmv-bench --suites sbvr --variants n4 --sbvr-ways mma,i8 --batches 1,2,3,4 --shapes $SH --out-dir /tmp/s$i > /tmp/s$i.log 2>&1; echo "run$i rc=$? $(( $(date +%s)-S ))s"
  echo "=== run$i" >> $OUT/ways.log; grep -E "ceiling|^sbvr " /tmp/s$i.log >> $OUT/ways.log
done
cp /tmp/s1.log $OUT/run1-full.log
grep -E "===|^sbvr +n4\S* +[0-9]+x[0-9]+ +[0-9]+ " $OUT/ways.log | awk '{print $2,$3,$4,$6,$8,$10}'
true

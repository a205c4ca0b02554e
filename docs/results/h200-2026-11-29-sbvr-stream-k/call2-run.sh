#!/bin/bash
# SBVR: the new GEMV walk without stream-K (CMV_SBVR_STREAM=0, NEW) against 727dc4f's kernels
# (OLD: its PTX with the GEMV parameter block declared 104 bytes, of which it reads the first
# 80, through CMV_PTX_DIR), same host binary; one vector A-B-A-B, then 16 vectors A-B.
T0=$(date +%s); cd gpu-variants/s2
for f in cmv-bench.xz old/*.xz; do xz -dkf $f; done; chmod +x cmv-bench
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
SH=11008x4096,14336x4096,4096x14336,28672x8192,8192x28672
export CMV_SBVR_STREAM=0
i=0; for v in OLD NEW OLD NEW; do i=$((i+1)); S=$(date +%s)
  [ $(( S-T0 )) -gt 420 ] && { echo "skip $v: time"; continue; }
  if [ $v = OLD ]; then export CMV_PTX_DIR=$PWD/old; else unset CMV_PTX_DIR; fi
  timeout 90 ./cmv-bench --suites sbvr --variants n2,n4 --shapes $SH --batches 1 --out-dir /tmp/s$i > /tmp/b$i.log 2>&1; echo "run$i $v rc=$? $(( $(date +%s)-S ))s"
  echo "=== run$i $v" >> $OUT/bench.log; grep -E "ceiling|b1:|rror" /tmp/b$i.log >> $OUT/bench.log
done
for v in OLD NEW; do i=$((i+1)); S=$(date +%s)
  [ $(( S-T0 )) -gt 500 ] && { echo "skip $v: time"; continue; }
  if [ $v = OLD ]; then export CMV_PTX_DIR=$PWD/old; else unset CMV_PTX_DIR; fi
  timeout 60 ./cmv-bench --suites sbvr --variants n4 --shapes 11008x4096,28672x8192 --batches 8,16 --out-dir /tmp/s$i > /tmp/b$i.log 2>&1; echo "run$i $v rc=$? $(( $(date +%s)-S ))s"
  echo "=== run$i $v" >> $OUT/bench.log; grep -E "ceiling|b8:|b16:|rror" /tmp/b$i.log >> $OUT/bench.log
done
cp /tmp/b1.log $OUT/run1-full.log
grep -E "===|b1:|b8:|b16:" $OUT/bench.log | awk '{print $1,$2,$3,$4,$5,$6,$7,$8,$9}'
true

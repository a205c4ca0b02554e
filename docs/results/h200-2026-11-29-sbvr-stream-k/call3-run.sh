#!/bin/bash
# SBVR one vector: which part of the stream-K branch's walk made the deep n = 4 kernel faster
# at the short-row shapes. Same host binary (the branch, CMV_SBVR_STREAM=0), three sm_90a PTX
# through CMV_PTX_DIR: OLD = 727dc4f, B = 727dc4f plus the one-vector kernels' item loop
# tracking each item's tile (no stream-K paths), NEW = the branch's kernels. A-B-C-A-B-C.
T0=$(date +%s); cd gpu-variants/s3
for f in cmv-bench.xz */*.xz; do xz -dkf $f; done; chmod +x cmv-bench
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
SH=11008x4096,14336x4096,4096x14336
export CMV_SBVR_STREAM=0
i=0; for v in old b new old b new; do i=$((i+1)); S=$(date +%s)
  [ $(( S-T0 )) -gt 400 ] && { echo "skip $v: time"; continue; }
  export CMV_PTX_DIR=$PWD/$v
  timeout 70 ./cmv-bench --suites sbvr --variants n2,n4 --shapes $SH --batches 1 --out-dir /tmp/s$i > /tmp/b$i.log 2>&1; echo "run$i $v rc=$? $(( $(date +%s)-S ))s"
  echo "=== run$i $v" >> $OUT/bench.log; grep -E "ceiling|b1:|rror" /tmp/b$i.log >> $OUT/bench.log
done
grep -E "===|b1:" $OUT/bench.log | awk '{print $1,$2,$3,$4,$5,$6,$7}'
true

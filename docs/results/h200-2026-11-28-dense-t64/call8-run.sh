#!/bin/bash
# Producer bursts (stages refilled together) 1-4, on build c66ab28's bench with PTX by CMV_PTX_DIR.
cd gpu-variants/bu
for f in *.xz */*.xz; do xz -dkf $f; done; chmod +x cmv-bench
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
for v in p1 p2 p3 p4 p1; do
  S=$(date +%s)
  CMV_PTX_DIR=$PWD/$v timeout 100 ./cmv-bench --suites dense --shapes 8192x8192,11008x4096,14336x4096,28672x8192,8192x28672 --batches 2,8,16 --iters 100 --out-dir /tmp/a$v > $OUT/$v-$S.log 2>&1; echo "$v rc=$? $(( $(date +%s)-S ))s"
  CMV_PTX_DIR=$PWD/$v CMV_DENSE_BULK=2 CMV_DENSE_BULK_TILE=64 timeout 100 ./cmv-bench --suites dense --shapes 4096x14336,4096x4096 --batches 2,16 --iters 100 --out-dir /tmp/b$v >> $OUT/$v-$S.log 2>&1; echo "$v t64 rc=$? $(( $(date +%s)-S ))s"
done
true

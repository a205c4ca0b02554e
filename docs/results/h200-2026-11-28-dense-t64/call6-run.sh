#!/bin/bash
# Stage counts (host sized 6 / 12): a = T128 6 / T64 8, b = 5 / 7, c = 5 / 9, d = 6 / 10, e = 5 / 8.
cd gpu-variants/st3
for f in *.xz */*.xz; do xz -dkf $f; done; chmod +x cmv-bench
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
for v in a b c d e; do
  S=$(date +%s)
  CMV_PTX_DIR=$PWD/$v CMV_DENSE_BULK_TILE=128 timeout 100 ./cmv-bench --suites dense --shapes 11008x4096,14336x4096,28672x8192 --batches 2,8,16 --iters 100 --out-dir /tmp/a$v > $OUT/$v.log 2>&1; echo "$v t128 rc=$? $(( $(date +%s)-S ))s"
  S=$(date +%s)
  CMV_PTX_DIR=$PWD/$v CMV_DENSE_BULK=2 CMV_DENSE_BULK_TILE=64 timeout 100 ./cmv-bench --suites dense --shapes 8192x8192,8192x28672,4096x14336 --batches 2,8,16 --iters 100 --out-dir /tmp/b$v >> $OUT/$v.log 2>&1; echo "$v t64 rc=$? $(( $(date +%s)-S ))s"
done
true

#!/bin/bash
# Rotated column order per tile (on: the binary's PTX; off: CMV_PTX_DIR), A-B-A; GPU tests with rotation on.
cd gpu-variants/rot
for f in *.xz */*.xz; do xz -dkf $f; done; chmod +x cmv-bench dense_gpu
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
S=$(date +%s); timeout 120 ./dense_gpu bulk > $OUT/tests.log 2>&1; echo "tests rc=$? $(( $(date +%s)-S ))s"; grep -E "test result|panicked|FAILED" $OUT/tests.log | head
(for s in 8192,8192,20 4096,14336,20; do CMV_BULK_STRESS=$s timeout 60 ./dense_gpu bulk_stress; done) >> $OUT/tests.log 2>&1; echo "stress rc=$?"
i=0; for v in on off on off; do i=$((i+1)); S=$(date +%s)
  if [ $v = off ]; then export CMV_PTX_DIR=$PWD/off; else unset CMV_PTX_DIR; fi
  timeout 100 ./cmv-bench --suites dense --shapes 8192x8192,11008x4096,14336x4096,28672x8192,8192x28672 --batches 2,8,16 --iters 100 --out-dir /tmp/a$i > $OUT/$i-$v.log 2>&1; echo "$v rc=$? $(( $(date +%s)-S ))s"
done
true

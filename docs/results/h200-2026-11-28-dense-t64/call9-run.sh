#!/bin/bash
# Build 37b64de (tree of 37b64de; one block per SM by shared memory): tests, default bench b1-16, forced tiles at 4096 rows.
cd gpu-variants/pad
for f in *.xz; do xz -dkf $f; done; chmod +x cmv-bench dense_gpu
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
S=$(date +%s); timeout 120 ./dense_gpu > $OUT/tests.log 2>&1; echo "tests rc=$? $(( $(date +%s)-S ))s"; grep -E "test result|panicked|FAILED|SKIPP" $OUT/tests.log | head
(for s in 8192,8192,20 4096,14336,20; do CMV_BULK_STRESS=$s timeout 60 ./dense_gpu bulk_stress; done) > $OUT/stress.log 2>&1; echo "stress rc=$?"; grep -E "test result|wrong" $OUT/stress.log | head -4
S=$(date +%s); timeout 150 ./cmv-bench --suites dense --batches 1,2,4,8,16 --out-dir /tmp/bd > $OUT/bench-default.log 2>&1; echo "bench rc=$? $(( $(date +%s)-S ))s"; cp /tmp/bd/bench.json $OUT/bench-default.json
for t in 64 128; do CMV_DENSE_BULK=2 CMV_DENSE_BULK_TILE=$t timeout 100 ./cmv-bench --suites dense --shapes 4096x14336,4096x4096,4096x11008 --batches 2,16 --iters 100 --out-dir /tmp/b$t > $OUT/forced-$t.log 2>&1; echo "forced $t rc=$?"; done
true

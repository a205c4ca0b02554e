#!/bin/bash
# Dense copy-engine kernels, final build: GPU tests, stress on both tiles, memcheck, racecheck, bench.
cd gpu-variants/fin
for f in *.xz; do xz -dkf $f; done; chmod +x cmv-bench dense_gpu
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
S=$(date +%s); timeout 120 ./dense_gpu > $OUT/tests.log 2>&1; echo "tests rc=$? $(( $(date +%s)-S ))s"; grep -E "test result|panicked|FAILED|SKIPP" $OUT/tests.log | head
S=$(date +%s); (for s in 8192,8192,30 4096,14336,30 8192,28672,10; do CMV_BULK_STRESS=$s timeout 60 ./dense_gpu bulk_stress; done) > $OUT/stress.log 2>&1; echo "stress rc=$? $(( $(date +%s)-S ))s"; grep -E "test result|wrong|error" $OUT/stress.log | head -5
S=$(date +%s); timeout 200 compute-sanitizer --tool memcheck ./dense_gpu bulk_kernels_match > $OUT/memcheck.log 2>&1; echo "memcheck rc=$? $(( $(date +%s)-S ))s"; tail -2 $OUT/memcheck.log
S=$(date +%s); CMV_BULK_STRESS=1000,4096,2,5 timeout 120 compute-sanitizer --tool racecheck ./dense_gpu bulk_stress > $OUT/racecheck.log 2>&1; echo "racecheck rc=$? $(( $(date +%s)-S ))s"; tail -2 $OUT/racecheck.log
S=$(date +%s); timeout 150 ./cmv-bench --suites dense --batches 1,2,4,8,16 --out-dir /tmp/bd > $OUT/bench-default.log 2>&1; echo "bench rc=$? $(( $(date +%s)-S ))s"
cp /tmp/bd/bench.json $OUT/bench-default.json 2>/dev/null
true

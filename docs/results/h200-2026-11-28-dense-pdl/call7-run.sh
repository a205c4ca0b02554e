#!/bin/bash
# Build with tiles of 112 rows: dense GPU tests, stress over the three tiles, memcheck, racecheck; A-B-A-B default / CMV_DENSE_BULK_TILE=128; default bench batch 1-16.
cd gpu-variants/f4
for f in *.xz; do xz -dkf $f; done; chmod +x cmv-bench dense_gpu
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
S=$(date +%s); timeout 60 ./dense_gpu > $OUT/tests.log 2>&1; echo "tests rc=$? $(( $(date +%s)-S ))s"; grep -E "test result|panicked|FAILED" $OUT/tests.log | head -3
S=$(date +%s); (for s in 14336,4096,30 28672,8192,9 11008,4096,30; do CMV_BULK_STRESS=$s timeout 60 ./dense_gpu bulk_stress; done) >> $OUT/tests.log 2>&1; echo "stress rc=$? $(( $(date +%s)-S ))s"; grep -E "test result|wrong|error" $OUT/tests.log | tail -3
S=$(date +%s); timeout 120 compute-sanitizer --tool memcheck ./dense_gpu bulk_kernels_match > $OUT/memcheck.log 2>&1; echo "memcheck rc=$? $(( $(date +%s)-S ))s"; tail -1 $OUT/memcheck.log
S=$(date +%s); CMV_BULK_STRESS=1000,4096,3,5 timeout 120 compute-sanitizer --tool racecheck ./dense_gpu bulk_stress >> $OUT/memcheck.log 2>&1; echo "racecheck rc=$? $(( $(date +%s)-S ))s"; tail -1 $OUT/memcheck.log
i=0; for v in new t128 new t128; do i=$((i+1)); S=$(date +%s)
  if [ $v = t128 ]; then export CMV_DENSE_BULK_TILE=128; else unset CMV_DENSE_BULK_TILE; fi
  timeout 60 ./cmv-bench --suites dense --shapes 14336x4096,28672x8192 --batches 2,4,8,16 --iters 100 --out-dir /tmp/w$i > $OUT/$i-$v.log 2>&1; echo "$v rc=$? $(( $(date +%s)-S ))s"
done
unset CMV_DENSE_BULK_TILE
S=$(date +%s); timeout 150 ./cmv-bench --suites dense --batches 1,2,4,8,16 --out-dir /tmp/bd > $OUT/dense-default.log 2>&1; echo "bench rc=$? $(( $(date +%s)-S ))s"
cp /tmp/bd/bench.json $OUT/dense-default.json 2>/dev/null
true

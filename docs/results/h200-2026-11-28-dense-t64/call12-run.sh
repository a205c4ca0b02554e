#!/bin/bash
# Clusters of 2 with the inputs multicast (build of the tree committed as the cluster commit): tests, sanitizers, A-B-A-B.
cd gpu-variants/cl
for f in *.xz; do xz -dkf $f; done; chmod +x cmv-bench dense_gpu
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
S=$(date +%s); timeout 120 ./dense_gpu > $OUT/tests.log 2>&1; echo "tests rc=$? $(( $(date +%s)-S ))s"; grep -E "test result|panicked|FAILED" $OUT/tests.log | head -5
S=$(date +%s); (for s in 8192,8192,20 28672,8192,6 11008,4096,20; do CMV_DENSE_BULK_CLUSTER=2 CMV_BULK_STRESS=$s timeout 60 ./dense_gpu bulk_stress; done) > $OUT/stress.log 2>&1; echo "stress rc=$? $(( $(date +%s)-S ))s"; grep -E "test result|wrong|error" $OUT/stress.log | head -5
S=$(date +%s); timeout 120 compute-sanitizer --tool memcheck ./dense_gpu bulk_kernels_match > $OUT/memcheck.log 2>&1; echo "memcheck rc=$? $(( $(date +%s)-S ))s"; tail -1 $OUT/memcheck.log
S=$(date +%s); CMV_DENSE_BULK_CLUSTER=2 CMV_BULK_STRESS=1024,4096,2,8 timeout 120 compute-sanitizer --tool racecheck ./dense_gpu bulk_stress > $OUT/racecheck.log 2>&1; echo "racecheck rc=$? $(( $(date +%s)-S ))s"; tail -1 $OUT/racecheck.log
i=0; for v in off on off on; do i=$((i+1)); S=$(date +%s)
  if [ $v = on ]; then export CMV_DENSE_BULK_CLUSTER=2; else unset CMV_DENSE_BULK_CLUSTER; fi
  timeout 80 ./cmv-bench --suites dense --shapes 8192x8192,11008x4096,14336x4096,28672x8192,8192x28672 --batches 8,16 --iters 100 --out-dir /tmp/c$i > $OUT/$i-$v.log 2>&1; echo "$v rc=$? $(( $(date +%s)-S ))s"
done
true

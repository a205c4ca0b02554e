#!/bin/bash
# Build of the int8 wide-shape rule: dense GPU tests, memcheck of the chain test, A-B-A-B default / CMV_DENSE_BULK=0 at the 4096-row wide shapes.
cd gpu-variants/f3
for f in *.xz; do xz -dkf $f; done; chmod +x cmv-bench dense_gpu
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
S=$(date +%s); timeout 60 ./dense_gpu > $OUT/tests.log 2>&1; echo "dense tests rc=$? $(( $(date +%s)-S ))s"; grep -E "test result|panicked|FAILED" $OUT/tests.log | head -3
S=$(date +%s); timeout 100 compute-sanitizer --tool memcheck ./dense_gpu bulk_kernels_match > $OUT/memcheck.log 2>&1; echo "memcheck rc=$? $(( $(date +%s)-S ))s"; tail -1 $OUT/memcheck.log
i=0; for v in new old new old; do i=$((i+1)); S=$(date +%s)
  if [ $v = old ]; then export CMV_DENSE_BULK=0; else unset CMV_DENSE_BULK; fi
  timeout 60 ./cmv-bench --suites dense --shapes 4096x11008,4096x14336 --batches 2,4,8,16 --iters 100 --out-dir /tmp/w$i > $OUT/$i-$v.log 2>&1; echo "$v rc=$? $(( $(date +%s)-S ))s"
done
true

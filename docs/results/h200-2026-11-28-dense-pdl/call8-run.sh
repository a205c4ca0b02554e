#!/bin/bash
# Dense GPU tests of the final build, memcheck of the chain test.
cd gpu-variants/f5
xz -dkf dense_gpu.xz; chmod +x dense_gpu
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
S=$(date +%s); timeout 90 ./dense_gpu > $OUT/tests.log 2>&1; echo "tests rc=$? $(( $(date +%s)-S ))s"; grep -E "test result|panicked|FAILED" $OUT/tests.log | head -5
S=$(date +%s); timeout 120 compute-sanitizer --tool memcheck ./dense_gpu a_chain_of_bulk > $OUT/memcheck.log 2>&1; echo "memcheck rc=$? $(( $(date +%s)-S ))s"; grep -E "test result|ERROR SUMMARY" $OUT/memcheck.log
true

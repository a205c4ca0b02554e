#!/bin/bash
# VQ-GEMM stream-K (680c9e0 + the test the_stream_k_gemm_matches_the_reference): the test, then
# racecheck and memcheck of it.
cd gpu-variants/g5; xz -dkf gpu-vq.xz; chmod +x gpu-vq
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
S=$(date +%s); timeout 60 ./gpu-vq the_stream > $OUT/test.log 2>&1; echo "test rc=$? $(( $(date +%s)-S ))s"; grep -E "test result|panicked" $OUT/test.log
for tool in racecheck memcheck; do S=$(date +%s)
  timeout 150 compute-sanitizer --tool $tool ./gpu-vq the_stream > $OUT/$tool.log 2>&1; echo "$tool rc=$? $(( $(date +%s)-S ))s"; grep -E "test result|SUMMARY" $OUT/$tool.log | tail -3
done
true

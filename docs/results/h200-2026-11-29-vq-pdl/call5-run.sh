#!/bin/bash
# Build d938d63 (= 977622d's code). The VQ-GEMM on an H200 (never measured there): GPTVQ-2 at
# the 8 shapes, 128 and 512 inputs, against cuBLAS fp16 GEMM; then the default GEMV (the
# programmatic launch, the new row-group rule) at all 8 shapes, batches 1, 4, 16.
T0=$(date +%s); cd gpu-variants/vq5
for f in *.xz; do xz -dkf $f; done; chmod +x cmv-bench
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
S=$(date +%s); timeout 300 ./cmv-bench --suites vq --variants none --vq-gemm-tokens 128,512 --out-dir /tmp/g > $OUT/gemm.log 2>&1; echo "gemm rc=$? $(( $(date +%s)-S ))s"
grep -E "^\| gptvq2" $OUT/gemm.log | head -40
cp /tmp/g/*.json $OUT/ 2>/dev/null
[ $(( $(date +%s)-T0 )) -gt 400 ] && { echo "skip gemv: time"; exit 0; }
S=$(date +%s); timeout 150 ./cmv-bench --suites vq --variants gptvq2 --batches 1,4,16 --out-dir /tmp/v > $OUT/gemv.log 2>&1; echo "gemv rc=$? $(( $(date +%s)-S ))s"
grep -E "^vq +gptvq2 +[0-9]+x[0-9]+ +[0-9]+ +2\.[0-9]+ " $OUT/gemv.log | awk '{print $3,$4,$6,$8,$9,$10}'
true

#!/bin/bash
# Nsight Compute at 8192x8192 and 11008x4096, 16 fp16 vectors: cuBLAS's nvjet kernel against ours (build 37b64de).
cd gpu-variants/ncu
xz -dkf cmv-bench.xz; chmod +x cmv-bench
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
for sh in 8192x8192 11008x4096; do for k in bulk nvjet; do
S=$(date +%s)
timeout 120 ncu --set full -k regex:"$k" -c 1 ./cmv-bench --suites dense --shapes $sh --batches 16 --iters 3 --warmup 1 --timing events --out-dir /tmp/n > $OUT/ncu-$sh-$k.txt 2>&1; echo "ncu $sh $k rc=$? $(( $(date +%s)-S ))s"
done; done
true

#!/bin/bash
cd "$(dirname "$0")"
mkdir -p $OUT/r
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/r/device.txt
grep -q H200 $OUT/r/device.txt || { echo "not an H200: stop"; exit 0; }
for f in *.gz; do gunzip -f "$f"; done; chmod +x cmv-bench gpu_mma
export CMV_REQUIRE_GPU=1
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
timeout 120 ./gpu_mma --test-threads 1 mma_hopper mma_per_width > $OUT/r/gpu-mma.txt 2>&1; el "tests rc=$?"; grep -E "test result|panicked" -A3 $OUT/r/gpu-mma.txt | head -6
timeout 200 ./cmv-bench --suites beam-gemm --beam-sizes 1GiB --beam-bits 1-8 --beam-kernels mma --beam-outputs sai/ovf --beam-iters 3 --out-dir $OUT/r/gemm-hopper > $OUT/r/gemm-hopper.txt 2>&1; el "bench rc=$?"
grep -E " mma " $OUT/r/gemm-hopper.txt | cut -c1-200
CMV_BEAM_GEMM90=0 timeout 60 ./cmv-bench --suites beam-gemm --beam-sizes 1GiB --beam-bits 8,4 --beam-kernels mma --beam-outputs sai/ovf --beam-iters 3 --out-dir $OUT/r/gemm-mmasync > $OUT/r/gemm-mmasync.txt 2>&1; el "mma.sync rc=$?"
grep -E " mma " $OUT/r/gemm-mmasync.txt | cut -c1-200
timeout 60 python3 intmm2.py 11584 > $OUT/r/cublaslt.txt 2>&1; el "cublaslt rc=$?"; cat $OUT/r/cublaslt.txt
timeout 100 ./cmv-bench --suites beam-gemv --shapes 14336x4096,4096x14336,28672x8192,8192x28672 --beam-gemv-bits 4,6,8,12,16,24,32 --beam-gemv-outputs sai/ovf --beam-gemv-vectors row --out-dir $OUT/r/gemv > $OUT/r/gemv-row.txt 2>&1; el "gemv rc=$?"
grep -E "direct_b" $OUT/r/gemv-row.txt | awk '{printf "%s b%s %s %s%%\n", $1, $3, $7, $9}'

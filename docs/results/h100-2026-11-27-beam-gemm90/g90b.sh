#!/bin/bash
cd "$(dirname "$0")"
for f in *.gz; do gunzip -f "$f"; done; chmod +x cmv-bench gpu_mma
export CMV_REQUIRE_GPU=1
mkdir -p $OUT/r
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/r/device.txt
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
timeout 60 ./gpu_mma --test-threads 1 mma_hopper > $OUT/r/gpu-mma-hopper.txt 2>&1; el "hopper test rc=$?"; grep -E "test result|panicked" -A5 $OUT/r/gpu-mma-hopper.txt | head -8
timeout 120 compute-sanitizer --tool memcheck ./gpu_mma --test-threads 1 mma_hopper > $OUT/r/memcheck-hopper.txt 2>&1; el "memcheck rc=$?"; grep -E "ERROR SUMMARY|test result" $OUT/r/memcheck-hopper.txt
timeout 240 ./cmv-bench --suites beam-gemm --beam-sizes 1GiB --beam-bits ${BITS:-1-8} --beam-kernels mma --beam-outputs sai/ovf --beam-iters 3 --out-dir $OUT/r/gemm-hopper > $OUT/r/gemm-hopper.txt 2>&1; el "bench hopper rc=$?"
grep -E " mma " $OUT/r/gemm-hopper.txt | cut -c1-200
[ -n "$NOBASE" ] || CMV_BEAM_GEMM90=0 timeout 100 ./cmv-bench --suites beam-gemm --beam-sizes 1GiB --beam-bits ${BASE_BITS:-8,4} --beam-kernels mma --beam-outputs sai/ovf --beam-iters 3 --out-dir $OUT/r/gemm-mmasync > $OUT/r/gemm-mmasync.txt 2>&1; el "bench mma.sync rc=$?"
grep -E " mma " $OUT/r/gemm-mmasync.txt | cut -c1-200
[ -n "$NOBASE" ] || timeout 60 python3 intmm2.py 11584 > $OUT/r/cublaslt.txt 2>&1; el "cublaslt rc=$?"; cat $OUT/r/cublaslt.txt
timeout 250 ./gpu_mma --test-threads 1 > $OUT/r/gpu-mma-all.txt 2>&1; el "all gpu_mma tests rc=$?"; grep -E "^test |test result|panicked" -A1 $OUT/r/gpu-mma-all.txt | head -20

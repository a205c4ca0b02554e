#!/bin/bash
# BEAM GEMM on Hopper: the warp-specialized wgmma kernel (one warpgroup copies and unpacks, two
# multiply; mbarriers per tile buffer) against the lockstep wgmma kernel (CMV_BEAM_GEMM90_WS=0).
# Carry gpu-variants/bg1; move crates/beam-pack/ptx/beam_kernels.ptx out of the tree first.
T0=$(date +%s); cd gpu-variants/bg1; el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
for f in cmv-bench.xz gpu_mma.xz; do xz -dkf $f; done; chmod +x cmv-bench gpu_mma
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
export CMV_REQUIRE_GPU=1
timeout 100 ./gpu_mma --test-threads 1 mma_hopper_kernels > $OUT/tests-hopper.log 2>&1; el "hopper tests rc=$?"; grep -E "test result|panicked" -A3 $OUT/tests-hopper.log | head -8
timeout 60 ./cmv-bench --suites beam-gemm --beam-sizes 1GiB --beam-bits 1-8 --beam-kernels mma --beam-outputs sai/ovf --beam-iters 3 --out-dir /tmp/g1 > $OUT/gemm-ws-1.log 2>&1; el "ws rc=$?"
grep -E " mma " $OUT/gemm-ws-1.log | cut -c1-170
CMV_BEAM_GEMM90_WS=0 timeout 60 ./cmv-bench --suites beam-gemm --beam-sizes 1GiB --beam-bits 1-8 --beam-kernels mma --beam-outputs sai/ovf --beam-iters 3 --out-dir /tmp/g2 > $OUT/gemm-old-1.log 2>&1; el "old rc=$?"
grep -E " mma " $OUT/gemm-old-1.log | cut -c1-170
timeout 60 ./cmv-bench --suites beam-gemm --beam-sizes 1GiB --beam-bits 2,4,8 --beam-kernels mma --beam-outputs sai/ovf --beam-iters 3 --out-dir /tmp/g3 > $OUT/gemm-ws-2.log 2>&1; el "ws2 rc=$?"
grep -E " mma " $OUT/gemm-ws-2.log | cut -c1-170
timeout 60 python3 intmm2.py 11584 > $OUT/cublaslt.log 2>&1; el "cublaslt rc=$?"; cat $OUT/cublaslt.log
timeout 150 ./gpu_mma --test-threads 1 mma_per_width > $OUT/tests-width.log 2>&1; el "width tests rc=$?"; grep -E "test result|panicked" -A3 $OUT/tests-width.log | head -8
timeout 120 compute-sanitizer --tool memcheck ./gpu_mma --test-threads 1 mma_hopper_kernels > $OUT/memcheck.log 2>&1; el "memcheck rc=$?"; tail -2 $OUT/memcheck.log
true

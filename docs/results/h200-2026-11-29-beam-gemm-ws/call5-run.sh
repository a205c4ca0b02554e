#!/bin/bash
# BEAM GEMM on Hopper, the committed build: K permuted at 1, 2, 4 bits and B's units of 1, 2, 4
# bits unpacked by gathering bytes (narrow_b_columns), in both wgmma kernels; the launcher runs
# the warp-specialized kernel up to 5 bits and the lockstep one above. GPU tests (both kernels
# forced, then the rule), the default path, the lockstep kernel forced, memcheck, cuBLASLt.
# Carry gpu-variants/bg5; move crates/beam-pack/ptx/beam_kernels.ptx out of the tree first.
T0=$(date +%s); cd gpu-variants/bg5; el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
for f in cmv-bench.xz gpu_mma.xz; do xz -dkf $f; done; chmod +x cmv-bench gpu_mma
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
export CMV_REQUIRE_GPU=1
timeout 110 ./gpu_mma --test-threads 1 mma_hopper_kernels > $OUT/tests-hopper.log 2>&1; el "hopper tests rc=$?"; grep -E "test result|panicked" -A3 $OUT/tests-hopper.log | head -8
timeout 60 ./gpu_mma --test-threads 1 mma_per_width > $OUT/tests-width.log 2>&1; el "width tests rc=$?"; grep -E "test result|panicked" -A3 $OUT/tests-width.log | head -8
B="--suites beam-gemm --beam-sizes 1GiB --beam-bits 1-8 --beam-kernels mma --beam-outputs sai/ovf --beam-iters 3"
timeout 90 ./cmv-bench $B --out-dir /tmp/d1 > $OUT/gemm-default-1.log 2>&1; el "default rc=$?"; grep -E " mma " $OUT/gemm-default-1.log | awk '{print $3, $8, $9, $(NF)}'
CMV_BEAM_GEMM90_WS=0 timeout 90 ./cmv-bench $B --out-dir /tmp/l > $OUT/gemm-lockstep.log 2>&1; el "lockstep rc=$?"; grep -E " mma " $OUT/gemm-lockstep.log | awk '{print $3, $8, $9, $(NF)}'
CMV_BEAM_GEMM90_WS=1 timeout 40 ./cmv-bench ${B/1-8/1,2,4,6} --out-dir /tmp/w > $OUT/gemm-ws.log 2>&1; el "ws rc=$?"; grep -E " mma " $OUT/gemm-ws.log | awk '{print $3, $8, $9, $(NF)}'
timeout 60 compute-sanitizer --tool memcheck ./gpu_mma --test-threads 1 mma_hopper_kernels > $OUT/memcheck.log 2>&1; el "memcheck rc=$?"; tail -1 $OUT/memcheck.log
timeout 30 python3 intmm2.py 11584 > $OUT/cublaslt.log 2>&1; el "cublaslt rc=$?"; cat $OUT/cublaslt.log
true

#!/bin/bash
# BEAM GEMM on Hopper, working tree on d391a6a (38cec56's kernels): each thread's raw-stage
# loads of a step issued together before the copies (unpack_load / unpack_store), in both
# wgmma kernels. The GPU tests of both kernels, then the default path at 1-8 bits (compare
# with call 3's 38cec56: the same host code and machine kind; no device time for an A-B).
# Carry gpu-variants/bg11; move crates/beam-pack/ptx/beam_kernels.ptx out of the tree first.
T0=$(date +%s); cd gpu-variants/bg11; el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
for f in cmv-bench.xz gpu_mma.xz; do xz -dkf $f; done; chmod +x cmv-bench gpu_mma
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
export CMV_REQUIRE_GPU=1
timeout 115 ./gpu_mma --test-threads 1 mma_hopper_kernels > $OUT/tests-hopper.log 2>&1; el "hopper tests rc=$?"; grep -E "test result|panicked" -A3 $OUT/tests-hopper.log | head -8
B="--suites beam-gemm --beam-sizes 1GiB --beam-bits 1-8 --beam-kernels mma --beam-outputs sai/ovf --beam-iters 3"
timeout 75 ./cmv-bench $B --out-dir /tmp/g1 > $OUT/gemm-new.log 2>&1; el "gemm rc=$?"
grep -E " mma " $OUT/gemm-new.log | awk '{for(k=1;k<=NF;k++) if($k=="ms") print $2, $(k-1), $NF}'
true

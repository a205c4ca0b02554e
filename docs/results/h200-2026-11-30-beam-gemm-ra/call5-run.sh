#!/bin/bash
# compute-sanitizer memcheck of mma_hopper_kernels (all three wgmma kernels, every width) with
# the final embedded PTX (V4 of calls 3-4). Carry gpu-variants/ra5; move
# crates/beam-pack/ptx/beam_kernels.ptx out of the tree first.
T0=$(date +%s); cd gpu-variants/ra5; el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
xz -dkf gpu_mma.xz; chmod +x gpu_mma
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
export CMV_REQUIRE_GPU=1
timeout 100 compute-sanitizer --tool memcheck ./gpu_mma --test-threads 1 mma_hopper_kernels > $OUT/memcheck-v4.log 2>&1; el "memcheck rc=$?"; grep -E "test result|ERROR SUMMARY" $OUT/memcheck-v4.log
true

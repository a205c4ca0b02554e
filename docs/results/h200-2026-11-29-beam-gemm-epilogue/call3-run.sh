#!/bin/bash
# BEAM GEMM on Hopper, working tree on 39468ad: (1) the A tile's K core matrices 32 bytes
# apart in banks (A_LBO + 32) and B's raw copies by slot (b_copy), against the 2-way and 5x
# shared-memory wavefronts Nsight Compute showed in call 2; (2) a staged epilogue: the tile's
# outputs as bytes in shared memory, then a thread per row packs and stores its words
# (staged_epilogue, pack_row), instead of store_quad's shuffles and atomic ORs.
# GPU tests (embedded PTX = both), memcheck, then at 1-8 bits: NEW (both), OLD (39468ad's
# sm_90a PTX), EPI (the epilogue only: A_LBO and b_copy as before), NEW. The host code is
# the same for all (CMV_PTX_DIR swaps the sm_90a module; its shared-memory size fits all).
# Carry gpu-variants/bg8; move crates/beam-pack/ptx/beam_kernels.ptx out of the tree first.
T0=$(date +%s); cd gpu-variants/bg8; el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
for f in cmv-bench.xz gpu_mma.xz old-ptx/beam-kernels-sm90.ptx.xz epi-ptx/beam-kernels-sm90.ptx.xz; do xz -dkf $f; done; chmod +x cmv-bench gpu_mma
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
export CMV_REQUIRE_GPU=1
timeout 110 ./gpu_mma --test-threads 1 mma_hopper_kernels > $OUT/tests-hopper.log 2>&1; el "hopper tests rc=$?"; grep -E "test result|panicked" -A3 $OUT/tests-hopper.log | head -8
timeout 60 ./gpu_mma --test-threads 1 mma_per_width > $OUT/tests-width.log 2>&1; el "width tests rc=$?"; grep -E "test result|panicked" -A3 $OUT/tests-width.log | head -8
timeout 60 compute-sanitizer --tool memcheck ./gpu_mma --test-threads 1 mma_hopper_kernels > $OUT/memcheck.log 2>&1; el "memcheck rc=$?"; tail -1 $OUT/memcheck.log
B="--suites beam-gemm --beam-sizes 1GiB --beam-bits 1-8 --beam-kernels mma --beam-outputs sai/ovf --beam-iters 3"
i=0; for v in new old epi new; do i=$((i+1))
  case $v in old) export CMV_PTX_DIR=$PWD/old-ptx;; epi) export CMV_PTX_DIR=$PWD/epi-ptx;; *) unset CMV_PTX_DIR;; esac
  [ $(( $(date +%s) - T0 )) -gt 520 ] && { echo "skip run$i: time"; continue; }
  timeout 100 ./cmv-bench $B --out-dir /tmp/g$i > $OUT/gemm-$i-$v.log 2>&1; el "run$i $v rc=$?"
  grep -E " mma " $OUT/gemm-$i-$v.log | awk '{for(k=1;k<=NF;k++) if($k=="ms") print $2, $(k-1), $NF}'
done
true

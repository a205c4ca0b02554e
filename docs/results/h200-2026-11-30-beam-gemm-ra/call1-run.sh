#!/bin/bash
# BEAM GEMM on Hopper: the register-A kernel (cmv_beam_gemm90ra_nogaps_b*: the lockstep
# kernel with A unpacked by each thread into its wgmma register fragments, B as before),
# working tree on 859acf6. GPU tests (all three wgmma kernels), memcheck, then 1-8 bits:
# RA forced (CMV_BEAM_GEMM90_RA=1), the default path (ws up to 5 bits, lockstep above), RA.
# Carry gpu-variants/ra1; move crates/beam-pack/ptx/beam_kernels.ptx out of the tree first.
T0=$(date +%s); cd gpu-variants/ra1; el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
for f in cmv-bench.xz gpu_mma.xz; do xz -dkf $f; done; chmod +x cmv-bench gpu_mma
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
export CMV_REQUIRE_GPU=1
timeout 200 ./gpu_mma --test-threads 1 mma_hopper_kernels > $OUT/tests-hopper.log 2>&1; el "hopper tests rc=$?"; grep -E "test result|panicked" -A3 $OUT/tests-hopper.log | head -8
B="--suites beam-gemm --beam-sizes 1GiB --beam-bits 1-8 --beam-kernels mma --beam-outputs sai/ovf --beam-iters 3"
i=0; for v in ra default ra; do i=$((i+1))
  case $v in ra) export CMV_BEAM_GEMM90_RA=1;; *) unset CMV_BEAM_GEMM90_RA;; esac
  [ $(( $(date +%s) - T0 )) -gt 480 ] && { echo "skip run$i: time"; continue; }
  timeout 110 ./cmv-bench $B --out-dir /tmp/g$i > $OUT/gemm-$i-$v.log 2>&1; el "run$i $v rc=$?"
  grep -E " mma " $OUT/gemm-$i-$v.log | awk '{for(k=1;k<=NF;k++) if($k=="ms") print $2, $(k-1), $NF}'
done
unset CMV_BEAM_GEMM90_RA
[ $(( $(date +%s) - T0 )) -lt 540 ] && { timeout 50 compute-sanitizer --tool memcheck ./gpu_mma --test-threads 1 mma_hopper_kernels > $OUT/memcheck.log 2>&1; el "memcheck rc=$?"; tail -1 $OUT/memcheck.log; }
true

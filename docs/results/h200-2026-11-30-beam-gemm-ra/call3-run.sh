#!/bin/bash
# BEAM GEMM, the register-A kernel at 1-8 bits, working tree on 4624572: L4 (embedded: copies
# RA_LEAD = 4 steps ahead, 5 raw stages) against V4 (4624572: 3 steps ahead) through
# CMV_PTX_DIR, RA forced; then the default path (RA at 1-4, 6, 8 bits; ws at 5; lockstep at
# 7). Tests of both PTX, memcheck of L4. Carry gpu-variants/ra3; move
# crates/beam-pack/ptx/beam_kernels.ptx out of the tree first.
T0=$(date +%s); cd gpu-variants/ra3; el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
for f in cmv-bench.xz gpu_mma.xz v4/beam-kernels-sm90.ptx.xz; do xz -dkf $f; done; chmod +x cmv-bench gpu_mma
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
export CMV_REQUIRE_GPU=1
timeout 130 ./gpu_mma --test-threads 1 mma_hopper_kernels > $OUT/tests-hopper-l4.log 2>&1; el "hopper tests L4 rc=$?"; grep -E "test result|panicked" -A3 $OUT/tests-hopper-l4.log | head -8
B="--suites beam-gemm --beam-sizes 1GiB --beam-bits 1-8 --beam-kernels mma --beam-outputs sai/ovf --beam-iters 3"
i=0; for v in l4 v4 l4 default; do i=$((i+1))
  case $v in v4) export CMV_PTX_DIR=$PWD/v4 CMV_BEAM_GEMM90_RA=1;; l4) unset CMV_PTX_DIR; export CMV_BEAM_GEMM90_RA=1;; *) unset CMV_PTX_DIR CMV_BEAM_GEMM90_RA;; esac
  [ $(( $(date +%s) - T0 )) -gt 400 ] && { echo "skip run$i: time"; continue; }
  timeout 100 ./cmv-bench $B --out-dir /tmp/g$i > $OUT/gemm-$i-$v.log 2>&1; el "run$i $v rc=$?"
  grep -E " mma " $OUT/gemm-$i-$v.log | awk '{for(k=1;k<=NF;k++) if($k=="ms") print $2, $(k-1), $NF}' | tr '\n' ';'; echo
done
unset CMV_PTX_DIR CMV_BEAM_GEMM90_RA
[ $(( $(date +%s) - T0 )) -lt 440 ] && { timeout 35 compute-sanitizer --tool memcheck ./gpu_mma --test-threads 1 mma_hopper_kernels > $OUT/memcheck-l4.log 2>&1; el "memcheck rc=$?"; tail -1 $OUT/memcheck-l4.log; }
[ $(( $(date +%s) - T0 )) -lt 450 ] && { CMV_PTX_DIR=$PWD/v4 timeout 120 ./gpu_mma --test-threads 1 mma_hopper_kernels > $OUT/tests-hopper-v4.log 2>&1; el "hopper tests V4 rc=$?"; grep -E "test result|panicked" -A3 $OUT/tests-hopper-v4.log | head -4; }
true

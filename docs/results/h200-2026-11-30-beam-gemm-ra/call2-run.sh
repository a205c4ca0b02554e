#!/bin/bash
# BEAM GEMM, the register-A kernel (RA forced, CMV_BEAM_GEMM90_RA=1) at 1-8 bits, working tree
# on 372c6ec: V3 (embedded: B's unpacking before the wgmma wait, copies without per-word
# tests inside the matrices, the two copy loops at 8 bits) against REORDER (the first only)
# and C1 (372c6ec, call 1's kernel) through CMV_PTX_DIR; tests of V3, memcheck, cuBLASLt.
# Carry gpu-variants/ra2; move crates/beam-pack/ptx/beam_kernels.ptx out of the tree first.
T0=$(date +%s); cd gpu-variants/ra2; el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
for f in cmv-bench.xz gpu_mma.xz reorder/beam-kernels-sm90.ptx.xz c1/beam-kernels-sm90.ptx.xz; do xz -dkf $f; done; chmod +x cmv-bench gpu_mma
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
export CMV_REQUIRE_GPU=1
timeout 150 ./gpu_mma --test-threads 1 mma_hopper_kernels > $OUT/tests-hopper.log 2>&1; el "hopper tests rc=$?"; grep -E "test result|panicked" -A3 $OUT/tests-hopper.log | head -8
B="--suites beam-gemm --beam-sizes 1GiB --beam-bits 1-8 --beam-kernels mma --beam-outputs sai/ovf --beam-iters 3"
export CMV_BEAM_GEMM90_RA=1
i=0; for v in v3 reorder c1 v3; do i=$((i+1))
  case $v in v3) unset CMV_PTX_DIR;; *) export CMV_PTX_DIR=$PWD/$v;; esac
  [ $(( $(date +%s) - T0 )) -gt 470 ] && { echo "skip run$i: time"; continue; }
  timeout 100 ./cmv-bench $B --out-dir /tmp/g$i > $OUT/gemm-$i-$v.log 2>&1; el "run$i $v rc=$?"
  grep -E " mma " $OUT/gemm-$i-$v.log | awk '{for(k=1;k<=NF;k++) if($k=="ms") print $2, $(k-1), $NF}' | tr '\n' ';'; echo
done
unset CMV_PTX_DIR CMV_BEAM_GEMM90_RA
[ $(( $(date +%s) - T0 )) -lt 520 ] && { timeout 40 compute-sanitizer --tool memcheck ./gpu_mma --test-threads 1 mma_hopper_kernels > $OUT/memcheck.log 2>&1; el "memcheck rc=$?"; tail -1 $OUT/memcheck.log; }
[ $(( $(date +%s) - T0 )) -lt 560 ] && { timeout 35 python3 intmm2.py 11584 > $OUT/cublaslt.log 2>&1; el "cublaslt rc=$?"; cat $OUT/cublaslt.log; }
true

#!/bin/bash
# BEAM GEMM on Hopper, the bundle of call 3 (working tree on 39468ad: A_LBO + 32, b_copy by
# slot, the staged epilogue): both wgmma kernels forced at 1-8 bits (for the launcher's rule),
# cuBLASLt before and after.
# Carry gpu-variants/bg9; move crates/beam-pack/ptx/beam_kernels.ptx out of the tree first.
T0=$(date +%s); cd gpu-variants/bg9; el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
xz -dkf cmv-bench.xz; chmod +x cmv-bench
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
timeout 40 python3 intmm2.py 11584 > $OUT/cublaslt.log 2>&1; el "cublaslt rc=$?"; grep column $OUT/cublaslt.log
B="--suites beam-gemm --beam-sizes 1GiB --beam-bits 1-8 --beam-kernels mma --beam-outputs sai/ovf --beam-iters 3"
i=0; for v in ws lockstep; do i=$((i+1))
  case $v in ws) export CMV_BEAM_GEMM90_WS=1;; lockstep) export CMV_BEAM_GEMM90_WS=0;; esac
  timeout 110 ./cmv-bench $B --out-dir /tmp/g$i > $OUT/gemm-$i-$v.log 2>&1; el "run$i $v rc=$?"
  grep -E " mma " $OUT/gemm-$i-$v.log | awk '{for(k=1;k<=NF;k++) if($k=="ms") print $2, $(k-1), $NF}'
done
unset CMV_BEAM_GEMM90_WS
timeout 30 python3 intmm2.py 11584 > $OUT/cublaslt-2.log 2>&1; el "cublaslt rc=$?"; grep column $OUT/cublaslt-2.log
true

#!/bin/bash
# BEAM GEMM, the register-A kernel (the default at 1-8 bits), working tree on the commit after
# 4624572: X (embedded: a step's copies issued after the fence that ends its unpacking, whose
# MEMBAR.ALL.CTA may wait for them) against V4 (the committed kernel, call 3) through
# CMV_PTX_DIR. Tests (hopper, per width) and memcheck of X, per-width tests of V4, cuBLASLt,
# then Nsight Compute of X at 3 bits if time is left. Carry gpu-variants/ra4; move
# crates/beam-pack/ptx/beam_kernels.ptx out of the tree first.
T0=$(date +%s); cd gpu-variants/ra4; el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
for f in cmv-bench.xz gpu_mma.xz v4/beam-kernels-sm90.ptx.xz; do xz -dkf $f; done; chmod +x cmv-bench gpu_mma
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
export CMV_REQUIRE_GPU=1
timeout 120 ./gpu_mma --test-threads 1 mma_hopper_kernels > $OUT/tests-hopper-x.log 2>&1; el "hopper tests X rc=$?"; grep -E "test result|panicked" -A3 $OUT/tests-hopper-x.log | head -6
B="--suites beam-gemm --beam-sizes 1GiB --beam-bits 1-8 --beam-kernels mma --beam-outputs sai/ovf --beam-iters 3"
i=0; for v in x v4 x; do i=$((i+1))
  case $v in v4) export CMV_PTX_DIR=$PWD/v4;; *) unset CMV_PTX_DIR;; esac
  [ $(( $(date +%s) - T0 )) -gt 330 ] && { echo "skip run$i: time"; continue; }
  timeout 100 ./cmv-bench $B --out-dir /tmp/g$i > $OUT/gemm-$i-$v.log 2>&1; el "run$i $v rc=$?"
  grep -E " mma " $OUT/gemm-$i-$v.log | awk '{for(k=1;k<=NF;k++) if($k=="ms") print $2, $(k-1), $NF}' | tr '\n' ';'; echo
done
unset CMV_PTX_DIR
timeout 60 ./gpu_mma --test-threads 1 mma_per_width > $OUT/tests-width-x.log 2>&1; el "width tests X rc=$?"; grep -E "test result|panicked" -A3 $OUT/tests-width-x.log | head -4
timeout 30 compute-sanitizer --tool memcheck ./gpu_mma --test-threads 1 mma_hopper_kernels > $OUT/memcheck-x.log 2>&1; el "memcheck X rc=$?"; tail -1 $OUT/memcheck-x.log
[ $(( $(date +%s) - T0 )) -lt 470 ] && { CMV_PTX_DIR=$PWD/v4 timeout 50 ./gpu_mma --test-threads 1 mma_per_width > $OUT/tests-width-v4.log 2>&1; el "width tests V4 rc=$?"; grep -E "test result|panicked" -A3 $OUT/tests-width-v4.log | head -4; }
[ $(( $(date +%s) - T0 )) -lt 500 ] && { timeout 30 python3 intmm2.py 11584 > $OUT/cublaslt.log 2>&1; el "cublaslt rc=$?"; cat $OUT/cublaslt.log; }
R=$(( 585 - ($(date +%s) - T0) )); [ $R -gt 40 ] && { timeout $R ncu --section SpeedOfLight --section WarpStateStats --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis -k regex:gemm90ra --launch-skip 1 --launch-count 1 ./cmv-bench --suites beam-gemm --beam-sizes 1GiB --beam-bits 3 --beam-kernels mma --beam-outputs sai/ovf --beam-iters 1 --out-dir /tmp/gn > $OUT/ncu-ra-b3.txt 2>&1; el "ncu rc=$?"; grep -E "Duration|Throughput|Issue Slots|Executed Ipc|Warp Cycles|No Eligible" $OUT/ncu-ra-b3.txt | head -20; }
true

#!/bin/bash
# BEAM GEMM on Hopper, warp-specialized kernel (2 producer warpgroups, setmaxnreg; build of
# call 2): A-B against the same kernels with one mbarrier arrival per warp instead of per thread
# (warp-arrive/, loaded by CMV_PTX_DIR), then Nsight Compute of the base kernel at 2 bits.
# Carry gpu-variants/bg3; move crates/beam-pack/ptx/beam_kernels.ptx out of the tree first.
T0=$(date +%s); cd gpu-variants/bg3; el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
for f in cmv-bench.xz gpu_mma.xz warp-arrive/beam-kernels-sm90.ptx.xz; do xz -dkf $f; done; chmod +x cmv-bench gpu_mma
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
export CMV_REQUIRE_GPU=1
B="--suites beam-gemm --beam-sizes 1GiB --beam-bits 1,2,4,8 --beam-kernels mma --beam-outputs sai/ovf --beam-iters 3"
i=0; for v in base warp base warp; do i=$((i+1))
  if [ $v = warp ]; then export CMV_PTX_DIR=$PWD/warp-arrive; else unset CMV_PTX_DIR; fi
  timeout 60 ./cmv-bench $B --out-dir /tmp/g$i > $OUT/gemm-$i-$v.log 2>&1; el "run$i $v rc=$?"
  grep -E " mma " $OUT/gemm-$i-$v.log | awk '{print $3, $8, $9, $(NF)}'
done
unset CMV_PTX_DIR
SEC="--section SpeedOfLight --section WarpStateStats --section SourceCounters --section MemoryWorkloadAnalysis --section LaunchStats --section Occupancy"
timeout 150 ncu --kernel-name "regex:cmv_beam_gemm90ws_nogaps_b2" --launch-skip 1 --launch-count 1 $SEC --import-source no -o /tmp/p-ws2 ./cmv-bench --suites beam-gemm --beam-sizes 1GiB --beam-bits 2 --beam-kernels mma --beam-outputs sai/ovf --beam-iters 3 --out-dir /tmp/o1 > /tmp/n1.log 2>&1; el "ncu rc=$?"; tail -3 /tmp/n1.log
ncu --import /tmp/p-ws2.ncu-rep --page details > $OUT/ncu-ws-b2-details.txt 2>&1
ncu --import /tmp/p-ws2.ncu-rep --page source --print-source sass --csv 2>/dev/null | xz -9 > $OUT/ncu-ws-b2-source.csv.xz
el done
true

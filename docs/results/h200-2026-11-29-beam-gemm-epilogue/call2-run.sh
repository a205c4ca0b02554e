#!/bin/bash
# BEAM GEMM on Hopper, build 39468ad (the bundle of call 1: the same PTX and host code, built on
# wip/beam-gemm-epilogue 1263c96): cuBLASLt, the default path, both wgmma kernels forced at 1-8
# bits (for the launcher's rule), then Nsight Compute of the warp-specialized kernel at 2 bits.
# Carry gpu-variants/bg7; move crates/beam-pack/ptx/beam_kernels.ptx out of the tree first.
T0=$(date +%s); cd gpu-variants/bg7; el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
for f in cmv-bench.xz; do xz -dkf $f; done; chmod +x cmv-bench
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
timeout 40 python3 intmm2.py 11584 > $OUT/cublaslt.log 2>&1; el "cublaslt rc=$?"; cat $OUT/cublaslt.log
B="--suites beam-gemm --beam-sizes 1GiB --beam-bits 1-8 --beam-kernels mma --beam-outputs sai/ovf --beam-iters 3"
i=0; for v in default ws lockstep; do i=$((i+1))
  case $v in ws) export CMV_BEAM_GEMM90_WS=1;; lockstep) export CMV_BEAM_GEMM90_WS=0;; *) unset CMV_BEAM_GEMM90_WS;; esac
  timeout 90 ./cmv-bench $B --out-dir /tmp/g$i > $OUT/gemm-$i-$v.log 2>&1; el "run$i $v rc=$?"
  grep -E " mma " $OUT/gemm-$i-$v.log | awk '{for(k=1;k<=NF;k++) if($k=="ms") print $2, $(k-1), $NF}'
done
unset CMV_BEAM_GEMM90_WS
timeout 30 python3 intmm2.py 11584 > $OUT/cublaslt-2.log 2>&1; el "cublaslt rc=$?"; cat $OUT/cublaslt-2.log
SEC="--section SpeedOfLight --section WarpStateStats --section SourceCounters --section MemoryWorkloadAnalysis --section LaunchStats --section Occupancy"
timeout 150 ncu --kernel-name "regex:cmv_beam_gemm90ws_nogaps_b2" --launch-skip 1 --launch-count 1 $SEC --import-source no -o /tmp/p-ws2 ./cmv-bench --suites beam-gemm --beam-sizes 1GiB --beam-bits 2 --beam-kernels mma --beam-outputs sai/ovf --beam-iters 3 --out-dir /tmp/o1 > /tmp/n1.log 2>&1; el "ncu rc=$?"; tail -3 /tmp/n1.log
ncu --import /tmp/p-ws2.ncu-rep --page details > $OUT/ncu-ws-b2-details.txt 2>&1
ncu --import /tmp/p-ws2.ncu-rep --page source --print-source sass --csv 2>/dev/null | xz -9 > $OUT/ncu-ws-b2-source.csv.xz
el done
true

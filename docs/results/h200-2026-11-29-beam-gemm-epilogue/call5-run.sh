#!/bin/bash
# BEAM GEMM on Hopper, the bundle of calls 3-4 (38cec56's PTX): Nsight Compute of the
# warp-specialized kernel at 2 and 3 bits and the lockstep kernel at 7 bits (one launch each).
# Carry gpu-variants/bg10; move crates/beam-pack/ptx/beam_kernels.ptx out of the tree first.
T0=$(date +%s); cd gpu-variants/bg10; el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
xz -dkf cmv-bench.xz; chmod +x cmv-bench
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
SEC="--section SpeedOfLight --section WarpStateStats --section SourceCounters --section MemoryWorkloadAnalysis --section LaunchStats --section Occupancy"
for kb in ws:2 ws:3 :7; do k=${kb%%:*}; b=${kb##*:}
  timeout 75 ncu --kernel-name "regex:cmv_beam_gemm90${k}_nogaps_b$b" --launch-skip 1 --launch-count 1 $SEC --import-source no -o /tmp/p$k$b ./cmv-bench --suites beam-gemm --beam-sizes 1GiB --beam-bits $b --beam-kernels mma --beam-outputs sai/ovf --beam-iters 3 --out-dir /tmp/o$b > $OUT/ncu-run-$k$b.log 2>&1; el "ncu $k b$b rc=$?"
  ncu --import /tmp/p$k$b.ncu-rep --page details > $OUT/ncu-$k-b$b-details.txt 2>&1
  ncu --import /tmp/p$k$b.ncu-rep --page source --print-source sass --csv 2>/dev/null | xz -9 > $OUT/ncu-$k-b$b-source.csv.xz
  grep -E "Duration|L1/TEX Cache Throughput|Compute \(SM\)" $OUT/ncu-$k-b$b-details.txt | head -3
done
true

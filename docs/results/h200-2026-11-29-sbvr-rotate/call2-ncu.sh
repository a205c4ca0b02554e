#!/bin/bash
# Nsight Compute of cmv_sbvr_gemv_mma_n4_b1(_deep) at 14336x4096, one vector: main's PTX
# (f5c0272 through CMV_PTX_DIR) against the rotating stages (the binary's embedded PTX, the
# diff in results/h200-2026-11-29-sbvr-rotate/rotate.diff).
cd gpu-variants/sr1
xz -dkf cmv-bench.xz; for f in a/*.xz; do xz -dkf $f; done; chmod +x cmv-bench
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
SEC="--section SourceCounters --section WarpStateStats --section SpeedOfLight --section LaunchStats --section Occupancy --section SchedulerStats"
prof() { name=$1; shift; S=$(date +%s)
  timeout 150 ncu --kernel-name "regex:cmv_sbvr_gemv_mma_n4_b1" --launch-skip 5 --launch-count 1 $SEC --import-source no -o /tmp/p-$name ./cmv-bench --suites sbvr --variants n4 --shapes 14336x4096 --batches 1 --timing events --out-dir /tmp/o-$name > /tmp/run-$name.log 2>&1; echo "$name rc=$? $(( $(date +%s)-S ))s"
  ncu --import /tmp/p-$name.ncu-rep --page details > $OUT/$name-details.txt 2>&1
  ncu --import /tmp/p-$name.ncu-rep --page source --print-source sass --csv 2>/dev/null | xz -9 > $OUT/$name-source.csv.xz
  grep -E "^\s+sbvr" /tmp/run-$name.log | head -2
}
CMV_PTX_DIR=$PWD/a prof main
unset CMV_PTX_DIR; prof rotated
grep -E "Kernel Name|cmv_sbvr|Duration|Issued Ipc|No Eligible|Registers Per|Achieved Occ|Warp Cycles Per Issued" $OUT/*-details.txt | head -30
true

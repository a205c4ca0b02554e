#!/bin/bash
# SpQR integer kernel, one vector, H200: weight-warp sweep at the 70B shapes; ncu of csr_i8_b1 at 28672x8192.
cd gpu-variants/sq1
xz -dkf cmv-bench.xz; chmod +x cmv-bench
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
SH=28672x8192,8192x28672
for w in def 2 3 6 7 def; do S=$(date +%s)
  if [ $w = def ]; then unset CMV_SPQR_WARPS; else export CMV_SPQR_WARPS=$w; fi
  echo "=== warps $w" >> $OUT/sweep.log
  timeout 120 ./cmv-bench --suites spqr --spqr-batches 1 --shapes $SH --out-dir /tmp/w$w >> $OUT/sweep.log 2>&1; echo "w$w rc=$? $(( $(date +%s)-S ))s"
done
unset CMV_SPQR_WARPS
SEC="--section SourceCounters --section WarpStateStats --section SpeedOfLight --section LaunchStats --section Occupancy --section SchedulerStats --section MemoryWorkloadAnalysis"
S=$(date +%s)
timeout 150 ncu --kernel-name regex:cmv_spqr_csr_i8_b1 --launch-skip 5 --launch-count 1 $SEC --import-source no -o /tmp/p ./cmv-bench --suites spqr --spqr-batches 1 --shapes 28672x8192 --timing events --out-dir /tmp/o > $OUT/ncu-run.log 2>&1; echo "ncu rc=$? $(( $(date +%s)-S ))s"
ncu --import /tmp/p.ncu-rep --page details > $OUT/ncu-details.txt 2>&1
ncu --import /tmp/p.ncu-rep --page source --print-source sass --csv 2>/dev/null | xz -9 > $OUT/ncu-source.csv.xz
true

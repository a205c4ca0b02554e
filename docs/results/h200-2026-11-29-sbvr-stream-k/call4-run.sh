#!/bin/bash
# ncu of the deep n = 4 one-vector SBVR kernel at 11008x4096: 727dc4f's (OLD) against the
# stream-K branch's (NEW, stream-K off), same host binary; source-level stalls per SASS line.
T0=$(date +%s); cd gpu-variants/s4
for f in cmv-bench.xz */*.xz; do xz -dkf $f; done; chmod +x cmv-bench
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
export CMV_SBVR_STREAM=0
SEC="--section SourceCounters --section WarpStateStats --section SpeedOfLight --section LaunchStats --section Occupancy --section SchedulerStats --section MemoryWorkloadAnalysis"
for v in old new; do S=$(date +%s)
  export CMV_PTX_DIR=$PWD/$v
  timeout 150 ncu --kernel-name "regex:cmv_sbvr_gemv_mma_n4_b1_deep" --launch-skip 5 --launch-count 1 $SEC --import-source no -o /tmp/p-$v ./cmv-bench --suites sbvr --variants n4 --shapes 11008x4096 --batches 1 --timing events --out-dir /tmp/o-$v > /tmp/run-$v.log 2>&1; echo "$v rc=$? $(( $(date +%s)-S ))s"
  ncu --import /tmp/p-$v.ncu-rep --page details > $OUT/$v-details.txt 2>&1
  ncu --import /tmp/p-$v.ncu-rep --page source --print-source sass --csv 2>/dev/null | xz -9 > $OUT/$v-source.csv.xz
  grep -E "Duration|Registers|Achieved Occupancy|Issue Slots Busy|No Eligible" $OUT/$v-details.txt | head -8
done
true

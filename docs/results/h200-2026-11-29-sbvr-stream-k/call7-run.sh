#!/bin/bash
# ncu of one launch of the fused deep n = 4 kernel (wip/sbvr-fused-quantize) at 11008x4096,
# and of the two-kernel path (CMV_SBVR_FUSED=0: cmv_sbvr_quantize and the deep kernel).
cd gpu-variants/s7; xz -dkf cmv-bench.xz; chmod +x cmv-bench
SEC="--section SpeedOfLight --section WarpStateStats --section SourceCounters --section LaunchStats --section Occupancy"
S=$(date +%s); timeout 100 ncu --kernel-name "regex:cmv_sbvr_gemv_mma_n4_b1_deep_fq" --launch-skip 5 --launch-count 1 $SEC --import-source no -o /tmp/p-fq ./cmv-bench --suites sbvr --variants n4 --shapes 11008x4096 --batches 1 --timing events --out-dir /tmp/o1 > /tmp/r1.log 2>&1; echo "fq rc=$? $(( $(date +%s)-S ))s"
ncu --import /tmp/p-fq.ncu-rep --page details > $OUT/fq-details.txt 2>&1
ncu --import /tmp/p-fq.ncu-rep --page source --print-source sass --csv 2>/dev/null | xz -9 > $OUT/fq-source.csv.xz
export CMV_SBVR_FUSED=0
S=$(date +%s); timeout 100 ncu --kernel-name "regex:cmv_sbvr_(quantize|gemv_mma_n4_b1_deep)" --launch-skip 10 --launch-count 2 --section SpeedOfLight -o /tmp/p-unf ./cmv-bench --suites sbvr --variants n4 --shapes 11008x4096 --batches 1 --timing events --out-dir /tmp/o2 > /tmp/r2.log 2>&1; echo "unf rc=$? $(( $(date +%s)-S ))s"
ncu --import /tmp/p-unf.ncu-rep --page details > $OUT/unf-details.txt 2>&1
grep -E "cmv_sbvr|Duration" $OUT/fq-details.txt $OUT/unf-details.txt | head -12
true

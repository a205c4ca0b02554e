#!/bin/bash
# Build 934b204 (main): GPU tests of ans-codec, sbvr-format, spqr-format, vq-codebook (first run of
# 72c1fe3's Kernel::launch_maybe_programmatic); then ncu of the Hopper VQ-GEMM (M = 512) at
# 28672x8192 and 11008x4096, and the GEMM bench rows at 512 there.
T0=$(date +%s); cd gpu-variants/g1
for f in *.xz; do xz -dkf $f; done; chmod +x cmv-bench gpu-*
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
for c in ans-codec sbvr-format spqr-format vq-codebook; do S=$(date +%s)
  timeout 120 ./gpu-$c > $OUT/tests-$c.log 2>&1; echo "$c tests rc=$? $(( $(date +%s)-S ))s"; grep -E "test result|panicked|FAILED" $OUT/tests-$c.log | head -5
done
SEC="--section SourceCounters --section WarpStateStats --section SpeedOfLight --section LaunchStats --section Occupancy --section ComputeWorkloadAnalysis --section SchedulerStats --section MemoryWorkloadAnalysis"
prof() { name=$1; re=$2; shift 2; S=$(date +%s)
  [ $(( $(date +%s)-T0 )) -gt 420 ] && { echo "skip $name: time"; return; }
  timeout 120 ncu --kernel-name "regex:$re" --launch-skip 3 --launch-count 1 $SEC --import-source no -o /tmp/p-$name ./cmv-bench "$@" --timing events --out-dir /tmp/o-$name > /tmp/run-$name.log 2>&1; echo "$name rc=$? $(( $(date +%s)-S ))s"
  ncu --import /tmp/p-$name.ncu-rep --page details > $OUT/$name-details.txt 2>&1
  ncu --import /tmp/p-$name.ncu-rep --page source --print-source sass --csv 2>/dev/null | xz -9 > $OUT/$name-source.csv.xz
}
prof gemm-28672 'cmv_vq_gemm90_v4' --suites vq --variants none --vq-gemm-tokens 512 --shapes 28672x8192
S=$(date +%s); timeout 100 ./cmv-bench --suites vq --variants none --vq-gemm-tokens 128,512 --shapes 28672x8192,11008x4096 --out-dir /tmp/b > $OUT/gemm-bench.log 2>&1; echo "bench rc=$? $(( $(date +%s)-S ))s"
grep -iE "gemm|ceiling" $OUT/gemm-bench.log | head -30
prof gemm-11008 'cmv_vq_gemm90_v4' --suites vq --variants none --vq-gemm-tokens 512 --shapes 11008x4096
true

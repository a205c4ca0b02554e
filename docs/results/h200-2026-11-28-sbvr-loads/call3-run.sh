#!/bin/bash
# Per-instruction stall samples (ncu SourceCounters) of the default batch-1 kernels of SBVR, SpQR,
# VQ, BEAM and of the dense int8 16-vector kernel, build d90213b.
cd gpu-variants/prof
xz -dkf cmv-bench.xz; chmod +x cmv-bench
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
SEC="--section SourceCounters --section WarpStateStats --section SpeedOfLight --section LaunchStats --section Occupancy --section ComputeWorkloadAnalysis --section SchedulerStats"
prof() { name=$1; re=$2; shift 2; S=$(date +%s)
  timeout 110 ncu --kernel-name "regex:$re" --launch-skip 5 --launch-count 1 $SEC --import-source no -o /tmp/p-$name ./cmv-bench "$@" --timing events --out-dir /tmp/o-$name > /tmp/run-$name.log 2>&1; echo "$name rc=$? $(( $(date +%s)-S ))s"
  ncu --import /tmp/p-$name.ncu-rep --page details > $OUT/$name-details.txt 2>&1
  ncu --import /tmp/p-$name.ncu-rep --page source --print-source sass --csv 2>/dev/null | xz -9 > $OUT/$name-source.csv.xz
  grep -E "^\s+(sbvr|spqr|vq|beam|dense)" /tmp/run-$name.log | head -4
}
prof sbvr-n4-b1 'cmv_sbvr_gemv_mma_n4_b1' --suites sbvr --variants n4 --shapes 14336x4096 --batches 1
prof beam-b4 'cmv_beam_gemv_direct_b4' --suites beam-gemv --beam-gemv-bits 4 --beam-gemv-outputs sai/ovf --beam-gemv-vectors row --shapes 14336x4096
prof dense-i8-b16 'cmv_gemv_i8_bulk' --suites dense --shapes 11008x4096 --batches 16
prof vq-b1 'cmv_vq_mma_v4' --suites vq --variants gptvq2 --shapes 11008x4096 --batches 1
prof spqr-b1 'cmv_spqr_(ptcsr|csr)_b1$' --suites spqr --spqr-batches 1 --spqr-no-int8 --shapes 11008x4096
true

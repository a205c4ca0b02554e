#!/bin/bash
# SBVR one-vector kernels of 3 and 4 bitvectors (mma n3/n4 b1 and _deep) with .minnctapersm 2
# (their occupancy already; ptxas schedules differently) added to the PTX of build 4f07d5e
# (module-named files in v2/ through CMV_PTX_DIR; bench binary of 4a141ca, same SBVR host code)
# against the PTX of 4f07d5e: GPU tests with v2, A-B-A-B at one vector.
cd gpu-variants/sb5
for f in *.xz v2/*.xz; do xz -dkf $f; done; chmod +x cmv-bench sbvr_gpu
mkdir -p base; cp ../../crates/sbvr-format/ptx/sbvr_kernels.ptx base/sbvr-kernels.ptx; cp ../../crates/sbvr-format/ptx/sbvr_kernels_sm90.ptx base/sbvr-kernels-sm90.ptx
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
S=$(date +%s); CMV_PTX_DIR=$PWD/v2 timeout 120 ./sbvr_gpu > $OUT/tests-v2.log 2>&1; echo "tests v2 rc=$? $(( $(date +%s)-S ))s"; grep -E "test result|panicked|FAILED" $OUT/tests-v2.log | head -3
SH=11008x4096,14336x4096,4096x14336,28672x8192
i=0; for v in base v2 base v2; do i=$((i+1)); S=$(date +%s)
  export CMV_PTX_DIR=$PWD/$v
  timeout 90 ./cmv-bench --suites sbvr --variants n3,n4 --shapes $SH --batches 1 --out-dir /tmp/s$i > /tmp/b$i.log 2>&1; echo "run$i $v rc=$? $(( $(date +%s)-S ))s"
  echo "=== run$i $v" >> $OUT/bench.log; grep -E "ceiling|b1:" /tmp/b$i.log >> $OUT/bench.log
done
cp /tmp/b1.log $OUT/run1-full.log
grep -E "===|b1:" $OUT/bench.log | awk '{print $1,$2,$3,$4,$5,$6,$7}'
true

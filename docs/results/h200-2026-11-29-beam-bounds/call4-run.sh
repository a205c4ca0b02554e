#!/bin/bash
# BEAM direct GEMV of one vector, 4 and 6 bits, with .minnctapersm 4 (the occupancy it has; another
# schedule: b6 63 registers instead of 58) added to the sm_90a PTX of bea3237 (v4/, CMV_PTX_DIR)
# against the embedded PTX (bench binary of 4a141ca: the same BEAM code). Direct-kernel GPU tests
# with v4, then A-B-A-B.
cd gpu-variants/bm1
for f in *.xz v4/*.xz; do xz -dkf $f; done; chmod +x cmv-bench beam_gpu
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
S=$(date +%s); CMV_PTX_DIR=$PWD/v4 timeout 60 ./beam_gpu direct_kernel row_vectors > $OUT/tests-v4.log 2>&1; echo "tests v4 rc=$? $(( $(date +%s)-S ))s"; grep -E "test result|panicked|FAILED" $OUT/tests-v4.log | head -3
SH=14336x4096,4096x14336
i=0; for v in base v4 base v4; do i=$((i+1)); S=$(date +%s)
  if [ $v = base ]; then unset CMV_PTX_DIR; else export CMV_PTX_DIR=$PWD/$v; fi
  timeout 60 ./cmv-bench --suites beam-gemv --beam-gemv-bits 4,6 --beam-gemv-outputs sai/ovf --beam-gemv-vectors row --shapes $SH --out-dir /tmp/b$i > /tmp/b$i.log 2>&1; echo "run$i $v rc=$? $(( $(date +%s)-S ))s"
  echo "=== run$i $v" >> $OUT/bench.log; grep -E "ceiling|beam" /tmp/b$i.log | grep -v "^beam " >> $OUT/bench.log
done
cp /tmp/b1.log $OUT/run1-full.log
grep -E "===| b1|us," $OUT/bench.log | awk '{print $1,$2,$3,$4,$5,$6,$7}' | head -40
true

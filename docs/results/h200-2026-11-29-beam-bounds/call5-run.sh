#!/bin/bash
# BEAM direct GEMV of one vector, 4 and 6 bits: .minnctapersm 4 on cmv_beam_gemv_direct_b4/_b6
# (v4/, the sm_90a PTX of bea3237 = f5c0272's, through CMV_PTX_DIR) against the embedded PTX
# (bench binary of 4a141ca: the same BEAM code), A-B-A-B at four shapes.
cd gpu-variants/bm1
for f in cmv-bench.xz v4/*.xz; do xz -dkf $f; done; chmod +x cmv-bench
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
SH=11008x4096,14336x4096,4096x14336,28672x8192
i=0; for v in base v4 base v4; do i=$((i+1)); S=$(date +%s)
  if [ $v = base ]; then unset CMV_PTX_DIR; else export CMV_PTX_DIR=$PWD/$v; fi
  timeout 70 ./cmv-bench --suites beam-gemv --beam-gemv-bits 4,6 --beam-gemv-outputs sai/ovf --beam-gemv-vectors row --shapes $SH --out-dir /tmp/b$i > /tmp/b$i.log 2>&1; echo "run$i $v rc=$? $(( $(date +%s)-S ))s"
  echo "=== run$i $v" >> $OUT/bench.log; grep -E "ceiling|beam-gemv .*batch 1" /tmp/b$i.log >> $OUT/bench.log
done
cp /tmp/b1.log $OUT/run1-full.log
grep -E "===|batch 1" $OUT/bench.log | awk '{print $1,$2,$3,$4,$5,$6,$10,$11,$12,$14,$15,$16}' | head -40
true

#!/bin/bash
# SBVR one vector quantized by the GEMV itself, the loads of four groups issued before their
# arithmetic (working tree on 15448b6). GPU tests, then FQ (default) against UNF
# (CMV_SBVR_FUSED=0: cmv_sbvr_quantize and the GEMV, same binary), A-B-A-B, n = 2 and 4.
T0=$(date +%s); cd gpu-variants/s6
for f in cmv-bench.xz sbvr_gpu.xz; do xz -dkf $f; done; chmod +x cmv-bench sbvr_gpu
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
S=$(date +%s); timeout 60 ./sbvr_gpu > $OUT/tests.log 2>&1; echo "tests rc=$? $(( $(date +%s)-S ))s"; grep -E "test result|panicked|FAILED" $OUT/tests.log | head -8
SH=11008x4096,14336x4096,4096x14336
i=0; for v in FQ UNF FQ UNF; do i=$((i+1)); S=$(date +%s)
  [ $(( S-T0 )) -gt 200 ] && { echo "skip $v: time"; continue; }
  unset CMV_SBVR_FUSED; [ $v = UNF ] && export CMV_SBVR_FUSED=0
  timeout 50 ./cmv-bench --suites sbvr --variants n2,n4 --shapes $SH --batches 1 --out-dir /tmp/s$i > /tmp/b$i.log 2>&1; echo "run$i $v rc=$? $(( $(date +%s)-S ))s"
  echo "=== run$i $v" >> $OUT/bench.log; grep -E "ceiling|b1:|rror" /tmp/b$i.log >> $OUT/bench.log
done
grep -E "===|b1:" $OUT/bench.log | awk '{print $1,$2,$3,$4,$5,$6,$7}'
true

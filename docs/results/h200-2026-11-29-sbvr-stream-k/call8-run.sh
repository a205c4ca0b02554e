#!/bin/bash
# READY FOR THE NEXT SESSION (built 2026-11-29 from wip/sbvr-fused-quantize e293a2c, not run):
# SBVR one vector quantized inside the GEMV, the vector staged in shared memory by cp.async.
# GPU tests (fused against the two kernels bit for bit), memcheck of the chain test, then
# FQ (default) against UNF (CMV_SBVR_FUSED=0: cmv_sbvr_quantize and the GEMV), A-B-A-B.
# Carry gpu-variants/s8; move crates/beam-pack/ptx/beam_kernels.ptx out of the tree first.
T0=$(date +%s); cd gpu-variants/s8
for f in cmv-bench.xz sbvr_gpu.xz; do xz -dkf $f; done; chmod +x cmv-bench sbvr_gpu
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
S=$(date +%s); timeout 60 ./sbvr_gpu > $OUT/tests.log 2>&1; echo "tests rc=$? $(( $(date +%s)-S ))s"; grep -E "test result|panicked|FAILED" $OUT/tests.log | head -8
S=$(date +%s); timeout 60 compute-sanitizer --tool memcheck ./sbvr_gpu a_chain > $OUT/memcheck.log 2>&1; echo "memcheck rc=$? $(( $(date +%s)-S ))s"; tail -1 $OUT/memcheck.log
SH=11008x4096,14336x4096,4096x14336
i=0; for v in FQ UNF FQ UNF; do i=$((i+1)); S=$(date +%s)
  [ $(( S-T0 )) -gt 300 ] && { echo "skip $v: time"; continue; }
  unset CMV_SBVR_FUSED; [ $v = UNF ] && export CMV_SBVR_FUSED=0
  timeout 50 ./cmv-bench --suites sbvr --variants n2,n4 --shapes $SH --batches 1 --out-dir /tmp/s$i > /tmp/b$i.log 2>&1; echo "run$i $v rc=$? $(( $(date +%s)-S ))s"
  echo "=== run$i $v" >> $OUT/bench.log; grep -E "ceiling|b1:|rror" /tmp/b$i.log >> $OUT/bench.log
done
grep -E "===|b1:" $OUT/bench.log | awk '{print $1,$2,$3,$4,$5,$6,$7}'
true

#!/bin/bash
# The rules: SpQR one-vector launches programmatic only unsplit with >= 12 blocks per SM
# (spqr_kernels::routed_programmatic; else the sm_90a kernels launched ordinarily); SBVR's
# programmatic quantization at one vector only. Build: e33a371 + these changes (uncommitted).
# SpQR: C = new default; A = main 0dd77fd sm_80 PTX (CMV_PTX_DIR) with CMV_SPQR_PDL=0.
cd gpu-variants/sq6
for f in *.xz a/*.xz; do xz -dkf $f; done; chmod +x cmv-bench spqr_gpu sbvr_gpu
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
S=$(date +%s); timeout 60 ./spqr_gpu > $OUT/spqr-tests.log 2>&1; echo "spqr tests rc=$? $(( $(date +%s)-S ))s"; grep -E "test result|panicked|FAILED" $OUT/spqr-tests.log | head -5
S=$(date +%s); timeout 60 ./sbvr_gpu > $OUT/sbvr-tests.log 2>&1; echo "sbvr tests rc=$? $(( $(date +%s)-S ))s"; grep -E "test result|panicked|FAILED" $OUT/sbvr-tests.log | head -5
S=$(date +%s); timeout 60 compute-sanitizer --tool memcheck ./spqr_gpu programmatic_launch > /tmp/mc.log 2>&1; echo "memcheck spqr programmatic rc=$? $(( $(date +%s)-S ))s"; tail -1 /tmp/mc.log; tail -2 /tmp/mc.log > $OUT/memcheck-tail.log
SH=11008x4096,28672x8192,8192x28672
i=0; for v in c a c a; do i=$((i+1)); S=$(date +%s)
  unset CMV_PTX_DIR CMV_SPQR_PDL
  [ $v = a ] && export CMV_PTX_DIR=$PWD/a CMV_SPQR_PDL=0
  timeout 70 ./cmv-bench --suites spqr --spqr-batches 1 --shapes $SH --out-dir /tmp/q$i > /tmp/q$i.log 2>&1; echo "spqr run$i $v rc=$? $(( $(date +%s)-S ))s"
  echo "=== spqr run$i $v" >> $OUT/bench.log; grep -E "ceiling|b1:" /tmp/q$i.log >> $OUT/bench.log
done
cp /tmp/q1.log $OUT/spqr-run1-full.log
grep -E "===|b1:" $OUT/bench.log | awk '{print $1,$2,$3,$4,$5,$6,$7,$8,$9}'
true

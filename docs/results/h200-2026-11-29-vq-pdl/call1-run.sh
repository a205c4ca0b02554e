#!/bin/bash
# VQ tensor-core GEMV in the sm_90a module, launched programmatically (wip/vq-chain-pdl rebased
# on main 2c25b27, + PtxModule::entry in the CPU test). B = default (programmatic), A = same
# binary with CMV_VQ_PDL=0 (the sm_80 module's kernels, ordinary launch). Then SBVR n4 at
# batches 2,4,8: CMV_SBVR_PDL=all against the default (gemv only).
T0=$(date +%s); cd gpu-variants/vq1
for f in *.xz; do xz -dkf $f; done; chmod +x cmv-bench vq_gpu sbvr_gpu
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
S=$(date +%s); timeout 90 ./vq_gpu > $OUT/vq-tests.log 2>&1; echo "vq tests rc=$? $(( $(date +%s)-S ))s"; grep -E "test result|panicked|FAILED" $OUT/vq-tests.log | head -5
S=$(date +%s); timeout 90 compute-sanitizer --tool memcheck ./vq_gpu a_chain_of_layers > /tmp/mc.log 2>&1; echo "memcheck vq chain rc=$? $(( $(date +%s)-S ))s"; tail -2 /tmp/mc.log; tail -3 /tmp/mc.log > $OUT/memcheck-tail.log
SH=11008x4096,14336x4096,4096x14336,28672x8192
i=0; for v in b a b a; do i=$((i+1)); S=$(date +%s)
  unset CMV_VQ_PDL; [ $v = a ] && export CMV_VQ_PDL=0
  timeout 80 ./cmv-bench --suites vq --variants gptvq2 --batches 1,16 --shapes $SH --out-dir /tmp/v$i > /tmp/v$i.log 2>&1; echo "vq run$i $v rc=$? $(( $(date +%s)-S ))s"
  echo "=== vq run$i $v" >> $OUT/bench.log; grep -E "ceiling| b1:| b16:" /tmp/v$i.log >> $OUT/bench.log
done
unset CMV_VQ_PDL
cp /tmp/v1.log $OUT/vq-run1-full.log
grep -E "===| b1:| b16:" $OUT/bench.log | awk '{print $1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12}'
i=0; for v in all gemv all gemv; do i=$((i+1)); S=$(date +%s)
  [ $(( $(date +%s)-T0 )) -gt 480 ] && { echo "skip sbvr run$i: time"; continue; }
  export CMV_SBVR_PDL=$v
  timeout 60 ./cmv-bench --suites sbvr --variants n4 --shapes $SH --batches 2,4,8 --out-dir /tmp/s$i > /tmp/s$i.log 2>&1; echo "sbvr run$i $v rc=$? $(( $(date +%s)-S ))s"
  echo "=== sbvr run$i $v" >> $OUT/sbvr.log; grep -E "ceiling| b[0-9]+:" /tmp/s$i.log >> $OUT/sbvr.log
done
grep -E "===| b[0-9]+:" $OUT/sbvr.log | awk '{print $1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12}'
true

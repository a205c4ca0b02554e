#!/bin/bash
# SBVR lean epilogue (branch wip/sbvr-lean, a13f702: pivots' power of two on the vector scale,
# f32 coefficient cache, bounds n2_b1=4 n3_b1=3) against main (4e6c99c PTX, bench of 4a141ca:
# same SBVR host code as main). B = branch bench binary with its embedded PTX. GPU tests and
# memcheck with the branch test binary; A-B-A-B at one vector, n = 2 and 4, 4 shapes.
cd gpu-variants/sl1
for f in sbvr_gpu.xz a/*.xz b/*.xz; do xz -dkf $f; done; chmod +x sbvr_gpu a/cmv-bench b/cmv-bench
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
S=$(date +%s); timeout 70 ./sbvr_gpu > $OUT/tests.log 2>&1; echo "tests rc=$? $(( $(date +%s)-S ))s"; grep -E "test result|panicked|FAILED" $OUT/tests.log | head -3
S=$(date +%s); timeout 70 compute-sanitizer --tool memcheck ./sbvr_gpu every_way > $OUT/memcheck.log 2>&1; echo "memcheck rc=$? $(( $(date +%s)-S ))s"; tail -1 $OUT/memcheck.log
SH=11008x4096,14336x4096,4096x14336,28672x8192
i=0; for v in a b a b; do i=$((i+1)); S=$(date +%s)
  if [ $v = a ]; then export CMV_PTX_DIR=$PWD/a; else unset CMV_PTX_DIR; fi
  timeout 85 ./$v/cmv-bench --suites sbvr --variants n2,n4 --shapes $SH --batches 1 --out-dir /tmp/s$i > /tmp/b$i.log 2>&1; echo "run$i $v rc=$? $(( $(date +%s)-S ))s"
  echo "=== run$i $v" >> $OUT/bench.log; grep -E "ceiling|b1:" /tmp/b$i.log >> $OUT/bench.log
done
cp /tmp/b2.log $OUT/run2-full.log
grep -E "===|b1:" $OUT/bench.log | awk '{print $1,$2,$3,$4,$5,$6,$7}'
true

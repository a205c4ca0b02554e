#!/bin/bash
# SBVR one-vector kernels (mma n2/n3/n4 b1 and _deep) with .minnctapersm 3 / 4 added to their
# PTX (module-named files in v3/, v4/ through CMV_PTX_DIR) against the embedded PTX:
# GPU tests per variant, memcheck of v4, A-B-C-A-B-C at one vector.
cd gpu-variants/sb4
for f in *.xz v3/*.xz v4/*.xz; do xz -dkf $f; done; chmod +x cmv-bench sbvr_gpu
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
for v in v3 v4; do S=$(date +%s); CMV_PTX_DIR=$PWD/$v timeout 120 ./sbvr_gpu > $OUT/tests-$v.log 2>&1; echo "tests $v rc=$? $(( $(date +%s)-S ))s"; grep -E "test result|panicked|FAILED" $OUT/tests-$v.log | head -3; done
S=$(date +%s); CMV_PTX_DIR=$PWD/v4 timeout 150 compute-sanitizer --tool memcheck ./sbvr_gpu every_way > $OUT/memcheck-v4.log 2>&1; echo "memcheck rc=$? $(( $(date +%s)-S ))s"; tail -1 $OUT/memcheck-v4.log
SH=11008x4096,14336x4096,4096x14336,28672x8192
i=0; for v in base v3 v4 base v3 v4; do i=$((i+1)); S=$(date +%s)
  if [ $v = base ]; then unset CMV_PTX_DIR; else export CMV_PTX_DIR=$PWD/$v; fi
  timeout 80 ./cmv-bench --suites sbvr --variants n2,n3,n4 --shapes $SH --batches 1 --out-dir /tmp/s$i > /tmp/b$i.log 2>&1; echo "run$i $v rc=$? $(( $(date +%s)-S ))s"
  echo "=== run$i $v" >> $OUT/bench.log; grep -E "ceiling|b1:" /tmp/b$i.log >> $OUT/bench.log
done
grep -E "===|b1:" $OUT/bench.log | awk '{print $1,$2,$3,$4,$5,$6,$7,$10,$11}'
true

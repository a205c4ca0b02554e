#!/bin/bash
# SpQR integer kernel of one vector at 47 registers with a 1296-byte staging area per warp
# (8 blocks per SM instead of 7): GPU tests, memcheck, A-B-A-B against 982d9cf's PTX of the
# module (CMV_PTX_DIR) with the old shared memory per block (CMV_SPQR_I8_SMEM=full).
cd gpu-variants/sq4
for f in *.xz old/*.xz; do xz -dkf $f; done; chmod +x cmv-bench spqr_gpu
S=$(date +%s); timeout 120 ./spqr_gpu > $OUT/tests.log 2>&1; echo "tests rc=$? $(( $(date +%s)-S ))s"; grep -E "test result|panicked|FAILED" $OUT/tests.log | head -5
S=$(date +%s); timeout 120 compute-sanitizer --tool memcheck ./spqr_gpu integer_kernel > $OUT/memcheck.log 2>&1; echo "memcheck rc=$? $(( $(date +%s)-S ))s"; tail -1 $OUT/memcheck.log
SH=14336x4096,28672x8192,8192x28672
i=0
for v in new old new old newfull; do i=$((i+1)); S=$(date +%s)
  unset CMV_PTX_DIR CMV_SPQR_I8_SMEM; sh=$SH
  if [ $v = old ]; then export CMV_PTX_DIR=$PWD/old CMV_SPQR_I8_SMEM=full; fi
  if [ $v = newfull ]; then export CMV_SPQR_I8_SMEM=full; sh=28672x8192; fi
  timeout 100 ./cmv-bench --suites spqr --spqr-batches 1 --shapes $sh --out-dir /tmp/s$i > /tmp/b$i.log 2>&1; echo "run$i $v rc=$? $(( $(date +%s)-S ))s"
  echo "=== run$i $v" >> $OUT/bench.log; grep -E "ceiling|b1:" /tmp/b$i.log >> $OUT/bench.log
done
grep -E "===|i8 " $OUT/bench.log | awk '{print $1,$2,$3,$4,$5,$6}'
true

#!/bin/bash
# SBVR rotating stages with one-shape index loads (wip/sbvr-rotate-idx 45b49e9, embedded in these binaries)
# against main 0dd77fd PTX through CMV_PTX_DIR (same host code).
# GPU tests + memcheck with the new PTX;
# n = 2, 3, 4, four shapes.
cd gpu-variants/sr2
for f in *.xz a/*.xz; do xz -dkf $f; done; chmod +x cmv-bench sbvr_gpu
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
S=$(date +%s); timeout 70 ./sbvr_gpu > $OUT/tests.log 2>&1; echo "tests rc=$? $(( $(date +%s)-S ))s"; grep -E "test result|panicked|FAILED" $OUT/tests.log | head -3
S=$(date +%s); timeout 60 compute-sanitizer --tool memcheck ./sbvr_gpu every_way > $OUT/memcheck.log 2>&1; echo "memcheck every_way rc=$? $(( $(date +%s)-S ))s"; tail -1 $OUT/memcheck.log
S=$(date +%s); timeout 60 compute-sanitizer --tool memcheck ./sbvr_gpu back_to_back > $OUT/memcheck2.log 2>&1; echo "memcheck back_to_back rc=$? $(( $(date +%s)-S ))s"; tail -1 $OUT/memcheck2.log
SH=11008x4096,14336x4096,4096x14336,28672x8192
i=0; for v in a b a b; do i=$((i+1)); S=$(date +%s)
  if [ $v = a ]; then export CMV_PTX_DIR=$PWD/a; else unset CMV_PTX_DIR; fi
  timeout 95 ./cmv-bench --suites sbvr --variants n2,n3,n4 --shapes $SH --batches 1 --out-dir /tmp/s$i > /tmp/b$i.log 2>&1; echo "run$i $v rc=$? $(( $(date +%s)-S ))s"
  echo "=== run$i $v" >> $OUT/bench.log; grep -E "ceiling|b1:" /tmp/b$i.log >> $OUT/bench.log
done
cp /tmp/b2.log $OUT/run2-full.log
grep -E "===|b1:" $OUT/bench.log | awk '{print $1,$2,$3,$4,$5}'
true

#!/bin/bash
# SBVR build d90213b (no arithmetic right behind the next pair's loads) against c946c96: GPU tests,
# memcheck of the main test, A-B-A-B of the sbvr suite at 1, 2, 8, 16 vectors.
cd gpu-variants/sb2
for f in *.xz old/*.xz; do xz -dkf $f; done; chmod +x cmv-bench sbvr_gpu
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
S=$(date +%s); timeout 120 ./sbvr_gpu > $OUT/tests.log 2>&1; echo "tests rc=$? $(( $(date +%s)-S ))s"; grep -E "test result|panicked|FAILED" $OUT/tests.log | head -3
S=$(date +%s); timeout 150 compute-sanitizer --tool memcheck ./sbvr_gpu every_way > $OUT/memcheck.log 2>&1; echo "memcheck rc=$? $(( $(date +%s)-S ))s"; tail -1 $OUT/memcheck.log
SH=11008x4096,14336x4096,28672x8192
i=0; for v in new old new old; do i=$((i+1)); S=$(date +%s)
  if [ $v = old ]; then export CMV_PTX_DIR=$PWD/old; else unset CMV_PTX_DIR; fi
  timeout 90 ./cmv-bench --suites sbvr --variants n2,n4 --shapes $SH --batches 1,8,16 --out-dir /tmp/s$i > $OUT/$i-$v.log 2>&1; echo "$v rc=$? $(( $(date +%s)-S ))s"
done
true

#!/bin/bash
# SBVR build 2611171 (rotating stages in the deep kernels, one flat item loop) against d90213b's
# SBVR PTX (CMV_PTX_DIR, module-named files): GPU tests, memcheck, A-B-A-B at 1, 2, 8, 16 vectors.
cd gpu-variants/sb3
for f in *.xz old/*.xz; do xz -dkf $f; done; chmod +x cmv-bench sbvr_gpu; ls old
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
S=$(date +%s); timeout 120 ./sbvr_gpu > $OUT/tests.log 2>&1; echo "tests rc=$? $(( $(date +%s)-S ))s"; grep -E "test result|panicked|FAILED" $OUT/tests.log | head -3
S=$(date +%s); timeout 150 compute-sanitizer --tool memcheck ./sbvr_gpu every_way > $OUT/memcheck.log 2>&1; echo "memcheck rc=$? $(( $(date +%s)-S ))s"; tail -1 $OUT/memcheck.log
S=$(date +%s); timeout 150 compute-sanitizer --tool memcheck ./sbvr_gpu back_to_back > $OUT/memcheck2.log 2>&1; echo "memcheck2 rc=$? $(( $(date +%s)-S ))s"; tail -1 $OUT/memcheck2.log
SH=11008x4096,14336x4096,4096x14336,28672x8192
i=0; for v in new old new old; do i=$((i+1)); S=$(date +%s)
  if [ $v = old ]; then export CMV_PTX_DIR=$PWD/old; else unset CMV_PTX_DIR; fi
  timeout 110 ./cmv-bench --suites sbvr --variants n2,n4 --shapes $SH --batches 1,2,8,16 --out-dir /tmp/s$i > $OUT/$i-$v.log 2>&1; echo "$v rc=$? $(( $(date +%s)-S ))s"
done
true

#!/bin/bash
# SBVR stream-K at one vector (working tree on 727dc4f): GPU tests, memcheck of the stream-K
# test, then A-B at n = 2 and 4: OLD = 727dc4f's PTX under the new host (CMV_PTX_DIR, stream-K
# off: the old kernels read the first 80 bytes of the params), OFF = new PTX with
# CMV_SBVR_STREAM=0, RULE = default, ALL = CMV_SBVR_STREAM=2.
T0=$(date +%s); cd gpu-variants/s1
for f in cmv-bench.xz sbvr_gpu.xz old/*.xz; do xz -dkf $f; done; chmod +x cmv-bench sbvr_gpu
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
S=$(date +%s); timeout 100 ./sbvr_gpu > $OUT/tests.log 2>&1; echo "tests rc=$? $(( $(date +%s)-S ))s"; grep -E "test result|panicked|FAILED|^ok: stream" $OUT/tests.log | head -8
S=$(date +%s); timeout 110 compute-sanitizer --tool memcheck ./sbvr_gpu stream_k > $OUT/memcheck.log 2>&1; echo "memcheck rc=$? $(( $(date +%s)-S ))s"; tail -2 $OUT/memcheck.log
SH=11008x4096,14336x4096,4096x14336,28672x8192,8192x28672
i=0; for v in OLD OFF RULE ALL RULE OLD; do i=$((i+1)); S=$(date +%s)
  [ $(( S-T0 )) -gt 480 ] && { echo "skip $v: time"; continue; }
  unset CMV_PTX_DIR CMV_SBVR_STREAM
  case $v in OLD) export CMV_PTX_DIR=$PWD/old CMV_SBVR_STREAM=0;; OFF) export CMV_SBVR_STREAM=0;; ALL) export CMV_SBVR_STREAM=2;; esac
  timeout 90 ./cmv-bench --suites sbvr --variants n2,n4 --shapes $SH --batches 1 --out-dir /tmp/s$i > /tmp/b$i.log 2>&1; echo "run$i $v rc=$? $(( $(date +%s)-S ))s"
  echo "=== run$i $v" >> $OUT/bench.log; grep -E "ceiling|b1:" /tmp/b$i.log >> $OUT/bench.log
done
cp /tmp/b3.log $OUT/run3-full.log
grep -E "===|b1:" $OUT/bench.log | awk '{print $1,$2,$3,$4,$5,$6,$7}'
true

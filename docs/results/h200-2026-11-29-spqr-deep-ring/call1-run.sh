#!/bin/bash
# SpQR integer kernel of one vector with the 8-slot weight ring (cmv_spqr_{csr,ptcsr}_i8d_b1):
# GPU tests, memcheck of the deep-ring test, A-B-A-B CMV_SPQR_I8_RING=8 vs 4.
cd gpu-variants/dr1
for f in *.xz; do xz -dkf $f; done; chmod +x cmv-bench spqr_gpu
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
S=$(date +%s); timeout 120 ./spqr_gpu > $OUT/tests.log 2>&1; echo "tests rc=$? $(( $(date +%s)-S ))s"; grep -E "test result|panicked|FAILED" $OUT/tests.log | head -5
S=$(date +%s); timeout 120 compute-sanitizer --tool memcheck ./spqr_gpu deep_ring > $OUT/memcheck.log 2>&1; echo "memcheck rc=$? $(( $(date +%s)-S ))s"; tail -1 $OUT/memcheck.log; grep "test result" $OUT/memcheck.log
SH=14336x4096,28672x8192,8192x28672
i=0
for v in 8 4 8 4 8w7 4w7; do i=$((i+1)); S=$(date +%s)
  unset CMV_SPQR_WARPS; sh=$SH
  export CMV_SPQR_I8_RING=${v:0:1}
  if [ ${#v} -gt 1 ]; then export CMV_SPQR_WARPS=7; sh=8192x28672; fi
  timeout 100 ./cmv-bench --suites spqr --spqr-batches 1 --shapes $sh --out-dir /tmp/s$i > /tmp/b$i.log 2>&1; echo "run$i ring=$v rc=$? $(( $(date +%s)-S ))s"
  echo "=== run$i ring=$v" >> $OUT/bench.log; grep -E "ceiling|b1:" /tmp/b$i.log >> $OUT/bench.log
done
grep -E "===|i8 " $OUT/bench.log | awk '{print $1,$2,$3,$4,$5,$6}'
true

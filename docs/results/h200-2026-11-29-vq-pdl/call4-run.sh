#!/bin/bash
# Build d938d63: the big-codebook GEMV kernels (AQLM-3) launched programmatically on Hopper;
# 4 row groups at 1-3 vectors only (58362bf). GPU tests, memcheck of the chain test and of the
# big-kernel test; AQLM-3 A-B-A-B: B = default, A = CMV_VQ_PDL=0 (same binary, the sm_80
# module, ordinary launches); GPTVQ-2 default at 1-8 vectors (the new row-group rule).
T0=$(date +%s); cd gpu-variants/vq4
for f in *.xz; do xz -dkf $f; done; chmod +x cmv-bench vq_gpu
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
S=$(date +%s); timeout 120 ./vq_gpu > $OUT/vq-tests.log 2>&1; echo "vq tests rc=$? $(( $(date +%s)-S ))s"; grep -E "^test |test result|panicked|FAILED" $OUT/vq-tests.log | head -12
for t in a_chain_of_layers the_big_kernel_matches_the_reference; do
S=$(date +%s); timeout 150 compute-sanitizer --tool memcheck ./vq_gpu $t > /tmp/mc.log 2>&1; echo "memcheck $t rc=$? $(( $(date +%s)-S ))s"; grep -E "test result|ERROR SUMMARY" /tmp/mc.log | tail -2; (echo "== memcheck $t"; grep -E "test result|ERROR SUMMARY" /tmp/mc.log) >> $OUT/sanitizer.log
done
SH=11008x4096,14336x4096
i=0; for v in b a b a; do i=$((i+1)); S=$(date +%s)
  [ $(( $(date +%s)-T0 )) -gt 420 ] && { echo "skip aqlm run$i: time"; continue; }
  unset CMV_VQ_PDL; [ $v = a ] && export CMV_VQ_PDL=0
  timeout 90 ./cmv-bench --suites vq --variants aqlm3 --batches 1,4,16 --shapes $SH --out-dir /tmp/v$i > /tmp/v$i.log 2>&1; echo "aqlm run$i $v rc=$? $(( $(date +%s)-S ))s"
  echo "=== aqlm run$i $v" >> $OUT/bench.log; grep -E "ceiling|^vq " /tmp/v$i.log >> $OUT/bench.log
done
unset CMV_VQ_PDL
cp /tmp/v1.log $OUT/aqlm-run1-full.log
S=$(date +%s); timeout 80 ./cmv-bench --suites vq --variants gptvq2 --batches 1,2,3,4,5,6,7,8 --shapes 11008x4096,14336x4096,4096x14336 --out-dir /tmp/g > /tmp/g.log 2>&1; echo "gptvq2 rule rc=$? $(( $(date +%s)-S ))s"
echo "=== gptvq2 rule" >> $OUT/bench.log; grep -E "ceiling|^vq " /tmp/g.log >> $OUT/bench.log
grep -E "===|^vq +\S+ +[0-9]+x[0-9]+ +[0-9]+ +[23]\.[0-9]+ " $OUT/bench.log | awk '{print $2,$3,$4,$6,$8,$10}'
true

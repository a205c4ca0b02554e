#!/bin/bash
# MatVANS cmv_ans_lanes2 with a persistent grid (this build, uncommitted on top of fa8f75e):
# GPU tests (paired kernel with its persistent grid and with at most 1-5 blocks), memcheck,
# then chains A-B (CMV_ANS_PERSISTENT=0: one block per item, the old grid) at d = 8192-32768.
cd gpu-variants/an1
for f in *.xz; do xz -dkf $f; done; chmod +x cmv-bench ans_gpu
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
S=$(date +%s); timeout 120 ./ans_gpu > $OUT/tests.log 2>&1; echo "tests rc=$? $(( $(date +%s)-S ))s"; grep -E "test result|panicked|FAILED" $OUT/tests.log | head -3
S=$(date +%s); timeout 90 compute-sanitizer --tool memcheck ./ans_gpu corrupted_streams > $OUT/memcheck.log 2>&1; echo "memcheck rc=$? $(( $(date +%s)-S ))s"; tail -1 $OUT/memcheck.log
i=0; for v in 0 1 0 1; do i=$((i+1)); S=$(date +%s)
  D=8192,16384,32768; [ $i -gt 2 ] && D=16384,32768
  CMV_ANS_PERSISTENT=$v timeout 110 ./cmv-bench --suites ans --shapes 2048x2048 --ans-dims $D --ans-variants ans-lanes-esc --out-dir /tmp/a$i > /tmp/a$i.log 2>&1; echo "run$i persistent=$v rc=$? $(( $(date +%s)-S ))s"
  echo "=== run$i persistent=$v" >> $OUT/bench.log; grep -E "ceiling|chain:" /tmp/a$i.log >> $OUT/bench.log
done
cp /tmp/a2.log $OUT/run2-full.log
grep -E "===|chain:" $OUT/bench.log
true

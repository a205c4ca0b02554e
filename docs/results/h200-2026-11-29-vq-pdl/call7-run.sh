#!/bin/bash
# Build d938d63: AQLM-3 at the 70B shapes, batch 1 and 16, programmatic (default); then the
# ordinary launch (CMV_VQ_PDL=0) if time allows.
T0=$(date +%s); cd gpu-variants/vq6
for f in *.xz; do xz -dkf $f; done; chmod +x cmv-bench
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
SH=28672x8192,8192x28672
i=0; for v in b a; do i=$((i+1)); S=$(date +%s)
  [ $(( $(date +%s)-T0 )) -gt 200 ] && { echo "skip run$i: time"; continue; }
  unset CMV_VQ_PDL; [ $v = a ] && export CMV_VQ_PDL=0
  timeout 170 ./cmv-bench --suites vq --variants aqlm3 --batches 1,16 --shapes $SH --out-dir /tmp/v$i > /tmp/v$i.log 2>&1; echo "run$i $v rc=$? $(( $(date +%s)-S ))s"
  echo "=== run$i $v" >> $OUT/bench.log; grep -E "ceiling|^vq |encoded" /tmp/v$i.log >> $OUT/bench.log
done
grep -E "===|^vq +aqlm3 +[0-9]+x[0-9]+ +[0-9]+ +3\.[0-9]+ " $OUT/bench.log | awk '{print $2,$3,$4,$6,$8,$9,$10}'
true

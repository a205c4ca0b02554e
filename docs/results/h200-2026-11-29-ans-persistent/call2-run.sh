#!/bin/bash
# MatVANS chains: main before the persistent grid (fa8f75e, "old") against 17284a2 ("new",
# persistent grid), A-B-A-B at d = 8192 and 16384, same host.
cd gpu-variants/an2
for f in old/*.xz new/*.xz; do xz -dkf $f; done; chmod +x old/cmv-bench new/cmv-bench
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
i=0; for v in old new old new; do i=$((i+1)); S=$(date +%s)
  timeout 100 ./$v/cmv-bench --suites ans --shapes 2048x2048 --ans-dims 8192,16384 --ans-variants ans-lanes-esc --out-dir /tmp/a$i > /tmp/a$i.log 2>&1; echo "run$i $v rc=$? $(( $(date +%s)-S ))s"
  echo "=== run$i $v" >> $OUT/bench.log; grep -E "ceiling|build|chain:" /tmp/a$i.log >> $OUT/bench.log
done
grep -E "===|chain:" $OUT/bench.log
true

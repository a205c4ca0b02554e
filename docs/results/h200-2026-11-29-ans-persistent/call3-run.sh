#!/bin/bash
# MatVANS chains at d = 8192, 16384, which part of 17284a2 (persistent cmv_ans_lanes2) costs
# at 8192: O = bench of fa8f75e (old kernel, 203 KiB of shared memory); OS = 17284a2's bench
# with the old PTX (CMV_PTX_DIR, CMV_ANS_PERSISTENT=0: old code, 219 KiB); N0/N1 = 17284a2
# one block per item / persistent; V3 = next item's copies opened after the reduction (no
# prefetch); V4 = one sums buffer, two barriers. Two rounds.
cd gpu-variants/an3
for f in */*.xz; do xz -dkf $f; done; chmod +x old/cmv-bench new/cmv-bench
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
run() { # name bin ptxdir persistent
  S=$(date +%s)
  if [ -n "$3" ]; then export CMV_PTX_DIR=$PWD/$3; else unset CMV_PTX_DIR; fi
  CMV_ANS_PERSISTENT=$4 timeout 60 ./$2/cmv-bench --suites ans --shapes 2048x2048 --ans-dims 8192,16384 --ans-variants ans-lanes-esc --out-dir /tmp/o-$1 > /tmp/$1.log 2>&1; echo "$1 rc=$? $(( $(date +%s)-S ))s"
  echo "=== $1" >> $OUT/bench.log; grep -E "ceiling|chain:" /tmp/$1.log >> $OUT/bench.log
}
for r in 1 2; do
  run O$r old "" 1; run OS$r new old 0; run N0$r new "" 0; run N1$r new "" 1; run V3$r new v3 1; run V4$r new v4 1
done
grep -E "===|ans-lanes-esc chain:" $OUT/bench.log | awk '/===/{n=$2} /chain/{print n, $1, $4, $5}'
true

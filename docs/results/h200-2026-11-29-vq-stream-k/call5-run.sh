#!/bin/bash
# Build 680c9e0 (VQ-GEMM stream-K, committed): VQ GPU tests, racecheck of the GEMM test; the GEMM
# at 128 and 512 inputs on all 8 shapes (default rule); 14336x4096 and 28672x8192 with
# CMV_VQ_GEMM_STREAM=1 / 0 (stream-K forced / off) against the rule.
T0=$(date +%s); cd gpu-variants/g4
for f in *.xz; do xz -dkf $f; done; chmod +x cmv-bench gpu-vq
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
S=$(date +%s); timeout 100 ./gpu-vq > $OUT/tests-vq.log 2>&1; echo "vq tests rc=$? $(( $(date +%s)-S ))s"; grep -E "test result|panicked|FAILED" $OUT/tests-vq.log | head -4
S=$(date +%s); timeout 120 compute-sanitizer --tool racecheck ./gpu-vq the_gemm_matches > /tmp/rc.log 2>&1; echo "racecheck gemm rc=$? $(( $(date +%s)-S ))s"; grep -E "test result|RACECHECK SUMMARY|ERROR SUMMARY" /tmp/rc.log | tail -3; cp /tmp/rc.log $OUT/racecheck-gemm.log
run() { n=$1; st=$2; shift 2; S=$(date +%s)
  [ $(( $(date +%s)-T0 )) -gt 330 ] && { echo "skip $n: time"; return; }
  if [ -n "$st" ]; then export CMV_VQ_GEMM_STREAM=$st; else unset CMV_VQ_GEMM_STREAM; fi
  timeout 90 ./cmv-bench --suites vq --variants none "$@" --out-dir /tmp/o-$n > /tmp/$n.log 2>&1; echo "$n rc=$? $(( $(date +%s)-S ))s"
  echo "=== $n" >> $OUT/bench.log; grep -E "ceiling|vq-gemm/" /tmp/$n.log >> $OUT/bench.log
}
run all "" --vq-gemm-tokens 128,512
cp /tmp/all.log $OUT/all-full.log
for r in 1 2; do for st in 1 0; do run s$st-$r $st --vq-gemm-tokens 512 --shapes 14336x4096,28672x8192; done; done
grep -E "===|vq-gemm/auto" $OUT/bench.log | sed 's/, rel_err.*//' | cut -c1-110
true

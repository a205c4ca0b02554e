#!/bin/bash
# VQ-GEMM stream-K in split-K's cases too (cc13f57 + CMV_VQ_GEMM_STREAM=2: one block per SM
# everywhere, no split-K) against the default rule (split-K under a wave, stream-K where the
# last wave is partial), all 8 shapes at 128 and 512 inputs, A-B-A-B.
T0=$(date +%s); cd gpu-variants/g6; xz -dkf cmv-bench.xz; chmod +x cmv-bench
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
run() { n=$1; st=$2; S=$(date +%s)
  [ $(( $(date +%s)-T0 )) -gt 190 ] && { echo "skip $n: time"; return; }
  if [ -n "$st" ]; then export CMV_VQ_GEMM_STREAM=$st; else unset CMV_VQ_GEMM_STREAM; fi
  timeout 80 ./cmv-bench --suites vq --variants none --vq-gemm-tokens 128,512 --out-dir /tmp/o-$n > /tmp/$n.log 2>&1; echo "$n rc=$? $(( $(date +%s)-S ))s"
  echo "=== $n" >> $OUT/bench.log; grep -E "ceiling|vq-gemm/auto" /tmp/$n.log >> $OUT/bench.log
}
run rule1 ""; run all1 2; run rule2 ""; run all2 2
grep -E "===|vq-gemm/auto" $OUT/bench.log | sed 's/, rel_err=\([0-9.e-]*\).*/ err \1/' | cut -c1-120
true

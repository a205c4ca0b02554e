#!/bin/bash
# VQ-GEMM stream-K (uncommitted tree on 934b204): the Hopper kernel runs a grid of one block per
# SM, each an equal share of the (tile, slab) units, where the tiles leave the last wave partial
# (vq_kernels::gemm90::choose_stream). GPU tests (the GEMM test has stream-K on 1-7 blocks),
# then A-B at 128 and 512 inputs: default rule against CMV_VQ_GEMM_STREAM=0 (one block per tile)
# and =1 (stream-K wherever the tiles outnumber the SMs); memcheck of the GEMM test last.
T0=$(date +%s); cd gpu-variants/g3
for f in *.xz; do xz -dkf $f; done; chmod +x cmv-bench gpu-vq
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
S=$(date +%s); timeout 100 ./gpu-vq > $OUT/tests-vq.log 2>&1; echo "vq tests rc=$? $(( $(date +%s)-S ))s"; grep -E "test result|panicked|FAILED" $OUT/tests-vq.log | head -4
run() { n=$1; st=$2; shift 2; S=$(date +%s)
  [ $(( $(date +%s)-T0 )) -gt 400 ] && { echo "skip $n: time"; return; }
  if [ -n "$st" ]; then export CMV_VQ_GEMM_STREAM=$st; else unset CMV_VQ_GEMM_STREAM; fi
  timeout 90 ./cmv-bench --suites vq --variants none --vq-gemm-tokens 128,512 "$@" --out-dir /tmp/o-$n > /tmp/$n.log 2>&1; echo "$n rc=$? $(( $(date +%s)-S ))s"
  echo "=== $n" >> $OUT/bench.log; grep -E "ceiling|vq-gemm/" /tmp/$n.log >> $OUT/bench.log
}
SH=28672x8192,11008x4096,8192x28672,14336x4096
SH2=8192x8192,4096x11008,4096x14336,4096x4096
run rule1 "" --shapes $SH; run off1 0 --shapes $SH; run rule2 "" --shapes $SH; run off2 0 --shapes $SH
run rule3 "" --shapes $SH2; run off3 0 --shapes $SH2; run on3 1 --shapes $SH2
grep -E "===|vq-gemm/auto" $OUT/bench.log | sed 's/, rel_err.*//' | cut -c1-110
S=$(date +%s); [ $(( $(date +%s)-T0 )) -lt 430 ] && { timeout 150 compute-sanitizer --tool memcheck ./gpu-vq the_gemm_matches > /tmp/mc.log 2>&1; echo "memcheck gemm rc=$? $(( $(date +%s)-S ))s"; grep -E "test result|ERROR SUMMARY" /tmp/mc.log | tail -2; cp /tmp/mc.log $OUT/memcheck-gemm.log; }
true

#!/bin/bash
# SBVR one vector quantized by the GEMV itself (working tree on 15448b6: `_fq` kernels, no
# cmv_sbvr_quantize launch). GPU tests, memcheck of the chain test, then A-B at n = 2 and 4:
# FQ = default, OLD = 727dc4f's PTX (parameter block declared 96 bytes; the old host path:
# CMV_SBVR_FUSED=0), UNF = new PTX with CMV_SBVR_FUSED=0 (the two-kernel path).
T0=$(date +%s); cd gpu-variants/s5
for f in cmv-bench.xz sbvr_gpu.xz old/*.xz; do xz -dkf $f; done; chmod +x cmv-bench sbvr_gpu
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
S=$(date +%s); timeout 80 ./sbvr_gpu > $OUT/tests.log 2>&1; echo "tests rc=$? $(( $(date +%s)-S ))s"; grep -E "test result|panicked|FAILED" $OUT/tests.log | head -8
S=$(date +%s); timeout 60 compute-sanitizer --tool memcheck ./sbvr_gpu a_chain > $OUT/memcheck.log 2>&1; echo "memcheck rc=$? $(( $(date +%s)-S ))s"; tail -1 $OUT/memcheck.log
SH=11008x4096,14336x4096,4096x14336
i=0; for v in FQ OLD FQ OLD UNF; do i=$((i+1)); S=$(date +%s)
  [ $(( S-T0 )) -gt 260 ] && { echo "skip $v: time"; continue; }
  unset CMV_PTX_DIR CMV_SBVR_FUSED
  case $v in OLD) export CMV_PTX_DIR=$PWD/old CMV_SBVR_FUSED=0;; UNF) export CMV_SBVR_FUSED=0;; esac
  timeout 60 ./cmv-bench --suites sbvr --variants n2,n4 --shapes $SH --batches 1 --out-dir /tmp/s$i > /tmp/b$i.log 2>&1; echo "run$i $v rc=$? $(( $(date +%s)-S ))s"
  echo "=== run$i $v" >> $OUT/bench.log; grep -E "ceiling|b1:|rror" /tmp/b$i.log >> $OUT/bench.log
done
for v in FQ OLD; do i=$((i+1)); S=$(date +%s)
  [ $(( S-T0 )) -gt 330 ] && { echo "skip $v: time"; continue; }
  unset CMV_PTX_DIR CMV_SBVR_FUSED
  case $v in OLD) export CMV_PTX_DIR=$PWD/old CMV_SBVR_FUSED=0;; esac
  timeout 45 ./cmv-bench --suites sbvr --variants n4 --shapes 28672x8192 --batches 1 --out-dir /tmp/s$i > /tmp/b$i.log 2>&1; echo "run$i $v rc=$? $(( $(date +%s)-S ))s"
  echo "=== run$i $v" >> $OUT/bench.log; grep -E "ceiling|b1:|rror" /tmp/b$i.log >> $OUT/bench.log
done
cp /tmp/b1.log $OUT/run1-full.log
grep -E "===|b1:" $OUT/bench.log | awk '{print $1,$2,$3,$4,$5,$6,$7}'
true

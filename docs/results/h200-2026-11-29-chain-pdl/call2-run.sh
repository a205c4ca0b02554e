#!/bin/bash
# SBVR: the quantization launched programmatically too (it waits for the GEMV before it; the
# GEMV lets the next launch start at once), so a call's start overlaps the previous call's end.
# Build: main 0dd77fd + this change (uncommitted), embedded in these binaries.
# C = new PTX, default (programmatic quantize); B = new PTX, CMV_SBVR_PDL=gemv (quantize
# ordinary, as main launches it); A = main 0dd77fd PTX through CMV_PTX_DIR with CMV_SBVR_PDL=gemv
# (main exactly). GPU tests + memcheck of the chain tests first.
cd gpu-variants/sp1
for f in *.xz a/*.xz; do xz -dkf $f; done; chmod +x cmv-bench sbvr_gpu
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
S=$(date +%s); timeout 80 ./sbvr_gpu > $OUT/tests.log 2>&1; echo "tests rc=$? $(( $(date +%s)-S ))s"; grep -E "test result|panicked|FAILED|programmatic" $OUT/tests.log | head -8
for t in a_chain_of_layers back_to_back; do S=$(date +%s); timeout 60 compute-sanitizer --tool memcheck ./sbvr_gpu $t > /tmp/mc.log 2>&1; echo "memcheck $t rc=$? $(( $(date +%s)-S ))s"; tail -1 /tmp/mc.log; tail -3 /tmp/mc.log >> $OUT/memcheck-tails.log; done
SH=11008x4096,14336x4096,4096x14336,28672x8192
i=0; for v in c b c b a; do i=$((i+1)); S=$(date +%s)
  unset CMV_PTX_DIR CMV_SBVR_PDL
  [ $v = a ] && export CMV_PTX_DIR=$PWD/a
  [ $v != c ] && export CMV_SBVR_PDL=gemv
  timeout 80 ./cmv-bench --suites sbvr --variants n2,n4 --shapes $SH --batches 1 --out-dir /tmp/s$i > /tmp/b$i.log 2>&1; echo "run$i $v rc=$? $(( $(date +%s)-S ))s"
  echo "=== run$i $v" >> $OUT/bench.log; grep -E "ceiling|b1:" /tmp/b$i.log >> $OUT/bench.log
done
cp /tmp/b1.log $OUT/run1-full.log
grep -E "===|b1:" $OUT/bench.log | awk '{print $1,$2,$3,$4,$5}'
true

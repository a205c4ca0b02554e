#!/bin/bash
# Build 4e47a8b: GPU tests (dense, BEAM GEMV); dense default bench batch 1-16; int8 wide-shape grid experiment; BEAM default bench.
cd gpu-variants/f2
for f in *.xz; do xz -dkf $f; done; chmod +x cmv-bench dense_gpu beam_gpu
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem,power.limit --format=csv,noheader
S=$(date +%s); timeout 60 ./dense_gpu > $OUT/tests.log 2>&1; echo "dense tests rc=$? $(( $(date +%s)-S ))s"; grep -E "test result|panicked|FAILED" $OUT/tests.log | head -3
S=$(date +%s); timeout 200 ./beam_gpu >> $OUT/tests.log 2>&1; echo "beam tests rc=$? $(( $(date +%s)-S ))s"; grep -E "test result|panicked|FAILED" $OUT/tests.log | tail -3
S=$(date +%s); timeout 150 ./cmv-bench --suites dense --batches 1,2,4,8,16 --out-dir /tmp/bd > $OUT/dense-default.log 2>&1; echo "dense bench rc=$? $(( $(date +%s)-S ))s"; head -3 $OUT/dense-default.log
for v in t64g128 t128g128; do S=$(date +%s)
  case $v in t64g128) T=64;; t128g128) T=128;; esac
  CMV_DENSE_BULK=2 CMV_DENSE_BULK_TILE=$T CMV_DENSE_BULK_GRID=128 timeout 60 ./cmv-bench --suites dense --shapes 4096x11008,4096x14336 --batches 2,8,16 --iters 100 --out-dir /tmp/w$v > $OUT/wide-$v.log 2>&1; echo "$v rc=$? $(( $(date +%s)-S ))s"
done
S=$(date +%s); timeout 200 ./cmv-bench --suites beam-gemv --beam-gemv-bits 4,6,8,12,16,32 --beam-gemv-outputs sai/ovf --beam-gemv-vectors row --shapes 11008x4096,14336x4096,4096x14336,28672x8192,8192x28672,8192x8192 --out-dir /tmp/bb > $OUT/beam-default.log 2>&1; echo "beam bench rc=$? $(( $(date +%s)-S ))s"
true

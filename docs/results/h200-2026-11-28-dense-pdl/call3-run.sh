#!/bin/bash
# (1) dense: copy-engine kernels forced at the 4096-row shapes (tiles 128 / 64, programmatic where a full wave) against the default; (2) BEAM direct GEMV slice sweep on the H200.
cd gpu-variants/pdl
for f in *.xz; do xz -dkf $f; done; chmod +x cmv-bench dense_gpu
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv,noheader
SH=4096x11008,4096x14336,4096x4096
for v in def t128 t64 def2; do S=$(date +%s)
  unset CMV_DENSE_BULK CMV_DENSE_BULK_TILE
  case $v in t128) export CMV_DENSE_BULK=2 CMV_DENSE_BULK_TILE=128;; t64) export CMV_DENSE_BULK=2 CMV_DENSE_BULK_TILE=64;; esac
  timeout 60 ./cmv-bench --suites dense --shapes $SH --batches 2,8,16 --iters 100 --out-dir /tmp/w$v > $OUT/wide-$v.log 2>&1; echo "$v rc=$? $(( $(date +%s)-S ))s"
done
unset CMV_DENSE_BULK CMV_DENSE_BULK_TILE
S=$(date +%s); timeout 240 ./cmv-bench --suites beam-gemv --beam-gemv-bits 4,6,8 --beam-gemv-outputs sai/ovf --beam-gemv-vectors row --beam-gemv-direct-slices 1,2,4,8 --shapes 11008x4096,14336x4096,4096x14336,28672x8192,8192x28672 --out-dir /tmp/bs > $OUT/beam-slices.log 2>&1; echo "beam rc=$? $(( $(date +%s)-S ))s"
S=$(date +%s); timeout 120 ./cmv-bench --suites beam-gemv --beam-gemv-bits 4,6,8 --beam-gemv-outputs sai/ovf --beam-gemv-vectors row --shapes 11008x4096,14336x4096,4096x14336,28672x8192,8192x28672 --out-dir /tmp/bd > $OUT/beam-default.log 2>&1; echo "beam default rc=$? $(( $(date +%s)-S ))s"
true

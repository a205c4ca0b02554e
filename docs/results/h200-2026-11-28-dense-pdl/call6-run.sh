#!/bin/bash
# Variant build (d458db6 with BULK_T64 := 7 consumers, 5 stages: tiles of 112 rows): default (128-row tiles) against CMV_DENSE_BULK_TILE=64 (the 112-row geometry), A-B-A-B; then 112 without programmatic launch.
cd gpu-variants/t112
xz -dkf cmv-bench.xz; chmod +x cmv-bench
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
SH=14336x4096,28672x8192,11008x4096
i=0; for v in def t112 def t112 t112nopdl; do i=$((i+1)); S=$(date +%s)
  unset CMV_DENSE_BULK_TILE CMV_DENSE_PDL
  case $v in t112) export CMV_DENSE_BULK_TILE=64;; t112nopdl) export CMV_DENSE_BULK_TILE=64 CMV_DENSE_PDL=0;; esac
  timeout 80 ./cmv-bench --suites dense --shapes $SH --batches 2,4,8,16 --iters 100 --out-dir /tmp/t$i > $OUT/$i-$v.log 2>&1; echo "$v rc=$? $(( $(date +%s)-S ))s"
done
true

#!/bin/bash
# BEAM direct GEMV, build 790edf2, 12-32 bits: A-B-A-B default (6-8 warps) / CMV_BEAM_DIRECT_WARPS=8.
cd gpu-variants/bw
for f in *.xz; do xz -dkf $f; done; chmod +x cmv-bench beam_gpu
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
SH=11008x4096,14336x4096,8192x8192
i=0; for v in new w8 new w8; do i=$((i+1)); S=$(date +%s)
  if [ $v = w8 ]; then export CMV_BEAM_DIRECT_WARPS=8; else unset CMV_BEAM_DIRECT_WARPS; fi
  timeout 70 ./cmv-bench --suites beam-gemv --beam-gemv-bits 12,16,24,32 --beam-gemv-outputs sai/ovf --beam-gemv-vectors row --shapes $SH --out-dir /tmp/b$i > $OUT/w$i-$v.log 2>&1; echo "$v rc=$? $(( $(date +%s)-S ))s"
done
true

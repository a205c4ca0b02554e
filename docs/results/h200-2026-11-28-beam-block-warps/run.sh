#!/bin/bash
# BEAM direct GEMV, build 790edf2: blocks of 6-8 warps by direct_block_warps. GPU tests of the
# direct kernel, memcheck of the new test, A-B-A-B default / CMV_BEAM_DIRECT_WARPS=8 (the old block).
cd gpu-variants/bw
for f in *.xz; do xz -dkf $f; done; chmod +x cmv-bench beam_gpu
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
S=$(date +%s); timeout 150 ./beam_gpu direct_kernel row_vectors programmatic_launch > $OUT/tests.log 2>&1; echo "tests rc=$? $(( $(date +%s)-S ))s"; grep -E "test result|panicked|FAILED" $OUT/tests.log | head -3
S=$(date +%s); timeout 120 compute-sanitizer --tool memcheck ./beam_gpu direct_kernel_blocks > $OUT/memcheck.log 2>&1; echo "memcheck rc=$? $(( $(date +%s)-S ))s"; tail -1 $OUT/memcheck.log
SH=11008x4096,14336x4096,4096x14336,28672x8192
i=0; for v in new w8 new w8; do i=$((i+1)); S=$(date +%s)
  if [ $v = w8 ]; then export CMV_BEAM_DIRECT_WARPS=8; else unset CMV_BEAM_DIRECT_WARPS; fi
  timeout 75 ./cmv-bench --suites beam-gemv --beam-gemv-bits 4,6,8 --beam-gemv-outputs sai/ovf --beam-gemv-vectors row --shapes $SH --out-dir /tmp/b$i > $OUT/$i-$v.log 2>&1; echo "$v rc=$? $(( $(date +%s)-S ))s"
done
true

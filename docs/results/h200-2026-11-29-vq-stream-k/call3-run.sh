#!/bin/bash
# The zero-fill copies (second try: call 2's old/ files were misnamed, so its "old" runs loaded
# the new PTX too). New = the binary's embedded PTX (cp_async_*_or_zeros); old = CMV_PTX_DIR=old
# (main 934b204's PTX of the changed modules, named by module), same host binary.
T0=$(date +%s); cd gpu-variants/g2
for f in *.xz old/*.xz; do xz -dkf $f; done; chmod +x cmv-bench gpu-* beam-*
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader; ls old/*.ptx
run() { # name ptxdir args...
  n=$1; d=$2; shift 2; S=$(date +%s)
  [ $(( $(date +%s)-T0 )) -gt 480 ] && { echo "skip $n: time"; return; }
  if [ "$d" = old ]; then export CMV_PTX_DIR=$PWD/old; else unset CMV_PTX_DIR; fi
  timeout 100 ./cmv-bench "$@" --out-dir /tmp/o-$n > /tmp/$n.log 2>&1; echo "$n rc=$? $(( $(date +%s)-S ))s"
  echo "=== $n" >> $OUT/bench.log; grep -E "ceiling|chain:|vq-gemm/|^sbvr |^dense|beam-gemv .*batch|^beam-gemm| mma " /tmp/$n.log >> $OUT/bench.log
}
for v in new old new old; do
  run vq-$v $v --suites vq --variants none --vq-gemm-tokens 512 --shapes 28672x8192,11008x4096
  run ans-$v $v --suites ans --shapes 2048x2048 --ans-dims 8192,16384 --ans-variants ans-lanes-esc
done
for v in new old; do
  run gemv-$v $v --suites beam-gemv --beam-gemv-bits 4,6,8 --beam-gemv-outputs sai/ovf --beam-gemv-vectors row --shapes 14336x4096,4096x14336
  run dense-$v $v --suites dense --shapes 4096x4096,4096x11008 --batches 4,16
done
for v in new old; do
  run gemm-$v $v --suites beam-gemm --beam-sizes 1GiB --beam-bits 2,4,8 --beam-kernels mma --beam-outputs sai/ovf --beam-iters 3
done
for t in gpu_gemv gpu_mma; do S=$(date +%s)
  [ $(( $(date +%s)-T0 )) -gt 520 ] && { echo "skip $t: time"; continue; }
  timeout 60 ./beam-$t > $OUT/tests-beam-$t.log 2>&1; echo "beam $t rc=$? $(( $(date +%s)-S ))s"; grep -E "test result|panicked|FAILED" $OUT/tests-beam-$t.log | head -4
done
grep -E "===|chain:|vq-gemm/(auto) " $OUT/bench.log | cut -c1-110
true

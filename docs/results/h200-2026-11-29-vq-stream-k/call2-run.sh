#!/bin/bash
# (Reconstructed: gpu-variants/g2/run.sh as call 2 ran it, before call 3 replaced it.)
# The zero-fill copies: cp.async with a source size (LDGSTS ..., P: one shared wavefront per
# thread) replaced by a predicated plain cp.async and st.shared of zeros (cmv-device
# cp_async_*_or_zeros) in vq (GEMM), ans (lane kernels), sbvr (int8 ring), dense (tc kernels),
# beam (GEMV rings, GEMM). New = the binary's embedded PTX; old = CMV_PTX_DIR=old (main 934b204's
# PTX of the changed modules), same host binary. GPU tests first.
# NOTE: old/ held vq_kernels.ptx etc. (the crates' file names), but the runtime looks for
# <module name>.ptx (vq-kernels.ptx): no file matched, so the "old" runs ran the new PTX too.
T0=$(date +%s); cd gpu-variants/g2
for f in *.xz old/*.xz; do xz -dkf $f; done; chmod +x cmv-bench gpu-* beam-*
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
for c in vq-codebook ans-codec sbvr-format dense-gemv; do S=$(date +%s)
  timeout 120 ./gpu-$c > $OUT/tests-$c.log 2>&1; echo "$c tests rc=$? $(( $(date +%s)-S ))s"; grep -E "test result|panicked|FAILED" $OUT/tests-$c.log | head -4
done
run() { # name ptxdir args...
  n=$1; d=$2; shift 2; S=$(date +%s)
  [ $(( $(date +%s)-T0 )) -gt 500 ] && { echo "skip $n: time"; return; }
  if [ "$d" = old ]; then export CMV_PTX_DIR=$PWD/old; else unset CMV_PTX_DIR; fi
  timeout 90 ./cmv-bench "$@" --out-dir /tmp/o-$n > /tmp/$n.log 2>&1; echo "$n rc=$? $(( $(date +%s)-S ))s"
  echo "=== $n" >> $OUT/bench.log; grep -E "ceiling|chain:|vq-gemm/|^sbvr " /tmp/$n.log >> $OUT/bench.log
}
for r in 1 2; do for v in new old; do
  run vq-$v$r $v --suites vq --variants none --vq-gemm-tokens 128,512 --shapes 28672x8192,11008x4096,4096x14336
  run ans-$v$r $v --suites ans --shapes 2048x2048 --ans-dims 8192,16384 --ans-variants ans-lanes-esc
done; done
for v in new old; do run sbvr-$v $v --suites sbvr --variants n4 --batches 4,16 --shapes 11008x4096,28672x8192; done
true

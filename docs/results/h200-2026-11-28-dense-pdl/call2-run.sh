#!/bin/bash
# Dense copy-engine kernels, programmatic launch for full waves only: GPU tests; A-B-A-B (rule / CMV_DENSE_PDL=0); grid 132 with and without.
cd gpu-variants/pdl
for f in *.xz; do xz -dkf $f; done; chmod +x cmv-bench dense_gpu
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv,noheader
S=$(date +%s); timeout 150 ./dense_gpu > $OUT/tests.log 2>&1; echo "tests rc=$? $(( $(date +%s)-S ))s"; grep -E "test result|panicked|FAILED|skipped" $OUT/tests.log | head
S=$(date +%s); timeout 150 compute-sanitizer --tool memcheck ./dense_gpu a_chain_of_bulk > $OUT/memcheck.log 2>&1; echo "memcheck rc=$? $(( $(date +%s)-S ))s"; tail -1 $OUT/memcheck.log
i=0; for v in on off on off; do i=$((i+1)); S=$(date +%s)
  if [ $v = off ]; then export CMV_DENSE_PDL=0; else unset CMV_DENSE_PDL; fi
  timeout 100 ./cmv-bench --suites dense --shapes 8192x8192,11008x4096,14336x4096,28672x8192,8192x28672 --batches 2,4,8,16 --iters 100 --out-dir /tmp/a$i > $OUT/$i-$v.log 2>&1; echo "$v rc=$? $(( $(date +%s)-S ))s"
done
unset CMV_DENSE_PDL
for sh in 11008x4096 14336x4096 28672x8192; do for v in on off; do S=$(date +%s)
  if [ $v = off ]; then export CMV_DENSE_PDL=0; else unset CMV_DENSE_PDL; fi
  CMV_DENSE_BULK_GRID=132 timeout 60 ./cmv-bench --suites dense --shapes $sh --batches 2,16 --iters 100 --out-dir /tmp/g > /tmp/g-$sh-$v.log 2>&1; echo "grid132 $sh $v rc=$? $(( $(date +%s)-S ))s"
  cat /tmp/g-$sh-$v.log | sed "s/^/$v /" >> $OUT/grid132.log
done; done
true

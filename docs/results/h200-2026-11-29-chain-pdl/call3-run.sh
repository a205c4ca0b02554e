#!/bin/bash
# SpQR one vector: the routed and integer-MMA kernels in the sm_90a module, launched
# programmatically (launch_dependents at the start, griddepcontrol.wait after the first weight
# copies), so a call overlaps the end of the one before. SBVR batch 16 with the programmatic
# quantization (e33a371). Build: e33a371 + the SpQR change (uncommitted), embedded.
# SpQR: C = new default; A = main 0dd77fd sm_80 PTX through CMV_PTX_DIR with CMV_SPQR_PDL=0
# (main's one-vector path exactly). SBVR b16: C = default, B = CMV_SBVR_PDL=gemv.
cd gpu-variants/sq5
for f in *.xz a/*.xz; do xz -dkf $f; done; chmod +x cmv-bench spqr_gpu
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
S=$(date +%s); timeout 100 ./spqr_gpu > $OUT/tests.log 2>&1; echo "tests rc=$? $(( $(date +%s)-S ))s"; grep -E "test result|panicked|FAILED" $OUT/tests.log | head -5
S=$(date +%s); timeout 80 compute-sanitizer --tool memcheck ./spqr_gpu a_chain_of_layers > /tmp/mc.log 2>&1; echo "memcheck chain rc=$? $(( $(date +%s)-S ))s"; tail -1 /tmp/mc.log; tail -3 /tmp/mc.log > $OUT/memcheck-tail.log
SH=11008x4096,28672x8192,8192x28672
i=0; for v in c a c a; do i=$((i+1)); S=$(date +%s)
  unset CMV_PTX_DIR CMV_SPQR_PDL
  [ $v = a ] && export CMV_PTX_DIR=$PWD/a CMV_SPQR_PDL=0
  timeout 70 ./cmv-bench --suites spqr --spqr-batches 1 --shapes $SH --out-dir /tmp/q$i > /tmp/q$i.log 2>&1; echo "spqr run$i $v rc=$? $(( $(date +%s)-S ))s"
  echo "=== spqr run$i $v" >> $OUT/bench.log; grep -E "ceiling|b1:" /tmp/q$i.log >> $OUT/bench.log
done
unset CMV_PTX_DIR CMV_SPQR_PDL
SH=11008x4096,14336x4096,4096x14336,28672x8192
i=0; for v in c b c b; do i=$((i+1)); S=$(date +%s)
  unset CMV_SBVR_PDL; [ $v = b ] && export CMV_SBVR_PDL=gemv
  timeout 60 ./cmv-bench --suites sbvr --variants n4 --shapes $SH --batches 16 --out-dir /tmp/s$i > /tmp/s$i.log 2>&1; echo "sbvr run$i $v rc=$? $(( $(date +%s)-S ))s"
  echo "=== sbvr run$i $v" >> $OUT/bench.log; grep -E "ceiling|b16:" /tmp/s$i.log >> $OUT/bench.log
done
cp /tmp/q1.log $OUT/spqr-run1-full.log; cp /tmp/s1.log $OUT/sbvr-run1-full.log
grep -E "===|b1:|b16:" $OUT/bench.log | awk '{print $1,$2,$3,$4,$5,$6,$7,$8,$9}'
true

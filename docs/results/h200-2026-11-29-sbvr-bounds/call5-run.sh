#!/bin/bash
# SBVR at the committed PTX of bea3237 (launch bounds for n = 2 and 3; module-named copies
# through CMV_PTX_DIR, bench and test binaries of 4a141ca, the same SBVR host code): GPU tests,
# memcheck, one bench run at one vector, n = 2 and 3.
cd gpu-variants/sb6
for f in *.xz; do xz -dkf $f; done; chmod +x cmv-bench sbvr_gpu
mkdir -p ptx; cp ../../crates/sbvr-format/ptx/sbvr_kernels.ptx ptx/sbvr-kernels.ptx; cp ../../crates/sbvr-format/ptx/sbvr_kernels_sm90.ptx ptx/sbvr-kernels-sm90.ptx
export CMV_PTX_DIR=$PWD/ptx
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
S=$(date +%s); timeout 60 ./sbvr_gpu > $OUT/tests.log 2>&1; echo "tests rc=$? $(( $(date +%s)-S ))s"; grep -E "test result|panicked|FAILED" $OUT/tests.log | head -3
S=$(date +%s); timeout 60 compute-sanitizer --tool memcheck ./sbvr_gpu every_way > $OUT/memcheck.log 2>&1; echo "memcheck rc=$? $(( $(date +%s)-S ))s"; tail -1 $OUT/memcheck.log
S=$(date +%s); timeout 80 ./cmv-bench --suites sbvr --variants n2,n3 --shapes 11008x4096,14336x4096,4096x14336,28672x8192 --batches 1 --out-dir /tmp/s1 > $OUT/bench.log 2>&1; echo "bench rc=$? $(( $(date +%s)-S ))s"
grep -E "ceiling|b1:" $OUT/bench.log | head -10 | cut -c1-150
true

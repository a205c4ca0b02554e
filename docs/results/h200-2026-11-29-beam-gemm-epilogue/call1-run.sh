#!/bin/bash
# READY FOR THE NEXT SESSION (built 2026-11-29 from wip/beam-gemm-epilogue 9e3b55e, not run).
# The BEAM Hopper GEMM with (1) an epilogue that packs a quad's 8 outputs of a row (nogaps C of
# at most 8 bits) by shuffles before one or two atomic ORs (store_quad, 6340703), and (2) A
# unpacked at 3, 5, 6, 7 bits by byte gathers with K permuted in groups of 32 (ffb4ffb) and B's
# units of those widths by byte gathers too (9e3b55e).
# GPU tests of both wgmma kernels with the full branch (embedded PTX), memcheck, then at 1-8
# bits: FULL (embedded), EPI (epi-ptx: 6340703's kernels), MAIN (main-ptx: main's kernels), FULL.
# The host code is the same for all three (CMV_PTX_DIR swaps the sm_90a module).
# Build the bundle on this branch: cargo build --release -p bench --bin cmv-bench; the test
# binary of `cargo test --release -p beam-pack --test gpu_mma --no-run`; both stripped and
# xz'd into gpu-variants/bg6 with this script as run.sh; main-ptx/ and epi-ptx/ hold
# `git show main:crates/beam-pack/ptx/beam_kernels_sm90.ptx` and the same of 6340703, each
# named beam-kernels-sm90.ptx (the module name) and xz'd; intmm2.py is not needed.
# Carry gpu-variants/bg6; move crates/beam-pack/ptx/beam_kernels.ptx out of the tree first.
T0=$(date +%s); cd gpu-variants/bg6; el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
for f in cmv-bench.xz gpu_mma.xz main-ptx/beam-kernels-sm90.ptx.xz epi-ptx/beam-kernels-sm90.ptx.xz; do xz -dkf $f; done; chmod +x cmv-bench gpu_mma
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
export CMV_REQUIRE_GPU=1
timeout 110 ./gpu_mma --test-threads 1 mma_hopper_kernels > $OUT/tests-hopper.log 2>&1; el "hopper tests rc=$?"; grep -E "test result|panicked" -A3 $OUT/tests-hopper.log | head -8
timeout 60 ./gpu_mma --test-threads 1 mma_per_width > $OUT/tests-width.log 2>&1; el "width tests rc=$?"; grep -E "test result|panicked" -A3 $OUT/tests-width.log | head -8
timeout 60 compute-sanitizer --tool memcheck ./gpu_mma --test-threads 1 mma_hopper_kernels > $OUT/memcheck.log 2>&1; el "memcheck rc=$?"; tail -1 $OUT/memcheck.log
B="--suites beam-gemm --beam-sizes 1GiB --beam-bits 1-8 --beam-kernels mma --beam-outputs sai/ovf --beam-iters 3"
i=0; for v in full epi main full; do i=$((i+1))
  case $v in main) export CMV_PTX_DIR=$PWD/main-ptx;; epi) export CMV_PTX_DIR=$PWD/epi-ptx;; *) unset CMV_PTX_DIR;; esac
  [ $(( $(date +%s) - T0 )) -gt 500 ] && { echo "skip run$i: time"; continue; }
  timeout 90 ./cmv-bench $B --out-dir /tmp/g$i > $OUT/gemm-$i-$v.log 2>&1; el "run$i $v rc=$?"
  grep -E " mma " $OUT/gemm-$i-$v.log | awk '{for(k=1;k<=NF;k++) if($k=="ms") print $2, $(k-1), $NF}'
done
true

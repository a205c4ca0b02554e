#!/bin/bash
# (1) BEAM GEMV 14336x4096 at 12-32 bits: 6-8-warp rule against 8-warp blocks.
# (2) ncu pipe utilization of cmv_spqr_csr_i8_b1 (982d9cf PTX) at 28672x8192.
cd gpu-variants/sq4
for f in *.xz old/*.xz; do xz -dkf $f; done; chmod +x cmv-bench
for w in def 8; do S=$(date +%s)
  if [ $w = def ]; then unset CMV_BEAM_DIRECT_WARPS; else export CMV_BEAM_DIRECT_WARPS=$w; fi
  timeout 90 ./cmv-bench --suites beam-gemv --beam-gemv-bits 12,16,24,32 --beam-gemv-outputs sai/ovf --beam-gemv-vectors row --shapes 14336x4096 --out-dir /tmp/w$w > /tmp/beam-$w.log 2>&1; echo "beam w=$w rc=$? $(( $(date +%s)-S ))s"
  echo "=== warps $w" >> $OUT/beam.log; grep -E "ceiling|beam" /tmp/beam-$w.log | grep -E "ceiling| us" >> $OUT/beam.log
done
unset CMV_BEAM_DIRECT_WARPS
grep -E "===| us" $OUT/beam.log | awk '{print $1,$2,$3,$4,$5,$6,$7,$8}' | head -20
S=$(date +%s)
CMV_PTX_DIR=$PWD/old CMV_SPQR_I8_SMEM=full timeout 120 ncu --kernel-name cmv_spqr_csr_i8_b1 --launch-skip 5 --launch-count 1 --section ComputeWorkloadAnalysis --section InstructionStats --section Occupancy --section SchedulerStats -o /tmp/p ./cmv-bench --suites spqr --spqr-batches 1 --shapes 28672x8192 --timing events --out-dir /tmp/o > /tmp/ncu-run.log 2>&1; echo "ncu rc=$? $(( $(date +%s)-S ))s"
ncu --import /tmp/p.ncu-rep --page details > $OUT/ncu-pipes.txt 2>&1
ncu --import /tmp/p.ncu-rep --page raw --csv 2>/dev/null | xz -9 > $OUT/ncu-raw.csv.xz
grep -iE "pipe|Achieved Occ|Block Limit|Executed Ipc|Issue Slots" $OUT/ncu-pipes.txt | head -30
true

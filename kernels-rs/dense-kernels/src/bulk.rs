//! The Hopper bulk-copy tensor-core GEMV (`cmv_gemv_{f16,i8}_bulk_n{8,16}`, crate
//! `dense-kernels-sm90`, PTX for `sm_90a`): its shared-memory layout and work plan, shared by
//! the kernels and the host.
//!
//! # Why
//! On an H200 the register-fed tensor-core kernels ([`crate::tc`]) stop at 65% of the DRAM
//! bandwidth at 16 vectors (ncu at 11008x4096: 16 warps per SM, each with a few KiB of loads
//! in flight), where cuBLAS's `nvjet_sm90_hsh_128x16_64x11` reaches 75% with 88 blocks of 128
//! rows, each streaming its weights through 11 shared-memory stages filled by the copy engine
//! (219 KiB of shared memory; docs/PERF.md). This kernel does the same with plain bulk copies.
//!
//! # The kernel
//! A block owns [`BULK_ROWS`] rows (one 16-row `mma` tile per consumer warp) and a range of
//! *k-stages*, a k-stage being [`BULK_KBLOCKS`] k-blocks ([`crate::tc`]: 4 chunks of 16 bytes
//! per row each), [`BULK_SEG`] bytes of every row. One producer warp fills a ring of
//! [`BULK_STAGES`] stages in shared memory, each with the stage's bytes of every row and of
//! every input vector, by one `cp.async.bulk` per row and per vector, completing on the
//! stage's *full* barrier; the [`BULK_CONSUMERS`] consumer warps wait on it, multiply their
//! tile with the same fragments and `mma`s as the column-slice kernels (lane `(g, t)` takes
//! chunk `4 u + t` of rows `g`, `g + 8` and of vectors `g`, `g + 8`), and arrive on the
//! stage's *empty* barrier, which the producer waits for before it refills the stage. No
//! block-wide barrier in the loop, and the weights in flight take no registers: up to
//! `BULK_STAGES - 1` stages (180 KiB) per SM.
//!
//! Rows past the matrix's end copy its last row (their sums are not stored); a partial last
//! k-stage copies only the row's remaining chunks, and the fragments of chunks past the row's
//! end are zeroed in registers (the stage may hold an older stage's bytes there).
//!
//! Where the row blocks leave SMs idle, the k-stages are split over `gridDim.y` blocks
//! ([`bulk_plan`]): each consumer warp stores its partial fragments in the workspace and counts
//! itself in on its tile's counter; the warp that counts last adds the partials in split order
//! (the same sums on every run), stores the outputs and sets the counter back to zero.

use crate::tc::{TC_KBLOCK_CHUNKS, tc_kblocks};

/// Consumer warps per block (one 16-row tile each).
pub const BULK_CONSUMERS: u32 = 8;
/// Threads per block: the consumers and one producer warp.
pub const BULK_THREADS: u32 = (BULK_CONSUMERS + 1) * 32;
/// Rows per block.
pub const BULK_ROWS: u32 = 16 * BULK_CONSUMERS;
/// k-blocks per k-stage.
pub const BULK_KBLOCKS: u32 = 4;
/// Bytes of one row (or vector) in one k-stage.
pub const BULK_SEG: u32 = BULK_KBLOCKS * TC_KBLOCK_CHUNKS * 16;
/// Stages of the ring.
pub const BULK_STAGES: u32 = 6;
/// Most vectors a stage holds.
pub const BULK_VECTORS: u32 = 16;
/// Bytes at the start of the shared memory for the barriers (full, then empty, 8 bytes each).
pub const BULK_BARRIER_BYTES: u32 = 128;
/// Bytes of one stage: every row's segment, then every vector's.
pub const BULK_STAGE_BYTES: u32 = (BULK_ROWS + BULK_VECTORS) * BULK_SEG;
/// Dynamic shared memory of a launch.
pub const BULK_SMEM_BYTES: u32 = BULK_BARRIER_BYTES + BULK_STAGES * BULK_STAGE_BYTES;
/// Most splits of a row block's k-stages.
pub const BULK_MAX_KSPLIT: u32 = 16;

const _: () = assert!(2 * 8 * BULK_STAGES <= BULK_BARRIER_BYTES);
const _: () = assert!(BULK_SMEM_BYTES <= 227 * 1024);
const _: () = assert!(BULK_STAGE_BYTES.is_multiple_of(128));

/// Offset of stage `s`'s full barrier in the shared memory.
pub const fn bulk_full_bar(s: u32) -> u32 {
    8 * s
}

/// Offset of stage `s`'s empty barrier.
pub const fn bulk_empty_bar(s: u32) -> u32 {
    8 * (BULK_STAGES + s)
}

/// Offset of row `r`'s segment in stage `s`.
pub const fn bulk_row_offset(s: u32, r: u32) -> u32 {
    BULK_BARRIER_BYTES + s * BULK_STAGE_BYTES + r * BULK_SEG
}

/// Offset of vector `n`'s segment in stage `s`.
pub const fn bulk_x_offset(s: u32, n: u32) -> u32 {
    bulk_row_offset(s, BULK_ROWS + n)
}

/// How a launch divides the work: `row_blocks x ksplit` blocks, each summing
/// `stages_per_split` k-stages of its rows (the last split fewer).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BulkPlan {
    /// Blocks of [`BULK_ROWS`] rows (`gridDim.x`).
    pub row_blocks: u32,
    /// Splits of the k-stages (`gridDim.y`).
    pub ksplit: u32,
    /// k-stages per split.
    pub stages_per_split: u32,
    /// k-stages of a row.
    pub kstages: u32,
}

/// Bytes of k-stage `i` of a row of `chunks` chunks (the last may be partial).
pub const fn bulk_stage_bytes(chunks: u32, i: u32) -> u32 {
    let c0 = i * BULK_KBLOCKS * TC_KBLOCK_CHUNKS;
    let per = BULK_KBLOCKS * TC_KBLOCK_CHUNKS;
    let left = if chunks > c0 { chunks - c0 } else { 0 };
    16 * if left < per { left } else { per }
}

/// The plan for `rows` rows of `chunks` 16-byte chunks on `sm_count` SMs (one block each): the
/// k-stages are split until the grid has about one block per SM, at most
/// [`BULK_MAX_KSPLIT`] ways and one k-stage per split; every split is non-empty.
pub const fn bulk_plan(rows: u32, chunks: u32, sm_count: u32) -> BulkPlan {
    let row_blocks = rows.div_ceil(BULK_ROWS);
    let kstages = tc_kblocks(chunks).div_ceil(BULK_KBLOCKS);
    let mut ksplit = match sm_count.checked_div(row_blocks) {
        Some(k) => k,
        None => 1,
    };
    if ksplit > BULK_MAX_KSPLIT {
        ksplit = BULK_MAX_KSPLIT;
    }
    if ksplit > kstages {
        ksplit = kstages;
    }
    if ksplit == 0 {
        ksplit = 1;
    }
    let per = if kstages == 0 {
        1
    } else {
        kstages.div_ceil(ksplit)
    };
    let ksplit = if kstages == 0 {
        1
    } else {
        kstages.div_ceil(per)
    };
    BulkPlan {
        row_blocks,
        ksplit,
        stages_per_split: per,
        kstages,
    }
}

/// Counters a split plan needs: one per consumer warp's tile.
pub const fn bulk_counters(p: &BulkPlan) -> u64 {
    if p.ksplit > 1 {
        p.row_blocks as u64 * BULK_CONSUMERS as u64
    } else {
        0
    }
}

/// Workspace words a split plan needs with `nt` groups of 8 vectors: every consumer lane's
/// fragments (4 words per group) per split.
pub const fn bulk_workspace_words(p: &BulkPlan, nt: u32) -> u64 {
    bulk_counters(p) * p.ksplit as u64 * 32 * 4 * nt as u64
}

/// Index (in 16-byte chunks) of consumer lane `lane`'s partial fragment of group `nt` (of
/// `nts`) for tile `tile` (`row block * BULK_CONSUMERS + warp`) and split `split`.
pub const fn bulk_slot(tile: u32, split: u32, ksplit: u32, lane: u32, nt: u32, nts: u32) -> u64 {
    (((tile as u64 * ksplit as u64 + split as u64) * 32 + lane as u64) * nts as u64) + nt as u64
}

/// A bulk kernel: its PTX name and the vectors it takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BulkKernel {
    /// PTX entry point (in the `sm_90a` module).
    pub name: &'static str,
    /// Input vectors it takes at most (8 or 16).
    pub batch: u32,
}

impl BulkKernel {
    /// Groups of 8 vectors.
    pub const fn nt(&self) -> u32 {
        self.batch / 8
    }
}

/// The fp16 bulk kernels: up to 8 and up to 16 vectors.
pub const BULK_F16_KERNELS: [BulkKernel; 2] = [
    BulkKernel {
        name: "cmv_gemv_f16_bulk_n8",
        batch: 8,
    },
    BulkKernel {
        name: "cmv_gemv_f16_bulk_n16",
        batch: 16,
    },
];

/// The int8 bulk kernels, as [`BULK_F16_KERNELS`].
pub const BULK_I8_KERNELS: [BulkKernel; 2] = [
    BulkKernel {
        name: "cmv_gemv_i8_bulk_n8",
        batch: 8,
    },
    BulkKernel {
        name: "cmv_gemv_i8_bulk_n16",
        batch: 16,
    },
];

/// The bulk kernel (index in [`BULK_F16_KERNELS`] / [`BULK_I8_KERNELS`]) for `batch` vectors.
pub const fn bulk_kernel(batch: u32) -> usize {
    if batch <= 8 { 0 } else { 1 }
}

#[cfg(all(test, not(target_arch = "nvptx64")))]
mod tests {
    use super::*;

    #[test]
    fn the_layout_fits_and_is_aligned() {
        assert_eq!(BULK_SEG, 256);
        assert_eq!(BULK_STAGE_BYTES, 144 * 256);
        assert_eq!(BULK_SMEM_BYTES, 128 + 6 * 36864);
        for s in 0..BULK_STAGES {
            assert!(bulk_full_bar(s) + 8 <= bulk_empty_bar(0));
            assert!(bulk_empty_bar(s) + 8 <= BULK_BARRIER_BYTES);
            assert!(bulk_row_offset(s, 0).is_multiple_of(128));
            assert_eq!(bulk_x_offset(s, 0), bulk_row_offset(s, BULK_ROWS));
            assert!(bulk_x_offset(s, BULK_VECTORS) <= BULK_SMEM_BYTES);
        }
        assert_eq!(
            bulk_x_offset(BULK_STAGES - 1, BULK_VECTORS),
            BULK_SMEM_BYTES
        );
    }

    #[test]
    fn stage_bytes_cover_each_row_once() {
        for chunks in [1, 3, 15, 16, 17, 64, 513, 1376] {
            let p = bulk_plan(1, chunks, 132);
            let total: u32 = (0..p.kstages).map(|i| bulk_stage_bytes(chunks, i)).sum();
            assert_eq!(total, 16 * chunks);
            assert!((0..p.kstages).all(|i| bulk_stage_bytes(chunks, i) > 0));
            assert_eq!(bulk_stage_bytes(chunks, p.kstages), 0);
        }
    }

    #[test]
    fn plans_fill_one_wave_and_cover_every_stage() {
        // 11008 rows: 86 blocks, no split; 4096 rows: 32 blocks, 4 splits; 28672 rows: 224.
        assert_eq!(bulk_plan(11008, 512, 132).ksplit, 1);
        assert_eq!(bulk_plan(11008, 512, 132).row_blocks, 86);
        let p = bulk_plan(4096, 1792, 132);
        assert_eq!((p.row_blocks, p.ksplit, p.stages_per_split), (32, 4, 28));
        assert_eq!(bulk_plan(28672, 1024, 132).row_blocks, 224);
        for rows in [1, 100, 128, 129, 4096, 11008, 14336] {
            for chunks in [1, 16, 17, 512, 1376, 1792] {
                for sms in [1, 132] {
                    let p = bulk_plan(rows, chunks, sms);
                    assert!(p.ksplit >= 1 && p.ksplit <= BULK_MAX_KSPLIT, "{p:?}");
                    assert!(p.ksplit * p.stages_per_split >= p.kstages, "{p:?}");
                    assert!(
                        (p.ksplit - 1) * p.stages_per_split < p.kstages.max(1),
                        "{p:?}"
                    );
                    if p.row_blocks <= sms {
                        assert!(p.row_blocks * p.ksplit <= sms.max(p.row_blocks), "{p:?}");
                    }
                    assert_eq!(bulk_counters(&p) == 0, p.ksplit == 1);
                }
            }
        }
        // Slots of different (tile, split, lane, group) never meet.
        let (k, nts) = (3, 2);
        let mut seen = std::collections::HashSet::new();
        for tile in 0..4 {
            for split in 0..k {
                for lane in 0..32 {
                    for nt in 0..nts {
                        assert!(seen.insert(bulk_slot(tile, split, k, lane, nt, nts)));
                    }
                }
            }
        }
        assert_eq!(seen.len() as u64, 4 * k as u64 * 32 * nts as u64);
        assert_eq!(*seen.iter().max().unwrap() + 1, 4 * 3 * 32 * 2);
    }
}

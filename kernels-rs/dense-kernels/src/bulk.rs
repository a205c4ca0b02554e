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
//! # Status
//! Correct (bit-exact int8, fp16 within the tolerance, every plan, under memcheck and under
//! load: `bulk_stress`) but not the default path: on an H200 at 2 vectors it is 0.6-7% faster
//! than the default kernels at 5 of the 8 LLM shapes and 3-16% slower at 4096x4096,
//! 4096x14336 and 8192x28672, and 11-33% slower at 16 vectors (docs/PERF.md, "Dense
//! batch 9-16 on an H200"). `dense_gemv::BULK_ENV` puts it in the default path for
//! comparisons.
//!
//! # The kernel
//! A block is a producer warp and [`BULK_CONSUMERS`] consumer warps, one block per SM
//! (persistent: block `b` of `grid` takes the 16-row tiles `b, b + grid, ...`, so the blocks
//! running at once read `16 * grid` rows, the regime in which the batch-1 kernel reaches the
//! bandwidth). A *k-stage* is [`BULK_SEG`] bytes of each of a tile's 16 rows (1024 fp16 or
//! 2048 int8 columns); the producer copies it into a ring of [`BULK_STAGES`] stages in shared
//! memory with one `cp.async.bulk` per row, completing on the stage's *full* barrier, and runs
//! ahead across tiles. Consumer warp `w` waits on it and multiplies k-blocks `4 w .. 4 w + 4`
//! of the stage (its *slice*: lane `(g, t)` takes chunk `4 u + t` of rows `g`, `g + 8`) with
//! the inputs' chunks (loaded from global memory before the wait), with the fragments and
//! `mma`s of [`crate::tc`], then arrives on the stage's *empty* barrier, which the producer
//! waits for before it refills the stage. At a tile's end the consumers add their sums through
//! shared memory in warp order (a named barrier of the consumers only: the producer goes on)
//! and warp 0 stores them. Up to `BULK_STAGES - 1` stages (160 KiB) per SM are in flight, and
//! they take no registers.
//!
//! Bulk copies are long (2 KiB per row) because the copy engine takes about 60 cycles per
//! copy whatever its size: a first version with 128-row blocks and 256-byte copies per row ran
//! one 36 KiB stage per 4.4 us per SM, 5x slower than the register kernels (docs/PERF.md).
//!
//! Rows past the matrix's end copy its last row (their sums are not stored); a partial last
//! k-stage copies only the row's remaining chunks, and the fragments of chunks past the row's
//! end are zeroed in registers (the stage may hold an older stage's bytes there). Rows are
//! [`BULK_STRIDE`] bytes apart in a stage (64 more than a segment), so that the 8 lanes of a
//! quarter warp (rows `g`, `g + 1`, chunks `t`) read 8 different 16-byte bank groups.

use crate::tc::TC_KBLOCK_CHUNKS;

/// Consumer warps per block.
pub const BULK_CONSUMERS: u32 = 8;
/// Threads per block: the consumers and one producer warp.
pub const BULK_THREADS: u32 = (BULK_CONSUMERS + 1) * 32;
/// Rows per tile (the `mma`'s M).
pub const BULK_TILE_ROWS: u32 = 16;
/// k-blocks of one consumer's slice of a k-stage.
pub const BULK_SLICE_KBLOCKS: u32 = 4;
/// 16-byte chunks of one row in one k-stage.
pub const BULK_STAGE_CHUNKS: u32 = BULK_CONSUMERS * BULK_SLICE_KBLOCKS * TC_KBLOCK_CHUNKS;
/// Bytes of one row in one k-stage (one bulk copy).
pub const BULK_SEG: u32 = 16 * BULK_STAGE_CHUNKS;
/// Bytes between rows in a stage.
pub const BULK_STRIDE: u32 = BULK_SEG + 64;
/// Stages of the ring.
pub const BULK_STAGES: u32 = 6;
/// Bytes at the start of the shared memory for the barriers (full, then empty, 8 bytes each).
pub const BULK_BARRIER_BYTES: u32 = 128;
/// Bytes of one stage.
pub const BULK_STAGE_BYTES: u32 = BULK_TILE_ROWS * BULK_STRIDE;
/// Bytes of the consumers' sums (16 per consumer thread and group of 8 vectors, 2 groups).
pub const BULK_SUMS_BYTES: u32 = BULK_CONSUMERS * 32 * 16 * 2;
/// Dynamic shared memory of a launch.
pub const BULK_SMEM_BYTES: u32 =
    BULK_BARRIER_BYTES + BULK_STAGES * BULK_STAGE_BYTES + BULK_SUMS_BYTES;

const _: () = assert!(2 * 8 * BULK_STAGES <= BULK_BARRIER_BYTES);
const _: () = assert!(BULK_SMEM_BYTES <= 227 * 1024);
const _: () = assert!(BULK_STAGE_BYTES.is_multiple_of(128));
const _: () = assert!((BULK_STRIDE / 16) % 8 == 4);

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
    BULK_BARRIER_BYTES + s * BULK_STAGE_BYTES + r * BULK_STRIDE
}

/// Offset of consumer thread `tid`'s sums of group `nt` (after the ring).
pub const fn bulk_sums_offset(tid: u32, nt: u32) -> u32 {
    BULK_BARRIER_BYTES + BULK_STAGES * BULK_STAGE_BYTES + 16 * (nt * BULK_CONSUMERS * 32 + tid)
}

/// Bytes of k-stage `k` of a row of `chunks` chunks (the last may be partial).
pub const fn bulk_stage_bytes(chunks: u32, k: u32) -> u32 {
    let left = chunks.saturating_sub(k * BULK_STAGE_CHUNKS);
    16 * if left < BULK_STAGE_CHUNKS {
        left
    } else {
        BULK_STAGE_CHUNKS
    }
}

/// How a launch divides the work.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BulkPlan {
    /// Tiles of 16 rows.
    pub tiles: u32,
    /// k-stages of a row.
    pub kstages: u32,
    /// Blocks (`gridDim.x`), `1..=tiles`.
    pub grid: u32,
}

/// The plan for `rows` rows of `chunks` 16-byte chunks on `blocks` blocks (one per SM; at
/// most one per tile).
pub const fn bulk_plan(rows: u32, chunks: u32, blocks: u32) -> BulkPlan {
    let tiles = rows.div_ceil(BULK_TILE_ROWS);
    let mut grid = if blocks == 0 { 1 } else { blocks };
    if tiles > 0 && grid > tiles {
        grid = tiles;
    }
    BulkPlan {
        tiles,
        kstages: chunks.div_ceil(BULK_STAGE_CHUNKS),
        grid,
    }
}

/// Tiles block `b` sums: `b, b + grid, ...` below `tiles`.
pub const fn bulk_block_tiles(p: &BulkPlan, b: u32) -> u32 {
    if b < p.tiles {
        (p.tiles - b).div_ceil(p.grid)
    } else {
        0
    }
}

/// A bulk kernel: its PTX name and the vectors it takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BulkKernel {
    /// PTX entry point (in the `sm_90a` module).
    pub name: &'static str,
    /// Input vectors it takes at most (8 or 16).
    pub batch: u32,
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
        assert_eq!(BULK_SEG, 2048);
        assert_eq!(BULK_STAGE_BYTES, 16 * 2112);
        for s in 0..BULK_STAGES {
            assert!(bulk_full_bar(s) + 8 <= bulk_empty_bar(0));
            assert!(bulk_empty_bar(s) + 8 <= BULK_BARRIER_BYTES);
            assert!(bulk_row_offset(s, 0).is_multiple_of(128));
            for r in 0..BULK_TILE_ROWS {
                assert!(bulk_row_offset(s, r).is_multiple_of(16));
            }
            assert!(bulk_row_offset(s, BULK_TILE_ROWS) <= bulk_sums_offset(0, 0));
        }
        assert_eq!(bulk_sums_offset(BULK_CONSUMERS * 32, 1), BULK_SMEM_BYTES);
        // A quarter warp (rows g, g + 1 and chunks t of the same k-block) hits 8 different
        // 16-byte bank groups.
        for q in 0..4 {
            let mut groups: Vec<u32> = (0..8)
                .map(|l| {
                    let (g, t) = (2 * q + l / 4, l % 4);
                    (bulk_row_offset(0, g) + 16 * t) / 16 % 8
                })
                .collect();
            groups.sort_unstable();
            groups.dedup();
            assert_eq!(groups.len(), 8);
        }
    }

    #[test]
    fn stage_bytes_cover_each_row_once() {
        for chunks in [1, 3, 127, 128, 129, 512, 513, 1376] {
            let p = bulk_plan(1, chunks, 132);
            let total: u32 = (0..p.kstages).map(|k| bulk_stage_bytes(chunks, k)).sum();
            assert_eq!(total, 16 * chunks);
            assert!((0..p.kstages).all(|k| bulk_stage_bytes(chunks, k) > 0));
            assert_eq!(bulk_stage_bytes(chunks, p.kstages), 0);
        }
    }

    #[test]
    fn the_blocks_take_every_tile_once() {
        for rows in [1, 15, 16, 17, 300, 4096, 11008] {
            for blocks in [1, 2, 7, 132, 1000] {
                let p = bulk_plan(rows, 512, blocks);
                assert!(p.grid >= 1 && p.grid <= p.tiles.max(1));
                let mut seen = vec![0u8; p.tiles as usize];
                for b in 0..p.grid {
                    for j in 0..bulk_block_tiles(&p, b) {
                        seen[(b + j * p.grid) as usize] += 1;
                    }
                }
                assert!(seen.iter().all(|&c| c == 1), "{rows} {blocks} {p:?}");
            }
        }
        assert_eq!(
            bulk_plan(11008, 512, 132),
            BulkPlan {
                tiles: 688,
                kstages: 4,
                grid: 132
            }
        );
        assert_eq!(bulk_kernel(8), 0);
        assert_eq!(bulk_kernel(9), 1);
    }
}

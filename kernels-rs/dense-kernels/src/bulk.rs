//! The Hopper copy-engine GEMV (`cmv_gemv_{f16,i8}_bulk_n{8,16}`, crate `dense-kernels-sm90`,
//! PTX for `sm_90a`): its shared-memory layout, fragment addresses, work plan and parameters,
//! shared by the kernels and the host.
//!
//! # Why
//! On an H200 the register-fed tensor-core kernels ([`crate::tc`]) stop at 63-65% of the DRAM
//! bandwidth at 16 vectors (ncu at 11008x4096), re-reading the 16 input vectors for every 16
//! rows (L2 hit rate 23%), where cuBLAS's `nvjet_sm90_hsh_128x16_64x11` reaches 72-75% with
//! tiles of 128 rows streamed through 11 shared-memory stages by the copy engine, one 2-D
//! tensor copy per stage (docs/PERF.md, "Dense batch 9-16 on an H200"). A first design of
//! this kernel with 1-D bulk copies (one per row: about 60 cycles each, whatever their size)
//! was slower; this one copies 2-D boxes as cuBLAS does.
//!
//! # The kernel
//! A block is [`BULK_CONSUMERS`] consumer warps and a producer warp, one block per SM
//! (persistent). The work is *items*: a tile of [`BULK_TILE_ROWS`] rows and a range of
//! *k-stages* (128 bytes of every row: 64 fp16 or 128 int8 columns). Block `b` of `grid`
//! takes items `b, b + grid, ...` ([`BulkPlan`]). For each k-stage the producer's lane 0 copies
//! two boxes with `cp.async.bulk.tensor.2d` into a ring of [`BULK_STAGES`] stages: the tile's
//! 128 rows x 128 bytes of weights (16 KiB) and the batch's 8 or 16 vectors x 128 bytes of
//! inputs, completing on the stage's *full* barrier; it runs ahead across items, refilling a
//! stage once the consumers have released it on its *empty* barrier. The boxes are written
//! with the 128-byte swizzle ([`swizzle128`]), and elements outside the matrix (rows past
//! the end, columns past a row's end, vectors past the batch) arrive as zeros: no bounds
//! checks, and partial tiles and stages need no special case.
//!
//! Consumer warp `w` owns rows `16 w .. 16 w + 16` of every tile and all k. Per stage it does
//! 4 k-steps of 32 bytes; each reads the weights' `mma` A fragment with one `ldmatrix.x4`
//! ([`bulk_a_offset`]) and the inputs' B fragments with one `ldmatrix.x4` (16 vectors) or
//! `.x2` (8; [`bulk_b_offset`]), then runs one `mma` per group of 8 vectors (fp16
//! `m16n8k16`, int8 `m16n8k32`: the same bytes, so the same addresses). The swizzle makes
//! every `ldmatrix` phase (8 rows, one 16-byte chunk each) hit 8 different bank groups. The
//! inputs are read once per 128 rows (the register kernels read them once per 16).
//!
//! # Split-K
//! When the tiles alone leave SMs idle, the k-stages are split into `ksplit` ranges of `per`
//! ([`bulk_plan`] picks the split with the fewest k-stages on the busiest block). Item `id`
//! is split `id % ksplit` of tile `id / ksplit`, so the splits of a tile run side by side.
//! Each warp stores its partial fragments to the workspace, then counts itself into its
//! (tile, warp) counter; the warp that counts last adds every split's partials in split order
//! (the same order every run: deterministic fp32 sums, exact int32 ones), stores the outputs
//! and sets the counter back to zero.

use crate::tc::{GemvTcF16Params, GemvTcI8Params, TC_COUNTERS, TC_WORKSPACE_WORDS};
use cmv_device::{KernelParams, TensorMap};

/// Consumer warps per block.
pub const BULK_CONSUMERS: u32 = 8;
/// Threads per block: the consumers and one producer warp.
pub const BULK_THREADS: u32 = (BULK_CONSUMERS + 1) * 32;
/// Rows per tile: 16 per consumer warp (the `mma`'s M).
pub const BULK_TILE_ROWS: u32 = 16 * BULK_CONSUMERS;
/// Bytes of a row in one k-stage: one box row, the 128-byte swizzle's span.
pub const BULK_ROW_BYTES: u32 = 128;
/// Bytes of a stage's weights (one box).
pub const BULK_W_BYTES: u32 = BULK_TILE_ROWS * BULK_ROW_BYTES;
/// Bytes of a stage's inputs (room for 16 vectors).
pub const BULK_X_BYTES: u32 = 16 * BULK_ROW_BYTES;
/// Bytes of one stage (a multiple of 1024, so every stage keeps the swizzle's alignment).
pub const BULK_STAGE_BYTES: u32 = BULK_W_BYTES + BULK_X_BYTES;
/// Stages of the ring.
pub const BULK_STAGES: u32 = 12;
/// Bytes at the start of the shared memory for the barriers (full, then empty, 8 bytes each).
pub const BULK_HEADER_BYTES: u32 = 256;
/// Dynamic shared memory of a launch: the header, up to 1008 bytes to the ring's 1024-byte
/// boundary ([`bulk_ring`]), the ring.
pub const BULK_SMEM_BYTES: u32 = BULK_HEADER_BYTES + 1024 + BULK_STAGES * BULK_STAGE_BYTES;
/// Most splits of a row's k-stages.
pub const BULK_MAX_SPLIT: u32 = 16;

const _: () = assert!(2 * 8 * BULK_STAGES <= BULK_HEADER_BYTES);
const _: () = assert!(BULK_SMEM_BYTES <= 227 * 1024);
const _: () = assert!(BULK_STAGE_BYTES.is_multiple_of(1024));
const _: () = assert!(BULK_W_BYTES.is_multiple_of(1024));

/// Offset of stage `s`'s full barrier in the shared memory.
pub const fn bulk_full_bar(s: u32) -> u32 {
    8 * s
}

/// Offset of stage `s`'s empty barrier.
pub const fn bulk_empty_bar(s: u32) -> u32 {
    8 * (BULK_STAGES + s)
}

/// The ring's start for dynamic shared memory at `base` (a shared-window address, 16-byte
/// aligned): the first 1024-byte boundary after the header, as the 128-byte swizzle needs.
pub const fn bulk_ring(base: u32) -> u32 {
    (base + BULK_HEADER_BYTES + 1023) & !1023
}

/// Where the 128-byte swizzle puts byte `off` of a box (counted from a 1024-byte boundary):
/// 16-byte chunk `c` of 128-byte row `r` lands at chunk `c ^ (r % 8)`
/// (`CU_TENSOR_MAP_SWIZZLE_128B`).
pub const fn swizzle128(off: u32) -> u32 {
    off ^ (((off >> 7) & 7) << 4)
}

/// Offset in a stage's weights (unswizzled) of the row that lane `lane` of consumer warp
/// `warp` addresses for the `ldmatrix.x4` of k-step `j` (`0..4`, 32 bytes each): lanes
/// `0..16` give rows `0..16` of the warp's 16 at the step's first 16-byte chunk, lanes
/// `16..32` the same rows at its second. The four matrices are then rows 0-7 / 8-15 at chunk
/// 0 and rows 0-7 / 8-15 at chunk 1: the `mma` A fragment's registers in order.
pub const fn bulk_a_offset(warp: u32, lane: u32, j: u32) -> u32 {
    (16 * warp + (lane & 15)) * BULK_ROW_BYTES + 16 * (2 * j + (lane >> 4))
}

/// Offset in a stage's inputs (unswizzled) of the vector row that lane `lane` addresses for
/// the `ldmatrix` of k-step `j`: lanes `8 i .. 8 i + 8` give vectors `8 (i / 2) ..` at the
/// step's chunk `i % 2`, so the matrices are the B fragments of vectors 0-7 (two registers)
/// and then of vectors 8-15 (`.x2` uses the first two).
pub const fn bulk_b_offset(lane: u32, j: u32) -> u32 {
    ((lane & 7) + 8 * (lane >> 4)) * BULK_ROW_BYTES + 16 * (2 * j + ((lane >> 3) & 1))
}

/// How a launch divides the work: items of (tile, `per` k-stages), `grid` persistent blocks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BulkPlan {
    /// Tiles of [`BULK_TILE_ROWS`] rows.
    pub tiles: u32,
    /// k-stages of a row (128 bytes each; the last may be partial).
    pub kstages: u32,
    /// k-stages per item (the last split of a tile may have fewer).
    pub per: u32,
    /// Items per tile: `ceil(kstages / per)`, each non-empty.
    pub ksplit: u32,
    /// Blocks (`gridDim.x`), `1..=tiles * ksplit`.
    pub grid: u32,
}

/// The plan with `per` k-stages per item on `grid` blocks for `rows` rows of `row_bytes`
/// bytes (`per` and `grid` are clamped to what the shape can use; `per` 0 means 1). The
/// kernel rebuilds its plan with this from its parameters.
pub const fn bulk_plan_for(rows: u32, row_bytes: u32, per: u32, grid: u32) -> BulkPlan {
    let tiles = rows.div_ceil(BULK_TILE_ROWS);
    let kstages = row_bytes.div_ceil(BULK_ROW_BYTES);
    let mut per = if per == 0 { 1 } else { per };
    if per > kstages && kstages > 0 {
        per = kstages;
    }
    let ksplit = if kstages == 0 {
        1
    } else {
        kstages.div_ceil(per)
    };
    let items = tiles * ksplit;
    let mut grid = if grid == 0 { 1 } else { grid };
    if items > 0 && grid > items {
        grid = items;
    }
    BulkPlan {
        tiles,
        kstages,
        per,
        ksplit,
        grid,
    }
}

/// Workspace words (32-bit partial sums) of a split launch of `p` for `groups` groups of 8
/// vectors: one slot of 4 words per lane, group and warp of every item.
pub const fn bulk_split_words(p: &BulkPlan, groups: u32) -> usize {
    p.tiles as usize * p.ksplit as usize * (BULK_CONSUMERS * 32 * 4 * groups) as usize
}

/// Whether `p` fits the split-K workspace and counters ([`TC_WORKSPACE_WORDS`],
/// [`TC_COUNTERS`]: one counter per tile and warp) for `groups` groups of 8 vectors; unsplit
/// plans always fit.
pub const fn bulk_plan_fits(p: &BulkPlan, groups: u32) -> bool {
    p.ksplit == 1
        || (p.tiles as usize * BULK_CONSUMERS as usize <= TC_COUNTERS
            && bulk_split_words(p, groups) <= TC_WORKSPACE_WORDS)
}

/// The plan for `rows` rows of `row_bytes` bytes and `groups` groups of 8 vectors on `sms`
/// SMs (one block each): the split (up to [`BULK_MAX_SPLIT`]) whose busiest block has the
/// fewest k-stages, the fewest splits among equals; within the workspace.
pub const fn bulk_plan(rows: u32, row_bytes: u32, groups: u32, sms: u32) -> BulkPlan {
    let sms = if sms == 0 { 1 } else { sms };
    let mut best = bulk_plan_for(rows, row_bytes, row_bytes.div_ceil(BULK_ROW_BYTES), sms);
    let mut best_cost = bulk_busiest(&best);
    let mut s = 2;
    while s <= BULK_MAX_SPLIT {
        let per = best.kstages.div_ceil(s);
        let p = bulk_plan_for(rows, row_bytes, per, sms);
        let cost = bulk_busiest(&p);
        if p.ksplit > best.ksplit && bulk_plan_fits(&p, groups) && cost < best_cost {
            best = p;
            best_cost = cost;
        }
        s += 1;
    }
    best
}

/// k-stages of the busiest block of plan `p` (every item counted as `per`).
pub const fn bulk_busiest(p: &BulkPlan) -> u32 {
    (p.tiles * p.ksplit).div_ceil(p.grid) * p.per
}

/// Items block `b` takes: `b, b + grid, ...` below `tiles * ksplit`.
pub const fn bulk_block_items(p: &BulkPlan, b: u32) -> u32 {
    let items = p.tiles * p.ksplit;
    if b < items {
        (items - b).div_ceil(p.grid)
    } else {
        0
    }
}

/// Item `id`'s tile, split and k-stages `k0..k1`.
pub const fn bulk_item(p: &BulkPlan, id: u32) -> (u32, u32, u32, u32) {
    let (tile, split) = (id / p.ksplit, id % p.ksplit);
    let k0 = split * p.per;
    let k1 = if k0 + p.per < p.kstages {
        k0 + p.per
    } else {
        p.kstages
    };
    (tile, split, k0, k1)
}

/// Parameters of the fp16 copy-engine kernels: the tensor maps of the weights (`rows x cols`,
/// boxes of 128 rows x 64 columns) and of the inputs (`batch x cols`, boxes of 8 or 16
/// vectors, the kernel's capacity, x 64 columns), then the tensor-core kernels' parameters
/// (`kblocks_per_split` is the plan's `per`, `acc` and `counters` the split-K workspace).
/// The maps sit at offsets 0 and 128 of the kernel's parameter, 64-byte aligned.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GemvBulkF16Params {
    /// The weights' tensor map.
    pub wmap: TensorMap,
    /// The inputs' tensor map.
    pub xmap: TensorMap,
    /// Buffers and sizes.
    pub p: GemvTcF16Params,
}
const _: () = assert!(core::mem::size_of::<GemvBulkF16Params>() == 256 + 56);
// SAFETY: repr(C), no padding (size asserted; every field 4-aligned), plain data and device
// pointers only; the one parameter of the fp16 bulk kernels.
unsafe impl KernelParams for GemvBulkF16Params {}

/// Parameters of the int8 copy-engine kernels, as [`GemvBulkF16Params`] (boxes of 128
/// columns).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GemvBulkI8Params {
    /// The weights' tensor map.
    pub wmap: TensorMap,
    /// The inputs' tensor map.
    pub xmap: TensorMap,
    /// Buffers, sizes and the requantization scale.
    pub p: GemvTcI8Params,
}
const _: () = assert!(
    core::mem::size_of::<GemvBulkI8Params>() == 256 + core::mem::size_of::<GemvTcI8Params>()
);
// SAFETY: as for GemvBulkF16Params; the one parameter of the int8 bulk kernels.
unsafe impl KernelParams for GemvBulkI8Params {}

/// A bulk kernel: its PTX name and the vectors it takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BulkKernel {
    /// PTX entry point (in the `sm_90a` module).
    pub name: &'static str,
    /// Input vectors it takes at most (8 or 16): also the rows of its input boxes.
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
        assert_eq!(BULK_W_BYTES, 16384);
        assert_eq!(BULK_STAGE_BYTES, 18432);
        for s in 0..BULK_STAGES {
            assert!(bulk_full_bar(s) + 8 <= bulk_empty_bar(0));
            assert!(bulk_empty_bar(s) + 8 <= BULK_HEADER_BYTES);
        }
        // Whatever 16-byte-aligned start the dynamic shared memory has, the ring is
        // 1024-byte aligned, after the header, and ends inside the launch's shared memory.
        for base in (0..4096).step_by(16) {
            let ring = bulk_ring(base);
            assert!(ring.is_multiple_of(1024));
            assert!(ring >= base + BULK_HEADER_BYTES);
            assert!(ring + BULK_STAGES * BULK_STAGE_BYTES <= base + BULK_SMEM_BYTES);
        }
    }

    /// Every `ldmatrix` phase (8 lanes' addresses) of the A and B reads hits 8 different
    /// 16-byte bank groups after the swizzle.
    #[test]
    fn fragment_reads_are_free_of_bank_conflicts() {
        for j in 0..4 {
            for phase in 0..4 {
                let groups = |f: &dyn Fn(u32) -> u32| {
                    let mut g: Vec<u32> = (0..8)
                        .map(|l| swizzle128(f(8 * phase + l)) / 16 % 8)
                        .collect();
                    g.sort_unstable();
                    g.dedup();
                    g.len()
                };
                for w in 0..BULK_CONSUMERS {
                    assert_eq!(groups(&|l| bulk_a_offset(w, l, j)), 8);
                }
                assert_eq!(groups(&|l| bulk_b_offset(l, j)), 8);
            }
        }
    }

    /// A stage as the copy engine writes it (128-byte swizzle), read back through the
    /// `ldmatrix` addresses and the PTX ISA's fragment layouts, gives for every consumer warp
    /// and k-step exactly the `mma` operands of its 16 rows and the 16 vectors: checked by
    /// element index, for 16-bit elements (`m16n8k16`) and bytes (`m16n8k32`).
    #[test]
    fn swizzled_stages_give_the_mma_operands() {
        // Element (row, byte) of the weights box and (vector, byte) of the inputs box, as the
        // byte value id: the byte offset in the unswizzled box, which is unique per byte.
        let mut w = vec![0u32; BULK_W_BYTES as usize];
        for off in 0..BULK_W_BYTES {
            w[swizzle128(off) as usize] = off;
        }
        let mut x = vec![0u32; BULK_X_BYTES as usize];
        for off in 0..BULK_X_BYTES {
            x[swizzle128(off) as usize] = off;
        }
        // ldmatrix: lane (g, t) of matrix i gets word t (4 bytes) of the row at the address
        // lane 8 i + g gave.
        let ldm = |mem: &[u32], addr: &dyn Fn(u32) -> u32, i: u32, lane: u32| -> [u32; 4] {
            let (g, t) = (lane / 4, lane % 4);
            let row = addr(8 * i + g);
            core::array::from_fn(|b| mem[(row + 4 * t + b as u32) as usize])
        };
        for warp in 0..BULK_CONSUMERS {
            for j in 0..4 {
                for lane in 0..32 {
                    let (g, t) = (lane / 4, lane % 4);
                    let a = |i| ldm(&w, &|l| swizzle128(bulk_a_offset(warp, l, j)), i, lane);
                    let b = |i| ldm(&x, &|l| swizzle128(bulk_b_offset(l, j)), i, lane);
                    // The unswizzled byte of weight row r (of the tile) at k-step byte kb, and
                    // of vector n.
                    let wid = |r: u32, kb: u32| r * BULK_ROW_BYTES + 32 * j + kb;
                    let xid = |n: u32, kb: u32| n * BULK_ROW_BYTES + 32 * j + kb;
                    let r0 = 16 * warp;
                    // fp16 m16n8k16: a0 = A[g][2t..2t+2], a1 = A[g+8][2t..], a2 = A[g][2t+8..],
                    // a3 = A[g+8][2t+8..]; b0 = B[2t..2t+2][n], b1 = B[2t+8..][n] (2 bytes per
                    // element). int8 m16n8k32: a0 = A[g][4t..4t+4], a1 = A[g+8][4t..],
                    // a2 = A[g][16+4t..], a3 = A[g+8][16+4t..]; b0 = B[4t..][n],
                    // b1 = B[16+4t..][n]. Both are the same bytes: byte 4t + 16 h of rows g
                    // (+ 8).
                    for (i, (dr, h)) in [(0, 0), (8, 0), (0, 1), (8, 1)].into_iter().enumerate() {
                        let want: [u32; 4] =
                            core::array::from_fn(|q| wid(r0 + g + dr, 16 * h + 4 * t + q as u32));
                        assert_eq!(a(i as u32), want, "warp {warp} step {j} lane {lane} a{i}");
                    }
                    for (i, (n0, h)) in [(0, 0), (0, 1), (8, 0), (8, 1)].into_iter().enumerate() {
                        let want: [u32; 4] =
                            core::array::from_fn(|q| xid(n0 + g, 16 * h + 4 * t + q as u32));
                        assert_eq!(b(i as u32), want, "step {j} lane {lane} b{i}");
                    }
                }
            }
        }
    }

    #[test]
    fn the_blocks_take_every_unit_once() {
        for rows in [1, 127, 128, 129, 300, 4096, 11008] {
            for row_bytes in [16, 128, 144, 2080, 8192] {
                for per in [0, 1, 3, 1000] {
                    for grid in [1, 2, 7, 132, 10_000] {
                        let p = bulk_plan_for(rows, row_bytes, per, grid);
                        let items = p.tiles * p.ksplit;
                        assert!(p.grid >= 1 && p.grid <= items.max(1));
                        let mut seen = vec![0u8; (p.tiles * p.kstages) as usize];
                        for b in 0..p.grid {
                            for n in 0..bulk_block_items(&p, b) {
                                let (tile, split, k0, k1) = bulk_item(&p, b + n * p.grid);
                                assert!(k0 < k1, "{p:?}: empty split {split}");
                                for k in k0..k1 {
                                    seen[(tile * p.kstages + k) as usize] += 1;
                                }
                            }
                        }
                        assert!(seen.iter().all(|&c| c == 1), "{rows} {row_bytes} {p:?}");
                    }
                }
            }
        }
    }

    #[test]
    fn plans_fill_the_sms_within_the_workspace() {
        // 11008x4096 fp16 on 132 SMs: 86 tiles of 64 k-stages; 3 splits of 22 give 258 items,
        // at most 2 per block: 44 k-stages on the busiest (ideal 41.7).
        let p = bulk_plan(11008, 8192, 2, 132);
        assert_eq!(
            (p.tiles, p.kstages, p.ksplit, p.per, p.grid),
            (86, 64, 3, 22, 132)
        );
        assert_eq!(bulk_busiest(&p), 44);
        for (rows, cols) in [(4096, 4096), (8192, 8192), (14336, 4096), (4096, 14336)] {
            for (eb, groups) in [(2, 2), (1, 2), (2, 1)] {
                for sms in [114, 132] {
                    let p = bulk_plan(rows, cols * eb, groups, sms);
                    assert!(bulk_plan_fits(&p, groups));
                    let ideal = (p.tiles * p.kstages) as f64 / f64::from(sms);
                    assert!(
                        f64::from(bulk_busiest(&p)) <= 1.25 * ideal,
                        "{rows}x{cols} {p:?}: {} against {ideal}",
                        bulk_busiest(&p)
                    );
                }
            }
        }
        // Too many tiles for the counters: unsplit.
        let p = bulk_plan(600_000, 256, 2, 132);
        assert_eq!(p.ksplit, 1);
        assert_eq!(bulk_kernel(8), 0);
        assert_eq!(bulk_kernel(9), 1);
    }
}

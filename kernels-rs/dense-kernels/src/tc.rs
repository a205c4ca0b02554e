//! The tensor-core GEMV for 2 to 16 input vectors: launch geometry, work plan and parameters,
//! shared by the kernels (`cmv_gemv_f16_tc_*`, `cmv_gemv_i8_tc_*`) and the host launcher.
//!
//! # The kernel
//! A block of [`TC_WARPS`] warps owns `16 * MT * TC_WARPS` consecutive rows (each warp `MT`
//! tiles of 16 rows) and one range of *k-blocks* (4 lanes x 16 bytes of every row: 32 fp16 or
//! 64 int8 columns). All warps of a block walk the same k-blocks, so the inputs they read are
//! the same cache lines: one warp's input loads bring them into L1 and the other warps hit,
//! which keeps the input traffic from L2 at about `16 / (16 * MT * TC_WARPS)` of the weight
//! traffic (the older `cmv_gemv_f16_mma_*` kernels read the inputs once per 16 rows, as many
//! bytes as the weights at 16 vectors).
//!
//! Lane `(g, t) = (lane / 4, lane % 4)` loads the 16 bytes at chunk `4 kb + t` of rows `g` and
//! `g + 8` of each tile and of input vector `g` (of each group of 8 vectors); the first `mma`
//! of the k-block takes words 0-1 of every chunk, the second words 2-3. Weights and inputs use
//! the same permutation of `k`, so the sums are unchanged and every load is 16 bytes wide.
//! fp16: `mma.m16n8k16` with fp32 accumulation; int8: `mma.m16n8k32.s8` with exact int32
//! accumulation, requantized as the CUDA-core kernels do ([`crate::requantize`]).
//!
//! # Split-K
//! When the rows alone give too few blocks, the k-blocks are split over `gridDim.y` blocks
//! ([`tc_plan`]). Each block stores its threads' partial `mma` fragments side by side in a
//! workspace (plain, coalesced 16-byte stores; no atomics on the sums), then counts itself into
//! its row block's counter; the block that counts last adds the partials of every split in
//! split order and stores the outputs, and sets the counter back to zero. So one launch does
//! the whole product, the counters are zero before and after every launch, and the result is
//! the same on every run (the fp32 additions always happen in the same order; int32 additions
//! are exact).

use cmv_device::{DevPtr, DevPtrMut, KernelParams, U32x4};

/// Warps per block of the tensor-core kernels.
pub const TC_WARPS: u32 = 8;
/// Threads per block of the tensor-core kernels.
pub const TC_THREADS: u32 = TC_WARPS * cmv_device::WARP_SIZE;
/// 16-byte chunks per row in one k-block (one per lane of a quad).
pub const TC_KBLOCK_CHUNKS: u32 = 4;
/// Workspace words (32-bit partial sums) the host allocates for split-K launches (16 MiB): a
/// split launch needs `ksplit * row_blocks * TC_THREADS * 4 * MT * NT` of them.
pub const TC_WORKSPACE_WORDS: usize = 1 << 22;
/// Counters the host allocates, zeroed: one per row block of a split launch (so a split launch
/// has at most this many row blocks; taller matrices run unsplit, their rows give enough
/// blocks).
pub const TC_COUNTERS: usize = 4096;

/// Workspace words one split of a launch with `row_blocks` row blocks of kernel `k` needs.
pub const fn tc_split_words(k: TcKernel, row_blocks: u32) -> usize {
    row_blocks as usize * TC_THREADS as usize * 4 * k.mt as usize * (k.batch as usize / 8)
}

/// Rows a block of the kernel with `mt` row tiles per warp owns.
pub const fn tc_rows_per_block(mt: u32) -> u32 {
    16 * mt * TC_WARPS
}

/// k-blocks of a row of `chunks` 16-byte chunks (the last may be partial).
pub const fn tc_kblocks(chunks: u32) -> u32 {
    chunks.div_ceil(TC_KBLOCK_CHUNKS)
}

/// How one launch divides the work: `row_blocks x ksplit` blocks, each summing
/// `kblocks_per_split` k-blocks (the last split fewer).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TcPlan {
    /// Blocks along the rows (`gridDim.x`).
    pub row_blocks: u32,
    /// Blocks along the k-blocks (`gridDim.y`); 1 means no workspace is used.
    pub ksplit: u32,
    /// k-blocks each split sums.
    pub kblocks_per_split: u32,
}

/// The work plan for `rows` rows of `chunks` 16-byte chunks with kernel `k`: the k-blocks are
/// split until the grid has about `target_blocks` blocks, keeping at least `min_kblocks`
/// k-blocks per split, within [`TC_COUNTERS`] row blocks and [`TC_WORKSPACE_WORDS`]. Every
/// split is non-empty (`ksplit` is recomputed from the rounded-up share).
pub const fn tc_plan(
    rows: u32,
    chunks: u32,
    k: TcKernel,
    target_blocks: u32,
    min_kblocks: u32,
) -> TcPlan {
    let row_blocks = rows.div_ceil(tc_rows_per_block(k.mt));
    let kblocks = tc_kblocks(chunks);
    let split_words = tc_split_words(k, row_blocks);
    let mut ksplit = if row_blocks == 0 || row_blocks as usize > TC_COUNTERS {
        1
    } else {
        target_blocks.div_ceil(row_blocks)
    };
    let min = if min_kblocks == 0 { 1 } else { min_kblocks };
    let most = if kblocks / min == 0 { 1 } else { kblocks / min };
    if ksplit > most {
        ksplit = most;
    }
    if split_words > 0 && ksplit as usize * split_words > TC_WORKSPACE_WORDS {
        ksplit = (TC_WORKSPACE_WORDS / split_words) as u32;
    }
    if ksplit == 0 {
        ksplit = 1;
    }
    let per = if kblocks == 0 {
        1
    } else {
        kblocks.div_ceil(ksplit)
    };
    let ksplit = if kblocks == 0 {
        1
    } else {
        kblocks.div_ceil(per)
    };
    TcPlan {
        row_blocks,
        ksplit,
        kblocks_per_split: per,
    }
}

/// Parameters of the fp16 tensor-core kernels (`cmv_gemv_f16_tc_*`).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GemvTcF16Params {
    /// `W`, `rows * cols` fp16 values, read as 16-byte chunks (16-byte aligned).
    pub w: DevPtr<U32x4>,
    /// `X`, `batch * cols` fp16 values, read as 16-byte chunks (16-byte aligned).
    pub x: DevPtr<U32x4>,
    /// `Y`, `batch * rows` fp16 values (as bits).
    pub y: DevPtrMut<u16>,
    /// Split-K workspace of [`TC_WORKSPACE_WORDS`] words (partial fp32 sums; unused when
    /// `gridDim.y == 1`).
    pub acc: DevPtrMut<u32>,
    /// One counter per row block, zero before and after a launch (unused unsplit).
    pub counters: DevPtrMut<u32>,
    /// Rows of `W`.
    pub rows: u32,
    /// Columns of `W`, a multiple of 8.
    pub cols: u32,
    /// Input vectors, `1..=` the kernel's `8 * NT`.
    pub batch: u32,
    /// k-blocks each split sums ([`TcPlan::kblocks_per_split`]).
    pub kblocks_per_split: u32,
}
const _: () = assert!(core::mem::size_of::<GemvTcF16Params>() == 56);
// SAFETY: repr(C), no padding (size asserted), plain data and device pointers only; the one
// parameter of the kernels named above.
unsafe impl KernelParams for GemvTcF16Params {}

/// Parameters of the int8 tensor-core kernels (`cmv_gemv_i8_tc_*`).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GemvTcI8Params {
    /// `W`, `rows * cols` int8 values, read as 16-byte chunks (16-byte aligned).
    pub w: DevPtr<U32x4>,
    /// `X`, `batch * cols` int8 values, read as 16-byte chunks (16-byte aligned).
    pub x: DevPtr<U32x4>,
    /// The int32 accumulators, `batch * rows`.
    pub y32: DevPtrMut<i32>,
    /// Their int8 requantization ([`crate::requantize`]), `batch * rows`.
    pub y8: DevPtrMut<i8>,
    /// Split-K workspace of [`TC_WORKSPACE_WORDS`] words (partial int32 sums).
    pub acc: DevPtrMut<u32>,
    /// One counter per row block, zero before and after a launch.
    pub counters: DevPtrMut<u32>,
    /// Requantization scale (finite).
    pub scale: f32,
    /// Rows of `W`.
    pub rows: u32,
    /// Columns of `W`, a multiple of 16.
    pub cols: u32,
    /// Input vectors, `1..=` the kernel's `8 * NT`.
    pub batch: u32,
    /// k-blocks each split sums.
    pub kblocks_per_split: u32,
    /// Zero; makes the struct's tail explicit, so it has no padding bytes.
    pub pad: u32,
}
const _: () = assert!(core::mem::size_of::<GemvTcI8Params>() == 72);
// SAFETY: repr(C), no padding (size asserted), plain data and device pointers only; the one
// parameter of the kernels named above.
unsafe impl KernelParams for GemvTcI8Params {}

/// A tensor-core kernel: its PTX name and compile-time shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TcKernel {
    /// PTX entry point.
    pub name: &'static str,
    /// Input vectors it takes at most (`8 * NT`).
    pub batch: u32,
    /// Row tiles of 16 per warp.
    pub mt: u32,
    /// k-blocks each warp loads before using any.
    pub unroll: u32,
    /// Whether the next `unroll` k-blocks are loaded while the current ones are multiplied.
    pub prefetch: bool,
}

/// The fp16 tensor-core kernels: the defaults first (for up to 8 and up to 16 vectors), then
/// the variants `cmv-bench --explore-tc` times (`m` row tiles, `u` k-blocks in flight, `p`
/// prefetch).
pub const TC_F16_KERNELS: [TcKernel; 11] = [
    TcKernel {
        name: "cmv_gemv_f16_tc_n8",
        batch: 8,
        mt: 1,
        unroll: 4,
        prefetch: true,
    },
    TcKernel {
        name: "cmv_gemv_f16_tc_n16",
        batch: 16,
        mt: 1,
        unroll: 4,
        prefetch: true,
    },
    TcKernel {
        name: "cmv_gemv_f16_tc_x_n8m1u2p",
        batch: 8,
        mt: 1,
        unroll: 2,
        prefetch: true,
    },
    TcKernel {
        name: "cmv_gemv_f16_tc_x_n8m1u4",
        batch: 8,
        mt: 1,
        unroll: 4,
        prefetch: false,
    },
    TcKernel {
        name: "cmv_gemv_f16_tc_x_n8m1u8",
        batch: 8,
        mt: 1,
        unroll: 8,
        prefetch: false,
    },
    TcKernel {
        name: "cmv_gemv_f16_tc_x_n16m1u2p",
        batch: 16,
        mt: 1,
        unroll: 2,
        prefetch: true,
    },
    TcKernel {
        name: "cmv_gemv_f16_tc_x_n16m1u4",
        batch: 16,
        mt: 1,
        unroll: 4,
        prefetch: false,
    },
    TcKernel {
        name: "cmv_gemv_f16_tc_x_n16m1u8",
        batch: 16,
        mt: 1,
        unroll: 8,
        prefetch: false,
    },
    TcKernel {
        name: "cmv_gemv_f16_tc_x_n16m2u2p",
        batch: 16,
        mt: 2,
        unroll: 2,
        prefetch: true,
    },
    TcKernel {
        name: "cmv_gemv_f16_tc_x_n16m1u4p2",
        batch: 16,
        mt: 1,
        unroll: 4,
        prefetch: true,
    },
    TcKernel {
        name: "cmv_gemv_f16_tc_x_n8m1u4p2",
        batch: 8,
        mt: 1,
        unroll: 4,
        prefetch: true,
    },
];

/// The int8 tensor-core kernels, as [`TC_F16_KERNELS`].
pub const TC_I8_KERNELS: [TcKernel; 11] = [
    TcKernel {
        name: "cmv_gemv_i8_tc_n8",
        batch: 8,
        mt: 1,
        unroll: 4,
        prefetch: true,
    },
    TcKernel {
        name: "cmv_gemv_i8_tc_n16",
        batch: 16,
        mt: 1,
        unroll: 4,
        prefetch: true,
    },
    TcKernel {
        name: "cmv_gemv_i8_tc_x_n8m1u2p",
        batch: 8,
        mt: 1,
        unroll: 2,
        prefetch: true,
    },
    TcKernel {
        name: "cmv_gemv_i8_tc_x_n8m1u4",
        batch: 8,
        mt: 1,
        unroll: 4,
        prefetch: false,
    },
    TcKernel {
        name: "cmv_gemv_i8_tc_x_n8m1u8",
        batch: 8,
        mt: 1,
        unroll: 8,
        prefetch: false,
    },
    TcKernel {
        name: "cmv_gemv_i8_tc_x_n16m1u2p",
        batch: 16,
        mt: 1,
        unroll: 2,
        prefetch: true,
    },
    TcKernel {
        name: "cmv_gemv_i8_tc_x_n16m1u4",
        batch: 16,
        mt: 1,
        unroll: 4,
        prefetch: false,
    },
    TcKernel {
        name: "cmv_gemv_i8_tc_x_n16m1u8",
        batch: 16,
        mt: 1,
        unroll: 8,
        prefetch: false,
    },
    TcKernel {
        name: "cmv_gemv_i8_tc_x_n16m2u2p",
        batch: 16,
        mt: 2,
        unroll: 2,
        prefetch: true,
    },
    TcKernel {
        name: "cmv_gemv_i8_tc_x_n16m1u4p2",
        batch: 16,
        mt: 1,
        unroll: 4,
        prefetch: true,
    },
    TcKernel {
        name: "cmv_gemv_i8_tc_x_n8m1u4p2",
        batch: 8,
        mt: 1,
        unroll: 4,
        prefetch: true,
    },
];

#[cfg(all(test, not(target_arch = "nvptx64")))]
mod tests {
    use super::*;

    #[test]
    fn plans_fill_the_grid_and_cover_every_kblock() {
        for rows in [
            1, 100, 128, 4096, 8192, 11008, 28672, 65536, 524_288, 600_000,
        ] {
            for chunks in [1, 3, 4, 5, 512, 1376, 1792, 3584] {
                for k in TC_F16_KERNELS.iter().chain(&TC_I8_KERNELS) {
                    for target in [1, 264, 528, 1 << 20] {
                        let p = tc_plan(rows, chunks, *k, target, 8);
                        let kb = tc_kblocks(chunks);
                        assert!(p.ksplit >= 1 && p.kblocks_per_split >= 1, "{p:?}");
                        // Every k-block in exactly one split, no empty split.
                        assert!(
                            p.ksplit * p.kblocks_per_split >= kb,
                            "{rows} {chunks} {p:?}"
                        );
                        assert!((p.ksplit - 1) * p.kblocks_per_split < kb, "{p:?}");
                        assert_eq!(p.row_blocks, rows.div_ceil(16 * k.mt * TC_WARPS));
                        if p.ksplit > 1 {
                            assert!(p.row_blocks as usize <= TC_COUNTERS);
                            let words = p.ksplit as usize * tc_split_words(*k, p.row_blocks);
                            assert!(words <= TC_WORKSPACE_WORDS, "{rows} {k:?} {p:?}");
                            assert!(p.kblocks_per_split >= 8 || kb < 16);
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn plans_split_small_matrices_only() {
        let k = TC_F16_KERNELS[1];
        // 4096 rows: 32 row blocks; 528 wanted -> 17 splits wanted, 128 k-blocks / 8 = 16 most.
        let p = tc_plan(4096, 512, k, 528, 8);
        assert_eq!((p.row_blocks, p.ksplit, p.kblocks_per_split), (32, 16, 8));
        // 28672 rows: 224 row blocks, 3 splits.
        let p = tc_plan(28672, 1024, k, 528, 8);
        assert_eq!((p.row_blocks, p.ksplit), (224, 3));
        assert_eq!(p.kblocks_per_split, 86);
        // Past the counters: never split.
        assert_eq!(tc_plan(600_000, 4096, k, 1 << 20, 8).ksplit, 1);
        // The workspace bounds the splits: 1024 row blocks x 256 threads x 8 words per split
        // -> 2 splits.
        assert_eq!(tc_plan(131_072, 4096, k, 1 << 20, 8).ksplit, 2);
        // Too few k-blocks to split.
        assert_eq!(tc_plan(16, 7, k, 528, 8).ksplit, 1);
    }

    #[test]
    fn kernel_tables_are_consistent() {
        for t in TC_F16_KERNELS.iter().chain(&TC_I8_KERNELS) {
            assert!(t.batch == 8 || t.batch == 16);
            assert!(t.mt >= 1 && t.unroll >= 1);
            let tag = format!("n{}", t.batch);
            assert!(t.name.contains(&tag), "{}", t.name);
            let shape = format!(
                "m{}u{}{}",
                t.mt,
                t.unroll,
                if t.prefetch { "p" } else { "" }
            );
            let bounded = format!("{shape}2");
            assert!(
                t.name.ends_with(&shape) || t.name.ends_with(&bounded) || !t.name.contains("_x_"),
                "{}",
                t.name
            );
        }
        assert_eq!(TC_F16_KERNELS[0].batch, 8);
        assert_eq!(TC_F16_KERNELS[1].batch, 16);
        assert_eq!(TC_I8_KERNELS[0].batch, 8);
        assert_eq!(TC_I8_KERNELS[1].batch, 16);
    }
}

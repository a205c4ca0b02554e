//! The persistent shared-input tensor-core GEMV (`cmv_gemv_{f16,i8}_tcp_*`) for 5 to 16
//! vectors: its work plan and shared-memory layout, shared by the kernels and the host.
//!
//! # Why
//! In the column-slice kernels ([`crate::tc`]) each warp reads its slice of the input vectors
//! from L2 again for every 16-row tile it sums: at 16 vectors as many bytes as its weights
//! (docs/PERF.md: at 14336x4096, L2 73% busy at 69% DRAM). Here a block copies every vector
//! into shared memory once and then walks many row blocks, so the inputs cross L2 once per
//! block instead of once per 16 rows. That needs the whole of `batch x cols` in shared memory
//! ([`tcp_smem_bytes`]): the host takes these kernels only where it fits (fp16: 16 vectors
//! up to about 6900 columns; int8 twice that).
//!
//! # The work
//! A block is [`TC_WARPS`] warps. A *unit* is one block of 16 rows and a range of its
//! k-blocks (a k-block being [`crate::tc::TC_KBLOCK_CHUNKS`] 16-byte chunks of every row, as
//! in [`crate::tc`], with the same fragments and `mma`s); the 8 warps split a unit's k-blocks
//! into contiguous shares of whole groups of `unroll` ([`tcp_warp_range`]) and add their sums
//! through shared memory in warp order, as the contiguous-slice kernels do. So the blocks
//! running at once read `16 * grid` distinct rows (about 2000 on 132 SMs: the regime in which
//! the batch-1 kernel reaches the bandwidth).
//!
//! With `grid` blocks and `row_blocks` row blocks ([`tcp_plan`]): first, block `b` sums the
//! whole rows of row blocks `b, b + grid, ...` (`full = row_blocks / grid` of them); then the
//! `rem = row_blocks % grid` row blocks left are each cut along k into `ksplit` parts, one
//! per block, so that the last round keeps every SM busy instead of `rem` of them. The parts
//! store their partial sums in the split-K workspace; the part that counts in last adds them
//! in part order (so results are the same on every run), stores the outputs and sets its
//! counter back to zero. A warp keeps the next group of weight loads in flight while it
//! multiplies, across units too, and the first group is in flight during the inputs' copy.

use crate::tc::{TC_THREADS, TC_WARPS, tc_kblocks, tc_x_stride};

/// Rows of one row block (the `mma`'s M).
pub const TCP_ROWS: u32 = 16;

/// Most parts a row block of the last round is cut into.
pub const TCP_MAX_KSPLIT: u32 = 16;

/// Marks a unit that is a whole row block ([`TcpUnit::part`]).
pub const TCP_WHOLE: u32 = u32::MAX;

/// A persistent tensor-core kernel: its PTX name and compile-time shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TcpKernel {
    /// PTX entry point.
    pub name: &'static str,
    /// Input vectors it takes at most (8 or 16).
    pub batch: u32,
    /// k-blocks per group (loaded together, one group ahead).
    pub unroll: u32,
}

impl TcpKernel {
    /// Groups of 8 vectors (accumulator fragments per thread).
    pub const fn nt(&self) -> u32 {
        self.batch / 8
    }
}

macro_rules! tcp_table {
    ($prefix:literal) => {
        [
            TcpKernel {
                name: concat!($prefix, "n8u4"),
                batch: 8,
                unroll: 4,
            },
            TcpKernel {
                name: concat!($prefix, "n16u4"),
                batch: 16,
                unroll: 4,
            },
            TcpKernel {
                name: concat!($prefix, "n16u8"),
                batch: 16,
                unroll: 8,
            },
        ]
    };
}

/// The fp16 persistent kernels: up to 8 or 16 vectors, groups of 4 k-blocks (the defaults,
/// [`tcp_kernel`]), and 16 vectors with groups of 8 (twice the weights in flight; for
/// `cmv-bench` comparisons).
pub const TCP_F16_KERNELS: [TcpKernel; 3] = tcp_table!("cmv_gemv_f16_tcp_");

/// The int8 persistent kernels, as [`TCP_F16_KERNELS`].
pub const TCP_I8_KERNELS: [TcpKernel; 3] = tcp_table!("cmv_gemv_i8_tcp_");

/// The default persistent kernel (index in [`TCP_F16_KERNELS`] / [`TCP_I8_KERNELS`]) for
/// `batch` vectors (1..=16).
pub const fn tcp_kernel(batch: u32) -> usize {
    if batch <= 8 { 0 } else { 1 }
}

/// Dynamic shared memory of a launch of a kernel with `nt` groups of 8 vectors on rows of
/// `chunks` 16-byte chunks and `batch` vectors: the vectors' copy (`batch` rows of
/// [`tc_x_stride`]`(kblocks)` chunks, zeros past the row's end), then the warps' sums (16
/// bytes per thread and group of 8 vectors).
pub const fn tcp_smem_bytes(chunks: u32, batch: u32, nt: u32) -> u64 {
    let x = 16 * batch as u64 * tc_x_stride(tc_kblocks(chunks)) as u64;
    x + TC_THREADS as u64 * 16 * nt as u64
}

/// Byte offset of the warps' sums in the dynamic shared memory (after the vectors' copy).
pub const fn tcp_sums_offset(chunks: u32, batch: u32) -> u32 {
    16 * batch * tc_x_stride(tc_kblocks(chunks))
}

/// How a launch of `grid` blocks divides the work ([`tcp_plan`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TcpPlan {
    /// Blocks of 16 rows.
    pub row_blocks: u32,
    /// Blocks of the grid (`1..=row_blocks`).
    pub grid: u32,
    /// Whole row blocks every block sums first (`row_blocks / grid`).
    pub full: u32,
    /// Row blocks left for the last round (`row_blocks % grid`).
    pub rem: u32,
    /// Parts each of those is cut into along k (1: summed whole).
    pub ksplit: u32,
    /// Groups of `unroll` k-blocks in one part (the last part may have fewer).
    pub part_groups: u32,
    /// k-blocks of a row.
    pub kblocks: u32,
    /// k-blocks per group.
    pub unroll: u32,
}

/// The plan of `grid` blocks (clamped to `1..=row_blocks`) for `rows` rows of `chunks`
/// 16-byte chunks and groups of `unroll` k-blocks: the last round's row blocks are cut into
/// as many parts as the idle blocks allow (`grid / rem`, at most [`TCP_MAX_KSPLIT`] and at most
/// one per group; every part non-empty).
pub const fn tcp_plan(rows: u32, chunks: u32, unroll: u32, grid: u32) -> TcpPlan {
    let row_blocks = rows.div_ceil(TCP_ROWS);
    let unroll = if unroll == 0 { 1 } else { unroll };
    let mut grid = if grid == 0 { 1 } else { grid };
    if row_blocks > 0 && grid > row_blocks {
        grid = row_blocks;
    }
    let kblocks = tc_kblocks(chunks);
    let groups = kblocks.div_ceil(unroll);
    let (full, rem) = (row_blocks / grid, row_blocks % grid);
    let mut ksplit = match grid.checked_div(rem) {
        Some(k) => k,
        None => 1,
    };
    if ksplit > TCP_MAX_KSPLIT {
        ksplit = TCP_MAX_KSPLIT;
    }
    if ksplit > groups {
        ksplit = groups;
    }
    if ksplit == 0 {
        ksplit = 1;
    }
    let part_groups = if groups == 0 {
        1
    } else {
        groups.div_ceil(ksplit)
    };
    // Recomputed from the rounded-up share, so that no part is empty.
    let ksplit = if groups == 0 {
        1
    } else {
        groups.div_ceil(part_groups)
    };
    TcpPlan {
        row_blocks,
        grid,
        full,
        rem,
        ksplit,
        part_groups,
        kblocks,
        unroll,
    }
}

/// Units block `b` of plan `p` sums: its `full` row blocks, and one part of the last round
/// when `b < rem * ksplit`.
pub const fn tcp_units(p: &TcpPlan, b: u32) -> u32 {
    p.full
        + if (b as u64) < p.rem as u64 * p.ksplit as u64 {
            1
        } else {
            0
        }
}

/// One unit: k-blocks `kb0..kb1` of row block `rb`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TcpUnit {
    /// Row block (rows `16 rb ..`).
    pub rb: u32,
    /// First k-block.
    pub kb0: u32,
    /// End of the k-blocks.
    pub kb1: u32,
    /// Which part of a last-round row block ([`TCP_WHOLE`] for a whole one, stored directly).
    pub part: u32,
    /// The last-round row block's index (`0..rem`): its counter and workspace slots.
    pub slot: u32,
}

/// Unit `j` (`< tcp_units(p, b)`) of block `b`.
pub const fn tcp_unit(p: &TcpPlan, b: u32, j: u32) -> TcpUnit {
    if j < p.full {
        return TcpUnit {
            rb: b + j * p.grid,
            kb0: 0,
            kb1: p.kblocks,
            part: TCP_WHOLE,
            slot: 0,
        };
    }
    let (slot, part) = (b / p.ksplit, b % p.ksplit);
    let rb = p.full * p.grid + slot;
    let g0 = part * p.part_groups;
    let mut kb0 = g0 * p.unroll;
    let mut kb1 = (g0 + p.part_groups) * p.unroll;
    if kb0 > p.kblocks {
        kb0 = p.kblocks;
    }
    if kb1 > p.kblocks {
        kb1 = p.kblocks;
    }
    TcpUnit {
        rb,
        kb0,
        kb1,
        part: if p.ksplit == 1 { TCP_WHOLE } else { part },
        slot,
    }
}

/// The k-blocks warp `slice` (`0..TC_WARPS`) of a block sums in k-blocks `kb0..kb1`: one
/// contiguous share of whole groups of `unroll` (empty when the range has fewer groups than
/// warps and this warp comes after them).
pub const fn tcp_warp_range(kb0: u32, kb1: u32, unroll: u32, slice: u32) -> (u32, u32) {
    let unroll = if unroll == 0 { 1 } else { unroll };
    let n = kb1.saturating_sub(kb0);
    let share = n.div_ceil(unroll).div_ceil(TC_WARPS) * unroll;
    let mut lo = kb0 + slice * share;
    if lo > kb1 {
        lo = kb1;
    }
    let mut hi = lo + share;
    if hi > kb1 {
        hi = kb1;
    }
    (lo, hi)
}

/// Workspace words (32-bit partial sums) plan `p` needs with `nt` groups of 8 vectors: one
/// fragment of 4 words per lane of a warp (the one that holds the block's sums) and group, per
/// part of every last-round row block (none when they are summed whole).
pub const fn tcp_workspace_words(p: &TcpPlan, nt: u32) -> u64 {
    if p.ksplit > 1 {
        p.rem as u64 * p.ksplit as u64 * 32 * 4 * nt as u64
    } else {
        0
    }
}

#[cfg(all(test, not(target_arch = "nvptx64")))]
mod tests {
    use super::*;

    /// Every (row block, k-block) is summed by exactly one (block, unit, warp), and the
    /// parts of a last-round row block are numbered `0..ksplit`, one block each.
    #[test]
    fn every_kblock_of_every_row_block_is_summed_once() {
        for rows in [1, 15, 16, 17, 300, 4096, 4100, 11008, 14336] {
            for chunks in [1, 3, 4, 5, 64, 130, 512, 1376] {
                for unroll in [1, 2, 4, 8] {
                    for grid in [1, 2, 3, 7, 100, 132, 264, 5000] {
                        let p = tcp_plan(rows, chunks, unroll, grid);
                        let kb = tc_kblocks(chunks);
                        assert!(p.grid >= 1 && p.grid <= p.row_blocks.max(1), "{p:?}");
                        assert!(p.ksplit >= 1 && p.ksplit <= TCP_MAX_KSPLIT, "{p:?}");
                        assert!(p.rem * p.ksplit <= p.grid, "{p:?}");
                        let mut seen = vec![0u8; (p.row_blocks * kb) as usize];
                        let mut parts = vec![0u32; p.rem as usize];
                        for b in 0..p.grid {
                            for j in 0..tcp_units(&p, b) {
                                let u = tcp_unit(&p, b, j);
                                assert!(u.rb < p.row_blocks, "{p:?} {u:?}");
                                if u.part != TCP_WHOLE {
                                    assert!(j == p.full && u.slot < p.rem && u.part < p.ksplit);
                                    assert_eq!(u.rb, p.full * p.grid + u.slot);
                                    parts[u.slot as usize] |= 1 << u.part;
                                    assert!(u.kb0 < u.kb1, "empty part {p:?} {u:?}");
                                }
                                let mut next = u.kb0;
                                for s in 0..TC_WARPS {
                                    let (lo, hi) = tcp_warp_range(u.kb0, u.kb1, unroll, s);
                                    assert!(lo <= hi && hi <= u.kb1);
                                    if lo < hi {
                                        // Contiguous shares in warp order, whole groups.
                                        assert_eq!(lo, next, "{p:?} {u:?} warp {s}");
                                        assert!((lo - u.kb0).is_multiple_of(unroll));
                                        next = hi;
                                    }
                                    for k in lo..hi {
                                        seen[(u.rb * kb + k) as usize] += 1;
                                    }
                                }
                                assert_eq!(next, u.kb1, "{p:?} {u:?}");
                            }
                        }
                        assert!(seen.iter().all(|&c| c == 1), "{rows} {chunks} {p:?}");
                        if p.ksplit > 1 {
                            assert!(parts.iter().all(|&m| m == (1 << p.ksplit) - 1), "{p:?}");
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn the_last_round_keeps_the_grid_busy() {
        // 11008 rows: 688 row blocks on 132 blocks leave 28 for a sixth round; cut into 4
        // parts they occupy 112 blocks instead of 28.
        let p = tcp_plan(11008, 512, 4, 132);
        assert_eq!((p.row_blocks, p.full, p.rem, p.ksplit), (688, 5, 28, 4));
        assert_eq!(p.part_groups, 8);
        assert_eq!(tcp_workspace_words(&p, 2), 28 * 4 * 32 * 4 * 2);
        // A round that divides evenly has no parts and needs no workspace.
        let p = tcp_plan(16 * 1024, 512, 4, 132);
        assert_eq!((p.full, p.rem, p.ksplit), (7, 100, 1));
        assert_eq!(tcp_workspace_words(&p, 2), 0);
        let p = tcp_plan(16 * 264, 512, 4, 132);
        assert_eq!((p.full, p.rem, p.ksplit), (2, 0, 1));
        // Few groups: at most one part per group.
        let p = tcp_plan(17, 8, 4, 132);
        assert_eq!((p.row_blocks, p.grid, p.full, p.rem), (2, 2, 1, 0));
        let p = tcp_plan(16 * 133, 8, 4, 132);
        assert_eq!((p.full, p.rem, p.ksplit, p.part_groups), (1, 1, 1, 1));
    }

    #[test]
    fn shared_memory_holds_the_vectors_then_the_sums() {
        // 4096 fp16 columns = 512 chunks = 128 k-blocks: stride 516 chunks (bank spread).
        assert_eq!(tcp_sums_offset(512, 16), 16 * 16 * 516);
        assert_eq!(tcp_smem_bytes(512, 16, 2), 16 * 16 * 516 + 256 * 16 * 2);
        assert_eq!(tcp_smem_bytes(512, 9, 2), 16 * 9 * 516 + 256 * 16 * 2);
        // The sums start 16-byte aligned.
        for (c, b) in [(1, 1), (5, 3), (512, 16), (1376, 7)] {
            assert!(tcp_sums_offset(c, b).is_multiple_of(16));
        }
        assert_eq!(tcp_kernel(5), 0);
        assert_eq!(tcp_kernel(8), 0);
        assert_eq!(tcp_kernel(9), 1);
        assert_eq!(TCP_F16_KERNELS[tcp_kernel(16)].nt(), 2);
    }
}

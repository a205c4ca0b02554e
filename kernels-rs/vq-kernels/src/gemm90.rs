//! The Hopper VQ-GEMM (`cmv_vq_gemm90_v{2,4}`, crate `vq-kernels-sm90`, PTX for `sm_90a`):
//! the layouts it shares with the host. Same work as [`crate::gemm`] (a block is 256 weight
//! rows x 128 tokens, the same parameters, codes, tables and lookups), on `wgmma`:
//!
//! * **Weights are the A operand, from registers.** A warpgroup (4 warps) multiplies 64 weight
//!   rows (warp `w` holds row group `w`, rows `16 w ..` of the block) by the 128 tokens with
//!   `wgmma.mma_async.m64n128k16`; the A registers of lane `(g, t)` at K step `s` are the
//!   lookups of the tensor-core GEMV ([`crate::mma`]): rows `g` and `g + 8`, the four
//!   consecutive columns `16 s + 4 t ..` (one entry for `v = 4`, two for `v = 2`). The MMA's K
//!   slots `2t, 2t+1 | 2t+8, 2t+9` are therefore columns `4t, 4t+1 | 4t+2, 4t+3`.
//! * **Inputs are the B operand, from shared memory**, K-major without swizzle: 8 x 8 core
//!   matrices (8 tokens x 8 K slots, 128 contiguous bytes). The K order above means that the
//!   16 columns of a K step are stored permuted: column pair `p` (columns `2p, 2p + 1`) is in
//!   K group `p % 2` at word `p / 2` ([`x90_offset`]). The copy moves 4-byte words
//!   (`cp.async` of 4 bytes), one per pair.
//! * **Four warpgroups** (512 threads), 64 fp32 sums per lane; one barrier per slab; two
//!   `wgmma`s in flight per warpgroup, across slab boundaries, the next step's lookups issued
//!   while they run; the copies of the slab [`prefetch`] ahead issued between the first four
//!   `wgmma`s of a slab ([`x90_stages`] input and [`code90_stages`] code stages).
//! * **Split-K** where the tiles leave SMs idle ([`crate::gemm::choose_splits`]); **stream-K**
//!   where split-K takes one split and the tiles leave the last wave partial
//!   ([`choose_stream`]): one block per SM, each an equal share of the (tile, slab) units
//!   ([`stream_segments`]), parts of tiles through the split-K sums.
//!
//! `v = 8` (whose K order is a different permutation) runs [`crate::gemm`].

use crate::gemm::{VqGemmParams, code_stage_bytes};
use crate::mma::{MMA_TABLES_BYTES, SLAB_COLS};

/// Threads per block (4 warpgroups).
pub const GEMM90_THREADS: u32 = 512;
/// Vector sizes the Hopper GEMM is compiled for.
pub const GEMM90_VECS: [usize; 2] = [2, 4];
/// Bytes of one 8 x 8 core matrix (8 tokens x 8 K slots of fp16).
pub const CORE_BYTES: u32 = 128;
/// Token groups (8 tokens) per block: 128 tokens.
pub const TOKEN_GROUPS: u32 = 16;
/// Byte distance between core matrices adjacent in K (the descriptor's leading dimension
/// offset): a whole K group of the 16 token groups.
pub const LBO: u32 = TOKEN_GROUPS * CORE_BYTES;
/// Byte distance between core matrices adjacent in N (tokens; the stride dimension offset).
pub const SBO: u32 = CORE_BYTES;
/// Bytes of one staged slab of inputs: 16 K groups x 16 token groups x 128 bytes.
pub const X90_SLAB_BYTES: u32 = (SLAB_COLS as u32 / 8) * LBO;

/// Byte offset of token `tok` (0..128), column `col` (0..128) inside an input stage: column
/// pair `p = (col % 16) / 2` of K step `col / 16` sits in K group `2 (col / 16) + p % 2`, at
/// K slot `2 (p / 2) + col % 2` of it.
#[inline(always)]
pub const fn x90_offset(tok: u32, col: u32) -> u32 {
    let (s, p) = (col / 16, (col % 16) / 2);
    let kg = 2 * s + p % 2;
    let slot = 2 * (p / 2) + col % 2;
    kg * LBO + (tok / 8) * SBO + (tok % 8) * 16 + 2 * slot
}

/// Where column `col` of an input row sits in the permuted copy the Hopper GEMM reads
/// (`cmv_vq_permute_x`, rows of [`padded_cols`] values): in each group of 16 columns, the eight
/// of K group 0 (`0, 1, 4, 5, 8, 9, 12, 13`), then the eight of K group 1. Chunk `q / 8` of 16
/// bytes of a permuted row is then one core-matrix row: the copy into the stage is 16-byte
/// `cp.async`s.
#[inline(always)]
pub const fn permuted_col(col: u32) -> u32 {
    let p = (col % 16) / 2;
    16 * (col / 16) + 8 * (p % 2) + 2 * (p / 2) + col % 2
}

/// Columns of a permuted input row: `cols` rounded up to 16 (zeros past `cols`).
#[inline(always)]
pub const fn padded_cols(cols: u32) -> u32 {
    cols.div_ceil(16) * 16
}

/// Byte offset in an input stage of 16-byte chunk `j` (0..16) of token `tok`'s part of a
/// permuted slab: K group `j`, token group `tok / 8`, row `tok % 8`.
#[inline(always)]
pub const fn x90_chunk_offset(tok: u32, j: u32) -> u32 {
    j * LBO + (tok / 8) * SBO + (tok % 8) * 16
}

/// Parameters of `cmv_vq_permute_x`: `xp` (`tokens x padded_cols(cols)`) = `x` (`tokens x
/// cols`) with the columns of every group of 16 permuted ([`permuted_col`]), zeros past `cols`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PermuteParams {
    /// `tokens x cols` fp16 inputs, 16-byte aligned, `cols % 8 == 0`.
    pub x: cmv_device::DevPtr<u16>,
    /// `tokens x padded_cols(cols)` fp16 outputs, 16-byte aligned.
    pub xp: cmv_device::DevPtrMut<u16>,
    /// Input rows.
    pub tokens: u32,
    /// Columns.
    pub cols: u32,
}
const _: () = assert!(core::mem::size_of::<PermuteParams>() == 24);
// SAFETY: #[repr(C)], plain data (device addresses and integers), layout asserted above.
unsafe impl cmv_device::KernelParams for PermuteParams {}

/// Threads per block of `cmv_vq_permute_x` (one group of 16 columns of one token each).
pub const PERMUTE_THREADS: u32 = 256;

/// Slabs whose copies are in flight ahead of the one multiplied: 2 for `v = 4`, 1 for `v = 2`
/// (whose codes take twice the shared memory).
#[inline(always)]
pub const fn prefetch(vec: usize) -> u32 {
    if vec == 4 { 2 } else { 1 }
}

/// Input stages: [`prefetch`] + 2, so that a slab's last `wgmma`s may still run while the next
/// slab starts (slab `j` reads stage `j % S`; the copies during slab `j` fill the stage of slab
/// `j + prefetch`, last read by slab `j - 2`).
#[inline(always)]
pub const fn x90_stages(vec: usize) -> u32 {
    prefetch(vec) + 2
}

/// Code stages: [`prefetch`] + 1 (codes are read once, at the start of their slab).
#[inline(always)]
pub const fn code90_stages(vec: usize) -> u32 {
    prefetch(vec) + 1
}

/// Start of input stage `stage`.
#[inline(always)]
pub const fn x90_stage_base(stage: u32) -> u32 {
    MMA_TABLES_BYTES + stage * X90_SLAB_BYTES
}

/// Start of code stage `stage` for vector size `vec`.
#[inline(always)]
pub const fn code90_stage_base(vec: usize, stage: u32) -> u32 {
    MMA_TABLES_BYTES + x90_stages(vec) * X90_SLAB_BYTES + stage * code_stage_bytes(vec)
}

/// Dynamic shared memory of the Hopper GEMM for vector size `vec` (the last 16 bytes: the
/// split-K flag).
#[inline(always)]
pub const fn gemm90_smem_bytes(vec: usize) -> u32 {
    code90_stage_base(vec, code90_stages(vec)) + 16
}

/// The `wgmma` shared-memory descriptor of the B operand of K step `s` in the stage at
/// shared address `stage`: start address, [`LBO`] and [`SBO`] in 16-byte units, no swizzle.
#[inline(always)]
pub const fn b_descriptor(stage: u32, s: u32) -> u64 {
    let start = stage + 2 * s * LBO;
    ((start as u64 >> 4) & 0x3fff) | ((LBO as u64 >> 4) << 16) | ((SBO as u64 >> 4) << 32)
}

/// One block's stretch of one tile under stream-K: slabs `start..end` of the tile of row
/// block `rb` and token block `tb`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Segment {
    /// Row block (256 rows).
    pub rb: u32,
    /// Token block (128 inputs).
    pub tb: u32,
    /// First slab.
    pub start: u32,
    /// One past the last slab.
    pub end: u32,
}

impl Segment {
    /// Whether the segment sums its whole tile (stored at once, not through `acc`).
    #[inline(always)]
    pub fn whole(&self, slabs: u32) -> bool {
        self.start == 0 && self.end == slabs
    }
}

/// The units of block `b` of a stream-K launch ([`VqGemmParams::stream`] blocks): its equal
/// share `b U / stream .. (b + 1) U / stream` of the `U = tiles * slabs` (tile, slab) units,
/// tiles in the order `tb * row_blocks + rb` (neighbouring blocks work on the same inputs).
#[inline(always)]
pub fn stream_units(p: &VqGemmParams, b: u32) -> (u32, u32) {
    let units = p.row_blocks() as u64 * p.token_blocks() as u64 * p.slabs as u64;
    let share = |b: u32| (b as u64 * units / p.stream.max(1) as u64) as u32;
    (share(b), share(b + 1))
}

/// The segment that starts at unit `u` of a block whose units end at `u1` (`u < u1`): the
/// rest of `u`'s tile, or up to `u1`.
#[inline(always)]
pub fn segment_at(p: &VqGemmParams, u: u32, u1: u32) -> Segment {
    let slabs = p.slabs.max(1);
    let (tile, start) = (u / slabs, u % slabs);
    let end = if u1 - u < slabs - start {
        start + (u1 - u)
    } else {
        slabs
    };
    Segment {
        rb: tile % p.row_blocks().max(1),
        tb: tile / p.row_blocks().max(1),
        start,
        end,
    }
}

/// The segments of block `b` of a stream-K launch, in order: [`segment_at`] from the first of
/// [`stream_units`] on. Every unit belongs to exactly one block (tested).
pub fn stream_segments(p: &VqGemmParams, b: u32) -> impl Iterator<Item = Segment> + '_ {
    let (mut u, u1) = stream_units(p, b);
    core::iter::from_fn(move || {
        (u < u1).then(|| {
            let seg = segment_at(p, u, u1);
            u += seg.end - seg.start;
            seg
        })
    })
}

/// The stream-K grid of the Hopper GEMM for `tiles` tiles (row blocks x token blocks) of
/// `slabs` slabs on `sms` SMs, where split-K chose one split: `sms` blocks (one per SM) where
/// the tiles leave the last (or only) wave partial and an equal share of the units saves more
/// than [`STREAM_COST_SLABS`] slabs per SM over whole tiles per block (`ceil(tiles / sms)
/// slabs`); else 0 (a block per tile). The units must fit 32 bits.
pub fn choose_stream(tiles: usize, slabs: usize, sms: usize) -> u32 {
    let sms = sms.max(1);
    if tiles.is_multiple_of(sms) || slabs == 0 {
        return 0;
    }
    let Some(units) = tiles.checked_mul(slabs).filter(|&u| u < 1 << 32) else {
        return 0;
    };
    let whole = tiles.div_ceil(sms) * slabs;
    let shared = units.div_ceil(sms) as f64 + STREAM_COST_SLABS;
    if shared < whole as f64 { sms as u32 } else { 0 }
}

/// What stream-K costs a block, in slabs of work: the `red.add`s of the parts of the (at most
/// two) tiles it shares with its neighbours, the conversion of one, and the extra ring fills.
/// Measured on an H200 at 512 inputs (docs/PERF.md "VQ-GEMM: stream-K"): 8.5 slabs at
/// 14336 x 4096, 11 at 28672 x 8192, 12.6 at 11008 x 4096 over an equal share, all three
/// faster than a block per tile (by 2%, 9-12% and 15%); under one wave, 28672 x 8192 at 128
/// inputs 13% faster, 8192 x 8192 and 8192 x 28672 at 512 (128 tiles) 2-8% slower.
pub const STREAM_COST_SLABS: f64 = 8.0;

/// The kernel for vector size `vec`.
pub fn gemm90_kernel(vec: usize) -> Option<&'static str> {
    match vec {
        2 => Some("cmv_vq_gemm90_v2"),
        4 => Some("cmv_vq_gemm90_v4"),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mma::frag_col;

    /// Where `wgmma` reads element (K slot `k`, token `n`) of the B tile of a K step, by the
    /// PTX ISA's K-major no-swizzle layout: core matrix (`k / 8`, `n / 8`) at `start + (k / 8)
    /// LBO + (n / 8) SBO`, row `n % 8` of 16 bytes, element `k % 8`.
    fn wgmma_reads(desc: u64, k: u32, n: u32) -> u32 {
        let start = ((desc & 0x3fff) << 4) as u32;
        let lbo = (((desc >> 16) & 0x3fff) << 4) as u32;
        let sbo = (((desc >> 32) & 0x3fff) << 4) as u32;
        start + (k / 8) * lbo + (n / 8) * sbo + (n % 8) * 16 + 2 * (k % 8)
    }

    #[test]
    fn the_b_tile_holds_the_columns_the_a_registers_hold() {
        let stage = x90_stage_base(1);
        for s in 0..8u32 {
            let desc = b_descriptor(stage, s);
            for t in 0..4u32 {
                // Lane t's K slots 2t, 2t+1, 2t+8, 2t+9 hold columns frag_col .. + 4 (v = 2, 4).
                for v in GEMM90_VECS {
                    let c0 = frag_col(v, s as usize, t as usize) as u32;
                    for (i, k) in [2 * t, 2 * t + 1, 2 * t + 8, 2 * t + 9]
                        .into_iter()
                        .enumerate()
                    {
                        for n in [0, 5, 8, 127] {
                            assert_eq!(
                                wgmma_reads(desc, k, n),
                                stage + x90_offset(n, c0 + i as u32),
                                "s {s} t {t} k {k} n {n}"
                            );
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn permuted_chunks_are_core_matrix_rows() {
        let mut seen = [0u8; 32];
        for col in 0..128u32 {
            let q = permuted_col(col);
            assert_eq!(q / 16, col / 16);
            seen[(q % 32) as usize] += 1;
            for tok in [0, 9, 127] {
                assert_eq!(
                    x90_chunk_offset(tok, (q % 128) / 8) + 2 * (q % 8),
                    x90_offset(tok, col),
                    "col {col} tok {tok}"
                );
            }
        }
        assert!(seen.iter().all(|&n| n == 4));
        assert_eq!(padded_cols(8), 16);
        assert_eq!(padded_cols(4096), 4096);
    }

    fn params(rows: u32, tokens: u32, slabs: u32, stream: u32) -> VqGemmParams {
        let (c, cb, x, y, acc, counters) = crate::null_ptrs();
        VqGemmParams {
            codes: c,
            codebooks: cb,
            x,
            y,
            rows,
            cols: slabs * 128,
            tokens,
            slabs,
            code_groups: rows.div_ceil(256) * 16,
            tile_blocks: 1,
            slabs_per_tile: 1,
            tiles_c: slabs,
            splits: 1,
            stream,
            acc,
            counters,
        }
    }

    #[test]
    fn stream_segments_cover_every_unit_once() {
        for (rows, tokens, slabs, stream) in [
            (28672, 512, 64, 132),
            (11008, 512, 32, 132),
            (11008, 300, 32, 7),
            (300, 17, 3, 5),
            (256, 128, 1, 3),
            (4096, 512, 112, 1),
            (777, 129, 5, 64),
        ] {
            let p = params(rows, tokens, slabs, stream);
            let tiles = (p.row_blocks() * p.token_blocks()) as usize;
            let mut seen = vec![0u32; tiles * slabs as usize];
            let mut counted = vec![0u32; tiles];
            for b in 0..stream {
                let mut last_end = None;
                for seg in stream_segments(&p, b) {
                    assert!(seg.start < seg.end && seg.end <= slabs, "{seg:?}");
                    assert!(
                        seg.rb < p.row_blocks() && seg.tb < p.token_blocks(),
                        "{seg:?}"
                    );
                    // A block's segments are consecutive: each after a tile's end starts at 0.
                    if let Some(e) = last_end {
                        assert_eq!((e, seg.start), (slabs, 0), "block {b} {seg:?}");
                    }
                    last_end = Some(seg.end);
                    let tile = (seg.tb * p.row_blocks() + seg.rb) as usize;
                    counted[tile] += seg.end - seg.start;
                    for s in seg.start..seg.end {
                        seen[tile * slabs as usize + s as usize] += 1;
                    }
                }
            }
            assert!(
                seen.iter().all(|&n| n == 1),
                "{rows} {tokens} {slabs} {stream}"
            );
            // The count-in target of every tile: its slabs.
            assert!(counted.iter().all(|&n| n == slabs));
        }
    }

    #[test]
    fn stream_k_where_the_last_wave_is_partial() {
        // 28672 x 8192 and 11008 x 4096 at 512 inputs on 132 SMs: 448 and 172 tiles.
        assert_eq!(choose_stream(448, 64, 132), 132);
        assert_eq!(choose_stream(172, 32, 132), 132);
        // Whole waves: none.
        assert_eq!(choose_stream(264, 64, 132), 0);
        assert_eq!(choose_stream(132, 64, 132), 0);
        // Under one wave where split-K takes none: 28672 x 8192 at 128 inputs (112 tiles of
        // 64 slabs) takes it, 8192 x 8192 and 8192 x 28672 at 512 (128 tiles: 4 SMs idle)
        // do not.
        assert_eq!(choose_stream(112, 64, 132), 132);
        assert_eq!(choose_stream(128, 64, 132), 0);
        assert_eq!(choose_stream(128, 224, 132), 0);
        // 14336 x 4096 at 512: 224 tiles of 32 slabs (63 against 64 slabs per SM).
        assert_eq!(choose_stream(224, 32, 132), 132);
        // A last wave that is nearly full saves less than the cost.
        assert_eq!(choose_stream(263, 64, 132), 0);
        // Units past 32 bits: none.
        assert_eq!(choose_stream(1 << 20, 1 << 13, 132), 0);
    }

    #[test]
    fn the_stage_is_a_bijection_and_fits() {
        let mut seen = vec![0u8; X90_SLAB_BYTES as usize / 2];
        for tok in 0..128 {
            for col in 0..128 {
                seen[x90_offset(tok, col) as usize / 2] += 1;
            }
        }
        assert!(seen.iter().all(|&n| n == 1));
        for v in GEMM90_VECS {
            assert!(gemm90_smem_bytes(v) <= 227 * 1024);
            assert!(code90_stage_base(v, 0).is_multiple_of(16));
        }
        // Descriptor fields fit their 14 bits for every stage address.
        let d = b_descriptor(x90_stage_base(1), 7);
        assert_eq!(((d & 0x3fff) << 4) as u32, x90_stage_base(1) + 14 * LBO);
        assert!(x90_stage_base(2) < 1 << 18);
    }
}

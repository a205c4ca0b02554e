//! The big-codebook tensor-core GEMV (`cmv_vq_big_mma_b{8,16}`): geometry, parameters and
//! the lane-to-data mapping shared by the host and the GPU, and a CPU model of the kernel's
//! arithmetic.
//!
//! For `VQ<8, b, 2>` (`b` up to 12, two stages of one codebook per tensor: AQLM-3) and 2 to
//! 16 vectors in one launch, where the table kernel (`crate::big`) needs one launch per
//! vector (its 128 KiB of tables hold one vector's products). It reads the **same upload** as
//! the table kernel (the 3 code planes of [`crate::big::big_codes`]) plus the codebooks as
//! stored, so one device copy serves both and the launcher picks per batch.
//!
//! * **Codebook in shared memory.** Both stages' codebooks as stored (entry `e` of stage `s`:
//!   8 fp16 values, 16 bytes at `(s * entries + e) * 16`), copied once per block by
//!   `cp.async` (128 KiB for 4096 entries). A code is one 16-byte shared load of its entry;
//!   nothing is replicated (it would not fit), so the 8 lanes of a wavefront conflict when
//!   their entries share a bank group (`e % 8`): the cost this kernel pays per code.
//! * **MMA.** `D (16 x 8) = A (16 x 16) B (16 x 8)`, the inputs as A (`M` = up to 16 vectors),
//!   8 weight rows as B, as in `crate::mma`: lane `(g, t)` holds K slots `2t, 2t+1, 2t+8,
//!   2t+9` of row `g`, and K is ordered so that those are 4 consecutive columns
//!   ([`bm_frag_col`]). A code covers 8 columns: its entry gives the lane's B registers of two
//!   K steps. Each stage has its own MMA into its own sums (exact fp32 sums of the two stages'
//!   products, no fp16 rounding of their sum).
//! * **Columns and codes.** A *slab* is [`BM_SLAB_COLS`] = 128 columns, 16 vector positions:
//!   the table kernel's slabs `4 slab .. 4 slab + 4` (4 positions each). Lane `t` takes the
//!   table kernel's slab `4 slab + t`, i.e. positions `4t .. 4t + 4` (columns `32 t ..
//!   32 t + 32` of the slab), one per pair of K steps; so its codes for a row are exactly that
//!   row's 3 words of that slab, 3 four-byte loads, and the 4 lanes `t` of a row read 4
//!   different slabs' words of 8 consecutive rows: whole 32-byte sectors.
//! * **Work.** A block (16 warps, one per SM: the codebook takes most of the shared memory)
//!   owns *row blocks* of [`bm_block_rows`] rows (warp `w` takes row groups `R w .. R w + R`
//!   of 16 rows, two MMA halves of 8 rows each). A *unit* is one slab of one row block; a block runs an
//!   equal contiguous range of units (row-block-major), the next unit's codes and inputs
//!   loaded while the current one runs. The finish is `crate::mma`'s: sums in registers while
//!   the row block stays, `red.add` into the fp32 workspace when it changes, a counter per row
//!   block, the block that completes a row block converts it to fp16 and zeroes it.
//! * **Variants** ([`BmShape`]): `_b8` and `_b16` take up to 8 or 16 inputs (one `M` group of
//!   16, `R` = 2 row groups per warp, one MMA and one fp32 sum per stage: exact stage sums);
//!   `_t64` takes up to 64 (four `M` groups, `R` = 1 to stay within 128 registers), for more
//!   than 16 inputs (prefill) in chunks of 64: there the MMAs bound the time, so the two
//!   stages' entries are added in fp16 first (`add.rn.f16x2`, one rounding per weight, as a
//!   dequantized fp16 copy of the weights would have) and every looked-up pair feeds four
//!   MMAs, one per input group.

use cmv_device::{DevPtr, DevPtrMut, KernelParams};

use crate::big::BigGeometry;

/// Threads per block.
pub const BM_THREADS: u32 = 512;
/// Warps per block.
pub const BM_WARPS: u32 = BM_THREADS / 32;
/// A compiled variant of the kernel: row groups (16 rows) per warp and groups of 16 inputs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BmShape {
    /// Row groups per warp (`R`: 2, or 1 for four input groups).
    pub r: usize,
    /// Groups of 16 inputs per launch (the MMA's `M`: 1 or 4).
    pub mg: usize,
}

impl BmShape {
    /// Whether the variant adds the two stages' entries in fp16 before its MMAs (`_t64`),
    /// rather than running one MMA per stage into fp32 sums.
    pub const fn fp16_stage_sum(self) -> bool {
        self.mg > 1
    }
}

/// `_b8`, `_b16`: one group of inputs, 2 row groups per warp.
pub const BM_GEMV: BmShape = BmShape { r: 2, mg: 1 };
/// `_t64`: four groups of inputs, 1 row group per warp.
pub const BM_T64: BmShape = BmShape { r: 1, mg: 4 };

/// Rows per row block for `r` row groups per warp: 16 warps x `r` x 16 rows.
pub const fn bm_block_rows(r: usize) -> u32 {
    BM_WARPS * r as u32 * 16
}
/// Columns per slab (8 MMA K steps of 16; 16 vector positions).
pub const BM_SLAB_COLS: usize = 128;
/// MMA K steps per slab.
pub const BM_STEPS: usize = BM_SLAB_COLS / 16;
/// The table kernel's slabs (4 positions each, two stages) per slab of this kernel.
pub const BM_BIG_SLABS: u32 = 4;
/// Residual stages the kernel takes.
pub const BM_STAGES: usize = 2;
/// Bytes of one codebook entry in shared memory (8 fp16 values).
pub const BM_ENTRY_BYTES: u32 = 16;
/// Bytes of one input stage per group of 16 inputs: 8 steps x 32 lanes x 16 bytes (vector
/// `g`'s 8 bytes, then vector `g + 8`'s).
pub const BM_X_GROUP_BYTES: u32 = BM_STEPS as u32 * 32 * 16;
/// Most inputs per launch (`_t64`).
pub const BM_MAX_BATCH: u32 = 64;

/// Bytes of one input stage with `mg` groups of 16 inputs.
pub const fn bm_x_stage_bytes(mg: usize) -> u32 {
    mg as u32 * BM_X_GROUP_BYTES
}

/// Bytes of the two stages' codebooks of `entries` entries in shared memory.
pub const fn bm_codebook_bytes(entries: u32) -> u32 {
    BM_STAGES as u32 * entries * BM_ENTRY_BYTES
}

/// Dynamic shared memory of the kernel with `mg` groups of inputs for codebooks of `entries`
/// entries: the codebooks, two input stages, 16 bytes for the block's flag.
pub const fn bm_smem_bytes(entries: u32, mg: usize) -> u32 {
    bm_codebook_bytes(entries) + 2 * bm_x_stage_bytes(mg) + 16
}

/// The kernel for `batch` inputs and its variant: 1..=8 `_b8` (inputs of 8 vectors staged),
/// 9..=16 `_b16`, 17..=64 `_t64`.
pub fn big_mma_kernel(batch: usize) -> Option<(&'static str, BmShape)> {
    match batch {
        1..=8 => Some(("cmv_vq_big_mma_b8", BM_GEMV)),
        9..=16 => Some(("cmv_vq_big_mma_b16", BM_GEMV)),
        17..=64 => Some(("cmv_vq_big_mma_t64", BM_T64)),
        _ => None,
    }
}

/// First of the four consecutive columns (inside the slab) that lane `t` holds at K step `s`:
/// position `4t + s / 2` of the slab, its columns `4 (s % 2) ..`.
#[inline(always)]
pub const fn bm_frag_col(s: usize, t: usize) -> usize {
    32 * t + 8 * (s / 2) + 4 * (s % 2)
}

/// Parameters of `cmv_vq_big_mma_b{8,16}`: `y = W x` for `batch` fp16 vectors.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VqBigMmaParams {
    /// The 3 code planes of the table kernel ([`crate::big::big_codes`]), `big_slabs *
    /// rows_pad` words each.
    pub codes: DevPtr<u32>,
    /// The codebooks as stored (fp16 bits), `2 * entries * 8` values, 16-byte aligned.
    pub codebooks: DevPtr<u16>,
    /// `batch x cols` fp16 inputs.
    pub x: DevPtr<u16>,
    /// `batch x rows` fp16 outputs.
    pub y: DevPtrMut<u16>,
    /// `batch x rows` fp32 sums, zero before and after each launch.
    pub acc: DevPtrMut<f32>,
    /// `row_blocks` counters, zero before and after each launch.
    pub counters: DevPtrMut<u32>,
    /// Rows.
    pub rows: u32,
    /// Columns.
    pub cols: u32,
    /// Rows rounded up to 4 (the planes' row stride).
    pub rows_pad: u32,
    /// The table kernel's slabs (`ceil(vecs / 4)`).
    pub big_slabs: u32,
    /// Entries per codebook (a power of two, 16..=4096).
    pub entries: u32,
    /// Vectors (1..=16, or 1..=64 for `_t64`).
    pub batch: u32,
    /// Slabs of this kernel (`ceil(cols / 128)`).
    pub slabs: u32,
    /// Row blocks (`ceil(rows / bm_block_rows(r))`).
    pub row_blocks: u32,
    /// Units (`row_blocks * slabs`).
    pub units: u32,
    /// Zero.
    pub pad: u32,
}
const _: () = assert!(core::mem::size_of::<VqBigMmaParams>() == 88);
// SAFETY: #[repr(C)], plain data (device addresses and integers), layout asserted above.
unsafe impl KernelParams for VqBigMmaParams {}

impl VqBigMmaParams {
    /// The units of block `block` of `grid`: an equal contiguous share, `start..end`.
    #[inline(always)]
    pub fn unit_range(&self, block: u32, grid: u32) -> (u32, u32) {
        crate::block_share(block, grid, self.units)
    }

    /// Row block and slab of unit `u`.
    #[inline(always)]
    pub fn unit(&self, u: u32) -> (u32, u32) {
        (u / self.slabs, u % self.slabs)
    }

    /// The row that lane `(g, _)` of warp `warp` holds in half `h` of row group `r` of row
    /// block `rb`, with `rgs` row groups per warp.
    #[inline(always)]
    pub fn row(rgs: usize, rb: u32, warp: u32, r: u32, h: u32, g: u32) -> u32 {
        ((rb * BM_WARPS + warp) * rgs as u32 + r) * 16 + 8 * h + g
    }

    /// Where word `k` (plane) of `row`'s codes in the table kernel's slab `4 slab + t` lies
    /// in `codes`, or `None` past the rows or the slabs (the codes there are zero).
    #[inline(always)]
    pub fn code_word(&self, row: u32, slab: u32, t: u32, k: usize) -> Option<usize> {
        let j = slab * BM_BIG_SLABS + t;
        if row >= self.rows || j >= self.big_slabs {
            return None;
        }
        let plane = self.big_slabs as usize * self.rows_pad as usize;
        Some(k * plane + j as usize * self.rows_pad as usize + row as usize)
    }
}

/// The kernel's geometry, from the table kernel's: `None` unless the matrix has two stages
/// (the only kind this kernel takes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BigMmaGeometry {
    /// The table kernel's geometry (the code planes).
    pub big: BigGeometry,
    /// Row groups per warp of the variant (1 or 2).
    pub r: usize,
    /// Slabs of 128 columns.
    pub slabs: usize,
    /// Row blocks of `bm_block_rows(r)` rows.
    pub row_blocks: usize,
}

impl BigMmaGeometry {
    /// The geometry for `rows x cols` weights laid out by the table kernel as `big`, for a
    /// variant with `r` (1 or 2) row groups per warp.
    pub fn new(rows: usize, cols: usize, big: BigGeometry, r: usize) -> Option<Self> {
        if big.residuals != BM_STAGES || rows == 0 || cols == 0 || !(1..=2).contains(&r) {
            return None;
        }
        Some(Self {
            big,
            r,
            slabs: cols.div_ceil(BM_SLAB_COLS),
            row_blocks: rows.div_ceil(bm_block_rows(r) as usize),
        })
    }

    /// Units (row blocks x slabs).
    pub fn units(&self) -> usize {
        self.row_blocks * self.slabs
    }
}

/// Parameters with null device pointers for a `rows x cols` matrix under `g` and `batch`
/// vectors: the geometry fields of a launch, for [`big_mma_model`] and tests.
#[cfg(not(target_arch = "nvptx64"))]
pub fn bm_model_params(
    rows: usize,
    cols: usize,
    batch: usize,
    g: &BigMmaGeometry,
) -> VqBigMmaParams {
    let (c, cb, x, y, a, n) = crate::null_ptrs();
    VqBigMmaParams {
        codes: c,
        codebooks: cb,
        x,
        y,
        acc: a,
        counters: n,
        rows: rows as u32,
        cols: cols as u32,
        rows_pad: g.big.rows_pad as u32,
        big_slabs: g.big.slabs as u32,
        entries: g.big.entries as u32,
        batch: batch as u32,
        slabs: g.slabs as u32,
        row_blocks: g.row_blocks as u32,
        units: g.units() as u32,
        pad: 0,
    }
}

/// The B registers of lane `(g, t)` at K step `s` from its entry's 4 words: the fp16 pairs
/// of columns `4 (s % 2) ..` of the code's 8.
#[inline(always)]
pub const fn bm_b_regs(e: [u32; 4], s: usize) -> [u32; 2] {
    [e[2 * (s % 2)], e[2 * (s % 2) + 1]]
}

#[cfg(not(target_arch = "nvptx64"))]
/// The kernel's product on the CPU for the variant `shape` (`p.row_blocks` from its
/// [`BigMmaGeometry`]), lane by lane in fp32: every unit's codes read through
/// [`VqBigMmaParams::code_word`] and `crate::big::slab_code` as the kernel reads them, each
/// entry split into B registers by [`bm_b_regs`], the inputs by [`bm_frag_col`], one sum per
/// stage (K in the MMA slot order; the tensor cores add in their own order), the two stages'
/// sums added at the end; or, where the variant adds the stages in fp16
/// ([`BmShape::fp16_stage_sum`]), the entries added by [`cmv_device::add_f16x2`] and one sum. `codes` are the table kernel's planes, `codebooks` as stored (fp16
/// bits), `x` `batch x cols` fp16 bits. Returns `batch x rows` fp32 sums before the fp16
/// rounding.
pub fn big_mma_model(
    p: &VqBigMmaParams,
    shape: BmShape,
    codes: &[u32],
    codebooks: &[u16],
    x: &[u16],
) -> Vec<f32> {
    use crate::big::slab_code;
    use cmv_device::f16_to_f32;
    let (rows, cols) = (p.rows as usize, p.cols as usize);
    let r_per_warp = shape.r;
    let mut y = vec![0f32; p.batch as usize * rows];
    let half = |w: u32, k: u32| f16_to_f32((w >> (16 * k)) as u16);
    let entry = |s: usize, e: u32| -> [u32; 4] {
        let at = (s * p.entries as usize + e as usize) * 8;
        core::array::from_fn(|i| {
            u32::from(codebooks[at + 2 * i]) | u32::from(codebooks[at + 2 * i + 1]) << 16
        })
    };
    let xv = |n: usize, col: usize| -> f32 {
        if col < cols {
            f16_to_f32(x[n * cols + col])
        } else {
            0.0
        }
    };
    for u in 0..p.units {
        let (rb, slab) = p.unit(u);
        for warp in 0..BM_WARPS {
            for r in 0..r_per_warp as u32 {
                for h in 0..2 {
                    for lane in 0..32u32 {
                        let (g, t) = (lane / 4, lane % 4);
                        let row = VqBigMmaParams::row(r_per_warp, rb, warp, r, h, g);
                        if row >= p.rows {
                            continue;
                        }
                        let mut w = [0u32; crate::big::BIG_ROW_WORDS];
                        for (k, w) in w.iter_mut().enumerate() {
                            if let Some(at) = p.code_word(row, slab, t, k) {
                                *w = codes[at];
                            }
                        }
                        for n in 0..p.batch as usize {
                            let mut sums = [0f32; BM_STAGES];
                            for s in 0..BM_STEPS {
                                let c = (s / 2) as u32;
                                let col0 =
                                    slab as usize * BM_SLAB_COLS + bm_frag_col(s, t as usize);
                                let e0 = entry(0, slab_code(w, 2 * c));
                                let e1 = entry(1, slab_code(w, 2 * c + 1));
                                let both =
                                    core::array::from_fn(|i| cmv_device::add_f16x2(e0[i], e1[i]));
                                let stages: &[[u32; 4]] = if shape.fp16_stage_sum() {
                                    &[both]
                                } else {
                                    &[e0, e1]
                                };
                                for (&e, sum) in stages.iter().zip(sums.iter_mut()) {
                                    let b = bm_b_regs(e, s);
                                    for (k, &bw) in b.iter().enumerate() {
                                        for q in 0..2 {
                                            let col = col0 + 2 * k + q as usize;
                                            *sum =
                                                cmv_device::fma_f32(half(bw, q), xv(n, col), *sum);
                                        }
                                    }
                                }
                            }
                            y[n * rows + row as usize] += sums[0] + sums[1];
                        }
                    }
                }
            }
        }
    }
    y
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn geometry_and_shared_memory() {
        let big = BigGeometry::new(28672, 1024, 12, 2).unwrap();
        let g = BigMmaGeometry::new(28672, 8192, big, 2).unwrap();
        assert_eq!((g.slabs, g.row_blocks, g.units()), (64, 56, 3584));
        let g1 = BigMmaGeometry::new(28672, 8192, big, 1).unwrap();
        assert_eq!((g1.row_blocks, g1.units()), (112, 7168));
        assert!(BigMmaGeometry::new(28672, 8192, big, 4).is_none());
        // Both 4096-entry codebooks and the input stages fit an H100's 227 KiB per block.
        assert_eq!(bm_smem_bytes(4096, 1), 131072 + 8192 + 16);
        assert_eq!(bm_smem_bytes(4096, 4), 131072 + 32768 + 16);
        assert!(bm_smem_bytes(4096, 4) <= 227 * 1024);
        let one = BigGeometry::new(100, 16, 12, 1).unwrap();
        assert!(BigMmaGeometry::new(100, 128, one, 2).is_none());
        assert_eq!(big_mma_kernel(1), Some(("cmv_vq_big_mma_b8", BM_GEMV)));
        assert_eq!(big_mma_kernel(9), Some(("cmv_vq_big_mma_b16", BM_GEMV)));
        assert_eq!(big_mma_kernel(17), Some(("cmv_vq_big_mma_t64", BM_T64)));
        assert_eq!(big_mma_kernel(64), Some(("cmv_vq_big_mma_t64", BM_T64)));
        assert_eq!(big_mma_kernel(0), None);
        assert_eq!(big_mma_kernel(65), None);
    }

    #[test]
    fn fp16_pair_sums_round_once() {
        use half::f16;
        let w = |lo: f32, hi: f32| {
            u32::from(f16::from_f32(lo).to_bits()) | u32::from(f16::from_f32(hi).to_bits()) << 16
        };
        // 1 + 2^-11 is a tie: to even (1); 1 + 3 * 2^-12 rounds up to 1 + 2^-10; 65504 + 65504
        // overflows to infinity; -0.5 + 0.5 is +0.
        assert_eq!(
            cmv_device::add_f16x2(w(1.0, 1.0), w(2f32.powi(-11), 3.0 * 2f32.powi(-12))),
            w(1.0, 1.0 + 2f32.powi(-10))
        );
        assert_eq!(
            cmv_device::add_f16x2(w(65504.0, -0.5), w(65504.0, 0.5)),
            w(f32::INFINITY, 0.0)
        );
        assert!(BM_T64.fp16_stage_sum() && !BM_GEMV.fp16_stage_sum());
    }

    #[test]
    fn lanes_cover_every_column_of_a_slab_once() {
        let mut seen = [0u32; BM_SLAB_COLS];
        for t in 0..4 {
            for s in 0..BM_STEPS {
                for c in 0..4 {
                    seen[bm_frag_col(s, t) + c] += 1;
                }
                // The lane's 8 columns of a code: positions 4t .. 4t + 4, the table kernel's
                // slab `4 slab + t`.
                assert_eq!(bm_frag_col(s, t) / 32, t);
                assert_eq!(bm_frag_col(s, t) / 8 % 4, s / 2);
            }
        }
        assert!(seen.iter().all(|&n| n == 1));
    }

    #[test]
    fn warps_cover_every_row_of_a_row_block_once() {
        for rgs in [1, 2] {
            let mut seen = vec![0u32; 2 * bm_block_rows(rgs) as usize];
            for rb in 0..2 {
                for warp in 0..BM_WARPS {
                    for r in 0..rgs as u32 {
                        for h in 0..2 {
                            for g in 0..8 {
                                seen[VqBigMmaParams::row(rgs, rb, warp, r, h, g) as usize] += 1;
                            }
                        }
                    }
                }
            }
            assert!(seen.iter().all(|&n| n == 1), "{rgs} row groups");
        }
    }

    #[test]
    fn code_words_stay_inside_the_planes() {
        let (rows, cols) = (1001usize, 200usize);
        let big = BigGeometry::new(rows, cols.div_ceil(8), 12, 2).unwrap();
        let g = BigMmaGeometry::new(rows, cols, big, 2).unwrap();
        let p = bm_model_params(rows, cols, 3, &g);
        let words = big.code_words();
        let mut some = 0;
        for slab in 0..p.slabs {
            for t in 0..4 {
                for row in [0, 7, 1000, 1001, 1023] {
                    for k in 0..3 {
                        match p.code_word(row, slab, t, k) {
                            Some(at) => {
                                assert!(at < words);
                                some += 1;
                            }
                            None => assert!(row >= 1001 || slab * 4 + t >= big.slabs as u32),
                        }
                    }
                }
            }
        }
        assert!(some > 0);
    }
}

//! The tensor-core VQ-GEMM for prefill (`cmv_vq_gemm_v{2,4,8}`): `Y = X W^T` for `tokens`
//! fp16 input rows (any count; the GEMV serves up to 16) on the codes of the tensor-core
//! GEMV ([`crate::mma`]), fused: the dequantized weights never leave the registers.
//!
//! * **Tiles.** A block (8 warps) computes [`GEMM_TOKENS`] tokens x [`GEMM_ROWS`] weight rows
//!   (16 row groups of 16 rows): warp `w` takes tokens `64 (w % 2) ..` (four `m16` tiles) and
//!   row groups `4 (w / 2) ..` (64 rows, eight `n8` halves): 32 `mma.m16n8k16` per K step of
//!   16 columns, 128 fp32 sums per lane. Block `(x, y)` is row block `x` (256 rows) and token
//!   block `y`.
//! * **Weights** are the GEMV's: the same byte codes ([`crate::mma::mma_codes`], any row-group
//!   count, as the GEMV's layout pads them), the same replicated, double-buffered tables and
//!   the same `prmt` lookup that lands a lane's B registers (four consecutive columns of one
//!   row, [`crate::mma::frag_col`]) with one shared load. A lookup here feeds four MMAs (the
//!   four token tiles), not one.
//! * **Inputs** per slab of 128 columns: the block's 128 token rows are copied by `cp.async`
//!   into shared memory at a stride of [`X_STRIDE`] bytes (256 + 32, so the four rows of a
//!   wavefront's 8-byte loads hit four different 32-byte bank groups; zeros past the tokens
//!   and the columns). Lane `(g, t)`'s A registers of token tile `i` at step `s` are two 8-byte
//!   loads: token `16 i + g` and `16 i + g + 8`, columns `frag_col(V, s, t) .. + 4` (the K order
//!   the weights' lookups fix). Needs `cols % 8 == 0` (16-byte copies).
//! * **Codes** per slab: the block's 16 row groups' lane bytes, copied by `cp.async` next to the
//!   inputs ([`code_stage_offset`]); a lane reads its own.
//! * **Pipeline.** One barrier per slab: the next slab's inputs and codes are copied, and its
//!   codebook entry loaded (when its tile differs from the table of that parity), while the
//!   warps multiply the current one.

use cmv_device::{DevPtr, DevPtrMut, KernelParams};

use crate::mma::{MMA_TABLES_BYTES, SLAB_COLS, lane_code_bytes};

/// Threads per block (8 warps).
pub const GEMM_THREADS: u32 = 256;
/// Warps per block.
pub const GEMM_WARPS: u32 = GEMM_THREADS / 32;
/// Tokens (input rows) per block.
pub const GEMM_TOKENS: u32 = 128;
/// Weight rows per block (16 row groups).
pub const GEMM_ROWS: u32 = 256;
/// Row groups (16 rows) per block.
pub const GEMM_ROW_GROUPS: u32 = GEMM_ROWS / 16;
/// Bytes between two token rows of a staged slab: 128 columns of fp16 and 32 bytes of gap.
pub const X_STRIDE: u32 = 2 * SLAB_COLS as u32 + 32;
/// Bytes of one staged slab of inputs.
pub const X_SLAB_BYTES: u32 = GEMM_TOKENS * X_STRIDE;
/// Vector sizes the GEMM is compiled for.
pub const GEMM_VECS: [usize; 3] = [2, 4, 8];

/// Bytes of one staged slab of codes for vector size `vec`: 16 row groups x 32 lanes x
/// [`lane_code_bytes`].
#[inline(always)]
pub const fn code_stage_bytes(vec: usize) -> u32 {
    GEMM_ROW_GROUPS * 32 * lane_code_bytes(vec) as u32
}

/// Where things live in the dynamic shared memory: the two tables (as the GEMV's), two input
/// slabs, two code slabs.
#[inline(always)]
pub const fn x_stage_base(parity: u32) -> u32 {
    MMA_TABLES_BYTES + parity * X_SLAB_BYTES
}

/// Start of code stage `parity` for vector size `vec`.
#[inline(always)]
pub const fn code_stage_base(vec: usize, parity: u32) -> u32 {
    MMA_TABLES_BYTES + 2 * X_SLAB_BYTES + parity * code_stage_bytes(vec)
}

/// Dynamic shared memory of the GEMM for vector size `vec`.
#[inline(always)]
pub const fn gemm_smem_bytes(vec: usize) -> u32 {
    code_stage_base(vec, 2)
}

/// Byte offset of token `tok` (0..128), column `col` (0..128, even) inside an input stage.
#[inline(always)]
pub const fn x_stage_offset(tok: u32, col: u32) -> u32 {
    tok * X_STRIDE + 2 * col
}

/// Byte offset of row group `rg` (0..16, inside the block) and lane `lane` inside a code stage.
#[inline(always)]
pub const fn code_stage_offset(vec: usize, rg: u32, lane: u32) -> u32 {
    (rg * 32 + lane) * lane_code_bytes(vec) as u32
}

/// The GEMM for vector size `vec`.
pub fn gemm_kernel(vec: usize) -> Option<&'static str> {
    Some(match vec {
        2 => "cmv_vq_gemm_v2",
        4 => "cmv_vq_gemm_v4",
        8 => "cmv_vq_gemm_v8",
        _ => return None,
    })
}

/// Parameters of `cmv_vq_gemm_v{V}`: `y = W x` for `tokens` fp16 input rows.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VqGemmParams {
    /// The byte codes ([`crate::mma::mma_codes`]), `code_groups` row groups x `slabs` x 32
    /// lanes x `lane_code_bytes(V)` bytes, 16-byte aligned.
    pub codes: DevPtr<u32>,
    /// The codebooks (fp16 bits) as stored, `tiles * 256 * V` values, 16-byte aligned.
    pub codebooks: DevPtr<u16>,
    /// `tokens x cols` fp16 inputs, 16-byte aligned.
    pub x: DevPtr<u16>,
    /// `tokens x rows` fp16 outputs.
    pub y: DevPtrMut<u16>,
    /// Rows.
    pub rows: u32,
    /// Columns (a multiple of 8).
    pub cols: u32,
    /// Input rows.
    pub tokens: u32,
    /// Slabs (`ceil(cols / 128)`).
    pub slabs: u32,
    /// Row groups in the codes (at least `16 * ceil(rows / 256)`).
    pub code_groups: u32,
    /// Row blocks (256 rows) per tile row (all of them when there is one tile row).
    pub tile_blocks: u32,
    /// Slabs per tile column (all of them when there is one tile column).
    pub slabs_per_tile: u32,
    /// Tiles across.
    pub tiles_c: u32,
    /// Split-K (Hopper kernel only; 1 elsewhere): block `(x, y, z)` sums slabs
    /// [`VqGemmParams::slab_range`]`(z)` into `acc` (`red.add`), and the block that completes
    /// a tile's slabs (by `counters`, counted in slabs) converts the tile to fp16 and zeroes
    /// it again.
    pub splits: u32,
    /// Stream-K (Hopper kernel only; 0 elsewhere, and with `splits == 1`): where nonzero, the
    /// grid is `stream` blocks along x and block `b` works through its equal share of the
    /// (tile, slab) units in tile order ([`crate::gemm90::stream_segments`]); a tile it sums
    /// whole is stored at once, a part of a tile goes through `acc` and `counters` as a split.
    pub stream: u32,
    /// `tokens x rows` fp32 sums, zero before and after each launch (null when `splits == 1`
    /// and `stream == 0`).
    pub acc: DevPtrMut<f32>,
    /// `row_blocks x token_blocks` counters, zero before and after each launch (null when
    /// `splits == 1` and `stream == 0`).
    pub counters: DevPtrMut<u32>,
}
const _: () = assert!(core::mem::size_of::<VqGemmParams>() == 88);
// SAFETY: #[repr(C)], plain data (device addresses and integers), layout asserted above.
unsafe impl KernelParams for VqGemmParams {}

impl VqGemmParams {
    /// The tile (codebook) of row block `rb` (256 rows) and slab `slab`.
    #[inline(always)]
    pub fn tile(&self, rb: u32, slab: u32) -> u32 {
        (rb / self.tile_blocks) * self.tiles_c + slab / self.slabs_per_tile
    }

    /// Row blocks (256 rows).
    #[inline(always)]
    pub fn row_blocks(&self) -> u32 {
        self.rows.div_ceil(GEMM_ROWS)
    }

    /// The slabs split `z` of `splits` sums: an equal contiguous share, `start..end`.
    #[inline(always)]
    pub fn slab_range(&self, z: u32) -> (u32, u32) {
        let share = |z: u32| ((z as u64 * self.slabs as u64) / self.splits as u64) as u32;
        (share(z), share(z + 1))
    }

    /// Token blocks (128 inputs).
    #[inline(always)]
    pub fn token_blocks(&self) -> u32 {
        self.tokens.div_ceil(GEMM_TOKENS)
    }
}

/// The GEMM's parameters for a matrix whose tensor-core geometry with 2 row groups per warp
/// (row blocks of 256 rows, the GEMM's) is `g`, codes laid out for `code_groups` row groups,
/// and `tokens` inputs; null device pointers (for [`gemm_model`] and tests). `None` where the
/// GEMM does not take it (`cols % 8 != 0`, `g` not of 2 row groups, too few code row groups).
#[cfg(not(target_arch = "nvptx64"))]
pub fn gemm_model_params(
    rows: usize,
    cols: usize,
    tokens: usize,
    g: &crate::mma::MmaGeometry,
    code_groups: usize,
) -> Option<VqGemmParams> {
    let (c, cb, x, y, _, _) = crate::null_ptrs();
    gemm_params(rows, cols, tokens, g, code_groups, (c, cb, x, y))
}

/// [`gemm_model_params`] with the launch's device pointers (codes, codebooks, inputs,
/// outputs).
pub fn gemm_params(
    rows: usize,
    cols: usize,
    tokens: usize,
    g: &crate::mma::MmaGeometry,
    code_groups: usize,
    (codes, codebooks, x, y): (DevPtr<u32>, DevPtr<u16>, DevPtr<u16>, DevPtrMut<u16>),
) -> Option<VqGemmParams> {
    let u = |v: usize| u32::try_from(v).ok();
    let block_groups = rows.div_ceil(GEMM_ROWS as usize) * GEMM_ROW_GROUPS as usize;
    if g.r != 2 || !cols.is_multiple_of(8) || code_groups < block_groups || tokens == 0 {
        return None;
    }
    let (_, _, _, _, acc, counters) = crate::null_ptrs();
    Some(VqGemmParams {
        codes,
        codebooks,
        x,
        y,
        splits: 1,
        stream: 0,
        acc,
        counters,
        rows: u(rows)?,
        cols: u(cols)?,
        tokens: u(tokens)?,
        slabs: u(g.slabs)?,
        code_groups: u(code_groups)?,
        tile_blocks: u(g.tile_blocks)?,
        slabs_per_tile: u(g.slabs_per_tile)?,
        tiles_c: u(g.tiles_c)?,
    })
}

/// Whether `tokens` (more than 16) inputs run faster as GEMV launches of 16 than as the GEMM,
/// whose 128-token tiles are mostly empty for a few dozen: up to 24 inputs for the Hopper GEMM
/// (48 on matrices of at least 2^27 weights, the 70B shapes), up to 64 for the `mma.sync`
/// GEMM. From an H100 (docs/PERF.md "VQ-GEMM for prefill", build `2782f73`): GEMV launches
/// against the Hopper GEMM took 35.3 / 40.4 µs at 11008 x 4096 and 17 inputs but 46.5 / 40.6
/// at 32; 45.1 / 47.9 at 4096 x 14336 and 32; 101.8 / 164.4 and 153.1 / 159.8 at 28672 x 8192
/// and 32 / 48; the `mma.sync` GEMM takes 5-6 GEMV launches' time at 11008 x 4096.
pub fn gemv_chunks_win(tokens: usize, rows: usize, cols: usize, hopper: bool) -> bool {
    let most = match (hopper, rows.saturating_mul(cols) >= 1 << 27) {
        (false, _) => 64,
        (true, true) => 48,
        (true, false) => 24,
    };
    tokens <= most
}

/// Least slabs a split sums.
pub const MIN_SPLIT_SLABS: usize = 4;

/// What a split block's fp32 round trip costs, in slabs of work: its `red.add`s of a whole
/// tile, and the tile's conversion by the last one. Fitted on an H100 (docs/VQ.md): 4096 x
/// 14336 and 11008 x 4096 at 128 and 512 inputs, split and not.
pub const SPLIT_COST_SLABS: f64 = 12.0;

/// The split-K of the Hopper GEMM for `blocks` tiles (row blocks x token blocks) of `slabs`
/// slabs on `sms` SMs (one block each): the count `s` in 1..=8 (at least
/// [`MIN_SPLIT_SLABS`] slabs each) with the least `ceil(blocks s / sms) (slabs / s + c)`
/// (waves times the work of one block, `c` = [`SPLIT_COST_SLABS`] when `s > 1`), the
/// smallest on ties. It splits where the tiles leave SMs idle, not to even out later waves.
pub fn choose_splits(blocks: usize, slabs: usize, sms: usize) -> u32 {
    let sms = sms.max(1);
    let cost = |s: usize| {
        let extra = if s > 1 { SPLIT_COST_SLABS } else { 0.0 };
        (blocks * s).div_ceil(sms) as f64 * (slabs as f64 / s as f64 + extra)
    };
    let mut best = 1;
    for s in 2..=8usize {
        if slabs / s < MIN_SPLIT_SLABS {
            break;
        }
        if cost(s) < cost(best) - 1e-9 {
            best = s;
        }
    }
    best as u32
}

#[cfg(not(target_arch = "nvptx64"))]
/// The GEMM's product on the CPU, step for step: every block's input and code stages and its
/// tables written as the kernel writes shared memory (through [`x_stage_offset`],
/// [`code_stage_offset`] and the GEMV's table layout), every lane's A registers read at the
/// kernel's offsets and its B registers looked up at the kernel's `prmt` address, placed in
/// the MMA tiles by the PTX ISA's fragment layout, and the tiles multiplied (fp32 sums in K
/// order). Returns the fp32 sums (`tokens x rows`) before the fp16 rounding.
pub fn gemm_model(
    p: &VqGemmParams,
    vec: usize,
    codes: &[u32],
    codebooks: &[u16],
    x: &[u16],
) -> Vec<f32> {
    use crate::mma::{MMA_ENTRIES, STEPS, entry_offset, frag_col, lookup_offset, lookup_selector};
    use cmv_device::f16_to_f32;
    let v = vec;
    let (rows, cols, tokens) = (p.rows as usize, p.cols as usize, p.tokens as usize);
    let lcb = lane_code_bytes(v);
    let code_bytes: Vec<u8> = codes.iter().flat_map(|w| w.to_le_bytes()).collect();
    let mut y = vec![0f32; tokens * rows];
    let mut table = vec![0u8; MMA_TABLES_BYTES as usize];
    let mut xs = vec![0u8; X_SLAB_BYTES as usize];
    let mut cs = vec![0u8; code_stage_bytes(v) as usize];
    let half = |b: &[u8], at: usize| f16_to_f32(u16::from_le_bytes([b[at], b[at + 1]]));
    let slot = |t: usize, i: usize| if i < 2 { 2 * t + i } else { 2 * t + 6 + i };
    for tb in 0..tokens.div_ceil(GEMM_TOKENS as usize) {
        for rb in 0..p.row_blocks() {
            let mut acc = vec![0f32; GEMM_TOKENS as usize * GEMM_ROWS as usize];
            for slab in 0..p.slabs {
                let par = slab % 2;
                // The table of this slab's tile (the kernel skips rebuilding an equal one).
                let tile = p.tile(rb, slab) as usize;
                for e in 0..MMA_ENTRIES {
                    let val: Vec<u8> = codebooks[(tile * MMA_ENTRIES + e) * v..][..v]
                        .iter()
                        .flat_map(|h| h.to_le_bytes())
                        .collect();
                    let at = (entry_offset(e as u32) + 128 * par) as usize;
                    for (i, b) in table[at..at + 128].iter_mut().enumerate() {
                        *b = val[i % (2 * v)];
                    }
                }
                // The input stage: 16-byte chunks, zeros past the tokens and columns.
                for tok in 0..GEMM_TOKENS {
                    for j in 0..16u32 {
                        let (n, c0) = (tb * GEMM_TOKENS as usize + tok as usize, 8 * j as usize);
                        let col = slab as usize * SLAB_COLS + c0;
                        for i in 0..8 {
                            let h = if n < tokens && col < cols {
                                x[n * cols + col + i]
                            } else {
                                0
                            };
                            let at = x_stage_offset(tok, (c0 + i) as u32) as usize;
                            xs[at..at + 2].copy_from_slice(&h.to_le_bytes());
                        }
                    }
                }
                // The code stage: each row group's 32 lanes' bytes.
                for rg in 0..GEMM_ROW_GROUPS {
                    let grg = (rb * GEMM_ROW_GROUPS + rg) as usize;
                    let src = (grg * p.slabs as usize + slab as usize) * 32 * lcb;
                    let dst = code_stage_offset(v, rg, 0) as usize;
                    cs[dst..dst + 32 * lcb].copy_from_slice(&code_bytes[src..src + 32 * lcb]);
                }
                for w in 0..GEMM_WARPS {
                    let (wm, wn) = (w % 2, w / 2);
                    for s in 0..STEPS {
                        // A tiles of the warp's 4 token tiles, B tiles of its 8 halves.
                        let mut a = [[[0f32; 16]; 16]; 4];
                        let mut b = [[[0f32; 8]; 16]; 8];
                        for lane in 0..32u32 {
                            let (gi, t) = ((lane / 4) as usize, (lane % 4) as usize);
                            let col = frag_col(v, s, t) as u32;
                            for (i, ai) in a.iter_mut().enumerate() {
                                for hm in 0..2 {
                                    let tok = 64 * wm + 16 * i as u32 + gi as u32 + 8 * hm;
                                    let at = x_stage_offset(tok, col) as usize;
                                    for k in 0..4 {
                                        ai[gi + 8 * hm as usize][slot(t, k)] =
                                            half(&xs, at + 2 * k);
                                    }
                                }
                            }
                            for r in 0..4u32 {
                                let at = code_stage_offset(v, 4 * wn + r, lane) as usize;
                                for h in 0..2 {
                                    let per = 32 / v;
                                    let (c, part, n) = match v {
                                        2 => (2 * s, 0, 2),
                                        4 => (s, 0, 1),
                                        _ => (s / 2, 8 * (s % 2), 1),
                                    };
                                    let len = 8 / n;
                                    let mut reg = [0u8; 8];
                                    for jj in 0..n {
                                        let cat = at + h * per + c + jj;
                                        let (wb, k) = (&cs[cat / 4 * 4..][..4], cat % 4);
                                        let word = u32::from_le_bytes([wb[0], wb[1], wb[2], wb[3]]);
                                        let lo = lookup_offset(v, lane) + 128 * par;
                                        let addr =
                                            cmv_device::prmt(word, lo, lookup_selector(k as u32));
                                        let src = addr as usize + part;
                                        reg[jj * len..][..len]
                                            .copy_from_slice(&table[src..][..len]);
                                    }
                                    for k in 0..4 {
                                        b[2 * r as usize + h][slot(t, k)][gi] = half(&reg, 2 * k);
                                    }
                                }
                            }
                        }
                        for (i, ai) in a.iter().enumerate() {
                            for (q, bq) in b.iter().enumerate() {
                                for (m, am) in ai.iter().enumerate() {
                                    for n in 0..8 {
                                        let d = am
                                            .iter()
                                            .zip(bq)
                                            .fold(0f32, |d, (&av, bk)| d + av * bk[n]);
                                        let tok = 64 * wm as usize + 16 * i + m;
                                        let row = 64 * wn as usize + 8 * q + n;
                                        acc[tok * GEMM_ROWS as usize + row] += d;
                                    }
                                }
                            }
                        }
                    }
                }
            }
            for tok in 0..GEMM_TOKENS as usize {
                for r in 0..GEMM_ROWS as usize {
                    let (n, row) = (
                        tb * GEMM_TOKENS as usize + tok,
                        rb as usize * GEMM_ROWS as usize + r,
                    );
                    if n < tokens && row < rows {
                        y[n * rows + row] = acc[tok * GEMM_ROWS as usize + r];
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
    use crate::mma::{MmaGeometry, frag_col};

    #[test]
    fn shared_memory_fits_and_stages_do_not_overlap() {
        for v in GEMM_VECS {
            assert!(gemm_smem_bytes(v) <= 227 * 1024, "v = {v}");
            assert_eq!(x_stage_base(1) - x_stage_base(0), X_SLAB_BYTES);
            assert_eq!(code_stage_base(v, 0), x_stage_base(2));
            // The last byte a lane reads in each stage stays inside it.
            assert!(x_stage_offset(GEMM_TOKENS - 1, 126) + 2 <= X_SLAB_BYTES);
            assert_eq!(
                code_stage_offset(v, GEMM_ROW_GROUPS - 1, 31) + lane_code_bytes(v) as u32,
                code_stage_bytes(v)
            );
            // 16-byte copies land 16-byte aligned.
            assert!(X_STRIDE.is_multiple_of(16) && x_stage_base(0).is_multiple_of(16));
            assert!(code_stage_base(v, 1).is_multiple_of(16));
        }
    }

    #[test]
    fn a_wavefront_of_input_loads_hits_each_bank_once_for_v_2_and_4() {
        // A warp's 8-byte loads are served 16 lanes at a time: lanes (g, t), g in 0..4 or 4..8.
        for v in [2, 4] {
            for s in 0..8 {
                for half in 0..2u32 {
                    let mut banks = [0u32; 32];
                    for lane in 16 * half..16 * half + 16 {
                        let (g, t) = (lane / 4, (lane % 4) as usize);
                        let at = x_stage_offset(g, frag_col(v, s, t) as u32);
                        for w in 0..2 {
                            banks[((at / 4 + w) % 32) as usize] += 1;
                        }
                    }
                    assert!(banks.iter().all(|&n| n == 1), "v = {v}, s = {s}");
                }
            }
        }
    }

    #[test]
    fn few_inputs_take_the_gemv() {
        assert!(gemv_chunks_win(17, 11008, 4096, true));
        assert!(gemv_chunks_win(24, 11008, 4096, true));
        assert!(!gemv_chunks_win(32, 11008, 4096, true));
        assert!(gemv_chunks_win(48, 28672, 8192, true));
        assert!(!gemv_chunks_win(49, 28672, 8192, true));
        assert!(gemv_chunks_win(64, 4096, 4096, false));
        assert!(!gemv_chunks_win(65, 4096, 4096, false));
        assert!(!gemv_chunks_win(512, 28672, 8192, true));
    }

    #[test]
    fn splits_fill_the_waves() {
        // Several waves of tiles: no split (28672 x 8192 and 11008 x 4096 at 512 tokens).
        assert_eq!(choose_splits(448, 64, 132), 1);
        assert_eq!(choose_splits(172, 32, 132), 1);
        assert_eq!(choose_splits(132, 64, 132), 1);
        // Under a wave: 4096 x 14336 at 512 tokens (64 tiles), at 128 (16 tiles); 11008 x 4096
        // at 128 (43 tiles).
        assert_eq!(choose_splits(64, 112, 132), 2);
        assert_eq!(choose_splits(16, 112, 132), 8);
        assert_eq!(choose_splits(43, 32, 132), 3);
        // Never below MIN_SPLIT_SLABS slabs a split, nor where the round trip costs more.
        assert_eq!(choose_splits(16, 7, 132), 1);
        assert_eq!(choose_splits(16, 8, 132), 1);
        assert_eq!(choose_splits(16, 40, 132), 8);
        let g = MmaGeometry::new(256, 1000, 4, (256, 1000, 1), 2).unwrap();
        let p = VqGemmParams {
            splits: 3,
            ..gemm_model_params(256, 1000, 17, &g, 16).unwrap()
        };
        assert_eq!(p.slabs, 8);
        assert_eq!(
            (0..3).map(|z| p.slab_range(z)).collect::<Vec<_>>(),
            [(0, 2), (2, 5), (5, 8)]
        );
    }

    #[test]
    fn params_refuse_what_the_kernel_does_not_take() {
        let g2 = MmaGeometry::new(1000, 4096, 4, (1000, 4096, 1), 2).unwrap();
        let g4 = MmaGeometry::new(1000, 4096, 4, (1000, 4096, 1), 4).unwrap();
        let p = gemm_model_params(1000, 4096, 512, &g2, g4.row_groups()).unwrap();
        assert_eq!((p.row_blocks(), p.slabs), (4, 32));
        assert!(gemm_model_params(1000, 4096, 512, &g4, g4.row_groups()).is_none());
        assert!(gemm_model_params(1000, 4092, 512, &g2, g4.row_groups()).is_none());
        assert!(gemm_model_params(1000, 4096, 0, &g2, g4.row_groups()).is_none());
        assert!(gemm_model_params(1000, 4096, 9, &g2, 63).is_none());
        assert!(gemm_model_params(1000, 4096, 9, &g2, 64).is_some());
    }
}

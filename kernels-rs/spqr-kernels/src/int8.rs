//! The inputs as two int8 halves, for the integer-MMA SpQR product of 1 vector
//! (`cmv_spqr_{csr,ptcsr}_i8_b1`, `crate::kernels_int8`): the arithmetic the kernel does, shared
//! with the host model (`spqr_format::int8::gemv_int8_model`) that checks its error bound on
//! the CPU.
//!
//! Per input vector and tile column `t` (16 columns), the staging takes the largest magnitude
//! `m_t` of the tile's fp16 inputs and the power of two `σ_t = 2^E` that puts it in
//! `[2^13, 2^14)` ([`tile_sigma`]); each input becomes the integer `x̂ = round(x / σ_t)` (half
//! to even, exact division) in `[-INPUT_MAX, INPUT_MAX]`, one fused multiply-add with a magic
//! constant ([`quantized_bits`]: the low 16 bits of the result are `x̂`), stored as two int8
//! halves `x̂ = 128 h + l` with `h` in `[-128, 127]` and `l` in `[0, 127]` ([`split_input`],
//! [`stage_tile`]). A tile row's 3-bit codes `q_k` then give, through two `mma.m16n8k32` (codes
//! as u8, halves as s8, exact int32 sums), `D = Σ q_k x̂_k` ([`tile_dot`]); the staging also
//! keeps the exact `T = Σ x̂_k`. The tile row adds `s σ_t (D - z T)` to its row ([`tile_term`]),
//! which equals `Σ s (q_k - z) σ_t x̂_k`.
//!
//! **Error.** The only rounding besides fp32 arithmetic is `x̂`: `|x_k - σ_t x̂_k| <= σ_t / 2`,
//! so a tile row's term is off from the exact `Σ s (q_k - z) x_k` by at most
//! `|s| σ_t / 2 Σ |q_k - z|` ([`tile_error_bound`]), at most `2^-14` of the tile's largest
//! input times the row's weights. The relative error of a row's output is that times the
//! row's conditioning `Σ |w_k x_k| / |Σ w_k x_k|`; `spqr_format`'s tests check the bound on
//! adversarial inputs (large dynamic range inside a tile, fp16's largest and subnormal
//! values, huge and tiny weight scales). A tile with a NaN or infinite input gets `σ = NaN`,
//! so its vector's outputs are NaN (as the fp16 kernels give NaN or infinity).

use crate::layout::{TILE, row_code};
use crate::tc::TileConsts;
use cmv_device::{fma_f32, half2_to_f32x2, hmax2_nan, prmt};

/// Largest magnitude of a quantized input: 15-bit signed integers, so that `x̂ = 128 h + l`
/// with `h` and `l` int8 (`h = x̂ >> 7` in `[-128, 127]`, `l = x̂ & 127`). ([`tile_sigma`]
/// keeps them below `2^14 - 8`.)
pub const INPUT_MAX: i32 = (1 << 14) - 1;

/// `1.5 * 2^23`: `fma(x, 1 / σ, MAGIC)` rounds `x / σ` (with `|x / σ| < 2^22`) to an integer,
/// half to even, whose 16-bit two's complement is the low 16 bits of the result.
pub const MAGIC: f32 = 12_582_912.0;

/// The exponent `E` of [`tile_sigma`] for a tile whose largest input magnitude has the finite
/// fp16 bits `max_bits`: the fp16 exponent field less 28 (in `[-28, 2]`), so that the largest
/// input over `2^E` lies in `[2^13, 2^14)` (below that for subnormals, which are then exact
/// multiples of `2^4`).
#[inline(always)]
const fn tile_exponent(max_bits: u32) -> i32 {
    (max_bits >> 10) as i32 - 28
}

/// The scale `σ = 2^E` of a tile whose largest input magnitude has fp16 bits `max_bits` (a
/// NaN or infinity is `0x7c00` or more): NaN for those.
#[inline(always)]
pub fn tile_sigma(max_bits: u32) -> f32 {
    if max_bits >= 0x7c00 {
        f32::NAN
    } else {
        f32::from_bits(((127 + tile_exponent(max_bits)) as u32) << 23)
    }
}

/// `1 / σ` ([`tile_sigma`]), exact; 1 for a tile with a NaN or infinity (its `σ` is NaN).
#[inline(always)]
pub fn tile_inverse(max_bits: u32) -> f32 {
    if max_bits >= 0x7c00 {
        1.0
    } else {
        f32::from_bits(((127 - tile_exponent(max_bits)) as u32) << 23)
    }
}

/// The bits of `fma(x, inv, MAGIC)`: for finite `x` with `|x inv| < 2^14`, `MAGIC`'s bits plus
/// `x̂ = round(x inv)` (half to even), so its low 16 bits are `x̂`'s two's complement.
#[inline(always)]
pub fn quantized_bits(x: f32, inv: f32) -> u32 {
    fma_f32(x, inv, MAGIC).to_bits()
}

/// `x̂ = round(x / σ)`, half to even, for a finite `x` of the tile whose scale `σ`
/// ([`tile_sigma`]) is: what [`quantized_bits`] encodes, as an integer (host model and tests).
#[inline(always)]
pub fn quantize_input(x: f32, sigma: f32) -> i32 {
    quantized_bits(x, 1.0 / sigma).wrapping_sub(MAGIC.to_bits()) as i32
}

/// One tile's staged inputs for the integer MMA ([`stage_tile`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct StagedTile {
    /// The high halves `h` of the 16 inputs, column `4i + j` in byte `j` of word `i`.
    pub h: [u32; 4],
    /// The low halves `l`, in the same places.
    pub l: [u32; 4],
    /// The tile's scale `σ` ([`tile_sigma`]).
    pub sigma: f32,
    /// `T = Σ x̂` (exact: `|T| <= 16 INPUT_MAX < 2^24`), as fp32.
    pub t: f32,
}

/// The staging of one tile's 16 fp16 inputs (`r[j]` holds columns `2j`, `2j + 1`): the scale,
/// the halves of the 15-bit integers as the MMA's B registers, and their sum. One multiply-add
/// per input, a byte permute per two halves.
#[inline(always)]
pub fn stage_tile(r: &[u32; 8]) -> StagedTile {
    // The largest magnitude's fp16 bits, NaN (0x7fff) if any input is NaN.
    let mut m = 0u32;
    for &v in r {
        m = hmax2_nan(m, v & 0x7fff_7fff);
    }
    let mx = hmax2_nan(m, m >> 16) & 0xffff;
    let inv = tile_inverse(mx);
    let mut bits = [0u32; TILE];
    for (j, &w) in r.iter().enumerate() {
        let (a, b) = half2_to_f32x2(w);
        bits[2 * j] = quantized_bits(a, inv);
        bits[2 * j + 1] = quantized_bits(b, inv);
    }
    let (mut h, mut l) = ([0u32; 4], [0u32; 4]);
    for i in 0..4 {
        // Two x̂ per word (16-bit two's complement each).
        let v01 = prmt(bits[4 * i], bits[4 * i + 1], 0x5410);
        let v23 = prmt(bits[4 * i + 2], bits[4 * i + 3], 0x5410);
        // h: bits 7-14 of each x̂ (byte 1 and 3 of the word shifted left by one).
        h[i] = prmt(v01 << 1, v23 << 1, 0x7531);
        // l: bits 0-6.
        l[i] = prmt(v01, v23, 0x6420) & 0x7f7f_7f7f;
    }
    let sum = bits.iter().fold(0u32, |a, &b| a.wrapping_add(b));
    StagedTile {
        h,
        l,
        sigma: tile_sigma(mx),
        t: sum.wrapping_sub(MAGIC.to_bits().wrapping_mul(TILE as u32)) as i32 as f32,
    }
}

/// The two int8 halves of `x̂`: `(h, l)` with `x̂ = 128 h + l`, `l` in `[0, 127]`.
#[inline(always)]
pub const fn split_input(q: i32) -> (i8, i8) {
    ((q >> 7) as i8, (q & 127) as i8)
}

/// `128 h + l`, the inverse of [`split_input`].
#[inline(always)]
pub const fn join_input(h: i8, l: i8) -> i32 {
    128 * h as i32 + l as i32
}

/// A tile row's integer sums from its row word `w` (codes) and the tile's quantized inputs:
/// `(D, T) = (Σ q_k x̂_k, Σ x̂_k)` (exact: `|D| <= 16 * 7 * INPUT_MAX`), as the two integer
/// `mma` on the halves give `D = 128 Σ q_k h_k + Σ q_k l_k`.
#[inline(always)]
pub fn tile_dot(w: u64, xq: &[i32; TILE]) -> (i32, i32) {
    let (mut dh, mut dl, mut t) = (0i32, 0i32, 0i32);
    for (k, &x) in xq.iter().enumerate() {
        let (h, l) = split_input(x);
        let q = row_code(w, k as u32) as i32;
        dh += q * h as i32;
        dl += q * l as i32;
        t += x;
    }
    (128 * dh + dl, t)
}

/// A tile row's term in fp32 as the kernel would form it: `(s σ) (D - z T)`, `D - z T` by
/// one fused multiply-add.
#[inline(always)]
pub fn tile_term(s: f32, z: f32, sigma: f32, d: i32, t: i32) -> f32 {
    (s * sigma) * cmv_device::fma_f32(-z, t as f32, d as f32)
}

/// The largest error the input rounding can give a tile row's term: `|s| σ / 2 Σ_k |q_k - z|`
/// (exact arithmetic; fp32 rounding comes on top). Host only.
#[cfg(not(target_arch = "nvptx64"))]
pub fn tile_error_bound(w: u64, s: f32, z: f32, sigma: f32) -> f64 {
    let mut spread = 0f64;
    for k in 0..TILE {
        spread += (f64::from(row_code(w, k as u32)) - f64::from(z)).abs();
    }
    f64::from(s).abs() * f64::from(sigma) / 2.0 * spread
}

/// The 4 codes of row word `w` at columns `4t .. 4t + 4` as the 4 bytes (u8) of an integer
/// `mma.m16n8k16` A register: lane `(g, t)` passes row `g`'s as `a0` and row `g + 8`'s as `a1`
/// (`.u8` A against `.s8` B). The codes are 3 bits at bit `6 + 3k` of the row word; each goes
/// to its own byte.
#[inline(always)]
pub const fn code_bytes(w: u64, t: u32) -> u32 {
    let v = (w >> (crate::layout::CODES_SHIFT + 12 * t)) as u32 & 0xfff;
    (v & 7) | ((v & 0x38) << 5) | ((v & 0x1c0) << 10) | ((v & 0xe00) << 15)
}

/// The halves of the 4 quantized inputs at columns `4t .. 4t + 4` as two integer `mma` B
/// registers (4 s8 bytes each, column `4t + i` in byte `i`): `(h, l)`. Lane `(g, t)` passes
/// vector `g`'s.
#[inline(always)]
pub fn input_bytes(xq: &[i32; TILE], t: usize) -> (u32, u32) {
    let (mut h, mut l) = (0u32, 0u32);
    for i in 0..4 {
        let (hi, lo) = split_input(xq[4 * t + i]);
        h |= u32::from(hi as u8) << (8 * i);
        l |= u32::from(lo as u8) << (8 * i);
    }
    (h, l)
}

/// # The byte layout of a row word for the integer MMA (planned; CPU model only)
///
/// The container's row word (`layout::pack_row`) keeps each 3-bit code at bit `6 + 3k`, where
/// no shift puts four codes into the low bits of four bytes. The integer kernel would read a
/// second device word layout, the same 64 bits rearranged at upload ([`byte_layout_word`]),
/// in which the low half `lo` and the high half `hi` hold, in byte `j` (`j < 4`):
///
/// | bits of byte `j` | `lo` | `hi` |
/// | --- | --- | --- |
/// | 0-2 | code of column `j` | code of column `8 + j` |
/// | 3-5 | code of column `4 + j` | code of column `12 + j` |
/// | 6-7 | bits `2j`, `2j + 1` of the statistics byte | bits `2j`, `2j + 1` of [`spare_hi`]: `qs` (0-2), `qz` (3-5), zero |
///
/// So `lo & 0x0707_0707`, `(lo >> 3) & 0x0707_0707`, `hi & 0x0707_0707` and
/// `(hi >> 3) & 0x0707_0707` are the u8 A registers of a row for columns `0-3`, `4-7`, `8-11`
/// and `12-15` ([`code_regs`]: six instructions for 16 codes, against 11 for the fp16 pairs
/// today), and one `mul.hi` gathers the eight spare bits of a half back into a byte
/// ([`gather_spare`]). Routed as the fp16 kernel routes tiles (column `n` of B carries tile
/// `n / 2`'s inputs, half `n % 2`: `h` or `l`), two `mma.m16n8k32` per step of 4 tiles take
/// both halves of every code of a lane's two rows ([`routed_a_fragment`]), and lane `(g, t)`
/// receives `D_h`, `D_l` of its own rows and tile: `D = 128 D_h + D_l`. The fp16 kernels would
/// need their windows changed to read this layout (one device copy serves every batch), which
/// is why it is not the upload's layout yet.
pub const CODE_MASK: u32 = 0x0707_0707;
/// The spare bits of every byte of a half word (bits 6-7).
pub const SPARE_MASK: u32 = 0xc0c0_c0c0;
/// `mul.hi(half & SPARE_MASK, SPARE_GATHER)` has byte `j`'s bits 6-7 at bits `2j`, `2j + 1`:
/// field `j` (at bit `8j + 6`) times `2^(26 - 6j)` lands at bit `32 + 2j`; every other partial
/// product lands at a distinct even position below 32 or at 40 and above, so nothing carries
/// into bits 32-39 ([`gather_spare`]).
pub const SPARE_GATHER: u32 = (1 << 26) | (1 << 20) | (1 << 14) | (1 << 8);

/// The byte of `hi`'s spare bits: `qs` in bits 0-2, `qz` in bits 3-5, bits 6-7 zero.
#[inline(always)]
pub const fn spare_hi(qs: u32, qz: u32) -> u32 {
    (qs & 7) | ((qz & 7) << 3)
}

/// Spreads `byte`'s bit pairs over bits 6-7 of the four bytes of a half word.
const fn scatter_spare(byte: u32) -> u32 {
    let mut v = 0;
    let mut j = 0;
    while j < 4 {
        v |= ((byte >> (2 * j)) & 3) << (8 * j + 6);
        j += 1;
    }
    v
}

/// The eight spare bits of a half word of [`byte_layout_word`] as a byte (bits 0-7 of the
/// result; bits 8 and up are not defined), with one `mul.hi`.
#[inline(always)]
pub const fn gather_spare(half: u32) -> u32 {
    (((half & SPARE_MASK) as u64 * SPARE_GATHER as u64) >> 32) as u32
}

/// A container row word (as `layout::device_tile_rows` leaves it, the statistics byte the
/// device's) in the byte layout above.
pub const fn byte_layout_word(w: u64) -> u64 {
    let (mut lo, mut hi) = (0u32, 0u32);
    let mut j = 0;
    while j < 4 {
        lo |= (row_code(w, j) | (row_code(w, 4 + j) << 3)) << (8 * j);
        hi |= (row_code(w, 8 + j) | (row_code(w, 12 + j) << 3)) << (8 * j);
        j += 1;
    }
    lo |= scatter_spare(crate::layout::row_stat_byte(w) as u32);
    hi |= scatter_spare(spare_hi(crate::layout::row_qs(w), crate::layout::row_qz(w)));
    lo as u64 | ((hi as u64) << 32)
}

/// The inverse of [`byte_layout_word`] for valid rows (padding bits zero).
pub const fn row_word_of(b: u64) -> u64 {
    let (lo, hi) = (b as u32, (b >> 32) as u32);
    let mut codes = [0u8; TILE];
    let mut j = 0;
    while j < 4 {
        codes[j] = ((lo >> (8 * j)) & 7) as u8;
        codes[4 + j] = ((lo >> (8 * j + 3)) & 7) as u8;
        codes[8 + j] = ((hi >> (8 * j)) & 7) as u8;
        codes[12 + j] = ((hi >> (8 * j + 3)) & 7) as u8;
        j += 1;
    }
    let (stat, qsz) = (gather_spare(lo) & 0xff, gather_spare(hi) & 0xff);
    crate::layout::pack_row(qsz & 7, (qsz >> 3) & 7, &codes, stat as u8)
}

/// The four u8 A registers of a row in [`byte_layout_word`] form: columns `0-3`, `4-7`,
/// `8-11`, `12-15`, one code per byte.
#[inline(always)]
pub const fn code_regs(b: u64) -> [u32; 4] {
    let (lo, hi) = (b as u32, (b >> 32) as u32);
    [
        lo & CODE_MASK,
        (lo >> 3) & CODE_MASK,
        hi & CODE_MASK,
        (hi >> 3) & CODE_MASK,
    ]
}

/// The A fragment of `mma.m16n8k32` number `m` (0 or 1) of a step for lane `(g, t)` holding
/// rows `2g` (`b0`) and `2g + 1` (`b1`) of tile `t` in [`byte_layout_word`] form: `a0`/`a1`
/// (k-slots `4t..4t + 4`, MMA rows `g`, `g + 8`) are columns `8m..8m + 4`, `a2`/`a3` (k-slots
/// `16 + 4t..`) columns `8m + 4..8m + 8`.
#[inline(always)]
pub const fn routed_a_fragment(b0: u64, b1: u64, m: usize) -> [u32; 4] {
    let (r0, r1) = (code_regs(b0), code_regs(b1));
    [r0[2 * m], r1[2 * m], r0[2 * m + 1], r1[2 * m + 1]]
}

/// The 16-bit quarter of the tile's statistics that a lane's two device rows hold in
/// [`byte_layout_word`] form (low halves `lo0` of row `2g`, `lo1` of row `2g + 1`): the same
/// quarter as `layout::stat_quarter` takes from the container's layout.
#[inline(always)]
pub fn stat_quarter_bytes(lo0: u32, lo1: u32) -> u32 {
    (gather_spare(lo0) & 0xff) | ((gather_spare(lo1) << 8) & 0xff00)
}

/// `2^23`: `f32::from_bits(v | 0x4b00_0000) - TWO_23` is `v` for `v < 2^23`.
const TWO_23: f32 = 8_388_608.0;

/// The tile constants of [`row_scale_zero_bytes`]: `tc::tile_consts` with `c` divided by 8
/// (exact).
#[inline(always)]
pub fn tile_consts_bytes(lo: u32, hi: u32, sigma: f32) -> TileConsts {
    let c = crate::tc::tile_consts(lo, hi, sigma);
    TileConsts {
        c: c.c * 0.125,
        ..c
    }
}

/// A row's scale (times the tile's `σ`) and negated zero, `(s σ, -z)`, from the high half
/// `hi` of its [`byte_layout_word`] (`qs`, `qz` in its spare bits) and the tile's
/// [`tile_consts_bytes`]: `qs` and `8 qz` become floats by a mask into the mantissa of
/// `2^23` and one subtraction each (the constants' `c / 8` takes the 8 back).
#[inline(always)]
pub fn row_scale_zero_bytes(hi: u32, c: &TileConsts) -> (f32, f32) {
    let sp = gather_spare(hi);
    let qs = f32::from_bits((sp & 7) | 0x4b00_0000) - TWO_23;
    let qz8 = f32::from_bits((sp & 0x38) | 0x4b00_0000) - TWO_23;
    (fma_f32(c.a, qs, c.b), fma_f32(c.c, qz8, c.d))
}

/// The exact `D` of the lane's two rows from the accumulators of the step's two chained
/// `mma.m16n8k32` (lane `(g, t)`: column `2t` carries `Σ q h`, column `2t + 1` `Σ q l`, rows
/// `g` and `g + 8` its rows `2g`, `2g + 1`): `(128 d0 + d1, 128 d2 + d3)`.
#[inline(always)]
pub const fn row_dots(d: [i32; 4]) -> (i32, i32) {
    (128 * d[0] + d[1], 128 * d[2] + d[3])
}

/// The B fragment of MMA `m` for lane `(g, t)` of the routed product of one vector: the
/// halves of tile `t`'s quantized inputs when `g / 2 == t` (`h` for even `g`, `l` for odd),
/// zeros otherwise (`b0` columns `8m..8m + 4`, `b1` columns `8m + 4..8m + 8`).
pub fn routed_b_fragment(xq: &[i32; TILE], g: usize, t: usize, m: usize) -> [u32; 2] {
    if g / 2 != t {
        return [0, 0];
    }
    let pick = |reg: usize| {
        let (h, l) = input_bytes(xq, reg);
        if g.is_multiple_of(2) { h } else { l }
    };
    [pick(2 * m), pick(2 * m + 1)]
}

#[cfg(all(test, not(target_arch = "nvptx64")))]
mod tests {
    use super::*;
    use half::f16;

    #[test]
    fn halves_are_int8_and_join_back_for_every_input() {
        for q in -INPUT_MAX..=INPUT_MAX {
            let (h, l) = split_input(q);
            assert!((0..=127).contains(&l), "{q}");
            assert_eq!(join_input(h, l), q);
        }
        assert_eq!(split_input(INPUT_MAX), (127, 127));
        assert_eq!(split_input(-INPUT_MAX), (-128, 1));
    }

    #[test]
    fn quantized_inputs_are_within_half_a_step() {
        let xs = [
            0.0f32, 1.0, -1.0, 65504.0, -65504.0, 6.0e-8, 1.0e-3, 0.333, 12345.6, -0.5,
        ];
        for &m in &[65504.0f32, 1.0, 6.0e-8, 0.1, 1.0e-5] {
            let mb = u32::from(f16::from_f32(m).to_bits());
            let (sigma, inv) = (tile_sigma(mb), tile_inverse(mb));
            assert_eq!(sigma * inv, 1.0);
            assert!(sigma.to_bits() & 0x7f_ffff == 0, "a power of two");
            let mh = f16::from_bits(mb as u16).to_f32();
            let top = quantize_input(mh, sigma);
            assert!(
                (8192 / 2..INPUT_MAX).contains(&top) || mb < 0x400,
                "{m}: {top}"
            );
            for &x in xs.iter().filter(|x| x.abs() <= mh) {
                let x = f16::from_f32(x).to_f32();
                let q = quantize_input(x, sigma);
                assert!(q.abs() <= INPUT_MAX);
                // Exactly the rounding of x / σ, half to even.
                assert_eq!(
                    q,
                    (f64::from(x) / f64::from(sigma)).round_ties_even() as i32
                );
                let back = f64::from(sigma) * f64::from(q);
                assert!(
                    (back - f64::from(x)).abs() <= f64::from(sigma) / 2.0,
                    "{x} {m}"
                );
            }
        }
        // Half to even through the magic constant.
        assert_eq!(quantize_input(2.5, 1.0), 2);
        assert_eq!(quantize_input(3.5, 1.0), 4);
        assert_eq!(quantize_input(-2.5, 1.0), -2);
        assert_eq!(quantize_input(-3.5, 1.0), -4);
        assert_eq!(quantize_input(-3.4, 1.0), -3);
        // Non-finite tiles get a NaN scale.
        assert!(tile_sigma(0x7c00).is_nan() && tile_sigma(0x7e00).is_nan());
        assert_eq!(tile_inverse(0x7c00), 1.0);
    }

    #[test]
    fn staged_tiles_hold_the_halves_and_the_sum_of_every_input() {
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            state >> 11
        };
        for case in 0..3000 {
            // Mixed magnitudes, subnormals, exact extremes, zeros.
            let x: [f16; TILE] = core::array::from_fn(|k| {
                let r = next();
                match (r % 7, case % 5) {
                    (0, _) => f16::from_f32(0.0),
                    (1, 0) => f16::MAX,
                    (1, 1) => f16::from_bits(1),
                    (2, _) => f16::from_bits((r >> 8) as u16 & 0x83ff),
                    _ => f16::from_f64(
                        ((r >> 8) % 2001) as f64 / 1000.0 - 1.0 * 2f64.powi((k as i32 % 9) - 4),
                    ),
                }
            });
            let r: [u32; 8] = core::array::from_fn(|j| {
                u32::from(x[2 * j].to_bits()) | u32::from(x[2 * j + 1].to_bits()) << 16
            });
            let st = stage_tile(&r);
            let m = x.iter().fold(0f32, |m, v| m.max(v.to_f32().abs()));
            let mb = u32::from(f16::from_f32(m).to_bits());
            assert_eq!(st.sigma, tile_sigma(mb));
            let xq: [i32; TILE] = core::array::from_fn(|k| quantize_input(x[k].to_f32(), st.sigma));
            assert_eq!(st.t, xq.iter().sum::<i32>() as f32);
            for i in 0..4 {
                let (h, l) = input_bytes(&xq, i);
                assert_eq!((st.h[i], st.l[i]), (h, l), "case {case} word {i}");
            }
        }
        // A NaN or an infinity makes σ NaN.
        let mut r = [0x3c00_3c00u32; 8];
        r[3] = 0x7c00_0000;
        assert!(stage_tile(&r).sigma.is_nan());
        r[3] = 0x3c00_7e00;
        assert!(stage_tile(&r).sigma.is_nan());
    }

    #[test]
    fn byte_layout_rows_give_their_scales_zeros_and_statistics() {
        use crate::layout::{SecondOrder, first_order, pack_row, stat_quarter};
        let so = SecondOrder {
            ss: f16::from_f32(0.0123).to_bits(),
            sz: f16::from_f32(2.5).to_bits(),
            zs: f16::from_f32(0.75).to_bits(),
            zz: f16::from_f32(-1.25).to_bits(),
        };
        let c = tile_consts_bytes(
            u32::from(so.ss) | u32::from(so.sz) << 16,
            u32::from(so.zs) | u32::from(so.zz) << 16,
            1.0,
        );
        for qs in 0..8 {
            for qz in 0..8 {
                let codes: [u8; TILE] = core::array::from_fn(|k| ((k as u32 + qs) % 8) as u8);
                let w = pack_row(qs, qz, &codes, (qs * 8 + qz) as u8 ^ 0xa5);
                let w1 = pack_row(qz, qs, &codes, (qz * 8 + qs) as u8);
                let b = byte_layout_word(w);
                let (s, nz) = row_scale_zero_bytes((b >> 32) as u32, &c);
                let (s_want, z_want) = first_order(qs, qz, so);
                assert_eq!((s, -nz), (s_want, z_want), "qs {qs} qz {qz}");
                let b1 = byte_layout_word(w1);
                assert_eq!(
                    stat_quarter_bytes(b as u32, b1 as u32),
                    stat_quarter((w >> 32) as u32, (w1 >> 32) as u32),
                );
            }
        }
        assert_eq!(row_dots([1, 2, -3, 4]), (130, -380));
    }

    /// `mma.m16n8k16` on integers, from the 32 lanes' fragments as the PTX ISA lays them out
    /// (A: `a0` row `g`, `a1` row `g + 8`, bytes `i` at column `4t + i`, u8; B: byte `i` at
    /// row `4t + i`, column `g`, s8): `D[row][col]`.
    fn mma_m16n8k16(a: &[[u32; 2]; 32], b: &[u32; 32]) -> [[i32; 8]; 16] {
        let (mut am, mut bm) = ([[0i32; 16]; 16], [[0i32; 8]; 16]);
        for lane in 0..32 {
            let (g, t) = (lane / 4, lane % 4);
            for i in 0..4 {
                am[g][4 * t + i] = i32::from((a[lane][0] >> (8 * i)) as u8);
                am[g + 8][4 * t + i] = i32::from((a[lane][1] >> (8 * i)) as u8);
                bm[4 * t + i][g] = i32::from((b[lane] >> (8 * i)) as u8 as i8);
            }
        }
        core::array::from_fn(|r| {
            core::array::from_fn(|c| (0..16).map(|k| am[r][k] * bm[k][c]).sum())
        })
    }

    #[test]
    fn fragments_give_the_tile_sums_through_two_integer_mmas() {
        // A tile of 16 rows with every code value, 8 vectors of extreme and mixed inputs.
        let words: [u64; TILE] = core::array::from_fn(|r| {
            let codes: [u8; TILE] = core::array::from_fn(|k| ((r * 5 + k * 3) % 8) as u8);
            crate::layout::pack_row(r as u32 % 8, 7 - r as u32 % 8, &codes, 0x5a)
        });
        let xs: [[i32; TILE]; 8] = core::array::from_fn(|n| {
            core::array::from_fn(|k| match (n + k) % 5 {
                0 => INPUT_MAX,
                1 => -INPUT_MAX,
                2 => 0,
                3 => (k as i32 * 1234 - 9000) * if n % 2 == 0 { 1 } else { -1 },
                _ => -1,
            })
        });
        let a: [[u32; 2]; 32] = core::array::from_fn(|lane| {
            let (g, t) = (lane / 4, lane as u32 % 4);
            [code_bytes(words[g], t), code_bytes(words[g + 8], t)]
        });
        let halves: [(u32, u32); 32] =
            core::array::from_fn(|lane| input_bytes(&xs[lane / 4], lane % 4));
        let dh = mma_m16n8k16(&a, &core::array::from_fn(|lane| halves[lane].0));
        let dl = mma_m16n8k16(&a, &core::array::from_fn(|lane| halves[lane].1));
        for (r, &w) in words.iter().enumerate() {
            for (n, x) in xs.iter().enumerate() {
                assert_eq!(
                    128 * dh[r][n] + dl[r][n],
                    tile_dot(w, x).0,
                    "row {r} vector {n}"
                );
            }
        }
        // Every code lands in its byte.
        for &w in &words {
            for t in 0..4u32 {
                let b = code_bytes(w, t);
                for i in 0..4 {
                    assert_eq!((b >> (8 * i)) & 0xff, row_code(w, 4 * t + i));
                }
            }
        }
    }

    #[test]
    fn tile_dot_matches_the_plain_sums() {
        let codes: [u8; TILE] = core::array::from_fn(|k| (k % 8) as u8);
        let w = crate::layout::pack_row(0, 0, &codes, 0);
        let xq: [i32; TILE] = core::array::from_fn(|k| (k as i32 * 2049 - 16383).min(INPUT_MAX));
        let (d, t) = tile_dot(w, &xq);
        let want_d: i32 = (0..TILE).map(|k| codes[k] as i32 * xq[k]).sum();
        assert_eq!((d, t), (want_d, xq.iter().sum()));
        // The extremes stay inside int32.
        let w7 = crate::layout::pack_row(0, 0, &[7; TILE], 0);
        assert_eq!(tile_dot(w7, &[INPUT_MAX; TILE]).0, 16 * 7 * INPUT_MAX);
        assert_eq!(tile_dot(w7, &[-INPUT_MAX; TILE]).0, -16 * 7 * INPUT_MAX);
    }

    /// `mma.m16n8k32` on integers from the 32 lanes' fragments as the PTX ISA lays them out
    /// (A u8: `a0` row `g` k `4t..`, `a1` row `g + 8` k `4t..`, `a2` row `g` k `16 + 4t..`,
    /// `a3` row `g + 8` k `16 + 4t..`; B s8: `b0` k `4t..`, `b1` k `16 + 4t..`, column `g`):
    /// `D[row][col]`.
    fn mma_m16n8k32(a: &[[u32; 4]; 32], b: &[[u32; 2]; 32]) -> [[i32; 8]; 16] {
        let (mut am, mut bm) = ([[0i32; 32]; 16], [[0i32; 8]; 32]);
        for lane in 0..32 {
            let (g, t) = (lane / 4, lane % 4);
            for i in 0..4 {
                let byte = |v: u32| (v >> (8 * i)) & 0xff;
                am[g][4 * t + i] = byte(a[lane][0]) as i32;
                am[g + 8][4 * t + i] = byte(a[lane][1]) as i32;
                am[g][16 + 4 * t + i] = byte(a[lane][2]) as i32;
                am[g + 8][16 + 4 * t + i] = byte(a[lane][3]) as i32;
                bm[4 * t + i][g] = byte(b[lane][0]) as u8 as i8 as i32;
                bm[16 + 4 * t + i][g] = byte(b[lane][1]) as u8 as i8 as i32;
            }
        }
        core::array::from_fn(|r| {
            core::array::from_fn(|c| (0..32).map(|k| am[r][k] * bm[k][c]).sum())
        })
    }

    #[test]
    fn the_byte_layout_round_trips_and_gathers_its_spare_bits() {
        let mut state = 0x2545_f491_4f6c_dd1du64;
        for _ in 0..5000 {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let codes: [u8; TILE] = core::array::from_fn(|k| ((state >> (3 * k)) & 7) as u8);
            let (qs, qz, stat) = (
                (state >> 48) as u32 & 7,
                (state >> 51) as u32 & 7,
                (state >> 54) as u8,
            );
            let w = crate::layout::pack_row(qs, qz, &codes, stat);
            let b = byte_layout_word(w);
            assert_eq!(row_word_of(b), w);
            let (lo, hi) = (b as u32, (b >> 32) as u32);
            assert_eq!(gather_spare(lo) & 0xff, u32::from(stat));
            let sp = gather_spare(hi);
            assert_eq!((sp & 7, (sp >> 3) & 7, (sp >> 6) & 3), (qs, qz, 0));
            // The kernel's float conversions: (sp & 7) | 2^23 and (sp & 0x38) | 2^23.
            let f = |v: u32| f32::from_bits(v | 0x4b00_0000) - 8_388_608.0;
            assert_eq!(f(sp & 7), qs as f32);
            assert_eq!(f(sp & 0x38), 8.0 * qz as f32);
            let regs = code_regs(b);
            for (r, reg) in regs.iter().enumerate() {
                for i in 0..4 {
                    assert_eq!((reg >> (8 * i)) & 0xff, u32::from(codes[4 * r + i]));
                }
            }
        }
        // The gather, bit by bit: each spare pair lands in its place and nothing else does.
        for j in 0..4 {
            for v in 1..4u32 {
                let half = v << (8 * j + 6) | 0x3f3f_3f3f;
                assert_eq!(gather_spare(half) & 0xff, v << (2 * j));
            }
        }
        assert_eq!(gather_spare(u32::MAX) & 0xff, 0xff);
    }

    #[test]
    fn two_routed_integer_mmas_give_every_tile_row_sum() {
        // A step of 4 tiles of 16 rows with every code value, one vector of extreme inputs:
        // lane (g, t) holds rows 2g, 2g + 1 of tile t (the device order); MMA row g is row
        // 2g, row g + 8 row 2g + 1.
        let tiles: [[u64; TILE]; 4] = core::array::from_fn(|t| {
            core::array::from_fn(|r| {
                let codes: [u8; TILE] =
                    core::array::from_fn(|k| ((r * 5 + k * 3 + t * 7) % 8) as u8);
                crate::layout::pack_row(r as u32 % 8, 7 - r as u32 % 8, &codes, (r * 37) as u8)
            })
        });
        let xs: [[i32; TILE]; 4] = core::array::from_fn(|t| {
            core::array::from_fn(|k| match (k + t) % 6 {
                0 => INPUT_MAX,
                1 => -INPUT_MAX,
                2 => 0,
                3 => k as i32 * 997 - 7000,
                4 => -1,
                _ => 129,
            })
        });
        let mut d = [[0i32; 8]; 16];
        for m in 0..2 {
            let a: [[u32; 4]; 32] = core::array::from_fn(|lane| {
                let (g, t) = (lane / 4, lane % 4);
                let (b0, b1) = (
                    byte_layout_word(tiles[t][2 * g]),
                    byte_layout_word(tiles[t][2 * g + 1]),
                );
                routed_a_fragment(b0, b1, m)
            });
            let b: [[u32; 2]; 32] = core::array::from_fn(|lane| {
                let (g, t) = (lane / 4, lane % 4);
                routed_b_fragment(&xs[g / 2], g, t, m)
            });
            let dm = mma_m16n8k32(&a, &b);
            for (dr, dmr) in d.iter_mut().zip(dm.iter()) {
                for (v, add) in dr.iter_mut().zip(dmr.iter()) {
                    *v += add;
                }
            }
        }
        // Lane (g, t)'s accumulators D(g, 2t), D(g, 2t + 1), D(g + 8, ..): its rows, its tile.
        for lane in 0..32 {
            let (g, t) = (lane / 4, lane % 4);
            for (half, row) in [(0, 2 * g), (8, 2 * g + 1)] {
                let got = 128 * d[g + half][2 * t] + d[g + half][2 * t + 1];
                assert_eq!(
                    got,
                    tile_dot(tiles[t][row], &xs[t]).0,
                    "lane {lane} row {row}"
                );
            }
        }
    }
}

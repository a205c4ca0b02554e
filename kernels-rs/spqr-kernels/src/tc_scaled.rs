//! How the scaled-weights kernel (3 to 16 vectors, `kernels_scaled`) feeds SpQR tiles to the
//! tensor cores (`mma.m16n8k16`, fp16 in, fp32 accumulation): plain functions, shared by the
//! kernel and the host tests.
//!
//! A warp multiplies 16 rows (one tile row) by 64 columns (4 tiles) per step, with lane
//! `(g, t) = (lane / 4, lane % 4)` holding rows `2g` and `2g + 1` of tile `t`: one 16-byte load
//! of two `u64` words. The MMA's row `g` is row `2g`, its row `g + 8` row `2g + 1`; its 16
//! k-slots are 4 columns of each of the 4 tiles, lane `t`'s slots always of tile `t`. Which
//! columns of a tile fill which slot is free (the input pairs follow the same order), so the
//! kernel takes the 16 codes of a `u64` in the [`PAIRS`] order, in which two codes land in the
//! two halves of a `half2` with one mask:
//!
//! - A 32-bit window of the word, `w >> WINDOW_SHIFTS[i]`, holds codes `k` and `k + 1` at
//!   bits 4 and 7 and codes `k + 4`, `k + 5` at bits 16 and 19 (`k = 0, 2, 8, 10`).
//! - `(window & MASK_A) | MAGIC_A` is the `half2` `(64 + q_k, 1024 + q_{k+4})`, exactly:
//!   the code sits in the mantissa of an fp16 whose unit in the last place is 1.
//!   `(window & MASK_B) | MAGIC_B` is `(8 + q_{k+1}, 128 + q_{k+5})`.
//! - `fma(v, s, -offset * s)` is then `s q` rounded once to fp16: the product is exact inside
//!   the FMA and `offset * s` is a power-of-two multiple of the fp16 scale `s`, so exact as
//!   long as it is finite, which [`MAX_SCALE`] guarantees. Two instructions per two weights.
//!
//! The zero is not folded into the weights (a rounded `s z` there would cost accuracy). A
//! tile's zero term for one vector is `-z s sum(x)`, the row's `-z s` times the sum of the
//! tile's 16 inputs: the sums are computed once per launch, before the kernel, in f32
//! ([`tile_sum_pair`]), and a step adds the four tiles' zero terms of both rows with one
//! bf16 MMA ([`zero_fragment`]): lane `(g, t)`'s four k-slots of tile `t` hold `-z s` split
//! into a bf16 `hi` and the bf16 rest `lo` (`hi, hi, lo, lo`), its B slots the tile's sum
//! for vector `g` split the same way (`hi, lo, hi, lo`), so the MMA adds
//! `(hi + lo)(sum_hi + sum_lo)`, each factor within 2^-16 of its f32 value, in fp32 (bf16
//! has the exponent range of f32: no tile sum overflows, none is subnormal). So the weights
//! the kernel uses are `s (q - z)` with `s` rounded to fp16 and the products `s q` rounded
//! to fp16 (each rounding at most 2^-11 relative); what that does to dot products is tested
//! below.

use cmv_device::{
    bf16_to_f32, f32x2_to_bf16x2, f32x2_to_half2, half2_to_f32x2, hfma2, hmul2, lop3,
};

pub use crate::tc::{MASK_A, MASK_B, PAIRS, WINDOW_SHIFTS, input_pairs};

/// Exponents that make the even pair `(64 + q, 1024 + q)`.
pub const MAGIC_A: u32 = 0x6400_5400;
/// Exponents that make the odd pair `(8 + q, 128 + q)`.
pub const MAGIC_B: u32 = 0x5800_4800;
/// `half2 (-64, -1024)`: times the scale, the offset to remove from an even pair.
pub const NEG_OFFSET_A: u32 = 0xe400_d400;
/// `half2 (-8, -128)`: times the scale, the offset to remove from an odd pair.
pub const NEG_OFFSET_B: u32 = 0xd800_c800;
/// Largest first-order scale magnitude the kernel takes as it is: `1024 s` must stay a finite
/// fp16 (at most 65504). A matrix with larger scales runs with all of them divided by a
/// power of two and the result multiplied back ([`prescale`]).
pub const MAX_SCALE: f32 = 63.0;
/// Largest `|z s|` the kernel takes as it is. (The zero terms are bf16, with the range of
/// f32; the bound keeps the scaled `s z` of the matrices of earlier builds' rule.)
pub const MAX_ZERO_TERM: f32 = 65000.0;

/// The per-row values of a tile row, as `half2` words (and the zero term in fp32).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RowConsts {
    /// `(s, s)`, `s` rounded to fp16.
    pub s2: u32,
    /// `(-64 s, -1024 s)`: removes the even pairs' offsets.
    pub ca: u32,
    /// `(-8 s, -128 s)`: removes the odd pairs' offsets.
    pub cb: u32,
    /// `-z s` (with the fp16 `s`) rounded to bf16, in both halves.
    pub nz_hi: u32,
    /// The rest, `-z s - hi`, rounded to bf16, in both halves.
    pub nz_lo: u32,
}

/// The row values for scale `s` and zero `z` (fp32, as the CPU computes them).
#[inline(always)]
pub fn row_consts(s: f32, z: f32) -> RowConsts {
    let s2 = f32x2_to_half2(s, s);
    let nz = -(z * half2_to_f32x2(s2).0);
    let nz_hi = f32x2_to_bf16x2(nz, nz);
    let rest = nz - bf16_to_f32(nz_hi as u16);
    RowConsts {
        s2,
        ca: hmul2(s2, NEG_OFFSET_A),
        cb: hmul2(s2, NEG_OFFSET_B),
        nz_hi,
        nz_lo: f32x2_to_bf16x2(rest, rest),
    }
}

/// `v` as the `bf16x2` word `(hi, lo)`: `hi` is `v` rounded to bf16, `lo` the rest `v - hi`
/// rounded to bf16, so `hi + lo` is within 2^-16 of `v` (relative).
#[inline(always)]
pub fn bf16_split(v: f32) -> u32 {
    let hi = f32x2_to_bf16x2(v, v) & 0xffff;
    let rest = v - bf16_to_f32(hi as u16);
    hi | (f32x2_to_bf16x2(rest, rest) & 0xffff_0000)
}

/// The sum of a tile's 16 inputs (`half2` words, as the kernel loads them), added in f32 in
/// order, as [`bf16_split`]: the B value of [`zero_fragment`]. Computed before the kernel
/// by `cmv_spqr_prep_inputs`, once per tile and vector.
#[inline(always)]
pub fn tile_sum_pair(x: &[u32; 8]) -> u32 {
    let mut sum = 0.0f32;
    for &w in x {
        let (a, b) = half2_to_f32x2(w);
        sum += a;
        sum += b;
    }
    bf16_split(sum)
}

/// The A fragment of the zero MMA (`mma.m16n8k16` in bf16) of lane `(g, t)`, whose rows
/// `2g, 2g + 1` (the MMA's rows `g`, `g + 8`) have the constants `c0`, `c1`: k-slots `2t`,
/// `2t + 1` hold `hi`, `2t + 8`, `2t + 9` `lo`. With B `[sum, sum]` (the lane's
/// [`tile_sum_pair`] for tile `t`, vector `g`) the MMA adds, per row and vector, the four
/// tiles' `(hi + lo)(sum_hi + sum_lo)`.
#[inline(always)]
pub fn zero_fragment(c0: &RowConsts, c1: &RowConsts) -> [u32; 4] {
    [c0.nz_hi, c1.nz_hi, c0.nz_lo, c1.nz_lo]
}

/// The `half2` pair `2i + odd` of word `w` before scaling: `(base + q_low, base' + q_high)`.
/// `masks` is `[MASK_A, MASK_B]` (see [`scaled_pairs`]).
#[inline(always)]
pub fn magic_pair(w: u64, i: usize, odd: bool, masks: [u32; 2]) -> u32 {
    let win = (w >> WINDOW_SHIFTS[i]) as u32;
    if odd {
        lop3::<0xea>(win, masks[1], MAGIC_B)
    } else {
        lop3::<0xea>(win, masks[0], MAGIC_A)
    }
}

/// The 8 weight pairs of a tile row, `half2 (s q_{k_low}, s q_{k_high})` for the codes of
/// [`PAIRS`], each rounded once. `masks` must be `[MASK_A, MASK_B]`; the kernel passes them
/// as values the compiler cannot see are constant, so they stay in registers (as constants,
/// `ptxas` rebuilds each with a move before every use: 16 extra instructions per step).
#[inline(always)]
pub fn scaled_pairs(w: u64, c: &RowConsts, masks: [u32; 2]) -> [u32; 8] {
    core::array::from_fn(|p| {
        let odd = p % 2 == 1;
        hfma2(
            magic_pair(w, p / 2, odd, masks),
            c.s2,
            if odd { c.cb } else { c.ca },
        )
    })
}

/// The power-of-two divisor the kernel applies to the scales of a matrix whose largest scale
/// magnitude is `max_scale` and largest `|z s|` is `max_zero_term` (1.0 when none is needed),
/// as `(pre, post)`: scales are multiplied by `pre`, results by `post = 1 / pre`.
pub fn prescale(max_scale: f32, max_zero_term: f32) -> (f32, f32) {
    // 2^e for |e| <= 126, from its bits (no `exp2` in `core`).
    let pow2 = |e: i32| f32::from_bits(((127 + e) as u32) << 23);
    let mut k = 0i32;
    while k < 126 && (max_scale * pow2(-k) > MAX_SCALE || max_zero_term * pow2(-k) > MAX_ZERO_TERM)
    {
        k += 1;
    }
    (pow2(-k), pow2(k))
}

#[cfg(all(test, not(target_arch = "nvptx64")))]
mod tests {
    use super::*;
    use crate::layout::{TILE, pack_row, row_code};
    use half::f16;

    fn lanes(v: u32) -> (u16, u16) {
        (v as u16, (v >> 16) as u16)
    }

    /// The low bf16 half of `v`, exactly.
    fn bf(v: u32) -> f64 {
        f64::from(bf16_to_f32(v as u16))
    }

    fn half2_words(x: &[f16; TILE]) -> [u32; 8] {
        core::array::from_fn(|j| {
            u32::from(x[2 * j].to_bits()) | (u32::from(x[2 * j + 1].to_bits()) << 16)
        })
    }

    #[test]
    fn tile_sums_split_into_two_bf16_within_2_pow_minus_16() {
        let mut state = 0x0dd5_eed5_u64;
        let mut next = || {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            state
        };
        let scales = [1.0f32, 65504.0, 6.0e-8, 1.0e-3, 300.0];
        for i in 0..3000 {
            let scale = scales[i % scales.len()];
            let x: [f16; TILE] = core::array::from_fn(|_| {
                let u = ((next() >> 11) as f64 / (1u64 << 53) as f64) * 2.0 - 1.0;
                f16::from_f32(u as f32 * scale)
            });
            let p = tile_sum_pair(&half2_words(&x));
            let (hi, lo) = (bf(p & 0xffff), bf(p >> 16));
            let exact: f64 = x.iter().map(|v| v.to_f64()).sum();
            let mag: f64 = x.iter().map(|v| v.to_f64().abs()).sum();
            // The f32 sum (15 roundings of 2^-24 of the running sum) and the split (2^-16).
            let err = (hi + lo - exact).abs();
            assert!(
                err <= exact.abs() * 1.53e-5 + mag * 1e-6,
                "tile {i}: {hi} + {lo} against {exact}"
            );
            assert!(hi.is_finite() && lo.abs() <= hi.abs() / 256.0);
        }
        // Sixteen fp16 maxima: far past fp16, still exact in bf16 pairs.
        let big = [f16::MAX; TILE];
        let p = tile_sum_pair(&half2_words(&big));
        assert_eq!(bf(p & 0xffff) + bf(p >> 16), 16.0 * 65504.0);
        assert_eq!(tile_sum_pair(&[0; 8]), 0);
    }

    #[test]
    fn magic_pairs_hold_the_codes_exactly() {
        let mut state = 0x1234_5678_9abc_def0u64;
        for _ in 0..2000 {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let codes: [u8; TILE] = core::array::from_fn(|k| ((state >> (3 * k)) & 7) as u8);
            let w = pack_row(
                (state >> 50) as u32,
                (state >> 53) as u32,
                &codes,
                (state >> 56) as u8,
            );
            for (p, &(kl, kh)) in PAIRS.iter().enumerate() {
                let (lo, hi) = lanes(magic_pair(w, p / 2, p % 2 == 1, [MASK_A, MASK_B]));
                let (bl, bh) = if p % 2 == 0 {
                    (64.0, 1024.0)
                } else {
                    (8.0, 128.0)
                };
                assert_eq!(
                    f16::from_bits(lo).to_f32(),
                    bl + row_code(w, kl as u32) as f32
                );
                assert_eq!(
                    f16::from_bits(hi).to_f32(),
                    bh + row_code(w, kh as u32) as f32
                );
            }
        }
    }

    #[test]
    fn scaled_pairs_are_the_rounded_products() {
        let codes: [u8; TILE] = core::array::from_fn(|k| (k as u8 * 3 + 1) % 8);
        let w = pack_row(3, 5, &codes, 0x5a);
        for s in [1.0f32, -0.013_37, 63.0, -63.0, 6.1e-5, 1e-7, 0.3333, 0.0] {
            for z in [0.0f32, 3.4, -2.7, 7.49, 900.0] {
                let c = row_consts(s, z);
                let sh = f16::from_bits(c.s2 as u16).to_f32();
                assert_eq!(c.s2 >> 16, c.s2 & 0xffff);
                assert_eq!(sh, f16::from_f32(s).to_f32());
                let got = scaled_pairs(w, &c, [MASK_A, MASK_B]);
                for (p, &(kl, kh)) in PAIRS.iter().enumerate() {
                    let want = |k: usize| f16::from_f32(sh * codes[k] as f32).to_f32();
                    let (lo, hi) = lanes(got[p]);
                    assert_eq!(
                        (f16::from_bits(lo).to_f32(), f16::from_bits(hi).to_f32()),
                        (want(kl), want(kh)),
                        "s {s}, z {z}, pair {p}"
                    );
                }
                let nz = -f64::from(z) * f64::from(sh);
                assert_eq!(c.nz_hi >> 16, c.nz_hi & 0xffff);
                assert_eq!(c.nz_lo >> 16, c.nz_lo & 0xffff);
                let err = (bf(c.nz_hi) + bf(c.nz_lo) - nz).abs();
                // 2^-16 relative (bf16 has the range of f32: no floor for tiny terms).
                assert!(
                    err <= nz.abs() * 1.53e-5,
                    "s {s}, z {z}: zero term off by {err}"
                );
            }
        }
    }

    /// The kernel's fp16 arithmetic for one tile row, emulated: the products and the zero
    /// term summed exactly, as the tensor cores do (up to their fp32 accumulation).
    fn emulated_row_dot(w: u64, s: f32, z: f32, x: &[f16; TILE]) -> f64 {
        let c = row_consts(s, z);
        let pairs = scaled_pairs(w, &c, [MASK_A, MASK_B]);
        let h = |b: u16| f64::from(f16::from_bits(b).to_f32());
        let mut acc = 0.0;
        for (p, &(kl, kh)) in PAIRS.iter().enumerate() {
            let (lo, hi) = lanes(pairs[p]);
            acc += h(lo) * f64::from(x[kl].to_f32()) + h(hi) * f64::from(x[kh].to_f32());
        }
        // The zero MMA: lane (g, t)'s A slots (hi, hi, lo, lo) times its B slots (sum_hi,
        // sum_lo, sum_hi, sum_lo), each product exact.
        let a = zero_fragment(&c, &c);
        let sum = tile_sum_pair(&half2_words(x));
        let (shi, slo) = (bf(sum & 0xffff), bf(sum >> 16));
        acc + bf(a[0]) * shi + bf(a[0] >> 16) * slo + bf(a[2]) * shi + bf(a[2] >> 16) * slo
    }

    #[test]
    fn the_fp16_weights_keep_products_within_the_tested_tolerance() {
        // Relative error of many rows' dot products against the fp64 product with the fp32
        // weights s (q - z): the budget the GPU test's 1e-3 leaves after the fp16 output.
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            state
        };
        let (mut d2, mut n2) = (0.0f64, 0.0f64);
        for _ in 0..4000 {
            let r = next();
            let codes: [u8; TILE] = core::array::from_fn(|k| ((r >> (3 * k)) & 7) as u8);
            let w = pack_row(0, 0, &codes, 0);
            let s = 0.001 + (next() % 1000) as f32 * 1e-4;
            let z = (next() % 7000) as f32 / 1000.0;
            let x: [f16; TILE] =
                core::array::from_fn(|_| f16::from_f32(((next() % 2001) as f32 - 1000.0) / 1000.0));
            let exact: f64 = (0..TILE)
                .map(|k| f64::from(s * (codes[k] as f32 - z)) * f64::from(x[k].to_f32()))
                .sum();
            let got = emulated_row_dot(w, s, z, &x);
            d2 += (got - exact) * (got - exact);
            n2 += exact * exact;
        }
        let rel = (d2 / n2).sqrt();
        assert!(rel < 4e-4, "relative error {rel}");
    }

    #[test]
    fn prescale_is_one_for_ordinary_scales_and_a_power_of_two_otherwise() {
        assert_eq!(prescale(0.5, 3.0), (1.0, 1.0));
        assert_eq!(prescale(63.0, 65000.0), (1.0, 1.0));
        let (pre, post) = prescale(1000.0, 10.0);
        assert_eq!((pre, post), (1.0 / 16.0, 16.0));
        assert!(1000.0 * pre <= MAX_SCALE);
        let (pre, _) = prescale(1.0, 1e6);
        assert!(1e6 * pre <= MAX_ZERO_TERM && 1e6 * pre * 2.0 > MAX_ZERO_TERM);
    }
}

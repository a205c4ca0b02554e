//! How the kernel feeds SpQR tiles to the tensor cores (`mma.m16n8k16`, fp16 in, fp32
//! accumulation): plain functions, shared by the kernel and the host tests.
//!
//! A warp multiplies 16 rows (one tile row) by 64 columns (4 tiles) per step, with lane
//! `(g, t) = (lane / 4, lane % 4)` holding rows `2g` and `2g + 1` of tile `t`: one 16-byte load
//! of two `u64` words. The MMA's row `g` is row `2g`, its row `g + 8` row `2g + 1`; its 16
//! k-slots are 4 columns of each of the 4 tiles, lane `t`'s slots always of tile `t`.
//!
//! **Codes as they are.** The A operand holds the raw codes: a 32-bit window of the word,
//! `w >> WINDOW_SHIFTS[i]`, masked with [`MASK_A`] or [`MASK_B`], is a `half2` whose halves are
//! two codes `q` sitting in the mantissa of an fp16 with a zero exponent, i.e. the exact
//! subnormals `q 2^(pos - 24)` (`pos` the code's bit in its half, [`POS_A`], [`POS_B`]). One
//! `LOP3` per two weights, no scaling: the pairs are [`PAIRS`].
//!
//! **Routing tiles to lanes through the B operand.** Scales differ per tile, so the four
//! tiles of a step must not be summed by the MMA. Column `n` of B carries the inputs of tile
//! `n / 2` only (zeros in the other tiles' k-slots) for vector slot `n % 2`: then `D(r, n)` is
//! the dot product of row `r` with tile `n / 2` alone, and the fragment of lane `(g, t)`, `D(g,
//! 2t..2t+2)` and `D(g + 8, 2t..2t+2)`, is exactly its own rows and its own tile, for two
//! vectors. Lane `(g, t)` supplies B column `g`, so it loads the tile's inputs when
//! `g / 2 == t` and zeros otherwise. The scale and zero are applied afterwards in fp32: the
//! weights are `s (q - z)` with `s` and `z` computed in fp32 as the CPU does, so the only
//! rounding left is fp32 accumulation.
//!
//! **Inputs.** Each input is multiplied by `2^(E - pos)` for its slot's code position (an
//! exact power-of-two scaling in fp16: `E` puts the largest input of a staging round just
//! below 2^15, so no scaled input overflows and only inputs 2^22 times smaller than the
//! largest lose bits). Then `D = 2^(E - 24) sum q x`, and [`result_scale`] undoes it.
//! The input sums of the zero term come from the same B fragments with an A of ones
//! ([`ONES_FRAGMENT`]: `2^(pos - 24)`, matching each slot's position).

use cmv_device::{f32_to_f16, fma_f32, half2_to_f32x2, hmax2, hmul2, prmt};

use crate::layout::{row_qs, row_qz};

/// The pairs of codes `(k_low, k_high)` of a tile row in the order the kernel uses them: pair
/// `2m` and `2m + 1` feed MMA `m` of a step.
pub const PAIRS: [(usize, usize); 8] = [
    (0, 4),
    (1, 5),
    (2, 6),
    (3, 7),
    (8, 12),
    (9, 13),
    (10, 14),
    (11, 15),
];

/// Right shifts of the `u64` word giving the window of pairs `2i` and `2i + 1`.
pub const WINDOW_SHIFTS: [u32; 4] = [2, 8, 26, 32];
/// Bits of the even pair in its window: the low code at bits 4-6, the high one at 16-18.
pub const MASK_A: u32 = 0x0007_0070;
/// Bits of the odd pair: 7-9 and 19-21.
pub const MASK_B: u32 = 0x0038_0380;
/// Bit positions (in their fp16 halves) of the low and high codes of an even pair.
pub const POS_A: (u32, u32) = (4, 0);
/// Bit positions of the low and high codes of an odd pair.
pub const POS_B: (u32, u32) = (7, 3);
/// The even pair with both codes 1: `2^(pos - 24)` in each half.
pub const ONES_A: u32 = (1 << POS_A.0) | (1 << (16 + POS_A.1));
/// The odd pair with both codes 1.
pub const ONES_B: u32 = (1 << POS_B.0) | (1 << (16 + POS_B.1));
/// The A fragment of every MMA of the input sums: all codes 1.
pub const ONES_FRAGMENT: [u32; 4] = [ONES_A, ONES_A, ONES_B, ONES_B];
/// Largest `E` ([`input_exponent`]): `2^(E - pos)` must be a normal fp16.
pub const MAX_EXPONENT: i32 = 15;

/// Pair `p` of word `w`: `half2 (q_low 2^(pos_low - 24), q_high 2^(pos_high - 24))`, exact.
#[inline(always)]
pub fn code_pair(w: u64, p: usize) -> u32 {
    let win = (w >> WINDOW_SHIFTS[p / 2]) as u32;
    win & if p.is_multiple_of(2) { MASK_A } else { MASK_B }
}

/// The 8 code pairs of a tile row, in the [`PAIRS`] order.
#[inline(always)]
pub fn code_pairs(w: u64) -> [u32; 8] {
    core::array::from_fn(|p| code_pair(w, p))
}

/// The A fragment of MMA `m` for a lane holding rows `2g` (pairs `p0`) and `2g + 1` (`p1`).
#[inline(always)]
pub fn a_fragment(p0: &[u32; 8], p1: &[u32; 8], m: usize) -> [u32; 4] {
    [p0[2 * m], p1[2 * m], p0[2 * m + 1], p1[2 * m + 1]]
}

/// The 16 inputs of a tile as the 8 `half2` pairs of [`PAIRS`], from their natural order (`r[j]`
/// holds inputs `2j` and `2j + 1`): one byte permute each.
#[inline(always)]
pub fn input_pairs(r: &[u32; 8]) -> [u32; 8] {
    // Pair (j, j + 4) of each half-tile: the low (even j) or high (odd j) halves of words
    // j / 2 and j / 2 + 2 of that half.
    core::array::from_fn(|p| {
        let base = if p < 4 { 0 } else { 4 };
        let w = base + (p % 4) / 2;
        let sel = if p % 2 == 0 { 0x5410 } else { 0x7632 };
        prmt(r[w], r[w + 2], sel)
    })
}

/// The largest magnitude among 16 fp16 inputs (8 `half2` words), as fp16 bits (non-negative
/// fp16 values order as their bits). `acc` is the running maximum of earlier calls.
#[inline(always)]
pub fn max_abs_bits(r: &[u32; 8], acc: u32) -> u32 {
    let mut m = 0u32;
    for &v in r {
        m = hmax2(m, v & 0x7fff_7fff);
    }
    acc.max(m & 0xffff).max(m >> 16)
}

/// The exponent `E` for inputs whose largest magnitude has fp16 bits `max_bits`: the largest
/// times `2^E` lies in `[2^14, 2^15)` (at most [`MAX_EXPONENT`], for tiny or zero inputs).
#[inline(always)]
pub fn input_exponent(max_bits: u32) -> i32 {
    let e = 29 - (max_bits >> 10) as i32;
    if e > MAX_EXPONENT { MAX_EXPONENT } else { e }
}

/// The `half2` factors `2^(E - pos)` of the even and of the odd input pairs.
#[inline(always)]
pub fn input_factors(e: i32) -> [u32; 2] {
    let f = |lo: u32, hi: u32| {
        (((e - lo as i32 + 15) as u32) << 10) | (((e - hi as i32 + 15) as u32) << 26)
    };
    [f(POS_A.0, POS_A.1), f(POS_B.0, POS_B.1)]
}

/// The 8 input pairs of a tile as the B operand wants them: [`input_pairs`] times
/// [`input_factors`] (exact unless a product is subnormal).
#[inline(always)]
pub fn staged_pairs(r: &[u32; 8], factors: [u32; 2]) -> [u32; 8] {
    let p = input_pairs(r);
    core::array::from_fn(|i| hmul2(p[i], factors[i % 2]))
}

/// `2^(24 - E)`: what the MMA results of a round with exponent `E` are multiplied by.
#[inline(always)]
pub fn result_scale(e: i32) -> f32 {
    f32::from_bits(((127 + 24 - e) as u32) << 23)
}

/// A tile's fp32 constants: `s = a qs + b` and `-z = c qz + d` for each of its rows.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TileConsts {
    /// `ss` times the round's result scale.
    pub a: f32,
    /// `-a sz`.
    pub b: f32,
    /// `-zs`.
    pub c: f32,
    /// `zs zz`.
    pub d: f32,
}

/// The constants of a tile from its statistics, `lo = (ss, sz)` and `hi = (zs, zz)` as
/// `half2` words, and the round's [`result_scale`] `f`.
#[inline(always)]
pub fn tile_consts(lo: u32, hi: u32, f: f32) -> TileConsts {
    let (ss, sz) = half2_to_f32x2(lo);
    let (zs, zz) = half2_to_f32x2(hi);
    let a = ss * f;
    TileConsts {
        a,
        b: -(a * sz),
        c: -zs,
        d: zs * zz,
    }
}

/// A row's scale (times the result scale) and negated zero: `(s f, -z)`.
#[inline(always)]
pub fn row_scale_zero(w: u64, c: &TileConsts) -> (f32, f32) {
    (
        fma_f32(c.a, row_qs(w) as f32, c.b),
        fma_f32(c.c, row_qz(w) as f32, c.d),
    )
}

/// Adds a row's part of one tile to its accumulator: `s f (d - z ds)`, with `d` the MMA
/// result of the codes and `ds` that of the ones.
#[inline(always)]
pub fn accumulate(acc: f32, s: f32, nz: f32, d: f32, ds: f32) -> f32 {
    fma_f32(s, fma_f32(nz, ds, d), acc)
}

/// The fp16 bits of `2^e` (for tests and the host's checks).
pub fn pow2_half(e: i32) -> u16 {
    f32_to_f16(f32::from_bits(((127 + e) as u32) << 23))
}

#[cfg(all(test, not(target_arch = "nvptx64")))]
mod tests {
    use super::*;
    use crate::layout::{SecondOrder, TILE, first_order, pack_row, row_code};
    use half::f16;

    fn lanes(v: u32) -> (u16, u16) {
        (v as u16, (v >> 16) as u16)
    }

    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 = self
                .0
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            self.0 >> 11
        }
        fn unit(&mut self) -> f64 {
            (self.next() % 2_000_001) as f64 / 1e6 - 1.0
        }
    }

    #[test]
    fn pairs_cover_every_code_once() {
        let mut seen = [0; TILE];
        for (a, b) in PAIRS {
            seen[a] += 1;
            seen[b] += 1;
        }
        assert_eq!(seen, [1; TILE]);
    }

    #[test]
    fn code_pairs_are_the_exact_subnormal_codes() {
        let mut rng = Rng(0x1234_5678_9abc_def0);
        for _ in 0..2000 {
            let st = rng.next();
            let codes: [u8; TILE] = core::array::from_fn(|k| ((st >> (3 * k)) & 7) as u8);
            let w = pack_row(
                rng.next() as u32,
                rng.next() as u32,
                &codes,
                rng.next() as u8,
            );
            for (p, &(kl, kh)) in PAIRS.iter().enumerate() {
                let (lo, hi) = lanes(code_pair(w, p));
                let (pl, ph) = if p % 2 == 0 { POS_A } else { POS_B };
                let val = |bits: u16, pos: u32| {
                    f64::from(f16::from_bits(bits).to_f32()) * 2f64.powi(24 - pos as i32)
                };
                assert_eq!(val(lo, pl), f64::from(row_code(w, kl as u32)));
                assert_eq!(val(hi, ph), f64::from(row_code(w, kh as u32)));
                // Ones have the same positions.
                let ones = if p % 2 == 0 { ONES_A } else { ONES_B };
                let (ol, oh) = lanes(ones);
                assert_eq!((val(ol, pl), val(oh, ph)), (1.0, 1.0));
            }
        }
    }

    #[test]
    fn input_pairs_follow_the_code_pairs() {
        let x: [u16; TILE] = core::array::from_fn(|k| 0x3c00 + k as u16);
        let r: [u32; 8] =
            core::array::from_fn(|j| u32::from(x[2 * j]) | u32::from(x[2 * j + 1]) << 16);
        let got = input_pairs(&r);
        for (p, &(kl, kh)) in PAIRS.iter().enumerate() {
            assert_eq!(lanes(got[p]), (x[kl], x[kh]), "pair {p}");
        }
    }

    #[test]
    fn input_exponent_keeps_scaled_inputs_finite_and_large() {
        for bits in (0u32..0x7c00)
            .step_by(7)
            .chain([0, 1, 0x3ff, 0x400, 0x7bff])
        {
            let e = input_exponent(bits);
            assert!((-1..=MAX_EXPONENT).contains(&e), "bits {bits:#x}: E {e}");
            let m = f64::from(f16::from_bits(bits as u16).to_f32()) * 2f64.powi(e);
            assert!(m < 32768.0, "bits {bits:#x}");
            if e < MAX_EXPONENT {
                assert!(m >= 16384.0, "bits {bits:#x}");
            }
            for f in input_factors(e) {
                let (lo, hi) = lanes(f);
                for h in [lo, hi] {
                    let v = f16::from_bits(h);
                    assert!(v.is_normal(), "E {e}: factor {h:#x}");
                }
            }
        }
        assert_eq!(
            input_factors(0)[0],
            u32::from(pow2_half(-4)) | u32::from(pow2_half(0)) << 16
        );
        assert_eq!(result_scale(24), 1.0);
        assert_eq!(result_scale(-1), 2f32.powi(25));
    }

    #[test]
    fn max_abs_bits_is_the_largest_magnitude() {
        let mut rng = Rng(7);
        for _ in 0..500 {
            let x: [u16; TILE] = core::array::from_fn(|_| {
                f16::from_f64(rng.unit() * 2f64.powi((rng.next() % 30) as i32 - 15)).to_bits()
            });
            let r: [u32; 8] =
                core::array::from_fn(|j| u32::from(x[2 * j]) | u32::from(x[2 * j + 1]) << 16);
            let want = x.iter().map(|&h| u32::from(h & 0x7fff)).max().unwrap_or(0);
            assert_eq!(max_abs_bits(&r, 0), want);
            assert_eq!(max_abs_bits(&r, 0x7bff), 0x7bff);
        }
    }

    /// `mma.m16n8k16` on the host, from the 32 lanes' fragments (the PTX ISA's layouts),
    /// exact sums of the exact products (the tensor cores add in fp32; the tests' tolerance
    /// covers that).
    fn mma(a: &[[u32; 4]; 32], b: &[[u32; 2]; 32]) -> [[f64; 4]; 32] {
        let h = |v: u32, hi: bool| {
            f64::from(f16::from_bits((v >> if hi { 16 } else { 0 }) as u16).to_f32())
        };
        let (mut am, mut bm) = ([[0.0f64; 16]; 16], [[0.0f64; 8]; 16]);
        for (lane, (al, bl)) in a.iter().zip(b).enumerate() {
            let (g, t) = (lane / 4, lane % 4);
            for (i, &v) in al.iter().enumerate() {
                let row = g + 8 * (i % 2);
                let col = 2 * t + 8 * (i / 2);
                am[row][col] = h(v, false);
                am[row][col + 1] = h(v, true);
            }
            for (i, &v) in bl.iter().enumerate() {
                let k = 2 * t + 8 * i;
                bm[k][g] = h(v, false);
                bm[k + 1][g] = h(v, true);
            }
        }
        core::array::from_fn(|lane| {
            let (g, t) = (lane / 4, lane % 4);
            core::array::from_fn(|i| {
                let (r, n) = (g + 8 * (i / 2), 2 * t + i % 2);
                (0..16).map(|k| am[r][k] * bm[k][n]).sum()
            })
        })
    }

    #[test]
    fn a_warp_step_gives_each_lane_its_rows_and_tile() {
        // Four random tiles (statistics, codes), two random vectors: the lanes' fragments
        // built as the kernel builds them, the MMA emulated, the result of each lane compared
        // with the fp64 product of its two rows of its tile with both vectors.
        let mut rng = Rng(0x5eed);
        for case in 0..200 {
            let tiles: [[u64; TILE]; 4] = core::array::from_fn(|_| {
                let h = |v: f64| f16::from_f64(v).to_bits();
                let so = SecondOrder {
                    ss: h(rng.unit().abs() * 0.01 + 1e-4),
                    sz: h(rng.unit() * 4.0 + 3.5),
                    zs: h(rng.unit().abs() + 0.05),
                    zz: h(rng.unit() * 3.0),
                };
                core::array::from_fn(|r| {
                    let st = rng.next();
                    let codes: [u8; TILE] = core::array::from_fn(|k| ((st >> (3 * k)) & 7) as u8);
                    pack_row(
                        rng.next() as u32,
                        rng.next() as u32,
                        &codes,
                        so.byte_for_row(r),
                    )
                })
            });
            // Vector magnitudes far apart in some cases (the round's exponent follows the
            // largest).
            let mag = [1.0, 2f64.powi((case % 9) * 3 - 12)];
            let x: [[[u16; TILE]; 4]; 2] = core::array::from_fn(|v| {
                core::array::from_fn(|_| {
                    core::array::from_fn(|_| f16::from_f64(rng.unit() * mag[v]).to_bits())
                })
            });
            let words = |v: usize, t: usize| -> [u32; 8] {
                core::array::from_fn(|j| {
                    u32::from(x[v][t][2 * j]) | u32::from(x[v][t][2 * j + 1]) << 16
                })
            };
            let mut maxb = 0;
            for v in 0..2 {
                for t in 0..4 {
                    maxb = max_abs_bits(&words(v, t), maxb);
                }
            }
            let e = input_exponent(maxb);
            let (fac, f) = (input_factors(e), result_scale(e));
            let staged: [[[u32; 8]; 4]; 2] =
                core::array::from_fn(|v| core::array::from_fn(|t| staged_pairs(&words(v, t), fac)));
            let (mut d, mut ds) = ([[0.0f64; 4]; 32], [[0.0f64; 4]; 32]);
            for m in 0..4 {
                let a: [[u32; 4]; 32] = core::array::from_fn(|lane| {
                    let (g, t) = (lane / 4, lane % 4);
                    a_fragment(
                        &code_pairs(tiles[t][2 * g]),
                        &code_pairs(tiles[t][2 * g + 1]),
                        m,
                    )
                });
                let b: [[u32; 2]; 32] = core::array::from_fn(|lane| {
                    let (g, t) = (lane / 4, lane % 4);
                    if g / 2 == t {
                        let s = &staged[g % 2][t];
                        [s[2 * m], s[2 * m + 1]]
                    } else {
                        [0, 0]
                    }
                });
                let (dm, sm) = (mma(&a, &b), mma(&[ONES_FRAGMENT; 32], &b));
                for lane in 0..32 {
                    for i in 0..4 {
                        d[lane][i] += dm[lane][i];
                        ds[lane][i] += sm[lane][i];
                    }
                }
            }
            for lane in 0..32 {
                let (g, t) = (lane / 4, lane % 4);
                let bytes: [u8; TILE] =
                    core::array::from_fn(|r| crate::layout::row_stat_byte(tiles[t][r]));
                let so = SecondOrder::from_row_bytes(&bytes);
                let v = so.to_u64();
                let c = tile_consts(v as u32, (v >> 32) as u32, f);
                for i in 0..4 {
                    let (row, vec) = (2 * g + i / 2, i % 2);
                    let w = tiles[t][row];
                    let (s, nz) = row_scale_zero(w, &c);
                    let got = f64::from(accumulate(
                        0.0,
                        s,
                        nz,
                        d[lane][i] as f32,
                        ds[lane][i] as f32,
                    ));
                    let (s32, z32) = first_order(row_qs(w), row_qz(w), so);
                    let terms: Vec<f64> = (0..TILE)
                        .map(|k| {
                            f64::from(s32)
                                * (f64::from(row_code(w, k as u32)) - f64::from(z32))
                                * f64::from(f16::from_bits(x[vec][t][k]).to_f32())
                        })
                        .collect();
                    let want: f64 = terms.iter().sum();
                    let scale: f64 = terms.iter().map(|v| v.abs()).sum::<f64>()
                        + f64::from(s32.abs() * z32.abs()) * mag[vec] * 16.0;
                    assert!(
                        (got - want).abs() <= 1e-6 * scale + 1e-30,
                        "case {case} lane {lane} i {i}: {got} vs {want} (scale {scale})"
                    );
                }
            }
        }
    }
}

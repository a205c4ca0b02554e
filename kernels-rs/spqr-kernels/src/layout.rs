//! Bit layouts of `docs/SPQR.md`: the `u64` per tile row, the second-order statistics, the
//! outlier words, and the dequantization formula.

use cmv_device::f16_to_f32;

/// Tile side: beta1 = beta2 = 16.
pub const TILE: usize = 16;
/// Largest code of a 3-bit value.
pub const MAX_CODE: u32 = 7;
/// Bit where the 16 weight codes start.
pub const CODES_SHIFT: u32 = 6;
/// Bit where the statistics byte starts.
pub const STAT_SHIFT: u32 = 54;

/// Packs one tile row: first-order scale and zero codes, 16 weight codes (each 0..=7) and one
/// byte of the tile's second-order statistics. Codes above 7 are masked to 3 bits.
pub const fn pack_row(qs: u32, qz: u32, codes: &[u8; TILE], stat_byte: u8) -> u64 {
    let mut w = (qs as u64 & 7) | ((qz as u64 & 7) << 3);
    let mut k = 0;
    while k < TILE {
        w |= (codes[k] as u64 & 7) << (CODES_SHIFT + 3 * k as u32);
        k += 1;
    }
    w | ((stat_byte as u64) << STAT_SHIFT)
}

/// The first-order scale code of a tile row.
#[inline(always)]
pub const fn row_qs(w: u64) -> u32 {
    (w & 7) as u32
}

/// The first-order zero code of a tile row.
#[inline(always)]
pub const fn row_qz(w: u64) -> u32 {
    ((w >> 3) & 7) as u32
}

/// Weight code `k` (0..16) of a tile row.
#[inline(always)]
pub const fn row_code(w: u64, k: u32) -> u32 {
    ((w >> (CODES_SHIFT + 3 * k)) & 7) as u32
}

/// The statistics byte of a tile row.
#[inline(always)]
pub const fn row_stat_byte(w: u64) -> u8 {
    (w >> STAT_SHIFT) as u8
}

/// True when the two unused top bits are zero, as a valid row has them.
#[inline(always)]
pub const fn row_padding_ok(w: u64) -> bool {
    w >> 62 == 0
}

/// The tile's second-order statistics as fp16 bits: scale of the scales, zero of the scales,
/// scale of the zeros, zero of the zeros.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct SecondOrder {
    /// `ss` (fp16 bits).
    pub ss: u16,
    /// `sz` (fp16 bits).
    pub sz: u16,
    /// `zs` (fp16 bits).
    pub zs: u16,
    /// `zz` (fp16 bits).
    pub zz: u16,
}

impl SecondOrder {
    /// The 64 bits: `(ss, sz)` as a half2 (`ss` low) in bytes 0..4, `(zs, zz)` in bytes 4..8.
    pub const fn to_u64(self) -> u64 {
        (self.ss as u64)
            | ((self.sz as u64) << 16)
            | ((self.zs as u64) << 32)
            | ((self.zz as u64) << 48)
    }

    /// Inverse of [`SecondOrder::to_u64`].
    pub const fn from_u64(v: u64) -> Self {
        SecondOrder {
            ss: v as u16,
            sz: (v >> 16) as u16,
            zs: (v >> 32) as u16,
            zz: (v >> 48) as u16,
        }
    }

    /// The byte stored in tile row `r`: byte `r / 2` of the 64 bits (rows `2f` and `2f + 1`
    /// hold byte `f`).
    pub const fn byte_for_row(self, r: usize) -> u8 {
        (self.to_u64() >> (8 * (r / 2))) as u8
    }

    /// Rebuilds the statistics from the 16 rows' bytes (the host view of the three
    /// xor-shuffles: each row contributes its byte at position `r / 2`).
    pub fn from_row_bytes(bytes: &[u8; TILE]) -> Self {
        let mut v = 0u64;
        for (r, &b) in bytes.iter().enumerate() {
            v |= u64::from(b) << (8 * (r / 2));
        }
        Self::from_u64(v)
    }
}

/// First-order scale and zero of a tile row from its codes and the tile's statistics, in
/// fp32: `s = ss (qs - sz)`, `z = zs (qz - zz)`.
#[inline(always)]
pub fn first_order(qs: u32, qz: u32, so: SecondOrder) -> (f32, f32) {
    let (ss, sz, zs, zz) = (
        f16_to_f32(so.ss),
        f16_to_f32(so.sz),
        f16_to_f32(so.zs),
        f16_to_f32(so.zz),
    );
    (ss * (qs as f32 - sz), zs * (qz as f32 - zz))
}

/// The dequantized weight of code `q` in a group with scale `s` and zero `z`: `s (q - z)`.
#[inline(always)]
pub fn dequantize(q: u32, s: f32, z: f32) -> f32 {
    s * (q as f32 - z)
}

/// An outlier word: column in the low 16 bits, fp16 value in the high 16.
#[inline(always)]
pub const fn outlier_word(col: u16, value_bits: u16) -> u32 {
    col as u32 | ((value_bits as u32) << 16)
}

/// The column of an outlier word.
#[inline(always)]
pub const fn outlier_col(w: u32) -> u32 {
    w & 0xffff
}

/// The fp16 value bits of an outlier word.
#[inline(always)]
pub const fn outlier_value(w: u32) -> u16 {
    (w >> 16) as u16
}

/// Tiles per kernel step: the kernels' warps take a tile row 4 tiles (64 words) at a time.
pub const STEP_TILES: usize = 4;
/// Words of one step.
pub const STEP_WORDS: usize = STEP_TILES * TILE;

/// Words of one tile row on the device: the tile row's `padded_cols` words (one per tile row
/// of each tile), rounded up to whole steps with zero words.
pub const fn device_band_words(padded_cols: usize) -> usize {
    padded_cols.div_ceil(STEP_WORDS) * STEP_WORDS
}

/// Where the device copy keeps word `r` (0..16) of tile `tile` of a tile row, counted from the
/// tile row's start: within each step of 4 tiles, lane `l = 4 g + t` of a warp finds rows
/// `2g` and `2g + 1` of tile `t` (the rows it computes) as the 16 bytes at `16 l`, so a
/// warp's loads of a step are lane-contiguous (one coalesced 512-byte read, also for
/// `cp.async`, and conflict-free 16-byte shared-memory reads).
pub const fn device_word(tile: usize, r: usize) -> usize {
    let (step, t) = (tile / STEP_TILES, tile % STEP_TILES);
    step * STEP_WORDS + 2 * (STEP_TILES * (r / 2) + t) + r % 2
}

/// The byte of the tile's statistics (`SecondOrder::to_u64`) that row `r` holds on the
/// device: rows `2g` and `2g + 1` hold bytes `2 (g % 4)` and `2 (g % 4) + 1` (the container's
/// rows both hold byte `g`). The lane holding rows `2g, 2g + 1` then has a 16-bit quarter
/// of the statistics, and two xor-shuffles gather the rest (`stat_quarter`, `stat_half`,
/// `stat_words`).
pub const fn device_stat_byte(r: usize) -> usize {
    2 * ((r / 2) % 4) + r % 2
}

/// A tile's 16 rows with the statistics bytes of [`device_stat_byte`] (the codes, scales and
/// zeros unchanged).
pub fn device_tile_rows(tile: &[u64; TILE]) -> [u64; TILE] {
    let so =
        SecondOrder::from_row_bytes(&core::array::from_fn(|r| row_stat_byte(tile[r]))).to_u64();
    core::array::from_fn(|r| {
        let byte = (so >> (8 * device_stat_byte(r))) & 0xff;
        (tile[r] & !(0xff << STAT_SHIFT)) | (byte << STAT_SHIFT)
    })
}

/// The 16-bit quarter of the statistics a lane's two device rows hold (high words `hi0` of
/// row `2g` and `hi1` of row `2g + 1`): quarter `g % 4`, bytes `2 (g % 4)`, `2 (g % 4) + 1`.
/// Valid rows (`row_padding_ok`, which the container checks) have nothing above their
/// statistics byte, so no mask is needed above it.
#[inline(always)]
pub fn stat_quarter(hi0: u32, hi1: u32) -> u32 {
    const SHIFT: u32 = STAT_SHIFT - 32;
    (hi0 >> SHIFT) | ((hi1 >> (SHIFT - 8)) & 0xff00)
}

/// The 32-bit half of the statistics of lane `g` after one xor-shuffle by 4 (lane `g ^ 1`,
/// quarter `other`): quarters `g % 4` and `(g % 4) ^ 1` in order.
#[inline(always)]
pub fn stat_half(mine: u32, other: u32, g: u32) -> u32 {
    let sel = if g & 1 == 0 { 0x5410 } else { 0x1054 };
    cmv_device::prmt(mine, other, sel)
}

/// The statistics as `(ss, sz)` and `(zs, zz)` `half2` words of lane `g` after a second
/// xor-shuffle by 8 (lane `g ^ 2`, the other half `other`).
#[inline(always)]
pub fn stat_words(mine: u32, other: u32, g: u32) -> (u32, u32) {
    if g & 2 == 0 {
        (mine, other)
    } else {
        (other, mine)
    }
}

/// The device copy of a matrix's tile rows (`dense`: `bands` tile rows of `padded_cols` words
/// each, tile `j`'s row `r` at `16 j + r`): each tile row in [`device_word`] order, padded
/// to [`device_band_words`] with zero words (zero statistics make a padding tile's products
/// zero), its statistics bytes as [`device_tile_rows`] puts them. Host only.
#[cfg(not(target_arch = "nvptx64"))]
pub fn device_order(dense: &[u64], padded_cols: usize) -> Vec<u64> {
    let band_out = device_band_words(padded_cols);
    let bands = dense.len().checked_div(padded_cols).unwrap_or(0);
    let mut out = vec![0u64; bands * band_out];
    for (band, dst) in dense
        .chunks_exact(padded_cols.max(1))
        .zip(out.chunks_exact_mut(band_out.max(1)))
    {
        for (j, tile) in band.chunks_exact(TILE).enumerate() {
            let rows = device_tile_rows(&core::array::from_fn(|r| tile[r]));
            for (r, w) in rows.into_iter().enumerate() {
                dst[device_word(j, r)] = w;
            }
        }
    }
    out
}

#[cfg(all(test, not(target_arch = "nvptx64")))]
mod tests {
    use super::*;

    #[test]
    fn rows_pack_every_field() {
        let codes: [u8; 16] = core::array::from_fn(|k| (k as u8 * 5) % 8);
        let w = pack_row(5, 2, &codes, 0xa7);
        assert_eq!((row_qs(w), row_qz(w), row_stat_byte(w)), (5, 2, 0xa7));
        for k in 0..16 {
            assert_eq!(row_code(w, k), u32::from(codes[k as usize]));
        }
        assert!(row_padding_ok(w));
        assert!(!row_padding_ok(w | 1 << 63));
    }

    #[test]
    fn second_order_bytes_rebuild_the_statistics() {
        let so = SecondOrder {
            ss: 0x3c00,
            sz: 0x4100,
            zs: 0xbc00,
            zz: 0x1234,
        };
        assert_eq!(SecondOrder::from_u64(so.to_u64()), so);
        let bytes: [u8; 16] = core::array::from_fn(|r| so.byte_for_row(r));
        assert_eq!(bytes[4], bytes[5]);
        assert_eq!(SecondOrder::from_row_bytes(&bytes), so);
    }

    #[test]
    fn device_order_puts_each_lanes_rows_at_its_16_bytes() {
        // 2 tile rows of 5 tiles (80 words, padded to 2 steps = 128 words on the device).
        let padded_cols = 80;
        let dense: Vec<u64> = (0..2 * padded_cols as u64).map(|i| i + 1).collect();
        let dev = device_order(&dense, padded_cols);
        assert_eq!(device_band_words(padded_cols), 128);
        assert_eq!(dev.len(), 256);
        for b in 0..2 {
            let band = &dev[b * 128..(b + 1) * 128];
            for step in 0..2 {
                for lane in 0..32 {
                    let (g, t) = (lane / 4, lane % 4);
                    let tile = 4 * step + t;
                    let got = [band[64 * step + 2 * lane], band[64 * step + 2 * lane + 1]];
                    let want = if tile < 5 {
                        let at = b * padded_cols + 16 * tile;
                        let rows = device_tile_rows(&core::array::from_fn(|r| dense[at + r]));
                        [rows[2 * g], rows[2 * g + 1]]
                    } else {
                        [0, 0]
                    };
                    assert_eq!(got, want, "band {b} step {step} lane {lane}");
                }
            }
        }
        // Every word lands once (its codes, scales and zeros).
        let strip = |w: &u64| w & !(0xff << STAT_SHIFT);
        let mut seen: Vec<u64> = dev.iter().copied().filter(|&w| w != 0).collect();
        seen.sort_unstable_by_key(strip);
        assert_eq!(
            seen.iter().map(strip).collect::<Vec<_>>(),
            dense.iter().map(strip).collect::<Vec<_>>()
        );
    }

    #[test]
    fn two_shuffles_gather_the_statistics_from_the_device_rows() {
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for _ in 0..200 {
            let so = SecondOrder::from_u64(next());
            let tile: [u64; TILE] = core::array::from_fn(|r| {
                let codes: [u8; TILE] = core::array::from_fn(|_| (next() & 7) as u8);
                pack_row(next() as u32, next() as u32, &codes, so.byte_for_row(r))
            });
            let dev = device_tile_rows(&tile);
            for r in 0..TILE {
                assert_eq!(
                    dev[r] & !(0xff << STAT_SHIFT),
                    tile[r] & !(0xff << STAT_SHIFT)
                );
                assert!(row_padding_ok(dev[r]));
            }
            // The 8 lanes of the tile (g = 0..7), the shuffles emulated.
            let quarter: [u32; 8] = core::array::from_fn(|g| {
                stat_quarter((dev[2 * g] >> 32) as u32, (dev[2 * g + 1] >> 32) as u32)
            });
            let half: [u32; 8] =
                core::array::from_fn(|g| stat_half(quarter[g], quarter[g ^ 1], g as u32));
            for g in 0..8 {
                let (lo, hi) = stat_words(half[g], half[g ^ 2], g as u32);
                assert_eq!(
                    u64::from(lo) | u64::from(hi) << 32,
                    so.to_u64(),
                    "lane g = {g}"
                );
            }
        }
    }

    #[test]
    fn outlier_words_split() {
        let w = outlier_word(65535, 0xc123);
        assert_eq!((outlier_col(w), outlier_value(w)), (65535, 0xc123));
    }
}

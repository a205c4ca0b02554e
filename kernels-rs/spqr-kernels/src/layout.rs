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

/// The device copy of a matrix's tile rows (`dense`: `bands` tile rows of `padded_cols` words
/// each, tile `j`'s row `r` at `16 j + r`): each tile row in [`device_word`] order, padded
/// to [`device_band_words`] with zero words (zero statistics make a padding tile's products
/// zero). Host only.
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
            for (r, &w) in tile.iter().enumerate() {
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
                        let at = b * padded_cols + 16 * tile + 2 * g;
                        [dense[at], dense[at + 1]]
                    } else {
                        [0, 0]
                    };
                    assert_eq!(got, want, "band {b} step {step} lane {lane}");
                }
            }
        }
        // Every word lands once.
        let mut seen: Vec<u64> = dev.iter().copied().filter(|&w| w != 0).collect();
        seen.sort_unstable();
        assert_eq!(seen, dense);
    }

    #[test]
    fn outlier_words_split() {
        let w = outlier_word(65535, 0xc123);
        assert_eq!((outlier_col(w), outlier_value(w)), (65535, 0xc123));
    }
}

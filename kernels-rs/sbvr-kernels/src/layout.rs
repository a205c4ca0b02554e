//! The SBVR bit layouts and the exact arithmetic the kernels perform, shared with the host.
//!
//! # Weights
//! A row is cut into groups of [`GROUP`] = 128 columns (the last one padded with zero bits).
//! A group of a row is `sum_j c_j b_j` over `n` ([`MIN_BITS`]..=[`MAX_BITS`]) bitvectors
//! `b_j` of 128 bits and the `n` fp16 coefficients `c` of one entry of the coefficient cache,
//! chosen by a per-(row, group) index.
//!
//! The bitvectors are stored in the order the binary `mma.m16n8k128` reads its `A` fragment,
//! so that each lane loads its fragments with one coalesced 16-byte load per bitvector for two
//! groups at a time. Rows are cut into tiles of [`TILE_ROWS`] = 16 (the last padded with zero
//! rows), groups into pairs (a last odd group gets a zero partner). For tile `T`, pair `P`,
//! bitvector `j` and lane `l`, the two `u64`s at `u64` index
//! `((((T * pairs + P) * n + j) * 32 + l) * 2 + h)`, `h` = 0, 1 the group of the pair, hold:
//! * low 32 bits: row `16 T + l / 4`, columns `128 g + 32 (l % 4) .. + 32` (bit `i` = column
//!   `+ i`), `g = 2 P + h`;
//! * high 32 bits: the same for row `16 T + l / 4 + 8`.
//!
//! The coefficient index of (row, group) is entry `((T * pairs + P) * 16 + r) * 2 + h` of the
//! index array (`r` = row within the tile), `u8` when the cache has at most 256 entries,
//! `u16` otherwise. On the device every cache entry takes [`COEF_STRIDE`] = 8 halves (16
//! bytes, one load), zero past `n`.
//!
//! # Activations
//! Each input vector is quantized per group of 128 to int8 ([`quantize_group`]) and split into
//! [`PLANES`] = 8 bit-planes (two's complement: plane 7 weighs -128, [`PIVOTS`]). For vector
//! `v` and (padded) group `g`, the 32 words at `((v * padded_groups + g) * 8 + a) * 4 + t` are
//! plane `a`, words `t` = 0..4 (bit `i` of word `t` = column `32 t + i` of the group): lane
//! `l` of a warp loads word `l`, which is exactly its `B` fragment (column `a = l / 4`, bits
//! `32 (l % 4) ..`). One f32 scale per (vector, group) at `v * padded_groups + g`.
//!
//! # Activations for the int8 way
//! The int8 GEMV ([`crate::Way::Int8`]) takes the quantized group as 128 bytes instead of
//! planes (the same buffer size, [`Geometry::plane_words`]): vector `v`, group `g` at byte
//! `(v * padded_groups + g) * 128`, column `k` of the group at [`q8_offset`]`(k)`. The order is
//! the one in which the bitvectors, expanded to bytes by [`expand`], meet the `B` fragments
//! of `mma.m16n8k32` (see [`q8_offset`]), so a lane loads its `B` fragments of a group's four
//! `k32` steps with two 16-byte loads.
//!
//! # Arithmetic
//! `y[v][r] = sum_g s_g(v) * sum_j c_j(r, g) * P_j(r, g, v)`, with the exact integer
//! `P_j = sum_a PIVOTS[a] * popc(b_j AND plane_a) = sum_k b_j[k] q[k]` ([`plane_dot`]). The
//! kernels sum in f32 and write fp16; the host reference sums the same integers in f64.

/// Columns per group (bits per bitvector).
pub const GROUP: usize = 128;
/// `u32` words per bitvector of a group.
pub const GROUP_WORDS: usize = GROUP / 32;
/// Groups per pair (one 16-byte lane load holds a bitvector of both).
pub const PAIR: usize = 2;
/// Rows per tile (the `M` of the MMA).
pub const TILE_ROWS: usize = 16;
/// Activation bit-planes (int8).
pub const PLANES: usize = 8;
/// Fewest bitvectors per group.
pub const MIN_BITS: u32 = 2;
/// Most bitvectors per group.
pub const MAX_BITS: u32 = 8;
/// Halves per coefficient-cache entry on the device.
pub const COEF_STRIDE: usize = 8;
/// f32 per entry of the device's f32 copy of the cache (the kernels of at most 4 slots):
/// the same 16 bytes per entry as the halves.
pub const F32_COEF_STRIDE: usize = 4;
const _: () = assert!(4 * F32_COEF_STRIDE == 2 * COEF_STRIDE);
/// Most coefficient-cache entries (u16 indices).
pub const MAX_ENTRIES: usize = 65536;
/// Most entries with u8 indices.
pub const MAX_U8_ENTRIES: usize = 256;
/// The weight of each activation bit-plane (two's complement).
pub const PIVOTS: [i32; PLANES] = [1, 2, 4, 8, 16, 32, 64, -128];
/// Largest |q| of the activation quantization (symmetric int8).
pub const QMAX: f32 = 127.0;

/// The padded geometry of an SBVR matrix: where each bit, index and plane word lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Geometry {
    /// Rows.
    pub rows: usize,
    /// Columns.
    pub cols: usize,
    /// Bitvectors per group (`n`).
    pub bits: usize,
    /// Tiles of 16 rows.
    pub tiles: usize,
    /// Groups of 128 columns.
    pub groups: usize,
    /// Pairs of groups.
    pub pairs: usize,
}

impl Geometry {
    /// The geometry of a `rows x cols` matrix with `bits` bitvectors per group.
    pub const fn new(rows: usize, cols: usize, bits: usize) -> Self {
        let groups = cols.div_ceil(GROUP);
        Self {
            rows,
            cols,
            bits,
            tiles: rows.div_ceil(TILE_ROWS),
            groups,
            pairs: groups.div_ceil(PAIR),
        }
    }

    /// Groups including an odd group's zero partner.
    pub const fn padded_groups(&self) -> usize {
        self.pairs * PAIR
    }

    /// Padded columns.
    pub const fn padded_cols(&self) -> usize {
        self.padded_groups() * GROUP
    }

    /// Padded rows.
    pub const fn padded_rows(&self) -> usize {
        self.tiles * TILE_ROWS
    }

    /// `u64`s of bitvectors.
    pub const fn bit_words(&self) -> usize {
        self.tiles * self.pairs * self.bits * 32 * PAIR
    }

    /// Entries of the index array.
    pub const fn index_len(&self) -> usize {
        self.tiles * self.pairs * TILE_ROWS * PAIR
    }

    /// `u32` plane words of `batch` quantized vectors.
    pub const fn plane_words(&self, batch: usize) -> usize {
        batch * self.padded_groups() * PLANES * GROUP_WORDS
    }

    /// The byte of vector `v`, group `g`, column `k` of the group in the int8 way's quantized
    /// inputs ([`q8_offset`]).
    #[inline]
    pub const fn q8_pos(&self, v: usize, g: usize, k: usize) -> usize {
        (v * self.padded_groups() + g) * Q8_GROUP_BYTES + q8_offset(k)
    }

    /// Scales of `batch` quantized vectors.
    pub const fn scales_len(&self, batch: usize) -> usize {
        batch * self.padded_groups()
    }

    /// The `u64` word and bit that hold bitvector `j` at (`row`, `col`) (padded coordinates
    /// allowed).
    #[inline]
    pub const fn bit_pos(&self, row: usize, col: usize, j: usize) -> (usize, u32) {
        let (tile, r) = (row / TILE_ROWS, row % TILE_ROWS);
        let (g, k) = (col / GROUP, col % GROUP);
        let (pair, h) = (g / PAIR, g % PAIR);
        let lane = (r % 8) * 4 + k / 32;
        let word = ((((tile * self.pairs + pair) * self.bits + j) * 32 + lane) * PAIR) + h;
        let bit = (r / 8) * 32 + k % 32;
        (word, bit as u32)
    }

    /// The entry of the index array for (`row`, `group`) (padded coordinates allowed).
    #[inline]
    pub const fn index_pos(&self, row: usize, group: usize) -> usize {
        let (tile, r) = (row / TILE_ROWS, row % TILE_ROWS);
        let (pair, h) = (group / PAIR, group % PAIR);
        ((tile * self.pairs + pair) * TILE_ROWS + r) * PAIR + h
    }

    /// The plane word of vector `v`, group `g`, plane `a`, word `t`.
    #[inline]
    pub const fn plane_pos(&self, v: usize, g: usize, a: usize, t: usize) -> usize {
        ((v * self.padded_groups() + g) * PLANES + a) * GROUP_WORDS + t
    }
}

/// Bytes of one quantized group in the int8 way's order.
pub const Q8_GROUP_BYTES: usize = GROUP;

/// The `mma.m16n8k32` steps of one group (`GROUP / 32`).
pub const Q8_STEPS: usize = GROUP / 32;

/// The int8 way's `A` register `r` (0..8) of one lane's 32-bit bitvector word `w`: byte `i`
/// is 128 when bit `8 i + 7 - r` of `w` is set, else 0. Step `s` of a group takes registers
/// `2 s` (its `a0`, `a1`: columns `4 t + i` of the `k32` step) and `2 s + 1` (`a2`, `a3`:
/// columns `16 + 4 t + i`) of the words of rows `l / 4` and `l / 4 + 8`. Every byte is 128 times
/// a bit, so the MMA sums 128 times the exact `sum_k b[k] q[k]` (at most `128 * 127 * 128 <
/// 2^22` in magnitude per group, which [`MAGIC`] relies on).
#[inline(always)]
pub const fn expand(w: u32, r: u32) -> u32 {
    (w << r) & 0x8080_8080
}

/// The byte offset of column `k` (0..128) of a group in the int8 way's order: lane `l`'s
/// bitvector word holds columns `32 t + 0..32` (`t = l % 4`), and byte `i` of its register `r`
/// ([`expand`]) is column `32 t + 8 i + 7 - r`. So its `B` fragment of step `s` must hold,
/// in `b0` byte `i`, the input of column `32 t + 8 i + 7 - 2 s`, and in `b1` byte `i` that of
/// column `32 t + 8 i + 6 - 2 s`: bytes `32 t + 8 s .. + 8` of the group are lane quad
/// position `t`'s `b0`, `b1` of step `s`.
#[inline(always)]
pub const fn q8_offset(k: usize) -> usize {
    let (t, i, c) = (k / 32, (k % 32) / 8, k % 8);
    // c = 7 - r: r = 2 s (b0) or 2 s + 1 (b1).
    let r = 7 - c;
    32 * t + 8 * (r / 2) + 4 * (r % 2) + i
}

/// The bits of the f32 `1.5 * 2^23`: an int8-way MMA accumulator starts here, so that the
/// exact integer sum `v` (|v| < 2^22) it ends with reads as the f32 `1.5 * 2^23 + v`, and
/// `f32::from_bits(d) - MAGIC_F32` is `v` exactly, with no integer-to-float conversion
/// (a quarter-rate instruction).
pub const MAGIC: u32 = 0x4B40_0000;

/// `f32::from_bits(MAGIC)`.
pub const MAGIC_F32: f32 = 12_582_912.0;

/// Quantizes one group of inputs (`x.len() <= 128`; missing values count as zeros) to int8,
/// exactly as the GPU does: `absmax = max |x|`, `scale = absmax / 127` (f32, rounded to
/// nearest), `q = round_half_even(x / scale)` clamped to `-127..=127`. An all-zero group has
/// scale 0 and `q = 0`; a group with a non-finite value has scale NaN and `q = 0` (so its
/// products are NaN, never a silently wrong number).
pub fn quantize_group(x: &[f32]) -> (f32, [i32; GROUP]) {
    let mut q = [0i32; GROUP];
    let mut absmax = 0.0f32;
    let mut bad = false;
    for &v in x.iter().take(GROUP) {
        bad |= !v.is_finite();
        absmax = absmax.max(v.abs());
    }
    if bad {
        return (f32::NAN, q);
    }
    if absmax == 0.0 {
        return (0.0, q);
    }
    let scale = absmax / QMAX;
    for (qi, &v) in q.iter_mut().zip(x) {
        *qi = quantize_value(v, scale);
    }
    (scale, q)
}

/// `round_half_even(x / scale)` clamped to `-127..=127` (`scale` finite and positive).
#[inline(always)]
pub fn quantize_value(x: f32, scale: f32) -> i32 {
    cmv_device::round_half_even_f32_to_i32(x / scale).clamp(-127, 127)
}

/// The 8 bit-planes of one quantized group: plane `a`, word `t`, bit `i` = bit `a` of
/// `q[32 t + i]` (two's complement).
pub fn planes_of(q: &[i32; GROUP]) -> [[u32; GROUP_WORDS]; PLANES] {
    let mut p = [[0u32; GROUP_WORDS]; PLANES];
    for (k, &v) in q.iter().enumerate() {
        let byte = v as u8;
        for (a, plane) in p.iter_mut().enumerate() {
            plane[k / 32] |= u32::from((byte >> a) & 1) << (k % 32);
        }
    }
    p
}

/// The exact inner product of one bitvector with a quantized group through its planes:
/// `sum_a PIVOTS[a] * popc(w AND plane_a)` (= `sum_k w[k] q[k]`).
#[inline]
pub fn plane_dot(w: &[u32; GROUP_WORDS], planes: &[[u32; GROUP_WORDS]; PLANES]) -> i32 {
    let mut s = 0i32;
    for (a, plane) in planes.iter().enumerate() {
        let pop: u32 = w.iter().zip(plane).map(|(x, p)| (x & p).count_ones()).sum();
        s += PIVOTS[a] * pop as i32;
    }
    s
}

/// The two pivots lane quad position `t` (0..4) applies to its MMA columns `2 t`, `2 t + 1`.
#[inline(always)]
pub const fn lane_pivots(t: u32) -> (i32, i32) {
    let a = 1i32 << (2 * t);
    let b = if t == 3 { -128 } else { 2i32 << (2 * t) };
    (a, b)
}

/// Lane quad position `t`'s pivots split as `lane_pivots(t) == (f, m * f)` with `f = 4^t` (a
/// power of two) and `m = 2`, or `-2` at `t = 3`: the binary kernels sum `d0 + m d1` of the
/// two popcounts (one multiply-add) and take the factor `f` on the vector's scale instead,
/// which changes no bit of the sums (tested here).
#[inline(always)]
pub const fn lane_pivot_split(t: u32) -> (i32, f32) {
    let m = if t == 3 { -2 } else { 2 };
    (m, (1u32 << (2 * t)) as f32)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One lane's sums of a group as the binary kernels compute them, for checking that taking
    /// the pivot factor on the scale changes no bit: `coefs[j]` and the popcount pairs `d[j]` of
    /// bitvector `j`, the group's scale `s`, the running sum `acc`. Returns the sum after the
    /// group both ways: with the pivots applied to the popcounts (`fma(s, sum_j fma(c_j, f (d0 + m
    /// d1)))`), and with `d0 + m d1` summed and `f` taken on `s`.
    fn scaled_terms_keep_the_bits(
        t: u32,
        coefs: &[f32],
        d: &[(u32, u32)],
        s: f32,
        acc: f32,
    ) -> (f32, f32) {
        let (a, b) = lane_pivots(t);
        let (m, f) = lane_pivot_split(t);
        let (mut full, mut split) = (0f32, 0f32);
        for (&c, &(d0, d1)) in coefs.iter().zip(d) {
            full = c.mul_add((d0 as i32 * a + d1 as i32 * b) as f32, full);
            split = c.mul_add((d0 as i32 + m * d1 as i32) as f32, split);
        }
        (s.mul_add(full, acc), (s * f).mul_add(split, acc))
    }

    /// Taking the pivot's power of two on the scale gives the same bits: every partial sum is
    /// the original divided by `f` exactly (binary rounding commutes with powers of two while
    /// nothing is subnormal: sums of f16 coefficients times integers are multiples of 2^-24),
    /// and `(s f) part` is `s (f part)` exactly. Random coefficients over the whole f16 range
    /// (subnormals too), popcounts 0..=128, scales and running sums of both signs.
    #[test]
    fn the_pivot_factor_on_the_scale_keeps_every_bit() {
        for t in 0..4 {
            let (a, b) = lane_pivots(t);
            let (m, f) = lane_pivot_split(t);
            assert_eq!((a, b), (f as i32, m * f as i32));
        }
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for case in 0..200_000 {
            let n = 2 + (next() % 7) as usize;
            let coefs: Vec<f32> = (0..n)
                .map(|_| {
                    // A finite f16 (any exponent, subnormals included) as f32.
                    let h = (next() % 0x7c00) as u16 | if next() % 2 == 0 { 0x8000 } else { 0 };
                    half_to_f32(h)
                })
                .collect();
            let d: Vec<(u32, u32)> = (0..n)
                .map(|_| ((next() % 129) as u32, (next() % 129) as u32))
                .collect();
            let s = f32::from_bits(0x3000_0000 + (next() % 0x1000_0000) as u32)
                * if next() % 2 == 0 { 1.0 } else { -1.0 };
            let acc = if case % 3 == 0 {
                0.0
            } else {
                f32::from_bits(0x3800_0000 + (next() % 0x0800_0000) as u32)
            };
            let t = (next() % 4) as u32;
            let (full, split) = scaled_terms_keep_the_bits(t, &coefs, &d, s, acc);
            assert_eq!(
                full.to_bits(),
                split.to_bits(),
                "t {t} coefs {coefs:?} d {d:?} s {s} acc {acc}: {full} against {split}"
            );
        }
    }

    /// IEEE half to f32 (the test's own conversion, exact).
    fn half_to_f32(h: u16) -> f32 {
        let sign = if h & 0x8000 != 0 { -1.0 } else { 1.0 };
        let e = i32::from((h >> 10) & 0x1f);
        let m = f32::from(h & 0x3ff);
        sign * if e == 0 {
            m * 2f32.powi(-24)
        } else {
            (1.0 + m / 1024.0) * 2f32.powi(e - 15)
        }
    }

    #[test]
    fn every_bit_has_its_own_position_and_lanes_match_the_mma_fragments() {
        let g = Geometry::new(33, 300, 3);
        assert_eq!((g.tiles, g.groups, g.pairs), (3, 3, 2));
        let mut seen = vec![0u64; g.bit_words()];
        for row in 0..g.padded_rows() {
            for col in 0..g.padded_cols() {
                for j in 0..g.bits {
                    let (w, b) = g.bit_pos(row, col, j);
                    assert!(seen[w] & (1u64 << b) == 0, "{row} {col} {j} twice");
                    seen[w] |= 1u64 << b;
                }
            }
        }
        assert!(seen.iter().all(|&w| w == u64::MAX));
        // Lane l's low word holds row l / 4, columns 32 (l % 4) ..: the A fragment's a0.
        let (w, b) = g.bit_pos(16 + 5, 2 * GROUP + 3 * 32 + 7, 2);
        let lane = 5 * 4 + 3;
        assert_eq!(w, ((3 * 3 + 2) * 32 + lane) * 2);
        assert_eq!(b, 7);
        let (_, b) = g.bit_pos(16 + 13, 7, 0);
        assert_eq!(b, 32 + 7);
    }

    /// One lane's `A` fragment of step `s` (rows `l / 4`, `l / 4 + 8`) from its two words.
    fn a_fragment(lo: u32, hi: u32, s: usize) -> [u32; 4] {
        let r = 2 * s as u32;
        [
            expand(lo, r),
            expand(hi, r),
            expand(lo, r + 1),
            expand(hi, r + 1),
        ]
    }

    /// `mma.m16n8k32` (u8 x s8) as the PTX ISA lays out the fragments: `A` row `g` / `g + 8`
    /// in registers 0, 2 / 1, 3, columns `4 t + i` (registers 0, 1) and `16 + 4 t + i`
    /// (2, 3); `B` column `g`, rows `4 t + i` (`b0`) and `16 + 4 t + i` (`b1`); `D` row
    /// `g` / `g + 8`, columns `2 t`, `2 t + 1`.
    fn mma_model(a: &[[u32; 4]; 32], b: &[[u32; 2]; 32], d: &mut [[i32; 4]; 32]) {
        let byte = |w: u32, i: usize| (w >> (8 * i)) & 0xff;
        for (lane, dl) in d.iter_mut().enumerate() {
            let (g, t) = (lane / 4, lane % 4);
            for (q, dq) in dl.iter_mut().enumerate() {
                let row_hi = q >= 2;
                let col = 2 * t + q % 2;
                let mut sum = 0i32;
                for k in 0..32 {
                    let (kt, ki, upper) = ((k % 16) / 4, k % 4, k >= 16);
                    let al = g * 4 + kt;
                    let ar = usize::from(row_hi) + 2 * usize::from(upper);
                    let bl = col * 4 + kt;
                    let av = byte(a[al][ar], ki) as i32;
                    let bv = byte(b[bl][usize::from(upper)], ki) as u8 as i8 as i32;
                    sum += av * bv;
                }
                *dq += sum;
            }
        }
    }

    #[test]
    fn the_int8_order_meets_the_expanded_bitvectors_in_the_mma() {
        // q8_offset is a bijection onto 0..128.
        let mut seen = [false; GROUP];
        for k in 0..GROUP {
            assert!(!seen[q8_offset(k)], "{k}");
            seen[q8_offset(k)] = true;
        }
        assert!(seen.iter().all(|&s| s));
        assert_eq!(expand(0x8000_0001, 0), 0x8000_0000);
        assert_eq!(expand(0x8000_0001, 7), 0x0000_0080);
        // A tile of 16 rows x one group, 8 vectors: the lane fragments through the model MMA
        // give 128 times the plain sums.
        let mut state = 99u64;
        let mut next = || {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (state >> 33) as u32
        };
        let bits: Vec<[bool; GROUP]> = (0..16)
            .map(|_| core::array::from_fn(|_| next() & 1 == 1))
            .collect();
        let q: Vec<[i32; GROUP]> = (0..8)
            .map(|v| {
                core::array::from_fn(|k| {
                    if v == 0 {
                        127 - (k as i32 % 3) * 127
                    } else {
                        (next() % 255) as i32 - 127
                    }
                })
            })
            .collect();
        // Lane words as the weight layout stores them: row l / 4 (+ 8), columns 32 t ..
        let word = |row: usize, t: usize| -> u32 {
            (0..32).fold(0, |w, i| w | (u32::from(bits[row][32 * t + i]) << i))
        };
        // The quantized bytes in the int8 order.
        let mut bytes = vec![[0u8; GROUP]; 8];
        for v in 0..8 {
            for k in 0..GROUP {
                bytes[v][q8_offset(k)] = q[v][k] as i8 as u8;
            }
        }
        let mut d = [[0i32; 4]; 32];
        for s in 0..Q8_STEPS {
            let a: [[u32; 4]; 32] =
                core::array::from_fn(|l| a_fragment(word(l / 4, l % 4), word(l / 4 + 8, l % 4), s));
            let b: [[u32; 2]; 32] = core::array::from_fn(|l| {
                let (v, t) = (l / 4, l % 4);
                let at = |o: usize| u32::from_le_bytes(bytes[v][o..o + 4].try_into().unwrap());
                [at(32 * t + 8 * s), at(32 * t + 8 * s + 4)]
            });
            mma_model(&a, &b, &mut d);
        }
        for (lane, dl) in d.iter().enumerate() {
            let (g, t) = (lane / 4, lane % 4);
            for (qi, &got) in dl.iter().enumerate() {
                let row = g + 8 * (qi / 2);
                let v = 2 * t + qi % 2;
                let want: i32 = (0..GROUP).filter(|&k| bits[row][k]).map(|k| q[v][k]).sum();
                assert_eq!(got, 128 * want, "lane {lane} q {qi}");
            }
        }
        // The magic start reads back exactly at the extremes.
        for v in [-(128 * 127 * 128), -1, 0, 1, 128 * 127 * 128] {
            let d = MAGIC.wrapping_add(v as u32);
            assert_eq!(f32::from_bits(d) - MAGIC_F32, v as f32);
        }
        assert_eq!(f32::from_bits(MAGIC), MAGIC_F32);
        let g = Geometry::new(20, 300, 2);
        assert_eq!(g.q8_pos(1, 3, 0), (4 + 3) * 128 + q8_offset(0));
        // The last group of the last vector ends where the planes of 3 vectors would.
        assert_eq!(
            g.q8_pos(2, 3, 0) - q8_offset(0) + Q8_GROUP_BYTES,
            g.plane_words(3) * 4
        );
    }

    #[test]
    fn index_and_plane_positions_are_a_bijection() {
        let g = Geometry::new(20, 129, 2);
        let mut seen = vec![false; g.index_len()];
        for r in 0..g.padded_rows() {
            for gr in 0..g.padded_groups() {
                let i = g.index_pos(r, gr);
                assert!(!seen[i]);
                seen[i] = true;
            }
        }
        assert!(seen.iter().all(|&s| s));
        assert_eq!(g.plane_words(3), 3 * 2 * 32);
        assert_eq!(g.plane_pos(1, 1, 7, 3), g.plane_words(2) - 1);
    }

    #[test]
    fn quantization_is_symmetric_rne_and_flags_non_finite_groups() {
        let x: Vec<f32> = (0..128).map(|i| (i as f32 - 64.0) * 0.5).collect();
        let (s, q) = quantize_group(&x);
        assert_eq!(s, 32.0 / 127.0);
        assert_eq!(q[0], -127);
        assert_eq!(q[64], 0);
        for (k, &v) in x.iter().enumerate() {
            assert!((v / s - q[k] as f32).abs() <= 0.5 + 1e-5);
        }
        let (s, q) = quantize_group(&[0.0; 5]);
        assert_eq!((s, q[0]), (0.0, 0));
        let (s, q) = quantize_group(&[1.0, f32::NAN]);
        assert!(s.is_nan() && q.iter().all(|&v| v == 0));
        assert!(quantize_group(&[f32::INFINITY]).0.is_nan());
        // Shorter groups are zero-padded.
        let (s, q) = quantize_group(&[-2.0]);
        assert_eq!((s, q[0], q[1]), (2.0 / 127.0, -127, 0));
    }

    #[test]
    fn plane_dot_is_the_integer_dot_product() {
        let mut q = [0i32; GROUP];
        let mut w = [0u32; GROUP_WORDS];
        let mut state = 12345u64;
        for k in 0..GROUP {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            q[k] = ((state >> 33) % 255) as i32 - 127;
            if (state >> 20) & 1 == 1 {
                w[k / 32] |= 1 << (k % 32);
            }
        }
        let want: i32 = (0..GROUP)
            .filter(|&k| w[k / 32] >> (k % 32) & 1 == 1)
            .map(|k| q[k])
            .sum();
        assert_eq!(plane_dot(&w, &planes_of(&q)), want);
        // The lane pivots cover the 8 planes in MMA column order.
        for t in 0..4 {
            let (a, b) = lane_pivots(t);
            assert_eq!((a, b), (PIVOTS[2 * t as usize], PIVOTS[2 * t as usize + 1]));
        }
    }
}

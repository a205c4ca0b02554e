//! GEMV on integer tensor cores: `nogaps` weights of 1 to [`MMA_MAX_BITS`] bits times one
//! vector, exact modulo 2^32 (the same contract as `cmv_beam_gemv_nogaps_b{B}`).
//!
//! `cmv_beam_gemv_mma_b{B}` multiplies with `mma.m16n8k32.u8.u8.s32`: the weights, unpacked to
//! bytes in registers, are the `A` operand (16 rows by 32 columns), and the vector's four bytes
//! `x = x0 + 2^8 x1 + 2^16 x2 + 2^24 x3` are four columns of `B`, so one MMA gives the four
//! byte-plane sums `P_p` of 16 rows and `y = sum_p 2^(8p) P_p mod 2^32`. The integer MMA wraps
//! modulo 2^32, so this is exact modulo 2^32 for any `k`.
//!
//! * A warp owns a tile of [`MMA_ROWS`] rows and walks a range of *segments* of
//!   [`SEG_ELEMS`] columns. In a segment, lane `l = 4 g + t` holds 64 elements of row `g` and
//!   64 of row `g + 8`: `B` bits each, `B` 64-bit words per row. For widths that divide 64 the
//!   four lanes `t` of a row read interleaved 16-byte pieces (piece `4 j + t`; 8 bytes at
//!   `B = 1`), so each warp load is 8 rows of 64 contiguous bytes; for the others a lane's
//!   words are contiguous (`B t + j`, elements do not straddle lanes). [`lane_word`]. Even
//!   widths load 16 bytes at a time where rows start on 16 bytes (an even number of words
//!   per row), otherwise 8.
//! * [`unpack`] turns a lane's words into the `A` registers of the segment's 8 MMA steps with
//!   masks and shifts (`B` = 4: `w & 0x0f0f0f0f` and `(w >> 4) & 0x0f0f0f0f`; `B` = 8: nothing).
//!   The order of the columns inside an MMA does not change the sum, so each width takes the
//!   order that is cheapest to unpack; [`local_elem`] says which element lands in which byte.
//! * `cmv_beam_gemv_prep` writes the `B` fragments in that order once per call
//!   ([`frag_word`], [`frag_words`] `u32`, 4 bytes per column); each block copies them into
//!   shared memory, and a lane reads its step's two registers with conflict-free 16-byte loads.
//! * The warps of a block may split each tile's segments into `slices` parts; the 4 lanes of a
//!   row add their plane sums with two shuffles and the slices are added in shared memory, in
//!   slice order (wrapping `u32` sums, so any order gives the same result anyway).

use crate::gemv::{WARPS_PER_BLOCK, least_cost_slices, tile_cost};
use crate::layout::mask;

/// Widest weight element the tensor-core GEMV takes.
pub const MMA_MAX_BITS: u32 = 8;
/// Whether the launcher picks the tensor-core GEMV by default for `bits`-bit weights: at 1-3
/// and 5-7 bits (where it was 1.5-2.3x the `nogaps` CUDA-core kernel at the largest LLM
/// shapes), not at 4 and 8 bits, where the CUDA-core kernel was faster or level at the LLM
/// shapes on an H100 and an H200 (docs/PERF.md, docs/BEAM.md).
pub const fn mma_by_default(bits: u32) -> bool {
    bits >= 1 && bits <= 7 && bits != 4
}
/// Rows of one warp's tile (the MMA's `m`).
pub const MMA_ROWS: u32 = 16;
/// Columns of a row in one segment (8 MMA steps of 32).
pub const SEG_ELEMS: u32 = 256;
/// `u32` of `B` fragments per segment: 4 byte planes x [`SEG_ELEMS`] bytes / 4.
pub const SEG_WORDS: u32 = 256;
/// Most segments whose weights a warp loads before it multiplies any ([`mma_unroll`]).
pub const MMA_UNROLL: u32 = 4;

/// Segments whose weights a warp loads before it multiplies any, for `bits`-bit weights: 4 up
/// to 4 bits, 2 above (`4 bits` registers per row and segment).
pub const fn mma_unroll(bits: u32) -> u32 {
    if bits <= 4 { 4 } else { 2 }
}

/// What a tile costs beyond its segments in [`mma_cost`], in segments: filling the load
/// pipeline and adding the slices.
pub const TILE_OVERHEAD_SEGS: u32 = 2;

/// Segments of a row of `cols` columns.
pub const fn segments(cols: u32) -> u32 {
    cols.div_ceil(SEG_ELEMS)
}

/// `u32` of the `B` fragments for `cols` columns ([`GemvParams::xp_len`](crate::gemv::GemvParams::xp_len)).
pub const fn frag_words(cols: u32) -> u32 {
    segments(cols) * SEG_WORDS
}

/// Bytes of dynamic shared memory `cmv_beam_gemv_mma_b{B}` needs: the `B` fragments, then one
/// slot per lane for the slices' sums.
pub const fn mma_smem_bytes(cols: u32) -> u64 {
    4 * (frag_words(cols) as u64 + (WARPS_PER_BLOCK * 32) as u64)
}

/// Rows one block computes per tile for `slices`.
pub const fn mma_tile_rows(slices: u32) -> u32 {
    WARPS_PER_BLOCK / slices * MMA_ROWS
}

/// Whether a lane's words in a segment are interleaved with the other lanes' of its row
/// (`bits` divides 64, so no element straddles two words).
pub const fn interleaved(bits: u32) -> bool {
    64 % bits == 0
}

/// Bytes of the pieces the four lanes of a row interleave ([`interleaved`] widths): 16, or 8
/// at one bit (a lane's whole share of a segment).
pub const fn piece_bytes(bits: u32) -> u32 {
    if bits == 1 { 8 } else { 16 }
}

/// The in-segment word (0..`4 bits`) of lane `t`'s word `j` (0..`bits`): word `j % w` of
/// piece `4 (j / w) + t` (`w` words per piece) for [`interleaved`] widths, word `bits t + j`
/// otherwise. For even widths, `j` even gives an even word (16-byte loads of words `j`,
/// `j + 1`).
#[inline(always)]
pub const fn lane_word(bits: u32, t: u32, j: u32) -> u32 {
    if interleaved(bits) {
        let w = piece_bytes(bits) / 8;
        (4 * (j / w) + t) * w + j % w
    } else {
        bits * t + j
    }
}

/// The element (0..64) of a lane's words in byte `i` of the `A` register of MMA step `s`
/// (0..8), half `h` (0: the register of columns `4t..4t+3`, 1: of columns `16+4t..`).
/// A lane's words hold its 64 elements in order (word `j`, bit `b e mod 64`).
#[inline(always)]
pub const fn local_elem(bits: u32, s: u32, h: u32, i: u32) -> u32 {
    match bits {
        1 => 32 * (s >> 2) + 2 * (s & 3) + h + 8 * i,
        2 => 16 * (s >> 1) + 2 * (s & 1) + h + 4 * i,
        4 => 8 * s + 2 * i + h,
        _ => 8 * s + 4 * h + i,
    }
}

/// The in-segment column (0..[`SEG_ELEMS`]) of lane `t`'s element `e` (0..64).
#[inline(always)]
pub const fn seg_elem(bits: u32, t: u32, e: u32) -> u32 {
    if interleaved(bits) {
        let per = 64 / bits;
        lane_word(bits, t, e / per) * per + e % per
    } else {
        64 * t + e
    }
}

/// Word `idx` of the `B` fragments for one vector of `cols` columns (`x(c)` its element `c`
/// mod 2^32). Layout: segment, then `q` (0..4, MMA steps `2q` and `2q + 1`), then lane
/// (0..16: `g` = byte plane `p`, `t`), then 4 words: step `2q + w / 2`, half `w % 2`. Byte `i`
/// of a word is byte `p` of the column [`seg_elem`]`(t, `[`local_elem`]`(s, h, i))`, zero past
/// the columns.
#[inline(always)]
pub fn frag_word(bits: u32, idx: u32, cols: u32, x: impl Fn(u32) -> u32) -> u32 {
    frag_word_planes(bits, 4, idx, cols, x)
}

/// `u32` of the `B` fragments of one segment with the vector's low `planes` (1..=4) bytes:
/// `64 planes` ([`SEG_WORDS`] for all four).
pub const fn seg_frag_words(planes: u32) -> u32 {
    64 * planes
}

/// Byte planes of a `bits`-bit vector that a product modulo 2^32 needs: `ceil(bits / 8)`, at
/// most 4 (the higher bytes only reach past 2^32).
pub const fn vector_planes(bits: u32) -> u32 {
    let p = bits.div_ceil(8);
    if p > 4 {
        4
    } else if p == 0 {
        1
    } else {
        p
    }
}

/// `u32` of the `B` fragments with `planes` byte planes for `cols` columns.
pub const fn frag_words_planes(cols: u32, planes: u32) -> u32 {
    segments(cols) * seg_frag_words(planes)
}

/// [`frag_word`] with only the vector's low `planes` bytes (1..=4): the same layout with
/// lanes `0..4 planes` (`g` = plane), [`seg_frag_words`] words per segment. The lanes
/// `g >= planes` of an MMA's `B` hold zeros (the kernel does not load them).
#[inline(always)]
pub fn frag_word_planes(
    bits: u32,
    planes: u32,
    idx: u32,
    cols: u32,
    x: impl Fn(u32) -> u32,
) -> u32 {
    let sw = seg_frag_words(planes);
    let (seg, rem) = (idx / sw, idx % sw);
    let (q, lane, w) = (rem / (16 * planes), (rem % (16 * planes)) / 4, rem % 4);
    let (p, t) = (lane / 4, lane % 4);
    let (s, h) = (2 * q + w / 2, w % 2);
    let mut v = 0u32;
    let mut i = 0;
    while i < 4 {
        let c = seg * SEG_ELEMS + seg_elem(bits, t, local_elem(bits, s, h, i));
        if c < cols {
            v |= ((x(c) >> (8 * p)) & 0xff) << (8 * i);
        }
        i += 1;
    }
    v
}

/// The 32 bits of a lane's words (`w[0]` first) from bit `o` on (zero past `w[15]`).
#[inline(always)]
fn window32(w: &[u32; 16], o: u32) -> u32 {
    let (k, r) = ((o / 32) as usize, o % 32);
    if r == 0 {
        w[k]
    } else {
        (w[k] >> r) | (w[(k + 1).min(15)] << (32 - r))
    }
}

/// Four `B`-bit fields of `v` (from bit 0) into the four bytes of a word.
#[inline(always)]
fn spread4<const B: u32>(v: u32) -> u32 {
    let m = mask(B) as u32;
    (v & m) | ((v >> B) & m) << 8 | ((v >> (2 * B)) & m) << 16 | ((v >> (3 * B)) & m) << 24
}

/// The two `A` registers (halves 0 and 1) of MMA step `s` from a lane's words of one row
/// (`w[2 j]`, `w[2 j + 1]`: the low and high halves of its word `j`; `2 B` used). Byte `i` of
/// half `h` is element [`local_elem`]`(B, s, h, i)`.
#[inline(always)]
pub fn unpack<const B: u32>(w: &[u32; 16], s: u32) -> (u32, u32) {
    match B {
        8 => (w[2 * s as usize], w[2 * s as usize + 1]),
        4 => {
            let v = w[s as usize];
            (v & 0x0f0f_0f0f, (v >> 4) & 0x0f0f_0f0f)
        }
        2 => {
            let (v, r) = (w[(s >> 1) as usize], 2 * (s & 1));
            (
                (v >> (2 * r)) & 0x0303_0303,
                (v >> (2 * r + 2)) & 0x0303_0303,
            )
        }
        1 => {
            let (v, r) = (w[(s >> 2) as usize], 2 * (s & 3));
            ((v >> r) & 0x0101_0101, (v >> (r + 1)) & 0x0101_0101)
        }
        _ => (
            spread4::<B>(window32(w, 8 * s * B)),
            spread4::<B>(window32(w, 8 * s * B + 4 * B)),
        ),
    }
}

/// A lane's share of the sum of row `g` (`lo`) and `g + 8` (`hi`) from its accumulators `c`
/// (columns `2t`, `2t + 1` = byte planes): `2^(8p) P_p` for its planes, zero for `t >= 2`.
/// The four lanes of a row add theirs to get `y mod 2^32`.
#[inline(always)]
pub const fn plane_shares(c: [u32; 4], t: u32) -> (u32, u32) {
    match t {
        0 => (c[0].wrapping_add(c[1] << 8), c[2].wrapping_add(c[3] << 8)),
        1 => (
            (c[0] << 16).wrapping_add(c[1] << 24),
            (c[2] << 16).wrapping_add(c[3] << 24),
        ),
        _ => (0, 0),
    }
}

/// The time of a launch with `slices`, in segments of one warp: [`tile_cost`] of the block
/// tiles, each taking a slice of `segs` segments plus [`TILE_OVERHEAD_SEGS`].
pub fn mma_cost(rows: u32, segs: u32, slices: u32, resident: u32) -> u64 {
    let tiles = rows.div_ceil(mma_tile_rows(slices));
    tile_cost(tiles, resident, segs.div_ceil(slices), TILE_OVERHEAD_SEGS)
}

/// The slice count and the grid of a tensor-core GEMV launch on `resident` blocks at once:
/// the slice count of the least [`mma_cost`] ([`least_cost_slices`]), each slice keeping at
/// least one segment; the grid is at most `resident`.
pub fn mma_split(rows: u32, segs: u32, resident: u32) -> (u32, u32) {
    let resident = resident.max(1);
    let s = least_cost_slices(
        |s| segs.div_ceil(s) * (s - 1) < segs,
        |s| mma_cost(rows, segs, s, resident),
    );
    (s, rows.div_ceil(mma_tile_rows(s)).min(resident))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{Rng, pack_nogaps as pack};

    #[test]
    fn each_lane_element_is_one_column_and_every_column_is_covered() {
        for bits in 1..=MMA_MAX_BITS {
            let mut seen = [0u32; SEG_ELEMS as usize];
            for t in 0..4 {
                for s in 0..8 {
                    for h in 0..2 {
                        for i in 0..4 {
                            let e = local_elem(bits, s, h, i);
                            assert!(e < 64);
                            seen[seg_elem(bits, t, e) as usize] += 1;
                        }
                    }
                }
            }
            assert!(seen.iter().all(|&k| k == 1), "bits {bits}");
        }
    }

    /// The segment's words of row `r` as lane `t` loads them (`w[2j]`, `w[2j+1]`), zero past
    /// the row.
    fn lane_words(words: &[u64], rw: u32, r: u32, seg: u32, bits: u32, t: u32) -> [u32; 16] {
        let mut w = [0u32; 16];
        for j in 0..bits {
            let g = seg * 4 * bits + lane_word(bits, t, j);
            let v = if g < rw {
                words[(r * rw + g) as usize]
            } else {
                0
            };
            w[2 * j as usize] = v as u32;
            w[2 * j as usize + 1] = (v >> 32) as u32;
        }
        w
    }

    fn unpack_any(bits: u32, w: &[u32; 16], s: u32) -> (u32, u32) {
        match bits {
            1 => unpack::<1>(w, s),
            2 => unpack::<2>(w, s),
            3 => unpack::<3>(w, s),
            4 => unpack::<4>(w, s),
            5 => unpack::<5>(w, s),
            6 => unpack::<6>(w, s),
            7 => unpack::<7>(w, s),
            8 => unpack::<8>(w, s),
            _ => unreachable!(),
        }
    }

    #[test]
    fn unpack_puts_each_element_where_local_elem_says() {
        let mut rng = Rng(0xBEA4_0001);
        for bits in 1..=MMA_MAX_BITS {
            let cols = 3 * SEG_ELEMS - 5;
            let v: Vec<u64> = (0..cols).map(|_| rng.next() & mask(bits)).collect();
            let (words, rw) = pack(&v, 1, cols, bits);
            for seg in 0..segments(cols) {
                for t in 0..4 {
                    let w = lane_words(&words, rw, 0, seg, bits, t);
                    for s in 0..8 {
                        let (a0, a1) = unpack_any(bits, &w, s);
                        for (h, a) in [(0, a0), (1, a1)] {
                            for i in 0..4 {
                                let c =
                                    seg * SEG_ELEMS + seg_elem(bits, t, local_elem(bits, s, h, i));
                                let want = if c < cols { v[c as usize] as u32 } else { 0 };
                                assert_eq!((a >> (8 * i)) & 0xff, want, "b{bits} c{c} s{s}");
                            }
                        }
                    }
                }
            }
        }
    }

    /// `mma.m16n8k32.u8` on the 32 lanes' fragments, as the PTX ISA defines them, wrapping.
    fn mma(a: &[[u32; 4]; 32], b: &[[u32; 2]; 32], c: &mut [[u32; 4]; 32]) {
        let byte = |v: u32, i: u32| (v >> (8 * i)) & 0xff;
        for lane in 0..32u32 {
            let (g, t) = (lane / 4, lane % 4);
            for (ci, (row, col)) in [
                (g, 2 * t),
                (g, 2 * t + 1),
                (g + 8, 2 * t),
                (g + 8, 2 * t + 1),
            ]
            .into_iter()
            .enumerate()
            {
                let mut sum = c[lane as usize][ci];
                for k in 0..32u32 {
                    let (tk, half, i) = ((k % 16) / 4, k / 16, k % 4);
                    let al = (row % 8) * 4 + tk;
                    let ar = a[al as usize][(2 * half + row / 8) as usize];
                    let bl = col * 4 + tk;
                    let br = b[bl as usize][half as usize];
                    sum = sum.wrapping_add(byte(ar, i) * byte(br, i));
                }
                c[lane as usize][ci] = sum;
            }
        }
    }

    /// One warp's tile as the kernel computes it (fragments from `frag_word`, weights through
    /// `lane_words`/`unpack`, the emulated MMA, `plane_shares` and the quad sum) against the
    /// plain sum mod 2^32.
    fn emulate(bits: u32, rows: u32, cols: u32, seed: u64) {
        emulate_planes(bits, 4, rows, cols, seed);
    }

    /// [`emulate`] with fragments of the vector's low `planes` bytes ([`frag_word_planes`];
    /// the vector below `2^(8 planes)`), as the streaming kernel loads them.
    fn emulate_planes(bits: u32, planes: u32, rows: u32, cols: u32, seed: u64) {
        let mut rng = Rng(seed);
        let v: Vec<u64> = (0..rows * cols).map(|_| rng.next() & mask(bits)).collect();
        let x: Vec<u32> = (0..cols)
            .map(|_| (rng.next() & mask(8 * planes)) as u32)
            .collect();
        let (words, rw) = pack(&v, rows, cols, bits);
        let frags: Vec<u32> = (0..frag_words_planes(cols, planes))
            .map(|i| frag_word_planes(bits, planes, i, cols, |c| x[c as usize]))
            .collect();
        if planes == 4 {
            let all: Vec<u32> = (0..frag_words(cols))
                .map(|i| frag_word(bits, i, cols, |c| x[c as usize]))
                .collect();
            assert_eq!(all, frags);
        }
        for row0 in (0..rows).step_by(MMA_ROWS as usize) {
            let mut c = [[0u32; 4]; 32];
            for seg in 0..segments(cols) {
                let base = (seg * seg_frag_words(planes)) as usize;
                for s in 0..8u32 {
                    let mut a = [[0u32; 4]; 32];
                    let mut b = [[0u32; 2]; 32];
                    for lane in 0..32u32 {
                        let (g, t) = (lane / 4, lane % 4);
                        let ra = (row0 + g).min(rows - 1);
                        let rb = (row0 + g + 8).min(rows - 1);
                        let wa = lane_words(&words, rw, ra, seg, bits, t);
                        let wb = lane_words(&words, rw, rb, seg, bits, t);
                        let (a0, a2) = unpack_any(bits, &wa, s);
                        let (a1, a3) = unpack_any(bits, &wb, s);
                        a[lane as usize] = [a0, a1, a2, a3];
                        if lane < 4 * planes {
                            let q = s / 2;
                            let o = base + (q * 16 * planes + lane * 4 + 2 * (s % 2)) as usize;
                            b[lane as usize] = [frags[o], frags[o + 1]];
                        }
                    }
                    mma(&a, &b, &mut c);
                }
            }
            for g in 0..8u32 {
                let (mut lo, mut hi) = (0u32, 0u32);
                for t in 0..4 {
                    let (l, h) = plane_shares(c[(4 * g + t) as usize], t);
                    lo = lo.wrapping_add(l);
                    hi = hi.wrapping_add(h);
                }
                for (r, got) in [(row0 + g, lo), (row0 + g + 8, hi)] {
                    if r < rows {
                        let want = (0..cols).fold(0u32, |s, k| {
                            s.wrapping_add(
                                (v[(r * cols + k) as usize] as u32).wrapping_mul(x[k as usize]),
                            )
                        });
                        assert_eq!(got, want, "bits {bits} rows {rows} cols {cols} row {r}");
                    }
                }
            }
        }
    }

    #[test]
    fn emulated_tile_matches_the_sum() {
        for bits in 1..=MMA_MAX_BITS {
            for (i, &(rows, cols)) in [(1, 1), (16, 256), (21, 300), (5, 1000), (17, 77)]
                .iter()
                .enumerate()
            {
                emulate(bits, rows, cols, 0x5EED_0000 + 97 * i as u64 + bits as u64);
                for planes in 1..=3 {
                    let seed = 0x5EED_1000 + 97 * i as u64 + 7 * bits as u64 + planes as u64;
                    emulate_planes(bits, planes, rows, cols, seed);
                }
            }
        }
    }

    #[test]
    fn split_fills_the_resident_blocks() {
        // 28672 x 8192 on 132 blocks: one slice, 112 blocks each streaming whole rows, costs
        // 34 segments; two slices 2 waves of 18.
        assert_eq!(mma_split(28672, 32, 132), (1, 112));
        // 8192 x 28672: 4 slices, 128 blocks of 28 segments each.
        assert_eq!(mma_split(8192, 112, 132), (4, 128));
        assert_eq!(mma_cost(8192, 112, 4, 132), 30);
        // A single short row: one slice, one block.
        assert_eq!(mma_split(1, 1, 132), (1, 1));
        // Few long rows: split.
        assert!(mma_split(16, 112, 132).0 > 1);
    }

    #[test]
    fn vector_planes_cover_the_low_32_bits() {
        assert_eq!(vector_planes(1), 1);
        assert_eq!(vector_planes(8), 1);
        assert_eq!(vector_planes(9), 2);
        assert_eq!(vector_planes(24), 3);
        assert_eq!(vector_planes(32), 4);
        assert_eq!(vector_planes(64), 4);
        assert_eq!(frag_words_planes(300, 1), 2 * 64);
        assert_eq!(frag_words_planes(300, 4), frag_words(300));
    }

    #[test]
    fn plane_shares_rebuild_the_product() {
        let x = 0xDEAD_BEEFu32;
        let w = 13u32;
        let p: Vec<u32> = (0..4).map(|k| w * ((x >> (8 * k)) & 0xff)).collect();
        let (a, _) = plane_shares([p[0], p[1], 0, 0], 0);
        let (b, _) = plane_shares([p[2], p[3], 0, 0], 1);
        assert_eq!(a.wrapping_add(b), w.wrapping_mul(x));
        assert_eq!(plane_shares([1, 2, 3, 4], 2), (0, 0));
    }
}

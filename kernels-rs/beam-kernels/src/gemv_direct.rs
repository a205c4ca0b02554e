//! The direct GEMV: `nogaps` weights of 4, 6, 8, 12, 16, 24 or 32 bits times one vector packed
//! like one of their rows (a `1 x k` `nogaps` matrix of the same width), exact modulo 2^32.
//!
//! `cmv_beam_gemv_direct_b{B}` reads the weights and the vector straight from global memory,
//! as the dense int8 kernel does: no preparation launch, no copy of the vector into shared
//! memory, no persistent grid. Because the vector is packed exactly like a row, in-row word `g`
//! of the vector holds the elements of word `g` of every row, so a lane multiplies the words it
//! loads by the same words of the vector (which stays in L1).
//!
//! * A **chunk** is [`chunk_words`] consecutive words of a row: 2 (16 bytes, one vector load
//!   where the rows start 16-byte aligned) for widths that divide 64, 3 (24 bytes, 192 bits:
//!   the least multiple of 64 that 6, 12 and 24 divide) for the others, so no element straddles
//!   two chunks. Lane `l` of a warp takes chunks `l, l + 32, ...` of its slice; words past the
//!   row read as zero.
//! * A warp owns [`DIRECT_ROWS`] rows and keeps [`direct_unroll`] chunks of each in flight; the
//!   vector's chunk is prepared once ([`direct_x`]) for all of them. [`direct_dot`] is the
//!   per-row arithmetic: `dp4a.u32` on bytes (8 bits; 4 bits after masking the low and the
//!   high nibbles; 6 bits after spreading four elements to four bytes), `dp2a.u32` on 16-bit
//!   halves against the vector's bytes (16 bits, two sums joined by [`direct_finish`]), a
//!   multiply-add per element otherwise.
//! * A block of [`DIRECT_WARPS`] warps forms groups of `slices` warps; a group's warps split
//!   the chunks of its rows ([`direct_split`]: the dense int8 kernel's rule) and add their
//!   sums through shared memory.
//!
//! Products and sums wrap modulo 2^32, so the result is the [`Acc::U32`](crate::layout::Acc)
//! one: exact wherever the launcher may choose a fast GEMV.

use crate::layout::mask;
use cmv_device::{dp2a_hi_u32, dp2a_lo_u32, dp4a_u32, prmt};

/// Threads per block of `cmv_beam_gemv_direct_b{B}`.
pub const DIRECT_THREADS: u32 = 256;
/// Warps per block.
pub const DIRECT_WARPS: u32 = DIRECT_THREADS / 32;
/// Rows each warp computes for one vector.
pub const DIRECT_ROWS: u32 = 4;
/// Most vectors of a direct kernel.
pub const DIRECT_MAX_VECTORS: u32 = 16;

/// The vector slots of the kernel that takes `n` vectors (1 to 16): 1, 2, 4, 8 or 16.
pub const fn direct_slots(n: u32) -> u32 {
    if n <= 1 { 1 } else { n.next_power_of_two() }
}

/// Rows each warp computes with `nb` vector slots: [`DIRECT_ROWS`], 2 for 16 slots (64 sums
/// of 4 rows, 128 at 16 bits, would not leave registers for the loads).
pub const fn direct_rows(_bits: u32, nb: u32) -> u32 {
    if nb >= 16 { 2 } else { DIRECT_ROWS }
}
/// Chunks of each row a lane loads before using any: 2, or 1 at 6 bits (whose unpacking
/// needs more registers: 80 at 2, which ran 2-9% slower than 1 on an H100, docs/PERF.md).
pub const fn direct_unroll(bits: u32) -> u32 {
    if bits == 6 { 1 } else { 2 }
}
/// Most words in a chunk.
pub const MAX_CHUNK_WORDS: usize = 3;
/// Most elements in a chunk (6 bits: 32).
pub const MAX_CHUNK_ELEMS: usize = 32;
/// Most warps of a launch the split aims for (as the dense int8 kernel).
pub const DIRECT_MAX_WARPS: u32 = 4096;

/// The widths that have a direct kernel.
pub const DIRECT_WIDTHS: [u32; 7] = [4, 6, 8, 12, 16, 24, 32];

/// The widths whose single-vector direct kernel `beam-kernels-sm90` also defines with
/// programmatic dependent launch (`crate::direct_kernel`): every direct width but 24, where
/// ptxas put 8 bytes of that kernel on the stack.
pub const DIRECT_PDL_WIDTHS: [u32; 6] = [4, 6, 8, 12, 16, 32];

/// Whether a product of `n` vectors by `bits`-bit weights may run the direct kernel with
/// programmatic dependent launch: one vector, a width of [`DIRECT_PDL_WIDTHS`], and an output
/// the kernel writes with plain stores (`zeroed` false: an output zeroed first is written by
/// atomic ORs after a separate zeroing pass, which that launch must not overlap).
pub const fn direct_programmatic(bits: u32, n: u32, zeroed: bool) -> bool {
    let mut i = 0;
    let mut listed = false;
    while i < DIRECT_PDL_WIDTHS.len() {
        listed |= DIRECT_PDL_WIDTHS[i] == bits;
        i += 1;
    }
    listed && n == 1 && !zeroed
}

/// Whether a programmatic launch of `grid` blocks pays, where `resident` blocks of the kernel
/// fit on each of `sm_count` SMs: only when the grid fills at least 90% of the resident slots
/// and no more than all of them (one full wave). Measured on an H200 (docs/PERF.md, "BEAM
/// GEMV: programmatic dependent launch"): grids of 97% of one wave gained 3-8% (4096x14336,
/// 8192x28672 at 4, 6 and 8 bits); 85% was mixed (14336x4096 with one slice: -4% to +2%);
/// 65% lost 15-19% (11008x4096 with one slice) and grids of 1.7-3.4 waves 13-19% at 4
/// bits. (The dependent grid's first blocks take the slots the grid before leaves free, so a
/// partial wave spreads them unevenly over the SMs: our reading, not profiled.)
pub const fn direct_full_wave(grid: u32, resident: u32, sm_count: u32) -> bool {
    let slots = resident as u64 * sm_count as u64;
    grid as u64 <= slots && 10 * grid as u64 >= 9 * slots
}

/// Whether `bits` has a direct kernel.
pub const fn direct_width(bits: u32) -> bool {
    matches!(bits, 4 | 6 | 8 | 12 | 16 | 24 | 32)
}

/// Words of a chunk at `bits` (a direct width): 2 where `bits` divides 64, else 3.
pub const fn chunk_words(bits: u32) -> u32 {
    if 64 % bits == 0 { 2 } else { 3 }
}

/// Elements of a chunk.
pub const fn chunk_elems(bits: u32) -> u32 {
    64 * chunk_words(bits) / bits
}

/// Chunks of a row of `row_words` words (the last may run past the row).
pub const fn direct_chunks(row_words: u32, bits: u32) -> u32 {
    row_words.div_ceil(chunk_words(bits))
}

/// Bytes of dynamic shared memory of a launch with `slices` at `bits` with `nb` vector slots
/// (the slices' sums).
pub const fn direct_smem_bytes(slices: u32, bits: u32, nb: u32) -> u32 {
    if slices > 1 {
        DIRECT_WARPS * direct_rows(bits, nb) * nb * 4
    } else {
        0
    }
}

/// Rows of at most this many chunks are split, with one vector, down to one chunk per lane
/// (32 per slice) whatever the warp count: measured on an H100 (docs/PERF.md, "BEAM GEMV:
/// slices for short rows"), 8 slices at 28672x8192 and 4 at 14336x4096 (4 and 6 bits) ran
/// 2-6% faster than the warp cap's 1, and the rows of 4096 and 8192 columns at 8 and 12 bits
/// up to 7%; on longer rows the cap's choice stayed as fast or faster.
pub const DIRECT_SHORT_CHUNKS: u32 = 256;

/// Short rows are split past the warp cap ([`direct_split`]'s `split_short`) only on GPUs
/// whose nominal memory bandwidth per SM is below this many bytes per second: an H100 SXM
/// (3.35 TB/s on 132 SMs, 25 GB/s each), where the split ran 2-6% faster (docs/PERF.md, "BEAM
/// GEMV: slices for short rows"); not on an H200 (4.8 TB/s, 36 GB/s each), where one slice ran
/// 10-18% faster than the split at 11008x4096, 14336x4096 and 28672x8192 at 4-8 bits (PERF.md,
/// "BEAM GEMV: one slice for short rows on an H200"). Our reading: residency caps the blocks
/// per SM whatever the slices, and a split lane keeps half as many bytes in flight, which a
/// GPU with more bandwidth per SM needs.
pub const DIRECT_SPLIT_SHORT_MAX_SM_BANDWIDTH: f64 = 30e9;

/// Whether [`direct_split`] splits short rows on a GPU of `bandwidth_per_sm` bytes per second
/// of nominal memory bandwidth per SM (`None`: not known, split as measured on the H100).
pub fn direct_split_short(bandwidth_per_sm: Option<f64>) -> bool {
    match bandwidth_per_sm {
        Some(b) => b < DIRECT_SPLIT_SHORT_MAX_SM_BANDWIDTH,
        None => true,
    }
}

/// The slice count and the grid of a launch over `rows` rows of `row_words` words with `nb`
/// vector slots: the most slices (1, 2, 4, 8) that keep every slice at least one chunk per
/// lane and the launch at or under [`DIRECT_MAX_WARPS`] warps (no warp cap for one vector on
/// rows of at most [`DIRECT_SHORT_CHUNKS`] chunks when `split_short` is set: on GPUs with
/// little bandwidth per SM, see [`DIRECT_SPLIT_SHORT_MAX_SM_BANDWIDTH`]).
pub fn direct_split(
    rows: u32,
    row_words: u32,
    bits: u32,
    nb: u32,
    split_short: bool,
) -> (u32, u32) {
    let rpw = direct_rows(bits, nb);
    let warps = rows.div_ceil(rpw);
    let chunks = direct_chunks(row_words, bits);
    let max_warps = if split_short && nb == 1 && chunks <= DIRECT_SHORT_CHUNKS {
        u32::MAX
    } else {
        DIRECT_MAX_WARPS
    };
    let mut s = 1;
    while s < 8 && warps.saturating_mul(s * 2) <= max_warps && chunks / (s * 2) >= 32 {
        s *= 2;
    }
    (s, direct_grid(rows, bits, nb, s))
}

/// Blocks of a launch over `rows` rows with `slices` and `nb` vector slots.
pub const fn direct_grid(rows: u32, bits: u32, nb: u32, slices: u32) -> u32 {
    direct_grid_of(rows, bits, nb, slices, DIRECT_WARPS)
}

/// Blocks of a launch over `rows` rows with `slices`, `nb` vector slots and blocks of `warps`
/// warps (a multiple of `slices`).
pub const fn direct_grid_of(rows: u32, bits: u32, nb: u32, slices: u32, warps: u32) -> u32 {
    let rows_per_block = warps / slices * direct_rows(bits, nb);
    let g = rows.div_ceil(rows_per_block);
    if g == 0 { 1 } else { g }
}

/// The fewest warps per block the launcher picks ([`direct_block_warps`]).
pub const DIRECT_MIN_WARPS: u32 = 6;

/// Warps per block of a one-slice launch over `rows` rows on `sms` SMs: of
/// [`DIRECT_MIN_WARPS`]`..=`[`DIRECT_WARPS`], the one whose busiest SM gets the fewest warps
/// when the blocks are spread evenly (`ceil(blocks / sms) * warps`), the largest on a tie.
/// 14336 rows at 4 rows per warp are 448 blocks of 8 warps for 132 SMs, 4 on some SMs and 3 on
/// others (32 warps where 27.2 would be even), but 512 blocks of 7 (28 warps); 11008 rows: 24
/// against 21. With slices, or without an SM count, [`DIRECT_WARPS`].
pub const fn direct_block_warps(rows: u32, bits: u32, nb: u32, slices: u32, sms: u32) -> u32 {
    if slices != 1 || sms == 0 {
        return DIRECT_WARPS;
    }
    let mut best = DIRECT_WARPS;
    let mut best_load = u32::MAX;
    let mut w = DIRECT_WARPS;
    while w >= DIRECT_MIN_WARPS {
        let load = direct_grid_of(rows, bits, nb, 1, w).div_ceil(sms) * w;
        if load < best_load {
            best = w;
            best_load = load;
        }
        w -= 1;
    }
    best
}

/// The chunk range `(begin, end)` of slice `slice` of `slices` over `chunks` chunks.
pub const fn slice_chunks(chunks: u32, slices: u32, slice: u32) -> (u32, u32) {
    let per = chunks.div_ceil(slices);
    let begin = if slice * per < chunks {
        slice * per
    } else {
        chunks
    };
    let end = if begin + per < chunks {
        begin + per
    } else {
        chunks
    };
    (begin, end)
}

/// A chunk as 32-bit halves: `h[2k]` is the low half of its word `k`.
pub type Halves = [u32; 2 * MAX_CHUNK_WORDS];

/// Chunk `ci` of a row of `row_words` words at `bits`, `load(g)` giving in-row word `g`
/// (called only for `g < row_words`; the words past the row are zero).
#[inline(always)]
pub fn chunk_halves(bits: u32, ci: u32, row_words: u32, load: impl Fn(u32) -> u64) -> Halves {
    let cw = chunk_words(bits);
    let mut h = [0u32; 2 * MAX_CHUNK_WORDS];
    for k in 0..MAX_CHUNK_WORDS as u32 {
        let g = ci * cw + k;
        if k < cw && g < row_words {
            let v = load(g);
            h[2 * k as usize] = v as u32;
            h[2 * k as usize + 1] = (v >> 32) as u32;
        }
    }
    h
}

/// Element `j` of a chunk of `B`-bit elements (`j < chunk_elems(B)`).
#[inline(always)]
pub fn chunk_elem<const B: u32>(h: &Halves, j: u32) -> u32 {
    let o = j * B;
    let (i, s) = ((o / 32) as usize, o % 32);
    let m = mask(B) as u32;
    if s + B <= 32 {
        (h[i] >> s) & m
    } else {
        ((h[i] >> s) | (h[i + 1] << (32 - s))) & m
    }
}

const NIBBLES: u32 = 0x0f0f_0f0f;

/// The 24 bits at bit `24 k` of a chunk of 6-bit elements (`k < 8`): elements `4k..4k+4`.
#[inline(always)]
fn six_group(h: &Halves, k: usize) -> u32 {
    let o = 24 * k;
    let (i, s) = (o / 32, (o % 32) as u32);
    if s + 24 <= 32 {
        h[i] >> s
    } else {
        (h[i] >> s) | (h[i + 1] << (32 - s))
    }
}

/// Four 6-bit elements (bits 0-23 of `g`) spread to the four bytes of a word, for `dp4a`.
#[inline(always)]
pub const fn spread6(g: u32) -> u32 {
    (g & 0x3f) | ((g << 2) & 0x3f00) | ((g << 4) & 0x3f_0000) | ((g << 6) & 0x3f00_0000)
}

/// The vector's chunk as [`direct_dot`] takes it: the words for 8 and 32 bits, the low
/// nibbles then the high nibbles of each 32 bits for 4 bits, each 32 bits' bytes reordered to
/// `(x0 low, x1 low, x0 high, x1 high)` for 16 bits (`dp2a`'s byte pairs), four elements per
/// word spread to bytes for 6 bits ([`spread6`]), the elements for 12 and 24 bits.
#[inline(always)]
pub fn direct_x<const B: u32>(x: &Halves) -> [u32; MAX_CHUNK_ELEMS] {
    let mut e = [0u32; MAX_CHUNK_ELEMS];
    match B {
        8 | 32 => e[..4].copy_from_slice(&x[..4]),
        4 => {
            for i in 0..4 {
                e[i] = x[i] & NIBBLES;
                e[4 + i] = (x[i] >> 4) & NIBBLES;
            }
        }
        16 => {
            for i in 0..4 {
                e[i] = prmt(x[i], 0, 0x3120);
            }
        }
        6 => {
            // Written out: a loop here left the chunks in local memory (not unrolled).
            let g = |k| spread6(six_group(x, k));
            [e[0], e[1], e[2], e[3]] = [g(0), g(1), g(2), g(3)];
            [e[4], e[5], e[6], e[7]] = [g(4), g(5), g(6), g(7)];
        }
        _ => {
            for (j, v) in e.iter_mut().enumerate().take(chunk_elems(B) as usize) {
                *v = chunk_elem::<B>(x, j as u32);
            }
        }
    }
    e
}

/// One row's chunk `w` times the prepared vector chunk `xe`, added to the row's sums `acc`
/// (two for 16 bits, see [`direct_finish`]; one otherwise), modulo 2^32.
#[inline(always)]
pub fn direct_dot<const B: u32>(
    acc: [u32; 2],
    w: &Halves,
    xe: &[u32; MAX_CHUNK_ELEMS],
) -> [u32; 2] {
    let [mut a0, mut a1] = acc;
    match B {
        8 => {
            for i in 0..4 {
                a0 = dp4a_u32(w[i], xe[i], a0);
            }
        }
        4 => {
            for i in 0..4 {
                a0 = dp4a_u32(w[i] & NIBBLES, xe[i], a0);
                a0 = dp4a_u32((w[i] >> 4) & NIBBLES, xe[4 + i], a0);
            }
        }
        16 => {
            for i in 0..4 {
                a0 = dp2a_lo_u32(w[i], xe[i], a0);
                a1 = dp2a_hi_u32(w[i], xe[i], a1);
            }
        }
        32 => {
            for i in 0..4 {
                a0 = a0.wrapping_add(w[i].wrapping_mul(xe[i]));
            }
        }
        6 => {
            // Written out, as in `direct_x`.
            let g = |k| spread6(six_group(w, k));
            a0 = dp4a_u32(g(0), xe[0], a0);
            a0 = dp4a_u32(g(1), xe[1], a0);
            a0 = dp4a_u32(g(2), xe[2], a0);
            a0 = dp4a_u32(g(3), xe[3], a0);
            a0 = dp4a_u32(g(4), xe[4], a0);
            a0 = dp4a_u32(g(5), xe[5], a0);
            a0 = dp4a_u32(g(6), xe[6], a0);
            a0 = dp4a_u32(g(7), xe[7], a0);
        }
        _ => {
            for (j, &x) in xe.iter().enumerate().take(chunk_elems(B) as usize) {
                a0 = a0.wrapping_add(chunk_elem::<B>(w, j as u32).wrapping_mul(x));
            }
        }
    }
    [a0, a1]
}

/// A row's sum modulo 2^32 from its [`direct_dot`] sums: for 16 bits the products with the
/// vector's low bytes plus 256 times those with its high bytes.
#[inline(always)]
pub const fn direct_finish<const B: u32>(acc: [u32; 2]) -> u32 {
    if B == 16 {
        acc[0].wrapping_add(acc[1] << 8)
    } else {
        acc[0]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::{NOGAPS, row_words};
    use crate::testing::{Rng, pack_nogaps as pack};

    #[test]
    fn programmatic_launch_only_for_one_vector_with_plain_stores() {
        for bits in DIRECT_WIDTHS {
            let listed = bits != 24;
            assert_eq!(direct_programmatic(bits, 1, false), listed, "{bits} bits");
            assert!(
                !direct_programmatic(bits, 1, true),
                "{bits} bits, zeroed output"
            );
            for n in 2..=DIRECT_MAX_VECTORS {
                assert!(
                    !direct_programmatic(bits, n, false),
                    "{bits} bits, {n} vectors"
                );
            }
        }
        assert!(!direct_programmatic(5, 1, false));
        // 4096x14336 at 4 bits (512 blocks, 4 per SM on 132 SMs) fills 97% of one wave;
        // 14336x4096 (1792 blocks) is more than one wave, and with one slice (448 blocks) 85%.
        let (_, g) = direct_split(4096, row_words(14336, 4, NOGAPS) as u32, 4, 1, true);
        assert_eq!(g, 512);
        assert!(direct_full_wave(g, 4, 132));
        let (_, g) = direct_split(14336, row_words(4096, 4, NOGAPS) as u32, 4, 1, true);
        assert!(!direct_full_wave(g, 4, 132));
        assert!(!direct_full_wave(direct_grid(14336, 4, 1, 1), 4, 132));
        assert!(!direct_full_wave(529, 4, 132) && direct_full_wave(528, 4, 132));
        assert!(direct_full_wave(476, 4, 132) && !direct_full_wave(475, 4, 132));
        assert!(!direct_full_wave(1, 0, 132) && !direct_full_wave(32, 4, 132));
        assert!(DIRECT_PDL_WIDTHS.iter().all(|&b| direct_width(b)));
    }

    /// What the kernel computes for one row: every slice's lanes over their chunks, each
    /// chunk through `chunk_halves`, `direct_x` and `direct_dot`, the sums added in wrapping
    /// arithmetic.
    fn emulate<const B: u32>(row: &[u64], x: &[u64], rw: u32, slices: u32) -> u32 {
        let chunks = direct_chunks(rw, B);
        let mut total = 0u32;
        for slice in 0..slices {
            let (begin, end) = slice_chunks(chunks, slices, slice);
            for lane in 0..32 {
                let mut acc = [0u32; 2];
                let mut c = begin + lane;
                while c < end {
                    let w = chunk_halves(B, c, rw, |g| row[g as usize]);
                    let xv = chunk_halves(B, c, rw, |g| x[g as usize]);
                    acc = direct_dot::<B>(acc, &w, &direct_x::<B>(&xv));
                    c += 32;
                }
                total = total.wrapping_add(direct_finish::<B>(acc));
            }
        }
        total
    }

    fn check_width<const B: u32>(rng: &mut Rng) {
        for cols in [1u32, 7, 31, 64, 100, 511, 1000, 4099] {
            let rw = row_words(u64::from(cols), B, NOGAPS) as u32;
            for max_vals in [false, true] {
                let vals = |rng: &mut Rng| -> Vec<u64> {
                    (0..cols)
                        .map(|_| if max_vals { mask(B) } else { rng.bits(B) })
                        .collect()
                };
                let (a, x) = (vals(rng), vals(rng));
                let want = a.iter().zip(&x).fold(0u32, |s, (&p, &q)| {
                    s.wrapping_add((p as u32).wrapping_mul(q as u32))
                });
                let ((row, arw), (xw, _)) = (pack(&a, 1, cols, B), pack(&x, 1, cols, B));
                assert_eq!(arw, rw);
                for slices in [1, 2, 4, 8] {
                    assert_eq!(
                        emulate::<B>(&row, &xw, rw, slices),
                        want,
                        "bits {B}, cols {cols}, slices {slices}, all-max {max_vals}"
                    );
                }
            }
        }
    }

    #[test]
    fn the_emulated_kernel_matches_the_wrapping_sum_at_every_direct_width() {
        let mut rng = Rng(0x000d_1ec7);
        check_width::<4>(&mut rng);
        check_width::<6>(&mut rng);
        check_width::<8>(&mut rng);
        check_width::<12>(&mut rng);
        check_width::<16>(&mut rng);
        check_width::<24>(&mut rng);
        check_width::<32>(&mut rng);
    }

    #[test]
    fn chunks_hold_whole_elements() {
        for bits in DIRECT_WIDTHS {
            assert!(direct_width(bits));
            assert_eq!((64 * chunk_words(bits)) % bits, 0, "bits {bits}");
            assert!(chunk_elems(bits) as usize <= MAX_CHUNK_ELEMS);
            assert!(chunk_words(bits) as usize <= MAX_CHUNK_WORDS);
        }
        for bits in [1, 2, 3, 5, 7, 9, 10, 11, 13, 17, 20, 31, 33, 64] {
            assert!(!direct_width(bits), "bits {bits}");
        }
    }

    #[test]
    fn slices_cover_every_chunk_once() {
        for chunks in [0u32, 1, 31, 32, 33, 100, 1023] {
            for slices in [1u32, 2, 4, 8] {
                let mut next = 0;
                for s in 0..slices {
                    let (b, e) = slice_chunks(chunks, slices, s);
                    assert_eq!(b, next.min(chunks), "chunks {chunks} slices {slices}");
                    assert!(b <= e && e <= chunks);
                    next = e;
                }
                assert_eq!(next, chunks);
            }
        }
    }

    #[test]
    fn block_warps_even_out_the_busiest_sm() {
        // 4-bit rows, one vector, 132 SMs (rows per warp 4).
        assert_eq!(direct_block_warps(14336, 4, 1, 1, 132), 7);
        assert_eq!(direct_grid_of(14336, 4, 1, 1, 7), 512);
        assert_eq!(direct_block_warps(11008, 4, 1, 1, 132), 7);
        // Already even, or no better: 8 stays.
        assert_eq!(direct_block_warps(28672, 4, 1, 1, 132), 8);
        assert_eq!(direct_block_warps(8192, 4, 1, 1, 132), 8);
        // Slices or an unknown SM count keep the fixed block.
        assert_eq!(direct_block_warps(14336, 4, 1, 2, 132), DIRECT_WARPS);
        assert_eq!(direct_block_warps(14336, 4, 1, 1, 0), DIRECT_WARPS);
        for rows in [1, 31, 32, 100, 4096, 11008, 14336, 28672] {
            for sms in [1, 7, 78, 114, 132] {
                for nb in [1, 16] {
                    let w = direct_block_warps(rows, 8, nb, 1, sms);
                    assert!((DIRECT_MIN_WARPS..=DIRECT_WARPS).contains(&w));
                    let load = |w: u32| direct_grid_of(rows, 8, nb, 1, w).div_ceil(sms) * w;
                    assert!(load(w) <= load(DIRECT_WARPS), "{rows} {sms} {nb}");
                    // Every row is covered.
                    let g = direct_grid_of(rows, 8, nb, 1, w);
                    assert!(g * w * direct_rows(8, nb) >= rows);
                }
            }
        }
    }

    #[test]
    fn the_split_keeps_the_grid_and_the_slices_in_bounds() {
        for (rows, cols, bits) in [
            (1u32, 1u32, 8u32),
            (14336, 4096, 8),
            (4096, 14336, 4),
            (28672, 8192, 12),
            (8192, 28672, 24),
            (3, 100000, 16),
        ] {
            let rw = row_words(u64::from(cols), bits, NOGAPS) as u32;
            let (s, grid) = direct_split(rows, rw, bits, 1, true);
            assert!(matches!(s, 1 | 2 | 4 | 8));
            assert!(s == 1 || direct_chunks(rw, bits) / s >= 32);
            assert!(grid * (DIRECT_WARPS / s) * DIRECT_ROWS >= rows);
            assert!((grid - 1) * (DIRECT_WARPS / s) * DIRECT_ROWS < rows.max(1));
        }
        // The tall LLM shapes keep whole rows per warp; the wide ones split.
        assert_eq!(direct_split(28672, 1024, 8, 1, true).0, 1);
        assert_eq!(direct_split(4096, 1792, 8, 1, true).0, 4);
        // Short rows (at most 256 chunks) split down to 32 chunks per slice with one vector:
        // 4096 columns at 4 and 6 bits (128 chunks), 8192 at 4 bits and 4096 at 8 (256).
        assert_eq!(direct_split(14336, 256, 4, 1, true).0, 4);
        assert_eq!(direct_split(14336, 384, 6, 1, true).0, 4);
        assert_eq!(direct_split(28672, 512, 4, 1, true).0, 8);
        assert_eq!(direct_split(14336, 512, 8, 1, true).0, 8);
        // Not with more vectors, nor on longer rows (4096 x 14336 at 4 bits: 448 chunks).
        assert_eq!(direct_split(28672, 512, 4, 2, true).0, 1);
        assert_eq!(direct_split(4096, 896, 4, 1, true).0, 4);
        assert_eq!(direct_split(8192, 1792, 4, 1, true).0, 2);
        // Without the short-row split (GPUs with more bandwidth per SM) the warp cap keeps
        // one slice on the tall short-row shapes; long rows split as before.
        assert_eq!(direct_split(14336, 256, 4, 1, false).0, 1);
        assert_eq!(direct_split(14336, 384, 6, 1, false).0, 1);
        assert_eq!(direct_split(11008, 256, 4, 1, false).0, 1);
        assert_eq!(direct_split(28672, 512, 4, 1, false).0, 1);
        assert_eq!(direct_split(4096, 896, 4, 1, false).0, 4);
        assert_eq!(direct_split(4096, 1792, 8, 1, false).0, 4);
        assert_eq!(direct_split(8192, 1792, 4, 1, false).0, 2);
        // H100 SXM (3.35 TB/s, 132 SMs) splits, H200 (4.8 TB/s) does not; unknown splits.
        assert!(direct_split_short(Some(3.35e12 / 132.0)));
        assert!(!direct_split_short(Some(4.8e12 / 132.0)));
        assert!(direct_split_short(None));
        // Every vector-slot count covers the rows with its rows per warp.
        for nb in [1, 2, 4, 8, 16] {
            for rows in [1u32, 5, 300, 4096, 28672] {
                let (s, grid) = direct_split(rows, 1024, 8, nb, true);
                assert!(grid * (DIRECT_WARPS / s) * direct_rows(8, nb) >= rows);
                assert!(direct_smem_bytes(s, 8, nb) <= 8 * 1024);
            }
        }
        assert_eq!(
            [1, 2, 3, 4, 5, 8, 9, 16].map(direct_slots),
            [1, 2, 4, 4, 8, 8, 16, 16]
        );
    }
}

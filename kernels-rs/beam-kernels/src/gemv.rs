//! GEMV: `C = A x B` for `B` of 1 to [`MAX_BATCH`](crate::MAX_BATCH) columns, streaming the
//! packed weights `A`.
//!
//! Two kernels take one [`GemvParams`]:
//!
//! * `cmv_beam_gemv_nogaps_b{B}` (`B` = 1..=[`FAST_MAX_BITS`]): `A` in `nogaps` with `B`-bit
//!   elements, one vector (`n = 1`), products exact modulo 2^32 (widths up to 8 have the
//!   tensor-core kernels of [`crate::gemv_mma`] too) ([`Acc::U32`]:
//!   `ovf` with an output of at most 32 bits, or any product whose exact result is below 2^32).
//!   `cmv_beam_gemv_prep` first writes the vector once as `u32` (`x mod 2^32`, from any layout
//!   and width) to a workspace, permuted by [`perm_slot`] so that the lanes' reads of it are
//!   free of bank conflicts; each block copies that into shared memory, then loops over tiles
//!   of rows (a persistent grid). A warp owns
//!   [`ROWS_PER_WARP`] rows; lane `l` reads in-row `u64` word `g = 32 i + l` of each of its rows
//!   (coalesced 256-byte loads, the same word index in every row, so one set of `x` values
//!   serves all of them) and multiplies every element that *starts* in that word. An element
//!   that straddles into word `g + 1` takes its high bits from the neighbour lane
//!   (`shfl.down`), or for lane 31 from a load of that word. [`word_elems`] says which
//!   elements start in a word, [`window`] and [`elem`] extract them with constant shifts
//!   (the width is a const generic), [`word_dot`] is one lane's work on one word of one row.
//!   A block's warps may split each row's words into `slices` parts (summed in shared memory).
//! * `cmv_beam_gemv_any`: every layout, width, batch and accumulator: one warp per row, the
//!   lanes striding over the columns, each element read with [`crate::layout::place`];
//!   wrapping `u64` sums (exact modulo 2^64, which covers [`Acc::U32`] and [`Acc::U64`]) or
//!   saturating ones ([`Acc::SatU64`]). `B` and the output may be given transposed
//!   ([`FLAG_B_TRANSPOSED`], [`FLAG_OUT_TRANSPOSED`]): the `DeviceGemv` path's `x[b * cols + c]`
//!   and `y[b * rows + r]` are naive `n x cols` and `n x rows` matrices.
//!
//! Every output is [`finish`](crate::layout::finish)ed (wrapped or clamped to its width) and
//! written packed in its layout by the lane that owns it (`naive`: a store; otherwise an atomic
//! OR into words the launcher zeroed).

use cmv_device::{DevPtrMut, KernelParams};

use crate::layout::{Acc, mask};
use crate::{PackedOut, PackedRef};

/// Threads per block of `cmv_beam_gemv_nogaps_b{B}`.
pub const BLOCK_THREADS: u32 = 512;
/// Warps per block of `cmv_beam_gemv_nogaps_b{B}`.
pub const WARPS_PER_BLOCK: u32 = BLOCK_THREADS / 32;
/// Rows each warp of `cmv_beam_gemv_nogaps_b{B}` computes at once.
pub const ROWS_PER_WARP: u32 = 4;
/// Most words of each row a lane loads before using any (steps of 32 words): [`unroll`].
pub const UNROLL: u32 = 2;

/// Words of each row a lane of `cmv_beam_gemv_nogaps_b{bits}` loads before using any: 2 for
/// 4, 8, 16 and 32 bits, 1 for the others (straddling elements need more registers: at 2
/// they took 94 and ran slower at 3 of the 4 largest LLM shapes on an H200; 1 and 2 bits
/// went to local memory).
pub const fn unroll(bits: u32) -> u32 {
    if 64 % bits == 0 && bits >= 4 { 2 } else { 1 }
}
/// Widest `A` element the fast kernels take.
pub const FAST_MAX_BITS: u32 = 32;
/// Threads per block of `cmv_beam_gemv_any`.
pub const ANY_BLOCK_THREADS: u32 = 256;

/// `B` is given transposed: element `(t, j)` of `B` is element `(j, t)` of [`GemvParams::b`].
pub const FLAG_B_TRANSPOSED: u32 = 1;
/// The output is written transposed: element `(r, j)` goes to `(j, r)` of [`GemvParams::c`].
pub const FLAG_OUT_TRANSPOSED: u32 = 2;
/// The fast kernels build their vector themselves (each block, from `B`) instead of copying
/// what `cmv_beam_gemv_prep` wrote: one launch instead of two.
pub const FLAG_FUSED_PREP: u32 = 4;

/// [`GemvParams::acc`] for [`Acc::U32`].
pub const ACC_U32: u32 = 0;
/// [`GemvParams::acc`] for [`Acc::U64`].
pub const ACC_U64: u32 = 1;
/// [`GemvParams::acc`] for [`Acc::SatU64`].
pub const ACC_SAT_U64: u32 = 2;

/// The code of an [`Acc`] in [`GemvParams::acc`].
pub const fn acc_code(acc: Acc) -> u32 {
    match acc {
        Acc::U32 => ACC_U32,
        Acc::U64 => ACC_U64,
        Acc::SatU64 => ACC_SAT_U64,
    }
}

/// Parameters of every GEMV kernel: `C = A x B`, `A` is `m x k`, `B` is `k x n` (`n` in
/// 1..=16; given as `n x k` with [`FLAG_B_TRANSPOSED`]), `C` is `m x n` (`n x m` with
/// [`FLAG_OUT_TRANSPOSED`]).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GemvParams {
    /// `A`.
    pub a: PackedRef,
    /// `B`.
    pub b: PackedRef,
    /// `C` (zeroed by the launcher unless `naive`).
    pub c: PackedOut,
    /// [`crate::layout::OVF`] or [`crate::layout::SAT`].
    pub overflow: u32,
    /// The accumulator ([`ACC_U32`], [`ACC_U64`], [`ACC_SAT_U64`]): [`crate::layout::acc_for`].
    pub acc: u32,
    /// Warps of a block that split each row's words (`nogaps` kernels; a power of two that
    /// divides [`WARPS_PER_BLOCK`]).
    pub slices: u32,
    /// [`FLAG_B_TRANSPOSED`], [`FLAG_OUT_TRANSPOSED`].
    pub flags: u32,
    /// The workspace of the fast kernels: `cmv_beam_gemv_prep` writes `xp_len` `u32` of the
    /// vector there ([`PREP_PERM`]: [`perm_value`], [`PREP_MMA`]:
    /// [`crate::gemv_mma::frag_word`]), the fast kernel reads them. Null for `gemv_any`.
    pub xp: DevPtrMut<u32>,
    /// `u32` in [`GemvParams::xp`] ([`perm_slots`] or [`crate::gemv_mma::frag_words`]).
    pub xp_len: u32,
    /// What `cmv_beam_gemv_prep` writes: [`PREP_PERM`] or [`PREP_MMA`].
    pub prep: u32,
}
const _: () = assert!(core::mem::size_of::<GemvParams>() == 128);

/// [`GemvParams::prep`]: the vector for `cmv_beam_gemv_nogaps_b{B}` ([`perm_value`]).
pub const PREP_PERM: u32 = 0;
/// [`GemvParams::prep`]: the `B` fragments of `cmv_beam_gemv_mma_b{B}`
/// ([`crate::gemv_mma::frag_word`]).
pub const PREP_MMA: u32 = 1;
/// [`GemvParams::prep`]: the `B` fragments of `cmv_beam_gemv_stream_b{B}` (as [`PREP_MMA`]),
/// then [`crate::gemv_stream::stream_extra_words`] zeros (its sums and tile counters).
pub const PREP_STREAM: u32 = 2;
// SAFETY: repr(C), no padding (size asserted), plain data and device pointers only; the one
// parameter of every GEMV kernel.
unsafe impl KernelParams for GemvParams {}

/// Bytes of dynamic shared memory `cmv_beam_gemv_nogaps_b{B}` needs for `bits`-bit rows of
/// `row_words` words: the permuted vector ([`perm_slots`]), then one slot per lane for the
/// slices' sums.
pub const fn nogaps_smem_bytes(bits: u32, row_words: u32) -> u64 {
    4 * (perm_slots(bits, row_words) as u64 + (WARPS_PER_BLOCK * 32) as u64)
}

/// `u32` slots of the permuted vector: [`elems_per_word`] slots for each word of a row, the
/// words rounded up to whole warp steps of 32 (a multiple of 32, so of 4).
pub const fn perm_slots(bits: u32, row_words: u32) -> u32 {
    row_words.div_ceil(32) * 32 * elems_per_word(bits)
}

/// The slot of the `j`-th element that starts in in-row word `g`: the elements of a 32-word
/// warp step are stored `j`-major, so the 32 lanes (words `g`) reading their `j`-th element
/// read 32 consecutive slots (no bank conflict).
#[inline(always)]
pub const fn perm_slot(bits: u32, g: u32, j: u32) -> u32 {
    (g / 32) * 32 * elems_per_word(bits) + j * 32 + g % 32
}

/// What slot `slot` of the permuted vector holds for `bits`-bit rows of `cols` columns
/// (`row_words` words): `x(c)` for the element `c` it stands for, zero where no element starts
/// (past the row, or the last slot of a word whose last element starts in the next word).
#[inline(always)]
pub fn perm_value(bits: u32, slot: u32, cols: u32, row_words: u32, x: impl Fn(u32) -> u32) -> u32 {
    let e = elems_per_word(bits);
    let (blk, rem) = (slot / (32 * e), slot % (32 * e));
    let (j, g) = (rem / 32, blk * 32 + rem % 32);
    if g >= row_words {
        return 0;
    }
    let we = word_elems(bits, g);
    if (j + 1 < e || we.last) && we.c0 + j < cols {
        x(we.c0 + j)
    } else {
        0
    }
}

/// Rows one block computes per tile for `slices`.
pub const fn tile_rows(slices: u32) -> u32 {
    WARPS_PER_BLOCK / slices * ROWS_PER_WARP
}

/// Words of a row each slice covers: `ceil(row_words / slices)` rounded up to whole warp
/// steps of 32 words, so that only lane 31 ever needs a word beyond its slice.
pub const fn slice_words(row_words: u32, slices: u32) -> u32 {
    row_words.div_ceil(slices).next_multiple_of(32)
}

/// Most elements that start in one 64-bit word: `ceil(64 / bits)`.
pub const fn elems_per_word(bits: u32) -> u32 {
    64u32.div_ceil(bits)
}

/// The elements that start in in-row word `g` of a `nogaps` row of `bits`-bit elements.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WordElems {
    /// The column of the first one.
    pub c0: u32,
    /// Its bit offset in the word (below `bits`).
    pub shift: u32,
    /// Whether element `c0 + elems_per_word(bits) - 1` starts in this word too (otherwise
    /// there is one fewer).
    pub last: bool,
}

/// [`WordElems`] of word `g` (rows start on a word, so every row has the same).
#[inline(always)]
pub const fn word_elems(bits: u32, g: u32) -> WordElems {
    if 64 % bits == 0 {
        WordElems {
            c0: g * (64 / bits),
            shift: 0,
            last: true,
        }
    } else {
        let bit0 = g as u64 * 64;
        let c0 = bit0.div_ceil(bits as u64);
        let shift = (c0 * bits as u64 - bit0) as u32;
        WordElems {
            c0: c0 as u32,
            shift,
            last: shift + (elems_per_word(bits) - 1) * bits < 64,
        }
    }
}

/// Bits `shift..` of the 128-bit value `next:w` (`shift < 64`): the low 64 and the next 32.
#[inline(always)]
pub const fn window(w: u64, next: u64, shift: u32) -> (u64, u32) {
    // `(next << 1) << (63 - shift)` is `next << (64 - shift)`, and 0 for `shift == 0`.
    (
        (w >> shift) | ((next << 1) << (63 - shift)),
        (next >> shift) as u32,
    )
}

/// Element `j` (`j < elems_per_word(B)`) of a window: bits `j * B ..` of `hi:lo`.
#[inline(always)]
pub const fn elem<const B: u32>(lo: u64, hi: u32, j: u32) -> u32 {
    let o = j * B;
    let m = mask(B) as u32;
    if o + B <= 64 {
        (lo >> o) as u32 & m
    } else {
        ((lo >> o) as u32 | (hi << (64 - o))) & m
    }
}

/// Elements of a word taken together: their `x` values are loaded as one chunk and used for
/// every row before the next chunk (fewer live registers than a whole word's).
pub const CHUNK: u32 = 8;

/// Chunks of [`CHUNK`] elements in a word of `bits`-bit elements.
pub const fn chunks_per_word(bits: u32) -> u32 {
    elems_per_word(bits).div_ceil(CHUNK)
}

/// One lane's work on chunk `k` of one word of one row: `acc + sum_i elem(CHUNK k + i) *
/// xv[i]` modulo 2^32 over the elements of the window `hi:lo` (`xv` from [`chunk_x`]).
#[inline(always)]
pub fn chunk_dot<const B: u32>(
    acc: u32,
    lo: u64,
    hi: u32,
    k: u32,
    xv: &[u32; CHUNK as usize],
) -> u32 {
    let mut acc = acc;
    for (i, &x) in xv.iter().enumerate() {
        let j = k * CHUNK + i as u32;
        if j < elems_per_word(B) {
            acc = acc.wrapping_add(elem::<B>(lo, hi, j).wrapping_mul(x));
        }
    }
    acc
}

/// The `x` values of chunk `k` of the elements starting in word `g`: the permuted vector's
/// slots [`perm_slot`]`(B, g, j)` (which hold zero past the word's elements), or zero for a
/// word outside the row (`inside == false`; `xp` is not called then).
#[inline(always)]
pub fn chunk_x<const B: u32>(
    g: u32,
    inside: bool,
    k: u32,
    xp: impl Fn(u32) -> u32,
) -> [u32; CHUNK as usize] {
    let e = elems_per_word(B);
    let mut xv = [0u32; CHUNK as usize];
    for (i, v) in xv.iter_mut().enumerate() {
        let j = k * CHUNK + i as u32;
        if j < e && inside {
            *v = xp(perm_slot(B, g, j));
        }
    }
    xv
}

/// A whole word `g` of one row ([`chunk_dot`] over every chunk; `xp` reads the permuted
/// vector).
pub fn word_dot<const B: u32>(
    acc: u32,
    g: u32,
    inside: bool,
    lo: u64,
    hi: u32,
    xp: impl Fn(u32) -> u32,
) -> u32 {
    let mut acc = acc;
    for k in 0..chunks_per_word(B) {
        let xv = chunk_x::<B>(g, inside, k, &xp);
        acc = chunk_dot::<B>(acc, lo, hi, k, &xv);
    }
    acc
}

/// Saturating `u64` sum (the [`Acc::SatU64`] accumulator).
#[inline(always)]
pub const fn sat_add(a: u64, b: u64) -> u64 {
    a.saturating_add(b)
}

/// One term of the `any` kernel's sum: wrapping or saturating.
#[inline(always)]
pub const fn mac_u64(acc: u64, a: u64, x: u64, saturate: bool) -> u64 {
    if saturate {
        sat_add(acc, crate::layout::sat_mul(a, x))
    } else {
        acc.wrapping_add(a.wrapping_mul(x))
    }
}

/// What a tile costs beyond its loop steps in [`nogaps_cost`], in steps (filling the load
/// pipeline and adding the slices), as [`crate::gemv_mma::TILE_OVERHEAD_SEGS`].
pub const NOGAPS_TILE_OVERHEAD_STEPS: u32 = 2;

/// The time of a launch of `tiles` block tiles over `resident` blocks, each taking `steps`
/// loop steps of a warp plus `overhead` (filling the load pipeline, adding the slices): the
/// waves times the steps per tile. The cost model of both fast GEMVs' splits.
pub const fn tile_cost(tiles: u32, resident: u32, steps: u32, overhead: u32) -> u64 {
    let resident = if resident == 0 { 1 } else { resident };
    tiles.div_ceil(resident) as u64 * (steps + overhead) as u64
}

/// The power-of-two slice count (1, 2, ..., [`WARPS_PER_BLOCK`]) of the least `cost` among
/// those `ok` allows (1 always), the fewest slices on a tie.
pub fn least_cost_slices(ok: impl Fn(u32) -> bool, cost: impl Fn(u32) -> u64) -> u32 {
    let mut best = (u64::MAX, 1);
    let mut s = 1;
    while s <= WARPS_PER_BLOCK {
        if s == 1 || ok(s) {
            let c = cost(s);
            if c < best.0 {
                best = (c, s);
            }
        }
        s *= 2;
    }
    best.1
}

/// The time of a `nogaps` launch of `bits`-bit rows of `row_words` words with `slices`, in
/// loop steps of one warp (32 [`unroll`] words): [`tile_cost`] with
/// [`NOGAPS_TILE_OVERHEAD_STEPS`].
pub fn nogaps_cost(rows: u32, row_words: u32, bits: u32, slices: u32, resident: u32) -> u64 {
    let tiles = rows.div_ceil(tile_rows(slices));
    let steps = slice_words(row_words, slices).div_ceil(32 * unroll(bits));
    tile_cost(tiles, resident, steps, NOGAPS_TILE_OVERHEAD_STEPS)
}

/// The slice count and the grid of a `nogaps` launch on `resident` blocks at once: the slice
/// count of the least [`nogaps_cost`] ([`least_cost_slices`]), a slice keeping at least one
/// warp step (32 words) of each row. The grid is at most `resident`.
pub fn nogaps_split(rows: u32, row_words: u32, bits: u32, resident: u32) -> (u32, u32) {
    let resident = resident.max(1);
    let s = least_cost_slices(
        |s| slice_words(row_words, s) * (s - 1) < row_words,
        |s| nogaps_cost(rows, row_words, bits, s, resident),
    );
    (s, rows.div_ceil(tile_rows(s)).min(resident))
}

#[cfg(all(target_arch = "nvptx64", feature = "entries"))]
mod kernels;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::{NOGAPS, extract, row_words};
    use crate::testing::{Rng, pack_nogaps as pack};

    #[test]
    fn word_elems_cover_each_column_once() {
        for bits in 1..=32u32 {
            let cols = 1000u32;
            let rw = row_words(cols as u64, bits, NOGAPS) as u32;
            let mut next_col = 0;
            for g in 0..rw {
                let we = word_elems(bits, g);
                assert_eq!(we.c0, next_col.min(we.c0), "bits {bits} word {g}");
                assert_eq!(we.c0, next_col, "bits {bits} word {g}");
                assert!(we.shift < bits);
                assert_eq!(we.c0 as u64 * bits as u64, g as u64 * 64 + we.shift as u64);
                let n = elems_per_word(bits) - u32::from(!we.last);
                // Every counted element starts inside the word; the next one does not.
                assert!(we.shift + (n - 1) * bits < 64);
                assert!(we.shift + n * bits >= 64);
                next_col = we.c0 + n;
            }
            assert!(next_col >= cols);
        }
    }

    #[test]
    fn window_and_elem_match_extract() {
        let mut rng = Rng(0x1234_5678_9abc_def1);
        for bits in 1..=32u32 {
            for _ in 0..200 {
                let (w, next) = (rng.next(), rng.next());
                let shift = (rng.next() % bits as u64) as u32;
                let (lo, hi) = window(w, next, shift);
                let e = elems_per_word(bits);
                for j in 0..e {
                    let pos = shift + j * bits;
                    if pos >= 64 {
                        continue;
                    }
                    let want = extract(w, next, pos, bits) as u32;
                    let got = match bits {
                        1 => elem::<1>(lo, hi, j),
                        3 => elem::<3>(lo, hi, j),
                        5 => elem::<5>(lo, hi, j),
                        7 => elem::<7>(lo, hi, j),
                        12 => elem::<12>(lo, hi, j),
                        17 => elem::<17>(lo, hi, j),
                        24 => elem::<24>(lo, hi, j),
                        31 => elem::<31>(lo, hi, j),
                        32 => elem::<32>(lo, hi, j),
                        _ => {
                            // The generic formula for the other widths.
                            let o = j * bits;
                            let v = if o + bits <= 64 {
                                (lo >> o) as u32
                            } else {
                                (lo >> o) as u32 | (hi << (64 - o))
                            };
                            v & mask(bits) as u32
                        }
                    };
                    assert_eq!(got, want, "bits {bits} shift {shift} j {j}");
                }
            }
        }
    }

    /// One warp's work on one row as the kernel does it (slices, steps of 32 words, the
    /// neighbour's word for straddling elements, lane 31 loading its own), against the sum.
    fn emulate<const B: u32>(cols: u32, slices: u32, seed: u64) {
        let mut rng = Rng(seed);
        let rows = 3;
        let v: Vec<u64> = (0..rows * cols).map(|_| rng.next() & mask(B)).collect();
        let x: Vec<u32> = (0..cols).map(|_| rng.next() as u32).collect();
        let (words, rw) = pack(&v, rows, cols, B);
        let xs: Vec<u32> = (0..perm_slots(B, rw))
            .map(|s| perm_value(B, s, cols, rw, |c| x[c as usize]))
            .collect();
        for r in 0..rows {
            let row = &words[(r * rw) as usize..((r + 1) * rw) as usize];
            let per = slice_words(rw, slices);
            let mut total = 0u32;
            for s in 0..slices {
                let begin = (s * per).min(rw);
                let end = (begin + per).min(rw);
                let mut acc = [0u32; 32];
                let mut g0 = begin;
                while g0 < end {
                    let load = |g: u32| if g < end { row[g as usize] } else { 0 };
                    for lane in 0..32 {
                        let g = g0 + lane;
                        let w = load(g);
                        let next = if lane < 31 {
                            load(g + 1)
                        } else if g + 1 < rw {
                            row[g as usize + 1]
                        } else {
                            0
                        };
                        let we = word_elems(B, g);
                        let (lo, hi) = window(w, next, we.shift);
                        acc[lane as usize] =
                            word_dot::<B>(acc[lane as usize], g, g < end, lo, hi, |s| {
                                xs[s as usize]
                            });
                    }
                    g0 += 32;
                }
                total = acc.iter().fold(total, |t, &a| t.wrapping_add(a));
            }
            let want = (0..cols).fold(0u32, |t, c| {
                t.wrapping_add((v[(r * cols + c) as usize] as u32).wrapping_mul(x[c as usize]))
            });
            assert_eq!(total, want, "bits {B} cols {cols} slices {slices} row {r}");
        }
    }

    #[test]
    fn permuted_vector_holds_each_column_once() {
        for bits in 1..=32u32 {
            for cols in [1u32, 5, 64, 1000, 4109] {
                let rw = row_words(cols as u64, bits, NOGAPS) as u32;
                let n = perm_slots(bits, rw);
                assert_eq!(n % 32, 0);
                let mut seen = vec![0u32; cols as usize];
                for s in 0..n {
                    let v = perm_value(bits, s, cols, rw, |c| c + 1);
                    if v > 0 {
                        seen[v as usize - 1] += 1;
                    }
                }
                assert!(seen.iter().all(|&k| k == 1), "bits {bits} cols {cols}");
                // The slot the kernel reads for element j of word g holds that element.
                for g in 0..rw {
                    let we = word_elems(bits, g);
                    let e = elems_per_word(bits) - u32::from(!we.last);
                    for j in 0..e {
                        let s = perm_slot(bits, g, j);
                        assert!(s < n);
                        let want = if we.c0 + j < cols { we.c0 + j + 1 } else { 0 };
                        assert_eq!(perm_value(bits, s, cols, rw, |c| c + 1), want);
                    }
                }
            }
        }
    }

    #[test]
    fn emulated_warp_matches_the_sum() {
        for (i, &cols) in [1u32, 3, 67, 1000, 4109].iter().enumerate() {
            for slices in [1, 2, 4, 16] {
                let seed = 0x9E37_79B9 + i as u64 * 31 + slices as u64;
                emulate::<1>(cols, slices, seed);
                emulate::<3>(cols, slices, seed);
                emulate::<4>(cols, slices, seed);
                emulate::<5>(cols, slices, seed);
                emulate::<6>(cols, slices, seed);
                emulate::<7>(cols, slices, seed);
                emulate::<8>(cols, slices, seed);
                emulate::<12>(cols, slices, seed);
                emulate::<17>(cols, slices, seed);
                emulate::<24>(cols, slices, seed);
                emulate::<31>(cols, slices, seed);
                emulate::<32>(cols, slices, seed);
            }
        }
    }

    #[test]
    fn split_keeps_waves_full() {
        // 28672 rows of 512 words over 264 resident blocks at 4 bits (steps of 64 words): one
        // slice is 2 waves of 448 tiles x (8 + 2) steps = 20; more slices cost more.
        assert_eq!(nogaps_split(28672, 512, 4, 264), (1, 264));
        assert_eq!(nogaps_cost(28672, 512, 4, 1, 264), 20);
        // 14336 x 4096 at 4 bits: one wave of 224 tiles.
        assert_eq!(nogaps_split(14336, 256, 4, 264), (1, 224));
        // One row: one slice at least, a grid of one block.
        assert_eq!(nogaps_split(1, 1, 4, 264), (1, 1));
        // Few rows, long rows: split.
        let (s, _) = nogaps_split(8, 4096, 4, 264);
        assert!(s > 1);
        assert_eq!(slice_words(100, 4), 32);
        assert_eq!(slice_words(512, 2), 256);
    }

    #[test]
    fn mac_wraps_or_saturates() {
        assert_eq!(mac_u64(1, u64::MAX, 2, false), u64::MAX);
        assert_eq!(mac_u64(1, u64::MAX, 2, true), u64::MAX);
        assert_eq!(mac_u64(5, 3, 4, true), 17);
        assert_eq!(mac_u64(u64::MAX, 1, 1, false), 0);
        assert_eq!(acc_code(Acc::SatU64), ACC_SAT_U64);
    }
}

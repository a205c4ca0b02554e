//! The CUDA-core GEMV with a copy ring, `cmv_beam_gemv_ring_b{B}` (`B` = 1..=32): the
//! arithmetic and the split of `cmv_beam_gemv_nogaps_b{B}` (the parent of
//! [`crate::gemv`]: each warp multiplies [`ROWS_PER_WARP`] rows, lane `l` the elements that
//! start in word `g0 + l` of a 32-word step, against the permuted vector in shared memory),
//! with the weights copied by `cp.async` into a ring of shared-memory stages per warp instead
//! of loaded into registers.
//!
//! Why: the register kernel holds its loads in flight in registers, one or two words per row
//! and lane, so the bytes in flight per SM are set by its occupancy. Where the vector is long
//! (`8192 x 28672`: 129 KiB of it at 12 and 24 bits) one block of 16 warps fits an SM and 16
//! KiB are in flight at widths that do not divide 64: 58-60% of the read ceiling on an H100,
//! against 76-80% at `28672 x 8192` where two blocks fit (docs/PERF.md). A ring puts
//! `stages - 1` stages of [`RING_STAGE_BYTES`] per warp in flight with no registers, at every
//! width and shape.
//!
//! **A stage** holds [`RING_STEP_WORDS`] consecutive words of each of the warp's rows, plus the
//! word after them (an element that starts in the step's last word may end in it), in rows of
//! [`RING_ROW_STRIDE`] words. Lane `l` reads its words `l` and `l + 32` and the word after each
//! from the stage: no shuffles, and the 32 lanes of each shared load read 256 consecutive bytes.
//! The copies are coalesced: copy `i` of lane `l` is [`ring_copy`]`(wide, l, i)`, 16 bytes
//! (`wide`, rows that start on 16 bytes) or 8. Words at or past [`ring_limit`] (past the
//! slice's end and the word after it, or past the row) are zero-filled, never read from `A`;
//! rows past the matrix read its last row again (their sums are never written).
//!
//! **The order of work** is the register kernel's (tiles of rows strided over the grid, each
//! warp one slice of each of its rows); a warp's copies run ahead through its whole list of
//! (tile, step) pairs, across tiles.

use crate::gemv::{
    ROWS_PER_WARP, WARPS_PER_BLOCK, chunk_dot, chunk_x, chunks_per_word, least_cost_slices,
    nogaps_smem_bytes, slice_words, tile_cost, tile_rows, window, word_elems,
};

const R: usize = ROWS_PER_WARP as usize;

/// Words of each row one stage holds (two 32-word steps of the register kernel).
pub const RING_STEP_WORDS: u32 = 64;
/// Words from one row of a stage to the next: the step, the word after it, one word of
/// padding (rows start on 16 bytes).
pub const RING_ROW_STRIDE: u32 = RING_STEP_WORDS + 2;
/// Bytes of one stage: [`ROWS_PER_WARP`] rows of [`RING_ROW_STRIDE`] words.
pub const RING_STAGE_BYTES: u32 = ROWS_PER_WARP * RING_ROW_STRIDE * 8;
/// Fewest stages of a warp's ring.
pub const RING_MIN_STAGES: u32 = 2;
/// Most stages of a warp's ring.
pub const RING_MAX_STAGES: u32 = 8;
/// Most stages [`ring_stages`] picks.
pub const RING_AUTO_MAX_STAGES: u32 = 4;
/// The shared memory per block [`ring_stages`] keeps within when it can: 150 KiB, which
/// leaves an H100 or H200 SM (256 KiB of L1 and shared memory together) about 100 KiB of L1
/// for the copies (`cp.async.ca` goes through L1).
pub const RING_SMEM_BUDGET: u64 = 150 * 1024;
/// What a tile costs beyond its steps in [`ring_cost`] (the slices' barriers and sums; the
/// copies run ahead across tiles), in steps.
pub const RING_TILE_OVERHEAD_STEPS: u32 = 1;

// A stage's rows start on 16 bytes, and so does every stage.
const _: () = assert!((RING_ROW_STRIDE * 8).is_multiple_of(16));
const _: () = assert!(RING_STAGE_BYTES.is_multiple_of(16));
// A lane's two words of a 16-byte copy, 32 lanes: the step is 64 words.
const _: () = assert!(RING_STEP_WORDS == 64);

/// The stages per warp the launcher gives the ring kernel for `bits`-bit rows of `row_words`
/// words: the most (up to [`RING_AUTO_MAX_STAGES`]) that keep the block within
/// [`RING_SMEM_BUDGET`], at least [`RING_MIN_STAGES`]. Measured on an H100 (docs/PERF.md,
/// "BEAM GEMV: the CUDA-core ring kernel"): at 12 and 24 bits on the four largest LLM shapes
/// this count was the fastest of 2, 3 and 4 or within 3% of it; a block that takes 200 KiB or
/// more (a 28672-column vector with 3 stages, or 4 stages beside a 14336-column one) ran 4-16%
/// slower than with one stage fewer, and two blocks of 106 KiB per SM 13% slower than one of
/// 140 KiB.
pub const fn ring_stages(bits: u32, row_words: u32) -> u32 {
    let mut s = RING_AUTO_MAX_STAGES;
    while s > RING_MIN_STAGES && ring_smem_bytes(bits, row_words, s) > RING_SMEM_BUDGET {
        s -= 1;
    }
    s
}

/// Whether the launcher picks the ring kernel by default (when its shared memory fits) over
/// the register kernel `cmv_beam_gemv_nogaps_b{bits}`, for `bits`-bit rows of `row_words`
/// words and `weights` weights, on a device that gives a block `max_smem` bytes of shared
/// memory:
/// * at widths that do not divide 64 (the register kernel loads one word per row ahead) from
///   2^25 weights;
/// * at 1, 2, 4, 8, 16 and 32 bits where the register kernel's vector leaves room for one block
///   per SM only (its loads in flight are then half as many).
///
/// Measured on an H100 (docs/PERF.md, "BEAM GEMV: the CUDA-core ring kernel"): 12 and 24 bits
/// 1.03-1.43x faster at the four largest LLM shapes; 4, 8, 16 and 32 bits 2-9% faster at
/// 8192 x 28672, 0-20% slower at 28672 x 8192, 14336 x 4096, 4096 x 14336 and 11008 x 4096.
pub const fn ring_by_default(bits: u32, row_words: u32, weights: u64, max_smem: u32) -> bool {
    if bits == 0 || bits > 32 {
        false
    } else if 64 % bits != 0 {
        weights >= 1 << 25
    } else {
        2 * nogaps_smem_bytes(bits, row_words) > max_smem as u64
    }
}

/// `slices | stages << 8`, the kernel's [`GemvParams::slices`](crate::gemv::GemvParams::slices).
pub const fn ring_code(slices: u32, stages: u32) -> u32 {
    slices | stages << 8
}

/// `(slices, stages)` of a [`ring_code`].
pub const fn ring_decode(code: u32) -> (u32, u32) {
    (code & 0xff, (code >> 8) & 0xff)
}

/// Byte offset of the rings in the kernel's dynamic shared memory: after the permuted vector
/// and the slices' sums of the register kernel ([`nogaps_smem_bytes`], a multiple of 16).
pub const fn ring_offset(bits: u32, row_words: u32) -> u64 {
    nogaps_smem_bytes(bits, row_words)
}

/// Bytes of dynamic shared memory `cmv_beam_gemv_ring_b{bits}` needs: [`ring_offset`], then
/// `stages` stages per warp of a block.
pub const fn ring_smem_bytes(bits: u32, row_words: u32, stages: u32) -> u64 {
    ring_offset(bits, row_words) + (WARPS_PER_BLOCK * stages * RING_STAGE_BYTES) as u64
}

/// Whether the copies are 16 bytes wide: rows of an even number of words (each row starts on
/// 16 bytes, and so does every step: slices and steps start on even words).
pub const fn ring_wide(row_words: u32) -> bool {
    row_words.is_multiple_of(2)
}

/// Copies of one stage per lane, besides the word after the step (lanes `0..ROWS_PER_WARP`,
/// one row each): 4 of 16 bytes or 8 of 8 bytes.
pub const fn ring_copies(wide: bool) -> u32 {
    if wide {
        ROWS_PER_WARP
    } else {
        2 * ROWS_PER_WARP
    }
}

/// Copy `i` (`i < ring_copies(wide)`) of lane `lane`: the row in the tile and the first word
/// of the step it copies (two with `wide`): row `i` words `2 lane, 2 lane + 1`, or row `i / 2`
/// word `32 (i % 2) + lane`. Every word `0..RING_STEP_WORDS` of every row is copied once, and
/// the 32 lanes of one copy instruction read consecutive bytes of one row.
pub const fn ring_copy(wide: bool, lane: u32, i: u32) -> (u32, u32) {
    if wide {
        (i, 2 * lane)
    } else {
        (i / 2, 32 * (i % 2) + lane)
    }
}

/// Byte offset in a stage of word `pos` (`<= RING_STEP_WORDS`) of row `r`.
pub const fn ring_word_offset(r: u32, pos: u32) -> u32 {
    (r * RING_ROW_STRIDE + pos) * 8
}

/// The first in-row word a warp's stage leaves zero: the slice's end plus the word after it
/// (the last element that starts in the slice may end there), at most the row.
pub const fn ring_limit(end: u32, row_words: u32) -> u32 {
    let l = end + 1;
    if l < row_words { l } else { row_words }
}

/// Bytes to copy from in-row word `g` for a copy of `width` bytes (8 or 16) when words from
/// `limit` on are zero-filled: the rest of the copy's bytes become zeros.
pub const fn ring_copy_bytes(width: u32, g: u32, limit: u32) -> u32 {
    if g >= limit {
        0
    } else if width == 16 && g + 1 >= limit {
        8
    } else {
        width
    }
}

/// One lane's work on one stage: the elements that start in words `g0 + lane` and
/// `g0 + 32 + lane` of each of the warp's rows (read from the stage: `word(r, pos)` is word
/// `g0 + pos` of row `r`, `pos <= RING_STEP_WORDS`) times the permuted vector (`xp(slot)`),
/// added to `acc` modulo 2^32. Words at or past `end` count zero (`xp` is not called for
/// them); the warp stops at the first 32 words past `end` (uniformly).
#[inline(always)]
pub fn ring_lane_step<const B: u32>(
    acc: &mut [u32; R],
    (g0, end, lane): (u32, u32, u32),
    word: impl Fn(u32, u32) -> u64,
    xp: impl Fn(u32) -> u32,
) {
    for u in 0..RING_STEP_WORDS / 32 {
        // Warp-uniform.
        if g0 + 32 * u >= end {
            break;
        }
        let pos = 32 * u + lane;
        let g = g0 + pos;
        let we = word_elems(B, g);
        let win: [(u64, u32); R] = core::array::from_fn(|r| {
            let next = if 64 % B == 0 {
                0
            } else {
                word(r as u32, pos + 1)
            };
            window(word(r as u32, pos), next, we.shift)
        });
        for k in 0..chunks_per_word(B) {
            let xv = chunk_x::<B>(g, g < end, k, &xp);
            for (a, &(lo, hi)) in acc.iter_mut().zip(win.iter()) {
                *a = chunk_dot::<B>(*a, lo, hi, k, &xv);
            }
        }
    }
}

/// The time of a ring launch with `slices`, in stages of one warp: [`tile_cost`] with
/// [`RING_TILE_OVERHEAD_STEPS`].
pub fn ring_cost(rows: u32, row_words: u32, slices: u32, resident: u32) -> u64 {
    let tiles = rows.div_ceil(tile_rows(slices));
    let steps = slice_words(row_words, slices).div_ceil(RING_STEP_WORDS);
    tile_cost(tiles, resident, steps, RING_TILE_OVERHEAD_STEPS)
}

/// The slice count and the grid of a ring launch on `resident` blocks at once: the least
/// [`ring_cost`] ([`least_cost_slices`]), a slice keeping at least one 32-word step of each
/// row; the grid at most `resident`.
pub fn ring_split(rows: u32, row_words: u32, resident: u32) -> (u32, u32) {
    let resident = resident.max(1);
    let s = least_cost_slices(
        |s| slice_words(row_words, s) * (s - 1) < row_words,
        |s| ring_cost(rows, row_words, s, resident),
    );
    (s, rows.div_ceil(tile_rows(s)).min(resident))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gemv::{perm_slots, perm_value};
    use crate::layout::{NOGAPS, row_words};
    use crate::testing::{Rng, pack_nogaps as pack};

    #[test]
    fn the_copies_cover_each_word_of_a_stage_once() {
        for wide in [false, true] {
            let mut seen = vec![0u32; (ROWS_PER_WARP * RING_STEP_WORDS) as usize];
            let width = if wide { 2 } else { 1 };
            for i in 0..ring_copies(wide) {
                let mut firsts = Vec::new();
                for lane in 0..32 {
                    let (r, pos) = ring_copy(wide, lane, i);
                    assert!(r < ROWS_PER_WARP && pos + width <= RING_STEP_WORDS);
                    if wide {
                        assert_eq!(ring_word_offset(r, pos) % 16, 0, "aligned 16-byte copy");
                    }
                    for p in pos..pos + width {
                        seen[(r * RING_STEP_WORDS + p) as usize] += 1;
                    }
                    firsts.push((r, pos));
                }
                // One instruction: one row, consecutive words (coalesced).
                assert!(firsts.iter().all(|&(r, _)| r == firsts[0].0));
                for (l, &(_, pos)) in firsts.iter().enumerate() {
                    assert_eq!(pos, firsts[0].1 + l as u32 * width);
                }
            }
            assert!(seen.iter().all(|&n| n == 1), "wide {wide}: {seen:?}");
        }
    }

    #[test]
    fn copy_sizes_stop_at_the_limit() {
        assert_eq!(ring_copy_bytes(16, 10, 12), 16);
        assert_eq!(ring_copy_bytes(16, 11, 12), 8);
        assert_eq!(ring_copy_bytes(16, 12, 12), 0);
        assert_eq!(ring_copy_bytes(8, 11, 12), 8);
        assert_eq!(ring_copy_bytes(8, 12, 12), 0);
        assert_eq!(ring_limit(64, 100), 65);
        assert_eq!(ring_limit(100, 100), 100);
        assert_eq!(ring_code(4, 3), 4 | 3 << 8);
        assert_eq!(ring_decode(ring_code(16, 8)), (16, 8));
    }

    #[test]
    fn shared_memory_layout() {
        // The rings start on 16 bytes after the vector and the sums.
        for bits in 1..=32 {
            for rw in [1, 31, 64, 65, 1000, 10_752] {
                assert_eq!(ring_offset(bits, rw) % 16, 0);
                assert_eq!(
                    ring_smem_bytes(bits, rw, 3) - ring_offset(bits, rw),
                    u64::from(WARPS_PER_BLOCK * 3 * RING_STAGE_BYTES)
                );
            }
        }
        // The longest rows of the LLM shapes fit an H100's 227 KiB with two stages.
        let rw = row_words(28672, 24, NOGAPS) as u32;
        assert!(ring_smem_bytes(24, rw, 2) <= 227 * 1024);
    }

    /// Emulates one warp's stages over each slice of each row block (the copies with their
    /// limits, both widths, then [`ring_lane_step`] for every lane) and checks the sums
    /// against a plain product modulo 2^32.
    fn emulate<const B: u32>(rows: u32, cols: u32, slices: u32, rng: &mut Rng) {
        let v: Vec<u64> = (0..rows * cols).map(|_| rng.bits(B)).collect();
        let (words, rw) = pack(&v, rows, cols, B);
        assert_eq!(rw as u64, row_words(cols as u64, B, NOGAPS));
        let x: Vec<u32> = (0..cols).map(|_| rng.next() as u32).collect();
        let xp: Vec<u32> = (0..perm_slots(B, rw))
            .map(|s| perm_value(B, s, cols, rw, |c| x[c as usize]))
            .collect();
        let word = |row: u32, g: u32| words[(row * rw + g) as usize];
        let per = slice_words(rw, slices);
        for row0 in (0..rows).step_by(R) {
            let mut total = [0u32; R];
            for slice in 0..slices {
                let begin = (slice * per).min(rw);
                let end = (begin + per).min(rw);
                let limit = ring_limit(end, rw);
                let mut g0 = begin;
                while g0 < end {
                    // The stage as the copies of each width (and the word after the step)
                    // leave it; unwritten words would show as all ones.
                    let stage = |wide: bool| {
                        let w = if wide { 16 } else { 8 };
                        let mut st = vec![[u64::MAX; (RING_STEP_WORDS + 1) as usize]; R];
                        for lane in 0..32 {
                            for i in 0..ring_copies(wide) {
                                let (r, pos) = ring_copy(wide, lane, i);
                                let row = (row0 + r).min(rows - 1);
                                let n = ring_copy_bytes(w, g0 + pos, limit) / 8;
                                for k in 0..w / 8 {
                                    st[r as usize][(pos + k) as usize] =
                                        if k < n { word(row, g0 + pos + k) } else { 0 };
                                }
                            }
                        }
                        for (r, sr) in st.iter_mut().enumerate() {
                            let row = (row0 + r as u32).min(rows - 1);
                            let g = g0 + RING_STEP_WORDS;
                            sr[RING_STEP_WORDS as usize] = if ring_copy_bytes(8, g, limit) == 8 {
                                word(row, g)
                            } else {
                                0
                            };
                        }
                        st
                    };
                    let st = stage(true);
                    assert_eq!(st, stage(false));
                    for lane in 0..32 {
                        ring_lane_step::<B>(
                            &mut total,
                            (g0, end, lane),
                            |r, pos| st[r as usize][pos as usize],
                            |s| xp[s as usize],
                        );
                    }
                    g0 += RING_STEP_WORDS;
                }
            }
            for (r, &t) in total.iter().enumerate() {
                let row = row0 + r as u32;
                if row < rows {
                    let want = (0..cols).fold(0u32, |s, c| {
                        let e = v[(row * cols + c) as usize] as u32;
                        s.wrapping_add(e.wrapping_mul(x[c as usize]))
                    });
                    assert_eq!(t, want, "B {B}, {rows}x{cols}, slices {slices}, row {row}");
                }
            }
        }
    }

    #[test]
    fn emulated_ring_matches_the_product() {
        let mut rng = Rng(0x5eed_7a11);
        macro_rules! widths {
            ($($b:literal),*) => {$(
                for (rows, cols, slices) in
                    [(5, 1, 1), (4, 300, 1), (7, 1000, 2), (3, 4099, 4), (9, 2113, 16)]
                {
                    emulate::<$b>(rows, cols, slices, &mut rng);
                }
            )*};
        }
        widths!(1, 3, 4, 5, 7, 8, 11, 12, 13, 16, 21, 24, 31, 32);
    }

    #[test]
    fn stage_counts_and_default_of_the_llm_shapes() {
        let rw = |cols: u64, bits: u32| row_words(cols, bits, NOGAPS) as u32;
        // The counts measured fastest or within 1% of it (H100, docs/PERF.md).
        assert_eq!(ring_stages(12, rw(8192, 12)), 3);
        assert_eq!(ring_stages(24, rw(8192, 24)), 3);
        assert_eq!(ring_stages(12, rw(4096, 12)), 3);
        assert_eq!(ring_stages(12, rw(14336, 12)), 2);
        assert_eq!(ring_stages(24, rw(28672, 24)), 2);
        // Never below two, even where two pass the budget.
        assert_eq!(ring_stages(32, rw(28672, 32)), RING_MIN_STAGES);
        for bits in 1..=32 {
            for cols in [1, 4096, 8192, 28672] {
                let s = ring_stages(bits, rw(cols, bits));
                assert!((RING_MIN_STAGES..=RING_AUTO_MAX_STAGES).contains(&s));
                assert!(
                    s == RING_MIN_STAGES
                        || ring_smem_bytes(bits, rw(cols, bits), s) <= RING_SMEM_BUDGET
                );
            }
        }
        let max = 227 * 1024;
        // Widths that do not divide 64: from 2^25 weights.
        assert!(ring_by_default(12, rw(4096, 12), 14336 * 4096, max));
        assert!(!ring_by_default(12, rw(4096, 12), 4096 * 4096, max));
        assert!(ring_by_default(31, rw(8192, 31), 1 << 25, max));
        // 1, 2, 4, 8, 16, 32 bits: where the register kernel's vector allows one block per SM.
        for bits in [1, 2, 4, 8, 16, 32] {
            assert!(ring_by_default(bits, rw(28672, bits), 8192 * 28672, max));
            assert!(!ring_by_default(bits, rw(8192, bits), 28672 * 8192, max));
        }
        assert!(!ring_by_default(33, 1, 1 << 30, max));
        assert!(!ring_by_default(0, 1, 1 << 30, max));
    }

    #[test]
    fn the_split_keeps_a_step_per_slice() {
        // 8192 x 28672 at 12 bits: 128 tiles of 64 rows for 132 SMs.
        let rw = row_words(28672, 12, NOGAPS) as u32;
        let (s, grid) = ring_split(8192, rw, 132);
        assert!(s.is_power_of_two() && s <= WARPS_PER_BLOCK);
        assert!(slice_words(rw, s) * (s - 1) < rw);
        assert!((1..=132).contains(&grid));
        // A single short row: one slice.
        assert_eq!(ring_split(1, 1, 132), (1, 1));
    }
}

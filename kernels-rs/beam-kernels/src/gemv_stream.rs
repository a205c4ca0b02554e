//! The streaming tensor-core GEMV, `cmv_beam_gemv_stream_b{B}` (`B` = 1..=8): the arithmetic
//! of [`crate::gemv_mma`] (weights unpacked to bytes as the `A` operand of
//! `mma.m16n8k32.u8.u8.s32`, the vector's four bytes as four columns of `B`, exact modulo
//! 2^32), with the two things that kernel lacks to stream at the memory bandwidth:
//!
//! * **Bytes in flight without registers.** Each warp copies its weights with `cp.async` into
//!   a ring of [`StreamShape::stages`] shared-memory stages; a stage is one *unit*: a tile of
//!   [`MMA_ROWS`] rows by [`StreamShape::unit_segs`] consecutive segments of [`SEG_ELEMS`]
//!   columns (`512 B` bytes each). While the warp multiplies one unit, the next
//!   `stages - 1` are on their way. The register kernel held the loads in flight in registers
//!   (118 of them, one block of 16 warps per SM) and waited for each batch of loads before
//!   multiplying.
//! * **Every SM gets the same work.** The units are numbered tile-major
//!   (`tile * row_units + unit`) and every warp of the grid (8 warps per block, one block per
//!   SM) takes an equal run of them ([`warp_units`]): a stream-K split. A warp that covers a
//!   whole tile writes its rows; otherwise each warp adds its part of the tile's sums to a
//!   `u32` per row with a wrapping atomic add (exact modulo 2^32 in any order) and adds its unit
//!   count to the tile's counter; the warp that completes the count reads the sums back,
//!   applies `finish` and writes the rows. The register kernel split by whole row tiles: 112
//!   blocks for 132 SMs at 28672 x 8192.
//! * **Only the vector's byte planes that exist** ([`crate::gemv_mma::vector_planes`]): a
//!   vector of at most 8 bits needs 1 KiB of fragments per 4 segments instead of 4 KiB, so the
//!   fragments of 28672 columns (28 KiB) fit beside the rings.
//!
//! **The stage layout.** The copies place each 8-byte word where the lane that multiplies it
//! reads it: the lane `L = 4 g + t` holding rows `g` and `g + 8` of the tile reads its words
//! `j` (0..`B`, [`crate::gemv_mma::lane_word`]) of row half `h` as 16-byte chunks
//! `((j / 2) 2 + h) 32 + L` ([`stage_offset`]), so the 32 lanes of every shared load read 512
//! consecutive bytes (no bank conflict) and get the same registers the register kernel loaded
//! from global memory. The copies themselves are coalesced: copy `i` of lane `l` is 16-byte
//! chunk (or 8-byte word) `32 i + l` of the unit in row-major order ([`copy_plan`]). Both
//! copy widths go through L1 (`cp.async.ca`): with `.cg` (L2 only) the 16-byte copies ran
//! 1.1-1.4x slower on an H100 (6 bits: 105 against 74 us at 28672 x 8192). 16-byte
//! copies need even widths (a lane's words pair up) and rows that start on 16 bytes (an even
//! number of words per row, [`wide_copies`]); otherwise every word is its own 8-byte copy.
//! Words past the row and rows past the matrix are zero-filled by the copy (`src-size` 0),
//! never read.

#[cfg(test)]
use crate::gemv_mma::lane_word;
use crate::gemv_mma::{MMA_ROWS, SEG_ELEMS, frag_words_planes, interleaved, piece_bytes};

/// Whether the launcher picks the streaming kernel by default for a matrix of `weights`
/// `bits`-bit weights (when its shared memory fits): at 3, 6 and 7 bits from 2^25 weights,
/// at 4 and 8 bits from [`STREAM_MIN_WEIGHTS`] (2^27). Measured on an H100 (docs/PERF.md
/// "BEAM GEMV: the streaming tensor-core kernel", build `b7b3e5f`) against the first
/// tensor-core kernel (`mma`) and the CUDA-core `nogaps` kernel at the 7 LLM shapes: at 3, 6
/// and 7 bits 1-6% faster than `mma` on the 70B shapes, from 8% slower to 10% faster on the
/// 7B/8B ones, 12-17% slower at 4096 x 4096; at 4 bits 6-18% faster than `nogaps` on the 70B
/// shapes, 1-8% slower on the 7B/8B ones (24% at 4096 x 4096); at 8 bits 1-13% faster on the
/// 70B shapes, 7-11% slower on the 7B/8B ones (23% at 4096 x 4096); slower at 1, 2 and 5 bits.
pub const fn stream_by_default(bits: u32, weights: u64) -> bool {
    match bits {
        3 | 6 | 7 => weights >= 1 << 25,
        4 | 8 => weights >= STREAM_MIN_WEIGHTS,
        _ => false,
    }
}

/// The size from which the streaming kernel is the default at 4 and 8 bits: 2^27 weights
/// (the 70B shapes have 2^27.8, the 7B/8B ones at most 2^25.8).
pub const STREAM_MIN_WEIGHTS: u64 = 1 << 27;

/// Most warps of a block of the streaming kernel: 16 at widths whose kernel fits in 128
/// registers a thread (1-4 and 8 bits, [`stream_max_warps`]), 8 at the others (up to 255).
pub const STREAM_MAX_WARPS: u32 = 16;

/// Most warps of a block of `cmv_beam_gemv_stream_b{bits}` (its launch bound).
pub const fn stream_max_warps(bits: u32) -> u32 {
    match bits {
        5..=7 => 8,
        _ => STREAM_MAX_WARPS,
    }
}
/// Fewest warps of a block of the streaming kernel.
pub const STREAM_MIN_WARPS: u32 = 4;
/// The warps [`stream_warps`] prefers.
pub const STREAM_WARPS: u32 = 8;

/// 16-byte chunks a lane reads from one segment's part of a stage: `ceil(B / 2)` per row half
/// (words `2 jj` and `2 jj + 1`; at odd widths the last chunk holds one word).
pub const fn lane_chunks(bits: u32) -> u32 {
    2 * bits.div_ceil(2)
}

/// Bytes of one segment's part of a stage (the 32 lanes' chunks): [`lane_chunks`] x 32 x 16.
pub const fn seg_stage_bytes(bits: u32) -> u32 {
    lane_chunks(bits) * 32 * 16
}

/// The shape of a launch of the streaming kernel: segments per unit and stages per warp's
/// ring (the kernel reads both from [`GemvParams::slices`](crate::gemv::GemvParams::slices),
/// [`StreamShape::code`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StreamShape {
    /// Consecutive segments of a unit (1..=16): each row of a tile is read in pieces of
    /// `32 B unit_segs` bytes.
    pub unit_segs: u32,
    /// Stages of a warp's ring (2..=8): `stages - 1` units are in flight while the warp
    /// multiplies one.
    pub stages: u32,
}

impl StreamShape {
    /// The default for `bits`-bit weights: two stages of units of 2 segments (4 at 3 bits, 8
    /// at 1 and 2 bits), 8 KiB or less per stage. Measured on an H100 (docs/PERF.md, build
    /// `b7b3e5f`): at 4 and 6 bits 2-3% faster than units of 4 segments (4 bits) or 3 stages
    /// (6 bits) at 28672 x 8192, 8192 x 28672 and 14336 x 4096; at 3 bits mixed (4 kept).
    pub const fn for_bits(bits: u32) -> StreamShape {
        match bits {
            1 | 2 => StreamShape {
                unit_segs: 8,
                stages: 2,
            },
            3 => StreamShape {
                unit_segs: 4,
                stages: 2,
            },
            _ => StreamShape {
                unit_segs: 2,
                stages: 2,
            },
        }
    }

    /// Whether the kernel takes this shape.
    pub const fn valid(self) -> bool {
        self.unit_segs >= 1 && self.unit_segs <= 16 && self.stages >= 2 && self.stages <= 8
    }

    /// `unit_segs | stages << 8`, as the kernel reads it.
    pub const fn code(self) -> u32 {
        self.unit_segs | self.stages << 8
    }

    /// The shape of [`StreamShape::code`] `code`.
    pub const fn from_code(code: u32) -> StreamShape {
        StreamShape {
            unit_segs: code & 0xff,
            stages: (code >> 8) & 0xff,
        }
    }

    /// Bytes of one stage (one unit): `unit_segs` [`seg_stage_bytes`].
    pub const fn stage_bytes(self, bits: u32) -> u32 {
        self.unit_segs * seg_stage_bytes(bits)
    }

    /// Bytes of one warp's ring.
    pub const fn ring_bytes(self, bits: u32) -> u32 {
        self.stages * self.stage_bytes(bits)
    }

    /// Units of a `rows x cols` matrix: tiles of [`MMA_ROWS`] rows times runs of `unit_segs`
    /// segments of [`SEG_ELEMS`] columns (the last of a row may be short).
    pub const fn units(self, rows: u32, cols: u32) -> u64 {
        rows.div_ceil(MMA_ROWS) as u64 * self.row_units(cols) as u64
    }

    /// Units of one row of `cols` columns.
    pub const fn row_units(self, cols: u32) -> u32 {
        cols.div_ceil(SEG_ELEMS).div_ceil(self.unit_segs)
    }
}

// The defaults are shapes the kernel takes.
const _: () = {
    let mut b = 1;
    while b <= crate::gemv_mma::MMA_MAX_BITS {
        assert!(StreamShape::for_bits(b).valid());
        b += 1;
    }
};

/// Bytes of dynamic shared memory `cmv_beam_gemv_stream_b{bits}` needs with `warps` warps for
/// a vector of `cols` columns and `planes` byte planes: the warps' rings, then the `B`
/// fragments ([`crate::gemv_mma::frag_words_planes`]).
pub const fn stream_smem_bytes(
    bits: u32,
    shape: StreamShape,
    warps: u32,
    cols: u32,
    planes: u32,
) -> u64 {
    (warps * shape.ring_bytes(bits)) as u64 + 4 * frag_words_planes(cols, planes) as u64
}

/// The warps of a block of `cmv_beam_gemv_stream_b{bits}` with `shape` when a block may have
/// `max_smem` bytes of shared memory: `want` (8 by default, [`STREAM_WARPS`]) if they fit,
/// else the most of 8 and 4 that fit, else `None` (the kernel does not take the vector).
pub const fn stream_warps(
    bits: u32,
    shape: StreamShape,
    (cols, planes): (u32, u32),
    want: u32,
    max_smem: u32,
) -> Option<u32> {
    let mut w = want;
    if w > stream_max_warps(bits) {
        w = stream_max_warps(bits);
    }
    while w >= STREAM_MIN_WARPS {
        if stream_smem_bytes(bits, shape, w, cols, planes) <= max_smem as u64 {
            return Some(w);
        }
        w /= 2;
    }
    None
}

/// `u32` of the workspace after the fragments: a sum per row, then a counter per tile (both
/// zeroed by `cmv_beam_gemv_prep` before each launch).
pub const fn stream_extra_words(rows: u32) -> u32 {
    rows + rows.div_ceil(MMA_ROWS)
}

/// Whether the copies move 16 bytes (two words): even widths and rows that start on 16 bytes.
pub const fn wide_copies(bits: u32, row_words: u32) -> bool {
    bits.is_multiple_of(2) && row_words.is_multiple_of(2)
}

/// Copies a lane issues per unit: `B` of 16 bytes, or `2 B` of 8 bytes.
pub const fn copies(bits: u32, wide: bool) -> u32 {
    if wide { bits } else { 2 * bits }
}

/// The lane `t` (0..4 of a row) and its word `j` (0..`bits`) that multiply in-segment word `wr`
/// (0..`4 bits`) of a row: the inverse of [`crate::gemv_mma::lane_word`].
pub const fn word_owner(bits: u32, wr: u32) -> (u32, u32) {
    if interleaved(bits) {
        let w = piece_bytes(bits) / 8;
        let piece = wr / w;
        (piece % 4, (piece / 4) * w + wr % w)
    } else {
        (wr / bits, wr % bits)
    }
}

/// Byte offset in a stage of lane `lane`'s word `j` of row half `h` (row `g` or `g + 8`):
/// 16-byte chunk `((j / 2) 2 + h) 32 + lane`, low or high half by `j % 2`.
pub const fn stage_offset(lane: u32, h: u32, j: u32) -> u32 {
    (((j / 2) * 2 + h) * 32 + lane) * 16 + (j % 2) * 8
}

/// Copy `i` (0..[`copies`]) of lane `lane` in a unit: the row in the tile (0..16), the
/// in-segment word it starts at (0..`4 bits`; with `wide`, the even first of two), and the
/// stage offset it goes to ([`stage_offset`] of the lane that multiplies it).
pub const fn copy_plan(bits: u32, wide: bool, lane: u32, i: u32) -> (u32, u32, u32) {
    let n = 32 * i + lane;
    let (row, wr) = if wide {
        (n / (2 * bits), 2 * (n % (2 * bits)))
    } else {
        (n / (4 * bits), n % (4 * bits))
    };
    let (t, j) = word_owner(bits, wr);
    (row, wr, stage_offset(4 * (row % 8) + t, row / 8, j))
}

/// The units `[begin, end)` of warp `warp` of `warps`: `units` split into runs whose lengths
/// differ by at most one (the first `units % warps` warps take one more).
pub const fn warp_units(units: u64, warps: u64, warp: u64) -> (u64, u64) {
    let (base, extra) = (units / warps, units % warps);
    let begin = warp * base + if warp < extra { warp } else { extra };
    (begin, begin + base + if warp < extra { 1 } else { 0 })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gemv_mma::MMA_MAX_BITS;
    use crate::layout::mask;
    use crate::testing::{Rng, pack_nogaps as pack};

    #[test]
    fn word_owner_inverts_lane_word() {
        for bits in 1..=MMA_MAX_BITS {
            let mut seen = vec![false; 4 * bits as usize];
            for t in 0..4 {
                for j in 0..bits {
                    let wr = lane_word(bits, t, j);
                    assert!(wr < 4 * bits);
                    assert_eq!(word_owner(bits, wr), (t, j), "bits {bits}");
                    assert!(!seen[wr as usize]);
                    seen[wr as usize] = true;
                }
            }
        }
    }

    fn stage_bytes(bits: u32) -> u32 {
        seg_stage_bytes(bits)
    }

    /// One unit's stage as the copies of the 32 lanes fill it (`None`: never written, zero on
    /// the GPU only if zero-filled), from the tile at `row0` and segment `seg`.
    fn fill_stage(
        words: &[u64],
        (rows, rw): (u32, u32),
        bits: u32,
        wide: bool,
        (row0, seg): (u32, u32),
    ) -> Vec<Option<u64>> {
        let mut st = vec![None; stage_bytes(bits) as usize / 8];
        for lane in 0..32 {
            for i in 0..copies(bits, wide) {
                let (r, wr, off) = copy_plan(bits, wide, lane, i);
                assert!(r < MMA_ROWS);
                let n = if wide { 2 } else { 1 };
                assert_eq!(off % (8 * n), 0, "copies land aligned");
                for k in 0..n {
                    let (row, word) = (row0 + r, seg * 4 * bits + wr + k);
                    let v = if row < rows && word < rw {
                        words[(row * rw + word) as usize]
                    } else {
                        0
                    };
                    let slot = &mut st[(off / 8 + k) as usize];
                    assert!(
                        slot.is_none(),
                        "bits {bits} wide {wide}: a word written twice"
                    );
                    *slot = Some(v);
                }
            }
        }
        st
    }

    /// Every lane reads from the stage exactly the words the register kernel loads (zero past
    /// the row and the matrix), for both copy widths, and every copy lands in the stage once.
    #[test]
    fn stages_hold_what_each_lane_multiplies() {
        let mut rng = Rng(0xBEA5_0001);
        for bits in 1..=MMA_MAX_BITS {
            for &(rows, cols) in &[(16, 256), (21, 300), (5, 1000), (40, 700), (3, 64)] {
                let v: Vec<u64> = (0..rows * cols).map(|_| rng.next() & mask(bits)).collect();
                let (words, rw) = pack(&v, rows, cols, bits);
                for wide in [false, true] {
                    if wide && bits % 2 == 1 {
                        continue;
                    }
                    for row0 in (0..rows).step_by(MMA_ROWS as usize) {
                        for seg in 0..cols.div_ceil(SEG_ELEMS) {
                            // The 16-byte path needs even row words; pad rows for it.
                            let (words, rw) = if wide && rw % 2 == 1 {
                                let mut p = vec![0u64; (rows * (rw + 1)) as usize];
                                for r in 0..rows as usize {
                                    let (a, b) = (r * (rw as usize + 1), r * rw as usize);
                                    p[a..a + rw as usize]
                                        .copy_from_slice(&words[b..b + rw as usize]);
                                }
                                (p, rw + 1)
                            } else {
                                (words.clone(), rw)
                            };
                            let st = fill_stage(&words, (rows, rw), bits, wide, (row0, seg));
                            for lane in 0..32u32 {
                                let (g, t) = (lane / 4, lane % 4);
                                for h in 0..2 {
                                    for j in 0..bits {
                                        let got = st[(stage_offset(lane, h, j) / 8) as usize]
                                            .expect("every word a lane reads was copied");
                                        let row = row0 + g + 8 * h;
                                        let word = seg * 4 * bits + lane_word(bits, t, j);
                                        let want = if row < rows && word < rw {
                                            words[(row * rw + word) as usize]
                                        } else {
                                            0
                                        };
                                        assert_eq!(got, want, "b{bits} wide {wide} lane {lane}");
                                    }
                                }
                            }
                            let written = st.iter().filter(|s| s.is_some()).count();
                            assert_eq!(written as u32, 64 * bits, "b{bits} wide {wide}");
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn a_lane_reads_consecutive_chunks() {
        // The 32 lanes' reads of one chunk index are 512 consecutive bytes: no bank conflict.
        for lane in 0..32 {
            for h in 0..2 {
                for j in (0..8).step_by(2) {
                    let base = stage_offset(0, h, j);
                    assert_eq!(stage_offset(lane, h, j), base + 16 * lane);
                    assert_eq!(stage_offset(lane, h, j + 1), base + 16 * lane + 8);
                }
            }
        }
    }

    #[test]
    fn warp_units_split_evenly_and_cover_everything() {
        for &(units, warps) in &[
            (0u64, 5u64),
            (1, 1056),
            (57344, 1056),
            (28672 / 16 * 32, 1056),
            (7, 3),
        ] {
            let mut next = 0;
            for w in 0..warps {
                let (b, e) = warp_units(units, warps, w);
                assert_eq!(b, next);
                assert!(e - b == units / warps || e - b == units / warps + 1);
                next = e;
            }
            assert_eq!(next, units);
        }
        let one = StreamShape {
            unit_segs: 1,
            stages: 2,
        };
        assert_eq!(one.units(28672, 8192), 1792 * 32);
        assert_eq!(one.units(17, 257), 4);
        let four = StreamShape {
            unit_segs: 4,
            stages: 2,
        };
        assert_eq!(four.units(28672, 8192), 1792 * 8);
        assert_eq!(four.units(17, 257 + 4 * 256), 2 * 2);
        assert_eq!(StreamShape::from_code(four.code()), four);
    }

    #[test]
    fn shared_memory_fits_the_largest_llm_rows() {
        // 28672 columns of an 8-bit vector: 28 KiB of fragments plus 8 rings of at most
        // 16 KiB, under the 227 KiB a block may have on sm_90; a 32-bit vector (112 KiB of
        // fragments) with 8 warps where the rings take at most 14 KiB (4 bits: 8 KiB), else
        // 4 (8 bits: 16 KiB).
        let max = 227 * 1024;
        for bits in 1..=MMA_MAX_BITS {
            let sh = StreamShape::for_bits(bits);
            assert!(sh.ring_bytes(bits) <= 16 * 1024, "bits {bits}");
            let w = |cols, planes| stream_warps(bits, sh, (cols, planes), STREAM_WARPS, max);
            assert_eq!(w(28672, 1), Some(8), "bits {bits}");
            assert_eq!(w(8192, 4), Some(8), "bits {bits}");
            assert_eq!(w(60_000, 4), None, "bits {bits}");
        }
        let w4 = |bits| {
            let sh = StreamShape::for_bits(bits);
            stream_warps(bits, sh, (28672, 4), STREAM_WARPS, max)
        };
        assert_eq!(w4(4), Some(8));
        assert_eq!(w4(8), Some(4));
    }
}

//! The coding of the `ans-lanes` layout (layout code 2; `docs/ANS.md`, "Layout `ans-lanes`"):
//! the constants of the layout and the encoding and decoding of one unit, which
//! [`crate::encode`], [`AnsMatrix::decode`](crate::AnsMatrix::decode), the reference product
//! and the load checks share.
//!
//! A *unit* is 32 rows (one per lane of a warp; rows padded to 32) by a *segment* of columns
//! (columns padded to a multiple of 16; a segment is a multiple of 16 columns and the last one
//! of a row group may be shorter). Lane `l` codes row `32 g + l` of its row group `g` with one
//! 32-bit coder ([`ans_kernels::coder32`], 8-bit model), one pair of columns per step.
//! Decoding order: for each pair in increasing column order, every lane decodes its pair, then
//! the lanes whose state fell below `2^16` refill, in increasing lane order, from the unit's
//! stream of 16-bit words. The stream starts with the 32 initial states (high then low half
//! each), then the data words, then zero words up to a multiple of 8 (16 bytes); 16-bit word
//! `k` is the low half of the unit's `u32` word `k / 2` for even `k`, the high half for odd
//! `k`.

use std::ops::Range;

use ans_kernels::coder::Slot;
use ans_kernels::coder32::{STATE32_LOWER, decode_pair32, encode_pair32, needs_refill32, refill32};
use ans_kernels::layout::LANES;

use crate::error::{AnsError, Result};

/// Rows of a unit: one per lane.
pub const LANE_ROWS: usize = LANES;
/// Columns are padded to a multiple of this, and a segment is a multiple of it.
pub const SEGMENT_MULTIPLE: usize = 16;
/// The model's precision in this layout: always 8 bits ([`ans_kernels::coder32::PAIR_PRECISION`]).
pub const LANE_PRECISION: u32 = ans_kernels::coder32::PAIR_PRECISION;
/// Elements per step in this layout (a pair): the container's `group` field.
pub const LANE_GROUP: usize = 2;
/// A unit's stream is padded with zero 16-bit words to a multiple of this many (16 bytes).
pub const BLOCK_HALFWORDS: usize = 8;
/// The same, in the `u32` words of the container's stream part (the offsets' multiple).
pub const BLOCK_WORDS: usize = BLOCK_HALFWORDS / 2;
/// 16-bit words of the 32 initial states at the start of a unit's stream.
pub const STATE_HALFWORDS: usize = 2 * LANES;
/// The same, in `u32` words: the least a unit's stream takes (the offsets' minimum gap).
pub const STATE_WORDS: usize = STATE_HALFWORDS / 2;
/// Segments per row group [`default_lane_segment`](crate::default_lane_segment) aims for: one
/// per warp of a full block (`ans_kernels::lanes::MAX_WARPS`). The kernel's 64 KiB table lets
/// two blocks share an SM whatever their size, so a full block is what fills the SM with warps,
/// and the kernel is bound by the latency of each lane's chain of pairs (docs/PERF.md: on an
/// H100 the best segment measured was `cols / 32` at every d from 2048 to 16384).
pub const SEGMENTS_PER_GROUP: usize = 32;
/// The shortest default segment: each unit's 32 flushed states cost `32 / segment` bits per
/// element (0.5 at 64 columns).
pub const MIN_DEFAULT_SEGMENT: usize = 64;

/// Where the units of an `ans-lanes` matrix lie: its padded columns cut in segments.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct LaneGeometry {
    /// Columns per segment (the last one may be shorter).
    pub segment: usize,
    /// Padded columns.
    pub padded_cols: usize,
    /// Segments per row group.
    pub segments: usize,
}

impl LaneGeometry {
    /// The geometry of `padded_cols` columns (a multiple of 16) cut every `segment` (a
    /// positive multiple of 16).
    pub fn new(padded_cols: usize, segment: usize) -> Self {
        debug_assert!(segment > 0);
        Self {
            segment,
            padded_cols,
            segments: padded_cols.div_ceil(segment),
        }
    }

    /// The row group and the padded columns of unit `unit`.
    pub fn unit(&self, unit: usize) -> (usize, Range<usize>) {
        let (group, seg) = (unit / self.segments, unit % self.segments);
        let c0 = seg * self.segment;
        (group, c0..(c0 + self.segment).min(self.padded_cols))
    }
}

/// 16-bit word `k` of a unit's stream stored in `words`: the low half of `words[k / 2]` for
/// even `k`, the high half for odd `k`; `None` past the end.
#[inline(always)]
pub(crate) fn halfword(words: &[u32], k: usize) -> Option<u16> {
    words.get(k / 2).map(|&w| (w >> (16 * (k % 2))) as u16)
}

/// The initial state of lane `lane` stored in a unit's stream `words`, if the stream holds it.
pub(crate) fn initial_state(words: &[u32], lane: usize) -> Option<u32> {
    let hi = halfword(words, 2 * lane)?;
    let lo = halfword(words, 2 * lane + 1)?;
    Some(u32::from(hi) << 16 | u32::from(lo))
}

/// Codes one unit: lane `l` codes row `first_row + l` over the padded columns `cols` (an even
/// count), element `(row, col)` being `at(row, col)` and `model(v)` giving `(cdf, freq)` at 8
/// bits. Returns the unit's stored stream (`u32` words, 16-bit words packed low half first,
/// padded to a multiple of [`BLOCK_WORDS`]) and its number of 16-bit data words.
pub(crate) fn encode_unit(
    at: impl Fn(usize, usize) -> i8,
    model: impl Fn(i8) -> (u32, u32) + Copy,
    first_row: usize,
    cols: Range<usize>,
) -> (Vec<u32>, u64) {
    let mut x = [STATE32_LOWER; LANES];
    let mut emitted: Vec<u16> = Vec::new();
    // The exact reverse of the decoding order: the last pair first, lanes 31 down to 0.
    for c in cols.step_by(2).rev() {
        for l in (0..LANES).rev() {
            let r = first_row + l;
            let (nx, w) = encode_pair32(x[l], model, [at(r, c), at(r, c + 1)]);
            emitted.extend(w);
            x[l] = nx;
        }
    }
    let data = emitted.len() as u64;
    // Flushed lanes 31 down to 0, low half then high half: reversed, the stream starts with
    // hi(x_0), lo(x_0), ..., hi(x_31), lo(x_31).
    for &s in x.iter().rev() {
        emitted.push(s as u16);
        emitted.push((s >> 16) as u16);
    }
    emitted.reverse();
    let len = emitted.len().next_multiple_of(BLOCK_HALFWORDS);
    let mut stored = vec![0u32; len / 2];
    for (k, &w) in emitted.iter().enumerate() {
        stored[k / 2] |= u32::from(w) << (16 * (k % 2));
    }
    (stored, data)
}

/// Decodes one unit from its stored stream `words` with `lookup` (the 8-bit table's slots),
/// over the padded columns `cols`, calling `sink(lane, col, values)` for every pair in
/// decoding order (`col` the pair's first padded column). Returns the 16-bit words read
/// (states included).
///
/// # Errors
/// `corrupted(reason)` when the stream is too short for the states, runs dry, or a coder does
/// not end in `2^16`.
pub(crate) fn decode_unit(
    words: &[u32],
    lookup: impl Fn(u32) -> Slot + Copy,
    cols: Range<usize>,
    mut sink: impl FnMut(usize, usize, &[i8]),
    corrupted: impl Fn(String) -> AnsError,
) -> Result<usize> {
    let mut x = [0u32; LANES];
    for (l, s) in x.iter_mut().enumerate() {
        *s = initial_state(words, l).ok_or_else(|| {
            corrupted(format!(
                "its stream of {} 16-bit words is too short for lane {l}'s initial state",
                2 * words.len()
            ))
        })?;
    }
    let mut next = STATE_HALFWORDS;
    for c in cols.step_by(2) {
        for (l, s) in x.iter_mut().enumerate() {
            let (vals, nx) = decode_pair32(*s, lookup);
            sink(l, c, &vals);
            *s = nx;
        }
        for (l, s) in x.iter_mut().enumerate() {
            if needs_refill32(*s) {
                let Some(w) = halfword(words, next) else {
                    return Err(corrupted(format!(
                        "its stream ran out after {next} 16-bit words, at column {c} for lane {l}"
                    )));
                };
                *s = refill32(*s, w);
                next += 1;
            }
        }
    }
    if let Some((l, s)) = x.iter().enumerate().find(|&(_, &s)| s != STATE32_LOWER) {
        return Err(corrupted(format!(
            "lane {l} ended in state {s:#x} instead of 2^16 after reading {next} of {} 16-bit \
             words",
            2 * words.len()
        )));
    }
    Ok(next)
}

#[cfg(test)]
mod tests {
    use rand::{Rng, SeedableRng, rngs::StdRng};

    use super::*;
    use crate::model::{Model, counts, entropy_bits, index};
    use crate::{EncodeOptions, Layout, encode};

    fn gaussian_int8(n: usize, sigma: f64, seed: u64) -> Vec<i8> {
        let mut rng = StdRng::seed_from_u64(seed);
        (0..n)
            .map(|_| {
                // Box-Muller.
                let (u1, u2): (f64, f64) = (rng.gen_range(1e-12..1.0), rng.gen_range(0.0..1.0));
                let z = (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos();
                (z * sigma).round().clamp(-128.0, 127.0) as i8
            })
            .collect()
    }

    /// Decodes one unit of 32 rows x `cols` from `words` with `model`: the 16-bit words read
    /// and the unit's values, or the corruption found.
    fn decode_words(words: &[u32], model: &Model, cols: usize) -> Result<(usize, Vec<i8>)> {
        let table = model.table();
        let mut out = vec![0i8; 32 * cols];
        decode_unit(
            words,
            |s| Slot::from_packed(table[s as usize]),
            0..cols,
            |l, c, v| out[l * cols + c..l * cols + c + 2].copy_from_slice(v),
            |reason| AnsError::Corrupted {
                unit: "lane unit",
                index: 0,
                reason,
            },
        )
        .map(|read| (read, out))
    }

    /// One unit of 32 rows x `cols` coded and decoded back through the unit functions.
    fn unit_round_trip(w: &[i8], cols: usize) -> (Vec<u32>, u64) {
        let model = Model::quantize(&counts(w), 8).unwrap();
        let (cdf, freq) = (model.cdfs(), model.freqs().map(u32::from));
        let cf = move |v: i8| (cdf[index(v)], freq[index(v)]);
        let (stored, data) = encode_unit(|r, c| w[r * cols + c], cf, 0, 0..cols);
        assert_eq!(
            stored.len(),
            (STATE_HALFWORDS + data as usize).next_multiple_of(BLOCK_HALFWORDS) / 2
        );
        let (read, out) = decode_words(&stored, &model, cols).unwrap();
        assert_eq!(read, STATE_HALFWORDS + data as usize);
        assert_eq!(out, w);
        (stored, data)
    }

    #[test]
    fn a_unit_round_trips_and_packs_its_halfwords_low_first() {
        let cols = 48;
        let w = gaussian_int8(32 * cols, 3.0, 5);
        let (stored, _) = unit_round_trip(&w, cols);
        // Lane 0's state: its high half is 16-bit word 0 (the low half of u32 word 0), its low
        // half word 1.
        let x0 = initial_state(&stored, 0).unwrap();
        assert_eq!(x0 >> 16, stored[0] & 0xffff);
        assert_eq!(x0 & 0xffff, stored[0] >> 16);
        assert!(x0 >= STATE32_LOWER);
        assert_eq!(halfword(&stored, 2 * stored.len()), None);
        // A constant unit costs only its states, all 2^16: hi = 1, lo = 0.
        let (stored, data) = unit_round_trip(&[7i8; 32 * 16], 16);
        assert_eq!(data, 0);
        assert_eq!(stored, vec![1u32; STATE_WORDS]);
    }

    #[test]
    fn damaged_units_are_reported_not_decoded_wrongly() {
        let cols = 512;
        let w = gaussian_int8(32 * cols, 4.0, 7);
        let (good, data) = unit_round_trip(&w, cols);
        let model = Model::quantize(&counts(&w), 8).unwrap();
        let decode = |words: &[u32]| decode_words(words, &model, cols);
        let end = STATE_HALFWORDS + data as usize;
        // Truncated: the last data word gone.
        let mut short = good.clone();
        short.truncate((end - 1) / 2);
        assert!(matches!(decode(&short), Err(AnsError::Corrupted { .. })));
        // Flipped bits in a state and in a data word.
        for k in [0usize, 3, 100, end - 1] {
            let mut flipped = good.clone();
            flipped[k / 2] ^= 0x0100 << (16 * (k % 2));
            assert!(
                decode(&flipped).is_err(),
                "a flip in 16-bit word {k} decoded"
            );
        }
        // Extended: the read count tells (the load checks the unit ends there).
        let mut long = good.clone();
        long.extend([0x1234_5678; BLOCK_WORDS]);
        let (read, out) = decode(&long).unwrap();
        assert_eq!((read, out), (end, w));
    }

    #[test]
    fn sizes_at_sigma_4_stay_within_the_issue_budget() {
        // Issue 16's size goal: within 0.15 bits per element of the entropy at sigma = 4 for
        // d >= 8192; a 2048 x 8192 matrix with 1024-column segments (512 units), the whole
        // container counted (header, frequency table, offsets, stream).
        let (rows, cols) = (2048, 8192);
        let w = gaussian_int8(rows * cols, 4.0, 42);
        let c = counts(&w);
        let entropy = entropy_bits(&c) / w.len() as f64;
        let model = Model::quantize(&c, 8).unwrap();
        let model_overhead = (model.cross_entropy_bits(&c) - entropy_bits(&c)) / w.len() as f64;
        let opts = EncodeOptions {
            layout: Layout::WarpLanes,
            lane_segment: Some(1024),
            ..EncodeOptions::default()
        };
        let m = encode(&w, rows, cols, &opts).unwrap();
        assert_eq!((m.segment(), m.units()), (Some(1024), 512));
        assert_eq!(m.model(), &model);
        let bits = m.bits_per_element();
        println!(
            "sigma=4 {rows}x{cols} ans-lanes segment 1024: {bits:.4} bits per element, entropy \
             {entropy:.4}, model {model_overhead:.4}\n  {}",
            m.entropy_report()
        );
        // The states' share: 32 x 32 bits per 32 x 1024 elements.
        let states = 32.0 / 1024.0;
        assert!(
            bits <= entropy + model_overhead + states + 0.01,
            "bits {bits}, entropy {entropy}, model {model_overhead}"
        );
        assert!(
            bits - entropy < 0.15,
            "{bits} bits against entropy {entropy}"
        );
        assert_eq!(m.decode().unwrap(), w);
    }
}

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
//!
//! `ans-lanes-esc` (layout code 3) codes the same way with *escapes*: the values of an escape
//! set are coded as one escape value, and after the states each unit stores an exception
//! header word (count and escape value, [`ans_kernels::lanes::exception_header`]) and the
//! list of its elements whose value is escaped but not the escape value, in decoding order
//! ([`ans_kernels::lanes::exception_entry`]); its data words follow the list. Lane 0's coder
//! starts (and a decoder ends) at `2^16` plus the list's check
//! ([`ans_kernels::lanes::exception_check`]), so that a damaged list is found as a damaged
//! stream is.

use std::ops::Range;

use ans_kernels::coder::Slot;
use ans_kernels::coder32::{STATE32_LOWER, decode_pair32, encode_pair32, needs_refill32, refill32};
use ans_kernels::lanes::{
    MAX_EXCEPTIONS, exception_check, exception_entry, exception_header, exception_key,
    parse_exception, parse_exception_header,
};
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

/// The escapes of an `ans-lanes-esc` matrix: the values of the set are coded as `escape`
/// (a member of the set), and each unit lists where its elements differ from it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Escapes {
    /// The value coded in the escaped values' place.
    pub escape: i8,
    /// Which values (by [`crate::model::index`]) are escaped.
    pub escaped: [bool; 256],
}

impl Escapes {
    /// No value escaped; `escape` is still recorded in every unit's header.
    pub fn none(escape: i8) -> Self {
        Self {
            escape,
            escaped: [false; 256],
        }
    }

    /// The value coded for `v`.
    #[inline(always)]
    pub fn coded(&self, v: i8) -> i8 {
        if self.escaped[crate::model::index(v)] {
            self.escape
        } else {
            v
        }
    }

    /// Moves the counts of the escaped values (by [`crate::model::index`]) onto the escape
    /// value, as the model codes them; returns how many were moved (the exceptions).
    pub fn merge(&self, counts: &mut [u64; 256]) -> u64 {
        let to = crate::model::index(self.escape);
        let mut moved = 0;
        for i in 0..counts.len() {
            if self.escaped[i] && i != to {
                moved += counts[i];
                counts[to] += counts[i];
                counts[i] = 0;
            }
        }
        moved
    }

    /// Whether `v` must be listed as an exception.
    #[inline(always)]
    pub fn is_exception(&self, v: i8) -> bool {
        v != self.escape && self.escaped[crate::model::index(v)]
    }
}

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
/// bits. With `escapes` (`ans-lanes-esc`) escaped values are coded as the escape value and the
/// unit's exception header and list follow its states; the caller has checked that the unit
/// has at most [`MAX_EXCEPTIONS`] exceptions ([`count_exceptions`]) and that its columns fit
/// an exception key. Returns the unit's stored stream (`u32` words, 16-bit words packed low
/// half first, padded to a multiple of [`BLOCK_WORDS`]) and its number of 16-bit words after
/// the states (the exception words counted, as a load's scan counts them).
pub(crate) fn encode_unit(
    at: impl Fn(usize, usize) -> i8,
    model: impl Fn(i8) -> (u32, u32) + Copy,
    first_row: usize,
    cols: Range<usize>,
    escapes: Option<&Escapes>,
) -> (Vec<u32>, u64) {
    let coded = |r: usize, c: usize| {
        let v = at(r, c);
        escapes.map_or(v, |e| e.coded(v))
    };
    // ans-lanes-esc: the header and list, whose check lane 0 starts from (and a decoder ends
    // in).
    let exceptions = escapes.map(|e| {
        let list = exception_list(&at, e, first_row, cols.clone());
        debug_assert!(list.len() <= MAX_EXCEPTIONS as usize);
        (exception_header(list.len() as u32, e.escape), list)
    });
    let mut x = [STATE32_LOWER; LANES];
    if let Some((header, list)) = &exceptions {
        x[0] += exception_check(*header, list);
    }
    let mut emitted: Vec<u16> = Vec::new();
    // The exact reverse of the decoding order: the last pair first, lanes 31 down to 0.
    for c in cols.clone().step_by(2).rev() {
        for l in (0..LANES).rev() {
            let r = first_row + l;
            let (nx, w) = encode_pair32(x[l], model, [coded(r, c), coded(r, c + 1)]);
            emitted.extend(w);
            x[l] = nx;
        }
    }
    // The stream: hi(x_0), lo(x_0), ..., hi(x_31), lo(x_31), the exception words (low half
    // first), then the data words in decoding order.
    let mut words: Vec<u16> = Vec::with_capacity(STATE_HALFWORDS + emitted.len() + 2);
    for &s in &x {
        words.push((s >> 16) as u16);
        words.push(s as u16);
    }
    if let Some((header, list)) = exceptions {
        for w in std::iter::once(header).chain(list) {
            words.push(w as u16);
            words.push((w >> 16) as u16);
        }
    }
    words.extend(emitted.iter().rev());
    let data = (words.len() - STATE_HALFWORDS) as u64;
    let len = words.len().next_multiple_of(BLOCK_HALFWORDS);
    let mut stored = vec![0u32; len / 2];
    for (k, &w) in words.iter().enumerate() {
        stored[k / 2] |= u32::from(w) << (16 * (k % 2));
    }
    (stored, data)
}

/// The exception entries of the unit of rows `first_row..first_row + 32` over the padded
/// columns `cols`, in decoding order.
fn exception_list(
    at: impl Fn(usize, usize) -> i8,
    e: &Escapes,
    first_row: usize,
    cols: Range<usize>,
) -> Vec<u32> {
    let mut list = Vec::new();
    for c in cols.clone().step_by(2) {
        for l in 0..LANES {
            for k in 0..2 {
                let v = at(first_row + l, c + k);
                if e.is_exception(v) {
                    let key = exception_key(l as u32, (c + k - cols.start) as u32)
                        .expect("the encoder escapes only in units whose columns fit a key");
                    list.push(exception_entry(key, v));
                }
            }
        }
    }
    list
}

/// How many exceptions the unit of rows `first_row..first_row + 32` over the padded columns
/// `cols` would list with `escapes`.
pub(crate) fn count_exceptions(
    at: impl Fn(usize, usize) -> i8,
    e: &Escapes,
    first_row: usize,
    cols: Range<usize>,
) -> usize {
    (first_row..first_row + LANES)
        .map(|r| cols.clone().filter(|&c| e.is_exception(at(r, c))).count())
        .sum()
}

/// Decodes one unit from its stored stream `words` with `lookup` (the 8-bit table's slots),
/// over the padded columns `cols`, calling `sink(lane, col, values)` for every pair in
/// decoding order (`col` the pair's first padded column). With `escapes`
/// (`ans-lanes-esc`), the unit's exception list replaces the escape value where it lists an
/// element; `escapes` is then the matrix's escape value (unit 0's), or `None` to take the
/// unit's own. Returns the 16-bit words read (states and exception words included).
///
/// # Errors
/// `corrupted(reason)` when the stream is too short for the states, runs dry, or a coder does
/// not end in `2^16`; with escapes, when the header or the list is damaged (a count past
/// [`MAX_EXCEPTIONS`], reserved bits set, entries out of order or outside the unit, an entry
/// holding the escape value or listing an element that does not decode to it);
/// [`AnsError::Escape`] when the unit's escape value is not the matrix's.
pub(crate) fn decode_unit(
    words: &[u32],
    lookup: impl Fn(u32) -> Slot + Copy,
    cols: Range<usize>,
    escapes: Option<Option<i8>>,
    unit: usize,
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
    // Where lane 0 must end: 2^16, plus the exception check with escapes.
    let mut lane0_end = STATE32_LOWER;
    let (list, escape) = match escapes {
        None => (&[][..], 0),
        Some(expected) => {
            let (list, escape) = read_exceptions(words, cols.len(), &corrupted)?;
            if let Some(expected) = expected
                && escape != expected
            {
                return Err(AnsError::Escape {
                    unit,
                    found: escape,
                    expected,
                });
            }
            next += 2 + 2 * list.len();
            lane0_end += exception_check(words[STATE_HALFWORDS / 2], list);
            (list, escape)
        }
    };
    let mut pending = list.iter().map(|&e| parse_exception(e)).peekable();
    for c in cols.clone().step_by(2) {
        for (l, s) in x.iter_mut().enumerate() {
            let (mut vals, nx) = decode_pair32(*s, lookup);
            for (k, v) in vals.iter_mut().enumerate() {
                let col = (c + k - cols.start) as u32;
                if let Some(&(el, ec, value)) = pending.peek()
                    && (el, ec) == (l as u32, col)
                {
                    if *v != escape {
                        return Err(corrupted(format!(
                            "its exception at lane {l}, column {c} + {k} lists an element that                              decodes to {v}, not the escape value {escape}"
                        )));
                    }
                    *v = value;
                    pending.next();
                }
            }
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
    debug_assert!(
        pending.peek().is_none(),
        "entries were checked to lie in the unit"
    );
    let end = |l: usize| if l == 0 { lane0_end } else { STATE32_LOWER };
    if let Some((l, s)) = x.iter().enumerate().find(|&(l, &s)| s != end(l)) {
        return Err(corrupted(format!(
            "lane {l} ended in state {s:#x} instead of {:#x} after reading {next} of {} 16-bit \
             words",
            end(l),
            2 * words.len()
        )));
    }
    Ok(next)
}

/// The exception list and escape value of an `ans-lanes-esc` unit `words` of `width`
/// columns, checked: a header with a count up to [`MAX_EXCEPTIONS`] and no reserved bits,
/// entries inside the stream, in strictly increasing decoding order, inside the unit's
/// columns, none holding the escape value.
fn read_exceptions<'w>(
    words: &'w [u32],
    width: usize,
    corrupted: &impl Fn(String) -> AnsError,
) -> Result<(&'w [u32], i8)> {
    let first = STATE_HALFWORDS / 2;
    let Some(&h) = words.get(first) else {
        return Err(corrupted(format!(
            "its stream of {} 16-bit words is too short for the exception header",
            2 * words.len()
        )));
    };
    let (n, escape) = match parse_exception_header(h) {
        Some((n, e)) if n <= MAX_EXCEPTIONS => (n as usize, e),
        _ => {
            return Err(corrupted(format!(
                "its exception header {h:#010x} is not a count up to {MAX_EXCEPTIONS} and an \
                 escape value"
            )));
        }
    };
    let Some(list) = words.get(first + 1..first + 1 + n) else {
        return Err(corrupted(format!(
            "its stream of {} 16-bit words is too short for its {n} exceptions",
            2 * words.len()
        )));
    };
    let mut last = None;
    for (i, &e) in list.iter().enumerate() {
        let (lane, col, value) = parse_exception(e);
        let key = e >> 8;
        if last.is_some_and(|k| key <= k) || col as usize >= width || value == escape {
            return Err(corrupted(format!(
                "its exception {i} ({e:#010x}: lane {lane}, column {col}, value {value}) is out \
                 of order, outside the unit's {width} columns or holds the escape value {escape}"
            )));
        }
        last = Some(key);
    }
    Ok((list, escape))
}

/// The escape value in an `ans-lanes-esc` unit's header, if the stream holds a valid one.
pub(crate) fn unit_escape(words: &[u32]) -> Option<i8> {
    words
        .get(STATE_HALFWORDS / 2)
        .and_then(|&h| parse_exception_header(h))
        .map(|(_, e)| e)
}

/// 16-bit words of an `ans-lanes-esc` unit's exception header and list (0 for a unit whose
/// header is unreadable).
pub(crate) fn exception_halfwords(words: &[u32]) -> usize {
    words
        .get(STATE_HALFWORDS / 2)
        .and_then(|&h| parse_exception_header(h))
        .map_or(0, |(n, _)| 2 + 2 * n as usize)
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
        decode_with(words, model, cols, None, 0)
    }

    /// [`decode_unit`] of one unit of 32 rows x `cols` (unit `index`, `escapes` as it takes
    /// them) into a row-major matrix.
    fn decode_with(
        words: &[u32],
        model: &Model,
        cols: usize,
        escapes: Option<Option<i8>>,
        index: usize,
    ) -> Result<(usize, Vec<i8>)> {
        let table = model.table();
        let mut out = vec![0i8; 32 * cols];
        decode_unit(
            words,
            |s| Slot::from_packed(table[s as usize]),
            0..cols,
            escapes,
            index,
            |l, c, v| out[l * cols + c..l * cols + c + 2].copy_from_slice(v),
            |reason| AnsError::Corrupted {
                unit: "lane unit",
                index,
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
        let (stored, data) = encode_unit(|r, c| w[r * cols + c], cf, 0, 0..cols, None);
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

    /// Decodes one `ans-lanes-esc` unit of 32 rows x `cols` with `model` as unit 3, the escape
    /// value expected `expected`.
    fn decode_esc(
        words: &[u32],
        model: &Model,
        cols: usize,
        expected: Option<i8>,
    ) -> Result<(usize, Vec<i8>)> {
        decode_with(words, model, cols, Some(expected), 3)
    }

    /// A unit with escapes: the values beyond +-`t` coded as the largest of them.
    fn escaped_unit(w: &[i8], cols: usize, t: i8) -> (Vec<u32>, Model, Escapes, usize) {
        let mut e = Escapes::none(0);
        let escape = *w.iter().filter(|v| v.abs() > t).max().unwrap();
        e.escape = escape;
        for v in w.iter().filter(|v| v.abs() > t) {
            e.escaped[index(*v)] = true;
        }
        let coded: Vec<i8> = w.iter().map(|&v| e.coded(v)).collect();
        let model = Model::quantize(&counts(&coded), 8).unwrap();
        let (cdf, freq) = (model.cdfs(), model.freqs().map(u32::from));
        let cf = move |v: i8| (cdf[index(v)], freq[index(v)]);
        let at = |r: usize, c: usize| w[r * cols + c];
        let n = count_exceptions(at, &e, 0, 0..cols);
        let (stored, data) = encode_unit(at, cf, 0, 0..cols, Some(&e));
        assert_eq!(data as usize % 2, 0);
        (stored, model, e, n)
    }

    #[test]
    fn escaped_units_round_trip_and_list_their_exceptions_in_decoding_order() {
        let cols = 96;
        let w = gaussian_int8(32 * cols, 4.0, 11);
        let (stored, model, e, n) = escaped_unit(&w, cols, 9);
        assert!(n > 2 && n <= MAX_EXCEPTIONS as usize, "{n} exceptions");
        // The header: the count and the escape value; the entries in increasing key order.
        assert_eq!(
            parse_exception_header(stored[STATE_WORDS]),
            Some((n as u32, e.escape))
        );
        let list = &stored[STATE_WORDS + 1..STATE_WORDS + 1 + n];
        assert!(list.windows(2).all(|p| p[0] >> 8 < p[1] >> 8));
        for &entry in list {
            let (l, c, v) = parse_exception(entry);
            assert_eq!(w[l as usize * cols + c as usize], v);
            assert!(e.is_exception(v));
        }
        assert_eq!(exception_halfwords(&stored), 2 + 2 * n);
        assert_eq!(unit_escape(&stored), Some(e.escape));
        for expected in [None, Some(e.escape)] {
            let (read, out) = decode_esc(&stored, &model, cols, expected).unwrap();
            assert_eq!(out, w);
            assert!(read >= STATE_HALFWORDS + 2 + 2 * n);
        }
        // Without the exceptions the escape value stands in their place.
        let plain = decode_words(&stored, &model, cols);
        assert!(plain.is_err() || plain.unwrap().1 != w);
        // Nothing escaped: an empty list, the unit otherwise as ans-lanes codes it.
        let m8 = Model::quantize(&counts(&w), 8).unwrap();
        let (cdf, freq) = (m8.cdfs(), m8.freqs().map(u32::from));
        let cf = move |v: i8| (cdf[index(v)], freq[index(v)]);
        let none = Escapes::none(0);
        let (esc, _) = encode_unit(|r, c| w[r * cols + c], cf, 0, 0..cols, Some(&none));
        let (lanes, _) = encode_unit(|r, c| w[r * cols + c], cf, 0, 0..cols, None);
        assert_eq!(esc[STATE_WORDS], exception_header(0, 0));
        assert_eq!(esc[..STATE_WORDS], lanes[..STATE_WORDS]);
        assert_eq!(decode_esc(&esc, &m8, cols, Some(0)).unwrap().1, w);
    }

    /// The values of a unit's `n` exceptions.
    fn list_values(words: &[u32], n: usize) -> Vec<i8> {
        words[STATE_WORDS + 1..STATE_WORDS + 1 + n]
            .iter()
            .map(|&e| parse_exception(e).2)
            .collect()
    }

    #[test]
    fn damaged_exception_lists_are_reported() {
        let cols = 96;
        let w = gaussian_int8(32 * cols, 4.0, 12);
        let (good, model, e, n) = escaped_unit(&w, cols, 9);
        let decode = |words: &[u32]| decode_esc(words, &model, cols, Some(e.escape));
        let corrupt = |words: Vec<u32>, what: &str| match decode(&words) {
            Err(AnsError::Corrupted {
                index: 3, reason, ..
            }) => reason,
            other => panic!("{what}: {other:?}"),
        };
        let header = STATE_WORDS;
        let mut bad = good.clone();
        bad[header] = exception_header(MAX_EXCEPTIONS + 1, e.escape);
        assert!(corrupt(bad, "count").contains("exception header"));
        let mut bad = good.clone();
        bad[header] |= 1 << 20;
        assert!(corrupt(bad, "reserved bits").contains("exception header"));
        // Two entries swapped: out of order.
        let mut bad = good.clone();
        bad.swap(header + 1, header + 2);
        assert!(corrupt(bad, "order").contains("out of order"));
        // An entry past the unit's columns.
        let mut bad = good.clone();
        let last = header + n;
        bad[last] = exception_entry(exception_key(31, cols as u32).unwrap(), 100);
        assert!(corrupt(bad, "column").contains("outside"));
        // An entry holding the escape value.
        let mut bad = good.clone();
        bad[header + 1] = (bad[header + 1] & !0xff) | u32::from(e.escape as u8);
        assert!(corrupt(bad, "escape value").contains("escape value"));
        // An entry moved onto an element that does not decode to the escape value (the key of
        // the first element of the unit, lane 0 column 0, which is not escaped here).
        assert!(!e.escaped[index(w[0])]);
        let mut bad = good.clone();
        bad[header + 1] = exception_entry(0, 100);
        assert!(corrupt(bad, "position").contains("not the escape value"));
        // A value changed to another exception's (still in order, still valid): the check
        // lane 0 ends in tells.
        let other = list_values(&good, n)
            .into_iter()
            .find(|&v| v != parse_exception(good[header + 1]).2)
            .unwrap();
        let mut bad = good.clone();
        bad[header + 1] = (bad[header + 1] & !0xff) | u32::from(other as u8);
        assert!(corrupt(bad, "value").contains("lane 0 ended in state"));
        // A stream cut inside the list.
        let short = good[..header + 2].to_vec();
        assert!(corrupt(short, "short").contains("too short"));
        let short = good[..header].to_vec();
        assert!(corrupt(short, "no header").contains("too short"));
        // Another escape value than the matrix's: not corruption, another encoder.
        let other = e.escape.wrapping_sub(1);
        assert!(matches!(
            decode_esc(&good, &model, cols, Some(other)),
            Err(AnsError::Escape { unit: 3, found, expected }) if found == e.escape && expected == other
        ));
    }

    #[test]
    fn exception_keys_follow_the_decoding_order() {
        let mut keys = Vec::new();
        for c in (0..64u32).step_by(2) {
            for l in 0..32u32 {
                for k in 0..2 {
                    let key = exception_key(l, c + k).unwrap();
                    let (pl, pc, pv) = parse_exception(exception_entry(key, -7));
                    assert_eq!((pl, pc, pv), (l, c + k, -7));
                    keys.push(key);
                }
            }
        }
        assert!(keys.windows(2).all(|p| p[0] < p[1]));
        let wide = (1u32 << ans_kernels::lanes::EXC_COL_BITS) - 1;
        assert!(exception_key(31, wide).is_some());
        assert_eq!(exception_key(0, wide + 1), None);
        assert_eq!(exception_key(32, 0), None);
        assert_eq!(
            parse_exception_header(exception_header(64, -128)),
            Some((64, -128))
        );
        assert_eq!(parse_exception_header(1 << 16), None);
    }

    #[test]
    fn escapes_bring_sigma_4_within_the_issue_budget_at_the_default_segment() {
        // Issue 16's size goal at d = 8192's default segment (256 columns): within 0.15 bits
        // of the entropy. A 2048 x 8192 matrix (256 units of 32 x 256), the whole container.
        let (rows, cols) = (2048, 8192);
        let w = gaussian_int8(rows * cols, 4.0, 42);
        let entropy = entropy_bits(&counts(&w)) / w.len() as f64;
        let encode_in = |layout| {
            let opts = EncodeOptions {
                layout,
                lane_segment: Some(256),
                ..EncodeOptions::default()
            };
            encode(&w, rows, cols, &opts).unwrap()
        };
        let (lanes, esc) = (
            encode_in(Layout::WarpLanes),
            encode_in(Layout::WarpLanesEsc),
        );
        let (b0, b1) = (lanes.bits_per_element(), esc.bits_per_element());
        let report = esc.entropy_report();
        println!(
            "sigma=4 {rows}x{cols} segment 256: ans-lanes {b0:.4}, ans-lanes-esc {b1:.4} \
             (escape {:?}), entropy {entropy:.4}\n  {report}",
            esc.escape_value()
        );
        assert!(b1 - entropy < 0.15, "{b1} bits against entropy {entropy}");
        assert!(b0 - b1 > 0.04, "escapes saved {} bits", b0 - b1);
        assert!(report.exception_bytes > 0);
        assert_eq!(
            report.total_bytes(),
            esc.size_breakdown().container_bytes as usize
        );
        assert_eq!(esc.decode().unwrap(), w);
        let back = crate::AnsMatrix::from_bytes(&esc.to_bytes()).unwrap();
        assert_eq!(back.escape_value(), esc.escape_value());
        assert_eq!(back.decode().unwrap(), w);
    }
}

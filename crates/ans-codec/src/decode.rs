//! The CPU decoder: the kernels' exact procedure, one row (or stripe, or lane unit) per task.
//!
//! Each unit's 32 coders take their initial states from the first 64 logical words of the
//! unit's stream, then decode in the decoding order of `docs/ANS.md`, refilling in increasing
//! lane order from the stream read through `layout::interleave` (`ans-lanes`: 16-bit words,
//! [`crate::lanes`]). A read past the end of the unit's stream, or a coder that does not end in
//! its initial state (`2^32`, `2^16` for `ans-lanes`), is [`AnsError::Corrupted`].

use ans_kernels::coder::{Slot, decode_group, needs_refill, refill};
use ans_kernels::layout::{BLOCK_WORDS, CHUNK, LANES, QUAD, STATE_LOWER, STRIPE_ROWS, interleave};
use rayon::prelude::*;

use cmv_format::{FormatError, check_len};

use crate::error::{AnsError, Result, shape_error};
use crate::lanes::{self, LANE_ROWS};
use crate::layout::Layout;
use crate::matrix::{AnsMatrix, STATE_WORDS, Stats};
use crate::model::{VALUES, index};

/// Units decoded by one task of [`AnsMatrix::scan`].
const SCAN_UNITS: usize = 64;

/// Reads a unit's logical stream through the interleaving, never past its end.
struct Reader<'a> {
    words: &'a [u32],
    pos: usize,
}

impl Reader<'_> {
    #[inline(always)]
    fn next(&mut self) -> Option<u32> {
        let p = self.pos;
        let w = *self
            .words
            .get(p - p % BLOCK_WORDS + interleave(p % BLOCK_WORDS))?;
        self.pos += 1;
        Some(w)
    }
}

impl AnsMatrix {
    /// Decodes the matrix: `rows * cols` values, row-major, the padding stripped.
    ///
    /// # Errors
    /// [`AnsError::Corrupted`] for the first row (or stripe, or lane unit) whose stream does
    /// not decode, [`AnsError::Alloc`] when the result cannot be allocated.
    pub fn decode(&self) -> Result<Vec<i8>> {
        let (rows, cols) = (self.shape.rows(), self.shape.cols());
        let n = rows
            .checked_mul(cols)
            .ok_or_else(|| shape_error(rows, cols))?;
        let mut out = Vec::new();
        out.try_reserve_exact(n)
            .map_err(|_| AnsError::Alloc { bytes: n as u128 })?;
        out.resize(n, 0i8);
        let table = self.table();
        let results: Vec<Result<usize>> = match self.layout {
            Layout::WarpRows => out
                .par_chunks_mut(cols)
                .enumerate()
                .map(|(o, row)| {
                    self.decode_unit(&table, o, |_, c, vals| {
                        for (k, &v) in vals.iter().enumerate() {
                            if let Some(slot) = row.get_mut(c + k) {
                                *slot = v;
                            }
                        }
                    })
                })
                .collect(),
            Layout::WarpStripes => out
                .par_chunks_mut(STRIPE_ROWS * cols)
                .enumerate()
                .map(|(t, stripe)| {
                    self.decode_unit(&table, t, |l, c, vals| {
                        for (k, &v) in vals.iter().enumerate() {
                            if c + k < cols
                                && let Some(slot) = stripe.get_mut(l * cols + c + k)
                            {
                                *slot = v;
                            }
                        }
                    })
                })
                .collect(),
            Layout::WarpLanes | Layout::WarpLanesEsc => {
                // One task per row group, its segments in order.
                let segments = self.segments();
                out.par_chunks_mut(LANE_ROWS * cols)
                    .enumerate()
                    .map(|(g, block)| {
                        for u in g * segments..(g + 1) * segments {
                            self.decode_unit(&table, u, |l, c, vals| {
                                for (k, &v) in vals.iter().enumerate() {
                                    if c + k < cols
                                        && let Some(slot) = block.get_mut(l * cols + c + k)
                                    {
                                        *slot = v;
                                    }
                                }
                            })?;
                        }
                        Ok(0)
                    })
                    .collect()
            }
        };
        first_error(results)?;
        Ok(out)
    }

    /// The product of the decoded matrix and `x` (`cols` values) as the kernels compute it:
    /// int32 accumulators, wrapping on overflow as `dp4a` does, and their requantization to
    /// int8 (`cmv_device::requantize`, round half to even). The matrix is decoded a row (or a
    /// stripe, or a lane unit) at a time, never materialized.
    ///
    /// # Errors
    /// [`FormatError::Length`] when `x` does not hold `cols` values, [`AnsError::Scale`] for a
    /// non-finite scale, [`AnsError::Corrupted`] as [`AnsMatrix::decode`].
    pub fn gemv_reference(&self, x: &[i8], scale: f32) -> Result<(Vec<i32>, Vec<i8>)> {
        check_len("input vector", x.len(), self.shape.cols())?;
        if !scale.is_finite() {
            return Err(AnsError::Scale { scale });
        }
        let acc = self.accumulate(x)?;
        let y = acc
            .iter()
            .map(|&a| cmv_device::requantize(a, scale))
            .collect();
        Ok((acc, y))
    }

    /// The int32 accumulators of `W x` (`x.len() == cols`, checked by the caller), wrapping
    /// as `dp4a` does.
    pub(crate) fn accumulate(&self, x: &[i8]) -> Result<Vec<i32>> {
        let table = self.table();
        let dot = |acc: &mut i32, c: usize, vals: &[i8]| {
            for (k, &v) in vals.iter().enumerate() {
                if let Some(&xv) = x.get(c + k) {
                    *acc = acc.wrapping_add(i32::from(v) * i32::from(xv));
                }
            }
        };
        let mut acc = vec![0i32; self.shape.rows()];
        let results: Vec<Result<usize>> = match self.layout {
            Layout::WarpRows => acc
                .par_iter_mut()
                .enumerate()
                .map(|(o, a)| self.decode_unit(&table, o, |_, c, vals| dot(a, c, vals)))
                .collect(),
            Layout::WarpStripes => acc
                .par_chunks_mut(STRIPE_ROWS)
                .enumerate()
                .map(|(t, accs)| {
                    self.decode_unit(&table, t, |l, c, vals| {
                        if let Some(a) = accs.get_mut(l) {
                            dot(a, c, vals);
                        }
                    })
                })
                .collect(),
            Layout::WarpLanes | Layout::WarpLanesEsc => {
                // One task per unit: its 32 rows' partial sums over its segment, added to the
                // rows' accumulators afterwards (wrapping sums: any order gives the same).
                let segments = self.segments();
                let partials: Vec<Result<[i32; LANE_ROWS]>> = (0..self.units())
                    .into_par_iter()
                    .map(|u| {
                        let mut part = [0i32; LANE_ROWS];
                        self.decode_unit(&table, u, |l, c, vals| dot(&mut part[l], c, vals))?;
                        Ok(part)
                    })
                    .collect();
                let mut results = Vec::with_capacity(partials.len());
                for (u, part) in partials.into_iter().enumerate() {
                    results.push(part.map(|part| {
                        let first = LANE_ROWS * (u / segments);
                        for (a, p) in acc.iter_mut().skip(first).zip(part) {
                            *a = a.wrapping_add(p);
                        }
                        0
                    }));
                }
                results
            }
        };
        first_error(results)?;
        Ok(acc)
    }

    /// Statistics of the matrix: the encoder's or a load's, else from one decode.
    pub(crate) fn stats(&self) -> &Stats {
        self.stats.get_or_init(|| {
            self.scan(false)
                .expect("a scan that checks nothing finds nothing")
        })
    }

    /// Decodes every unit (in parallel) to count its data words and the real elements'
    /// values; a unit that does not decode counts all its non-state words as data and is
    /// kept (it is reported as corrupted where it is decoded).
    ///
    /// With `canonical`, a unit that decodes must also be the encoder's: its padding elements
    /// decode to the padding value ([`AnsError::Padding`]), the words after its data up to the
    /// next multiple of 128 (`ans-lanes`: 16-bit words up to the next multiple of 8) are zero
    /// ([`FormatError::NonZero`]) and its stream ends there ([`FormatError::Offset`]). The work
    /// is one decode of the padded matrix.
    pub(crate) fn scan(&self, canonical: bool) -> Result<Stats> {
        let units = self.units();
        let table = self.table();
        let blocks: Vec<Result<([u64; VALUES], Vec<u32>)>> = (0..units.div_ceil(SCAN_UNITS))
            .into_par_iter()
            .map(|b| {
                let mut counts = [0u64; VALUES];
                let range = b * SCAN_UNITS..units.min((b + 1) * SCAN_UNITS);
                let data_words = range
                    .map(|u| self.scan_unit(&table, u, canonical, &mut counts))
                    .collect::<Result<Vec<u32>>>()?;
                Ok((counts, data_words))
            })
            .collect();
        let mut counts = [0u64; VALUES];
        let mut data_words = Vec::with_capacity(units);
        for block in blocks {
            let (c, d) = block?;
            for (a, b) in counts.iter_mut().zip(c) {
                *a += b;
            }
            data_words.extend(d);
        }
        Ok(Stats { data_words, counts })
    }

    /// [`AnsMatrix::scan`] of one unit: adds its real values to `counts`, returns its data
    /// words (16-bit words for `ans-lanes`).
    fn scan_unit(
        &self,
        table: &[u32],
        u: usize,
        canonical: bool,
        counts: &mut [u64; VALUES],
    ) -> Result<u32> {
        let (rows, cols) = (self.shape.rows(), self.shape.cols());
        let padding = self.padding_value();
        let mut bad_padding = None;
        let segments = self.segments();
        let result = self.decode_unit(table, u, |l, c, vals| {
            let row = self.layout.row_of(u, l, segments);
            for (k, &v) in vals.iter().enumerate() {
                if row < rows && c + k < cols {
                    counts[index(v)] += 1;
                } else if v != padding && bad_padding.is_none() {
                    bad_padding = Some((row, c + k, v));
                }
            }
        });
        let (lo, hi) = (self.offsets[u] as usize, self.offsets[u + 1] as usize);
        // The unit's length in its logical words (16-bit ones for ans-lanes).
        let per_word = 4 / self.layout.word_bytes();
        if canonical
            && u == 0
            && let Some(escape) = self.escape_value()
            && self.model.freq(escape) == 0
        {
            return Err(AnsError::Escape {
                unit: 0,
                found: escape,
                expected: escape,
            });
        }
        let read = match result {
            Ok(read) => read,
            // Not damage but another encoder's choice: refused.
            Err(e @ AnsError::Escape { .. }) if canonical => return Err(e),
            // Kept as it is: decode, gemv_reference and the kernels report it.
            Err(_) => return Ok((per_word * (hi - lo)).saturating_sub(STATE_WORDS) as u32),
        };
        if canonical && let Some((row, col, found)) = bad_padding {
            return Err(AnsError::Padding {
                row,
                col,
                found,
                expected: padding,
            });
        }
        if canonical && self.layout.is_lanes() {
            self.check_lane_end(u, read)?;
        }
        if canonical && !self.layout.is_lanes() {
            let end = read.next_multiple_of(BLOCK_WORDS);
            if hi - lo != end {
                return Err(self.unit_end_error(
                    u,
                    "a unit's stream must end at the first multiple of 128 words after its data",
                ));
            }
            for p in read..end {
                let at = lo + p - p % BLOCK_WORDS + interleave(p % BLOCK_WORDS);
                if self.stream[at] != 0 {
                    return Err(FormatError::NonZero {
                        what: "stream padding word (offset in stream words)",
                        offset: at as u64,
                        found: self.stream[at].into(),
                    }
                    .into());
                }
            }
        }
        Ok(read.saturating_sub(STATE_WORDS) as u32)
    }

    /// The error of unit `u` whose stream does not end where `rule` says (its end offset).
    fn unit_end_error(&self, u: usize, rule: &'static str) -> AnsError {
        FormatError::Offset {
            table: "stream",
            index: u + 1,
            value: self.offsets[u + 1].into(),
            previous: self.offsets[u].into(),
            words: self.stream.len() as u64,
            rule,
        }
        .into()
    }

    /// The canonical end of lane unit `u` whose data ends after `read` 16-bit words: zero
    /// words up to the next multiple of 8, and the unit's stream ends there.
    fn check_lane_end(&self, u: usize, read: usize) -> Result<()> {
        let (lo, hi) = (self.offsets[u] as usize, self.offsets[u + 1] as usize);
        let end = read.next_multiple_of(lanes::BLOCK_HALFWORDS);
        if 2 * (hi - lo) != end {
            return Err(self.unit_end_error(
                u,
                "an ans-lanes unit's stream must end at the first multiple of 8 16-bit words (4 \
                 stream words) after its data",
            ));
        }
        let words = &self.stream[lo..hi];
        for k in read..end {
            let half = lanes::halfword(words, k).unwrap_or(0);
            if half != 0 {
                return Err(FormatError::NonZero {
                    what: "ans-lanes stream padding half-word (offset in stream words)",
                    offset: (lo + k / 2) as u64,
                    found: half.into(),
                }
                .into());
            }
        }
        Ok(())
    }

    /// The escape value of an `ans-lanes-esc` matrix (what escaped values are coded as):
    /// unit 0's, `None` when unit 0's header is unreadable or the layout has no escapes.
    pub fn escape_value(&self) -> Option<i8> {
        if !self.layout.has_exceptions() {
            return None;
        }
        let (lo, hi) = (
            *self.offsets.first()? as usize,
            *self.offsets.get(1)? as usize,
        );
        lanes::unit_escape(self.stream.get(lo..hi)?)
    }

    /// Decodes unit `unit` with `table` (the model's), calling `sink(lane, col, values)` for
    /// every group in decoding order (`col` is the group's first column in the padded matrix,
    /// `lane` the coder). Returns the words read.
    fn decode_unit(
        &self,
        table: &[u32],
        unit: usize,
        sink: impl FnMut(usize, usize, &[i8]),
    ) -> Result<usize> {
        let corrupted = |reason: String| AnsError::Corrupted {
            unit: self.layout.unit(),
            index: unit,
            reason,
        };
        let words = match (self.offsets.get(unit), self.offsets.get(unit + 1)) {
            (Some(&lo), Some(&hi)) => self.stream.get(lo as usize..hi as usize),
            _ => None,
        }
        .ok_or_else(|| corrupted("its offsets are outside the stream".into()))?;
        match (self.lane_geometry(), self.group()) {
            (Some(geometry), _) => {
                // 8-bit models only (checked when the matrix was made): every slot is in the
                // table.
                let lookup = |s: u32| Slot::from_packed(table[s as usize]);
                let (_, cols) = geometry.unit(unit);
                let escapes = self.layout.has_exceptions().then(|| self.escape_value());
                lanes::decode_unit(words, lookup, cols, escapes, unit, sink, corrupted)
            }
            (None, 4) => self.decode_unit_g::<4>(table, words, sink, corrupted),
            (None, _) => self.decode_unit_g::<2>(table, words, sink, corrupted),
        }
    }

    /// [`AnsMatrix::decode_unit`] of `ans-warp-rows` and `ans-warp-stripes`: the unit's stored
    /// stream is `words`.
    fn decode_unit_g<const G: usize>(
        &self,
        table: &[u32],
        words: &[u32],
        mut sink: impl FnMut(usize, usize, &[i8]),
        corrupted: impl Fn(String) -> AnsError,
    ) -> Result<usize> {
        let mut reader = Reader { words, pos: 0 };
        let mut x = [0u64; LANES];
        for (l, s) in x.iter_mut().enumerate() {
            match (reader.next(), reader.next()) {
                (Some(hi), Some(lo)) => *s = u64::from(hi) << 32 | u64::from(lo),
                _ => {
                    return Err(corrupted(format!(
                        "its stream of {} words is too short for lane {l}'s initial state",
                        words.len()
                    )));
                }
            }
        }
        let precision = self.precision();
        let lookup = |s: u32| Slot::from_packed(table[s as usize]);
        let steps = QUAD / G;
        let (chunks, chunk_cols, lane_cols) = match self.layout {
            Layout::WarpRows => (self.shape.padded_cols() / CHUNK, CHUNK, QUAD),
            // Not reached: decode_unit decodes lane units.
            Layout::WarpStripes | Layout::WarpLanes | Layout::WarpLanesEsc => {
                (self.shape.padded_cols() / QUAD, QUAD, 0)
            }
        };
        for j in 0..chunks {
            for g in 0..steps {
                let col = chunk_cols * j + G * g;
                for (l, s) in x.iter_mut().enumerate() {
                    let (vals, nx) = decode_group::<G>(*s, precision, lookup);
                    sink(l, col + lane_cols * l, &vals);
                    *s = nx;
                }
                for (l, s) in x.iter_mut().enumerate() {
                    if needs_refill(*s) {
                        let Some(w) = reader.next() else {
                            return Err(corrupted(format!(
                                "its stream ran out after {} words, at step {j}.{g} for lane {l}",
                                reader.pos
                            )));
                        };
                        *s = refill(*s, w);
                    }
                }
            }
        }
        if let Some((l, s)) = x.iter().enumerate().find(|&(_, &s)| s != STATE_LOWER) {
            return Err(corrupted(format!(
                "lane {l} ended in state {s:#x} instead of 2^32 after reading {} of {} words",
                reader.pos,
                words.len()
            )));
        }
        Ok(reader.pos)
    }
}

/// The error of the first unit that failed, if any.
fn first_error(results: Vec<Result<usize>>) -> Result<()> {
    results.into_iter().try_for_each(|r| r.map(drop))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{EncodeOptions, encode};

    fn sample(rows: usize, cols: usize) -> Vec<i8> {
        (0..rows * cols)
            .map(|i| {
                let h = (i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 58;
                (h as i8) - 32
            })
            .collect()
    }

    #[test]
    fn every_layout_round_trips_and_multiplies() {
        let (rows, cols) = (37, 301);
        let w = sample(rows, cols);
        let x: Vec<i8> = (0..cols).map(|i| (i % 255) as u8 as i8).collect();
        for (layout, lane_segment) in [
            (Layout::WarpRows, None),
            (Layout::WarpStripes, None),
            (Layout::WarpLanes, None),
            (Layout::WarpLanes, Some(64)),
        ] {
            let opts = EncodeOptions {
                layout,
                lane_segment,
                ..Default::default()
            };
            let m = encode(&w, rows, cols, &opts).unwrap();
            assert_eq!(m.decode().unwrap(), w);
            let (acc, y) = m.gemv_reference(&x, 0.01).unwrap();
            for r in 0..rows {
                let want: i32 = (0..cols)
                    .map(|c| i32::from(w[r * cols + c]) * i32::from(x[c]))
                    .sum();
                assert_eq!(acc[r], want);
                assert_eq!(y[r], cmv_device::requantize(want, 0.01));
            }
            assert!(matches!(
                m.gemv_reference(&x[1..], 1.0),
                Err(AnsError::Format(FormatError::Length {
                    what: "input vector",
                    ..
                }))
            ));
            assert!(matches!(
                m.gemv_reference(&x, f32::NAN),
                Err(AnsError::Scale { .. })
            ));
            // A decode finds the encoder's counts.
            let fresh = m.scan(true).unwrap();
            let known = m.stats();
            assert_eq!(fresh.data_words, known.data_words);
            assert_eq!(fresh.counts, known.counts);
        }
    }

    #[test]
    fn a_damaged_stream_is_reported_with_its_unit() {
        let (rows, cols) = (4, 256);
        let w = sample(rows, cols);
        let mut m = encode(&w, rows, cols, &EncodeOptions::default()).unwrap();
        let start = m.offsets[2] as usize;
        // Lane 0's initial high word of row 2.
        m.stream[start + interleave(0)] ^= 0x10;
        match m.decode() {
            Err(AnsError::Corrupted {
                unit: "row",
                index: 2,
                reason,
            }) => {
                assert!(reason.contains("lane"), "{reason}")
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_damaged_lane_unit_is_reported_with_its_index() {
        let (rows, cols) = (40, 100);
        let w = sample(rows, cols);
        let opts = EncodeOptions {
            layout: Layout::WarpLanes,
            lane_segment: Some(32),
            ..Default::default()
        };
        let mut m = encode(&w, rows, cols, &opts).unwrap();
        // 2 row groups x 4 segments (the last 16 columns wide); unit 5 is group 1, segment 1.
        assert_eq!((m.segments(), m.units()), (4, 8));
        let start = m.offsets[5] as usize;
        // Lane 0's initial high half.
        m.stream[start] ^= 0x10;
        for result in [m.decode().map(drop), m.accumulate(&w[..cols]).map(drop)] {
            match result {
                Err(AnsError::Corrupted {
                    unit: "lane unit",
                    index: 5,
                    reason,
                }) => assert!(reason.contains("lane"), "{reason}"),
                other => panic!("{other:?}"),
            }
        }
        // Offsets outside the stream (only a hand-made matrix has them).
        m.offsets[8] += 4;
        assert!(matches!(
            m.decode(),
            Err(AnsError::Corrupted { index: 5 | 7, .. })
        ));
    }

    #[test]
    fn reads_stop_at_the_end_of_the_unit() {
        let words: Vec<u32> = (0..128).collect();
        let mut r = Reader {
            words: &words,
            pos: 0,
        };
        for p in 0..128 {
            assert_eq!(r.next(), Some(words[interleave(p)]));
        }
        assert_eq!(r.next(), None);
        assert_eq!(r.pos, 128);
    }
}

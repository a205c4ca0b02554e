//! The encoder: fits the model, codes every row (or stripe, or lane unit) in parallel, and
//! lays the streams out as `docs/ANS.md` specifies.

use std::sync::OnceLock;

use ans_kernels::coder::encode_group;
use ans_kernels::layout::{BLOCK_WORDS, CHUNK, LANES, QUAD, STATE_LOWER, STRIPE_ROWS, interleave};
use rayon::prelude::*;

use cmv_format::{PaddedShape, Weights};

use crate::error::{AnsError, Result};
use crate::lanes::{self, LANE_PRECISION, LANE_ROWS, LaneGeometry, SEGMENT_MULTIPLE};
use crate::layout::{Layout, default_lane_segment};
use crate::matrix::{AnsMatrix, STATE_WORDS, Stats};
use crate::model::{self, Model, VALUES, index};
use crate::options::{EncodeOptions, INT8_ALLOWANCE_BYTES};

/// Compresses the row-major `rows x cols` int8 matrix `matrix`, which must hold exactly
/// `rows * cols` values ([`Weights::new`], the one rule of every format).
///
/// The model is fitted to the elements and the padding together (the padding is coded with
/// the most frequent value); each row, stripe or lane unit is coded independently, in
/// parallel.
///
/// # Errors
/// [`FormatError::Shape`](cmv_format::FormatError::Shape) for an empty shape or a padded side
/// past `u32::MAX`, [`FormatError::Length`](cmv_format::FormatError::Length) for a buffer of
/// any other length than `rows * cols`, the model's errors ([`Model::fit`]) for bad options,
/// [`AnsError::LanePrecision`] and [`AnsError::LaneSegment`] for options `ans-lanes` cannot
/// code with, [`AnsError::StreamTooLong`] when the stream would not fit 32-bit word offsets,
/// [`AnsError::LayoutBudget`] and [`AnsError::Incompressible`] for the layout choice
/// ([`EncodeOptions::auto`]).
pub fn encode(matrix: &[i8], rows: usize, cols: usize, opts: &EncodeOptions) -> Result<AnsMatrix> {
    opts.layout.padded_shape(rows, cols)?;
    encode_weights(Weights::new(matrix, rows, cols)?, opts)
}

/// [`encode`] of a matrix already checked to hold `rows * cols` values.
///
/// # Errors
/// As [`encode`].
pub fn encode_weights(weights: Weights<'_, i8>, opts: &EncodeOptions) -> Result<AnsMatrix> {
    let Some(budget) = opts.layout_budget_bits else {
        return encode_layout(weights, opts, opts.layout);
    };
    if !budget.is_finite() || budget < 0.0 {
        return Err(AnsError::LayoutBudget { value: budget });
    }
    let n = weights.rows() * weights.cols();
    let entropy = model::entropy_bits(&model::counts(weights.data())) / n as f64;
    let limit = n as u64 + INT8_ALLOWANCE_BYTES as u64;
    let bytes = |m: &AnsMatrix| m.size_breakdown().container_bytes;
    let within = |m: &AnsMatrix| bytes(m) <= limit && m.bits_per_element() <= entropy + budget;
    // ans-lanes-esc first (the fast kernel; its escapes never cost more than a word per
    // unit), unless a forced precision rules it out.
    if opts.precision.is_none_or(|p| p == LANE_PRECISION) {
        if let Some(segment) = opts.lane_segment {
            // A bad segment is the caller's mistake, not a reason to pick another layout.
            check_lane_segment(segment)?;
        }
        // The default (fastest) segment first, then twice as long while the container is
        // past the budget (fewer flushed states), up to one segment per row; an error (a
        // matrix this layout cannot code) or no segment within the budget and the limit: the
        // other layouts.
        let (_, padded_cols) = Layout::WarpLanesEsc.padded_shape(weights.rows(), weights.cols())?;
        let mut segment = opts
            .lane_segment
            .unwrap_or_else(|| crate::default_lane_segment(weights.rows(), weights.cols()))
            .min(padded_cols);
        loop {
            let o = EncodeOptions {
                lane_segment: Some(segment),
                ..*opts
            };
            match encode_layout(weights, &o, Layout::WarpLanesEsc) {
                Ok(lanes) if within(&lanes) => return Ok(lanes),
                Ok(_) if opts.lane_segment.is_none() && segment < padded_cols => {
                    segment = (2 * segment).min(padded_cols);
                }
                _ => break,
            }
        }
    }
    let rows = encode_layout(weights, opts, Layout::WarpRows)?;
    if within(&rows) {
        return Ok(rows);
    }
    let stripes = encode_layout(weights, opts, Layout::WarpStripes)?;
    let best = if bytes(&stripes) < bytes(&rows) {
        stripes
    } else {
        rows
    };
    if bytes(&best) > limit {
        return Err(AnsError::Incompressible {
            layout: best.layout().name(),
            bytes: bytes(&best),
            limit,
            entropy_bits: entropy,
        });
    }
    Ok(best)
}

/// [`encode_weights`] in the given layout.
fn encode_layout(
    weights: Weights<'_, i8>,
    opts: &EncodeOptions,
    layout: Layout,
) -> Result<AnsMatrix> {
    let (real, rows, cols) = (weights.data(), weights.rows(), weights.cols());
    let (padded_rows, padded_cols) = layout.padded_shape(rows, cols)?;
    let lanes = match layout {
        Layout::WarpLanes | Layout::WarpLanesEsc => {
            if let Some(precision) = opts.precision.filter(|&p| p != LANE_PRECISION) {
                return Err(AnsError::LanePrecision { precision });
            }
            let segment = match opts.lane_segment {
                None => default_lane_segment(rows, cols),
                Some(s) => check_lane_segment(s)?.min(padded_cols),
            };
            Some(LaneGeometry::new(padded_cols, segment))
        }
        Layout::WarpRows | Layout::WarpStripes => None,
    };
    let n = real.len();
    let counts = model::counts(real);
    // The padding is coded with the model's most frequent value, which is the most frequent
    // value of the matrix (the smallest on ties): count it there before fitting.
    let mut with_padding = counts;
    let top = (0..VALUES).fold(0, |best, i| if counts[i] > counts[best] { i } else { best });
    with_padding[top] += padded_rows as u64 * padded_cols as u64 - n as u64;
    let escapes = match lanes {
        Some(geometry) if layout.has_exceptions() => Some(choose_escapes(
            real,
            rows,
            cols,
            &with_padding,
            model::value(top),
            geometry,
        )?),
        _ => None,
    };
    if let Some(e) = &escapes {
        e.merge(&mut with_padding);
    }
    let model = match lanes {
        // The lane coder's 8 bits, whatever the overhead.
        Some(_) => Model::fit_counts(
            &with_padding,
            &EncodeOptions {
                precision: Some(LANE_PRECISION),
                ..*opts
            },
        )?,
        None => Model::fit_counts(&with_padding, opts)?,
    };

    let mut coder = UnitCoder::new(&model, real, rows, cols, padded_cols, layout, lanes);
    coder.escapes = escapes;
    let units = layout.units(padded_rows, lanes.map_or(1, |g| g.segments));
    let coded: Vec<(Vec<u32>, u64)> = match model.group() {
        4 => (0..units)
            .into_par_iter()
            .map(|u| coder.encode_unit::<4>(u))
            .collect(),
        _ => (0..units)
            .into_par_iter()
            .map(|u| coder.encode_unit::<2>(u))
            .collect(),
    };
    let lengths: Vec<usize> = coded.iter().map(|(s, _)| s.len()).collect();
    let offsets = offsets_from_lengths(&lengths)?;
    let data_words = coded
        .iter()
        .map(|&(_, d)| u32::try_from(d).map_err(|_| AnsError::StreamTooLong { words: d }))
        .collect::<Result<Vec<u32>>>()?;
    let mut stream = Vec::with_capacity(*offsets.last().expect("units + 1 offsets") as usize);
    for (s, _) in &coded {
        stream.extend_from_slice(s);
    }
    drop(coded);
    let m = AnsMatrix {
        layout,
        model,
        shape: PaddedShape::new(rows, cols, padded_rows, padded_cols),
        segment: lanes.map(|g| g.segment),
        offsets,
        stream,
        stats: OnceLock::from(Stats { data_words, counts }),
    };
    debug_assert!(m.validate().is_ok());
    Ok(m)
}

/// Checks an `ans-lanes` segment asked for: a positive multiple of 16.
///
/// # Errors
/// [`AnsError::LaneSegment`] otherwise.
fn check_lane_segment(segment: usize) -> Result<usize> {
    if segment > 0 && segment.is_multiple_of(SEGMENT_MULTIPLE) {
        Ok(segment)
    } else {
        Err(AnsError::LaneSegment { segment })
    }
}

/// The offsets of streams of `lengths` words laid end to end (`lengths.len() + 1` entries).
///
/// # Errors
/// [`AnsError::StreamTooLong`] when the total is past `u32::MAX`.
pub(crate) fn offsets_from_lengths(lengths: &[usize]) -> Result<Vec<u32>> {
    let mut offsets = Vec::with_capacity(lengths.len() + 1);
    let mut total = 0u64;
    offsets.push(0);
    for &len in lengths {
        total += len as u64;
        offsets.push(u32::try_from(total).map_err(|_| AnsError::StreamTooLong {
            words: lengths.iter().map(|&l| l as u64).sum(),
        })?);
    }
    Ok(offsets)
}

/// What coding one unit needs.
struct UnitCoder<'a> {
    cdf: [u32; VALUES],
    freq: [u32; VALUES],
    precision: u32,
    padding: i8,
    matrix: &'a [i8],
    rows: usize,
    cols: usize,
    padded_cols: usize,
    layout: Layout,
    /// The units of `ans-lanes`; `None` for the other layouts.
    lanes: Option<LaneGeometry>,
    /// The escapes of `ans-lanes-esc`; `None` for the other layouts.
    escapes: Option<lanes::Escapes>,
}

impl<'a> UnitCoder<'a> {
    fn new(
        model: &Model,
        matrix: &'a [i8],
        rows: usize,
        cols: usize,
        padded_cols: usize,
        layout: Layout,
        lanes: Option<LaneGeometry>,
    ) -> Self {
        Self {
            cdf: model.cdfs(),
            freq: model.freqs().map(u32::from),
            precision: model.precision(),
            padding: model.padding_value(),
            matrix,
            rows,
            cols,
            padded_cols,
            layout,
            lanes,
            escapes: None,
        }
    }

    /// Element `(row, col)` of the padded matrix.
    #[inline(always)]
    fn at(&self, row: usize, col: usize) -> i8 {
        if row < self.rows && col < self.cols {
            self.matrix[row * self.cols + col]
        } else {
            self.padding
        }
    }

    /// Codes unit `unit` (a row, a stripe or a lane unit): returns its stored (interleaved,
    /// padded; for `ans-lanes`, 16-bit words packed two to a `u32` and padded) stream and the
    /// number of data words in it (16-bit words for `ans-lanes`).
    fn encode_unit<const G: usize>(&self, unit: usize) -> (Vec<u32>, u64) {
        let steps = QUAD / G;
        let mut x = [STATE_LOWER; LANES];
        let mut emitted = Vec::new();
        let model = |v: i8| (self.cdf[index(v)], self.freq[index(v)]);
        // The exact reverse of the decoding order: the last step first, lanes 31 down to 0.
        let mut step = |lane: usize, row: usize, col: usize| {
            let values: [i8; G] = std::array::from_fn(|k| self.at(row, col + k));
            let (nx, word) = encode_group::<G>(x[lane], self.precision, model, values);
            emitted.extend(word);
            x[lane] = nx;
        };
        match self.layout {
            Layout::WarpRows => {
                for j in (0..self.padded_cols / CHUNK).rev() {
                    for g in (0..steps).rev() {
                        for l in (0..LANES).rev() {
                            step(l, unit, CHUNK * j + QUAD * l + G * g);
                        }
                    }
                }
            }
            Layout::WarpStripes => {
                for j in (0..self.padded_cols / QUAD).rev() {
                    for g in (0..steps).rev() {
                        for l in (0..LANES).rev() {
                            step(l, STRIPE_ROWS * unit + l, QUAD * j + G * g);
                        }
                    }
                }
            }
            Layout::WarpLanes | Layout::WarpLanesEsc => return self.encode_lane_unit(unit),
        }
        let data_words = emitted.len() as u64;
        // Flush lanes 31 down to 0, low half then high half; reversed, the stream starts with
        // hi(x_0), lo(x_0), ..., hi(x_31), lo(x_31).
        for &s in x.iter().rev() {
            emitted.push(s as u32);
            emitted.push((s >> 32) as u32);
        }
        emitted.reverse();
        debug_assert!(emitted.len() >= STATE_WORDS);
        let len = emitted.len().next_multiple_of(BLOCK_WORDS);
        let mut stored = vec![0u32; len];
        for (p, &w) in emitted.iter().enumerate() {
            stored[p - p % BLOCK_WORDS + interleave(p % BLOCK_WORDS)] = w;
        }
        (stored, data_words)
    }

    /// [`UnitCoder::encode_unit`] for `ans-lanes` (independent of the group size: pairs at 8
    /// bits).
    fn encode_lane_unit(&self, unit: usize) -> (Vec<u32>, u64) {
        let geometry = self.lanes.expect("ans-lanes has a lane geometry");
        let (group, cols) = geometry.unit(unit);
        let model = |v: i8| (self.cdf[index(v)], self.freq[index(v)]);
        lanes::encode_unit(
            |r, c| self.at(r, c),
            model,
            LANE_ROWS * group,
            cols,
            self.escapes.as_ref(),
        )
    }
}

/// The escapes of an `ans-lanes-esc` matrix with the value counts `counts` (padding included;
/// `padding` the padding value, never escaped): the `k` rarest values coded as the most
/// frequent of them, for the `k` that gives the smallest model cross-entropy plus exception
/// entries (32 bits each), as long as no unit lists more than
/// [`MAX_EXCEPTIONS`](ans_kernels::lanes::MAX_EXCEPTIONS) exceptions (else fewer values are
/// escaped). Nothing is escaped when the segment is too wide for an exception key.
///
/// # Errors
/// The model's errors (not expected: 8 bits hold any merged counts).
fn choose_escapes(
    real: &[i8],
    rows: usize,
    cols: usize,
    counts: &[u64; VALUES],
    padding: i8,
    geometry: LaneGeometry,
) -> Result<lanes::Escapes> {
    let none = lanes::Escapes::none(padding);
    if geometry.segment >= 1 << ans_kernels::lanes::EXC_COL_BITS {
        return Ok(none);
    }
    // Candidates: occurring values but the padding value, rarest first.
    let mut rare: Vec<usize> = (0..VALUES)
        .filter(|&i| counts[i] > 0 && i != index(padding))
        .collect();
    rare.sort_by_key(|&i| (counts[i], i));
    let escapes_of = |k: usize| {
        if k < 2 {
            return none;
        }
        let mut e = lanes::Escapes::none(model::value(rare[k - 1]));
        for &i in &rare[..k] {
            e.escaped[i] = true;
        }
        e
    };
    let cost = |k: usize| -> Result<f64> {
        let mut merged = *counts;
        let exceptions = escapes_of(k).merge(&mut merged);
        let model = Model::quantize(&merged, LANE_PRECISION)?;
        Ok(model.cross_entropy_bits(&merged) + 32.0 * exceptions as f64)
    };
    let mut best = (cost(0)?, 0);
    // Escaping more than a quarter of the values never pays at 8 bits.
    for k in 2..rare.len().min(64) {
        let c = cost(k)?;
        if c < best.0 {
            best = (c, k);
        }
    }
    // Fewer escaped values until every unit's list fits.
    let padded_rows = rows.next_multiple_of(LANE_ROWS);
    let units = Layout::WarpLanesEsc.units(padded_rows, geometry.segments);
    let at = |r: usize, c: usize| {
        if r < rows && c < cols {
            real[r * cols + c]
        } else {
            padding
        }
    };
    let mut k = best.1;
    loop {
        let e = escapes_of(k);
        if k < 2 {
            return Ok(e);
        }
        let fits = (0..units).into_par_iter().all(|u| {
            let (group, unit_cols) = geometry.unit(u);
            lanes::count_exceptions(at, &e, LANE_ROWS * group, unit_cols)
                <= ans_kernels::lanes::MAX_EXCEPTIONS as usize
        });
        if fits {
            return Ok(e);
        }
        k -= 1;
    }
}

#[cfg(test)]
mod tests {
    use cmv_format::FormatError;

    use super::*;

    #[test]
    fn offsets_are_prefix_sums_within_u32() {
        assert_eq!(
            offsets_from_lengths(&[128, 256]).unwrap(),
            vec![0, 128, 384]
        );
        let big = 1usize << 31;
        assert!(matches!(
            offsets_from_lengths(&[big, big]),
            Err(AnsError::StreamTooLong { words }) if words == 1 << 32
        ));
        assert_eq!(
            offsets_from_lengths(&[big, big - 128]).unwrap()[2],
            u32::MAX - 127
        );
    }

    #[test]
    fn bad_arguments_are_errors() {
        let o = EncodeOptions::default();
        assert!(matches!(
            encode(&[], 0, 3, &o),
            Err(AnsError::Format(FormatError::Shape {
                rows: 0,
                cols: 3,
                ..
            }))
        ));
        assert!(matches!(
            encode(&[1], 1, 0, &o),
            Err(AnsError::Format(FormatError::Shape { .. }))
        ));
        for len in [3, 5] {
            // Shorter or longer than rows * cols: the one rule is exactly rows * cols.
            assert!(matches!(
                encode(&[1, 2, 3, 4, 5][..len], 2, 2, &o),
                Err(AnsError::Format(FormatError::Length {
                    what: "matrix",
                    got,
                    expected: 4
                })) if got == len
            ));
        }
        let forced = EncodeOptions {
            precision: Some(6),
            ..o
        };
        assert!(matches!(
            encode(&[1], 1, 1, &forced),
            Err(AnsError::Precision { precision: 6 })
        ));
        let all: Vec<i8> = (0..256).map(|i| i as u8 as i8).collect();
        let forced = EncodeOptions {
            precision: Some(7),
            ..o
        };
        assert!(matches!(
            encode(&all, 16, 16, &forced),
            Err(AnsError::TooManyValues { distinct: 256, .. })
        ));
    }

    #[test]
    fn lane_segments_are_checked_and_clamped() {
        for bad in [0, 1, 15, 17, 24] {
            assert!(matches!(
                check_lane_segment(bad),
                Err(AnsError::LaneSegment { segment }) if segment == bad
            ));
        }
        assert_eq!(check_lane_segment(16).unwrap(), 16);
        let w = vec![1i8; 3 * 40];
        let opts = |lane_segment| EncodeOptions {
            layout: Layout::WarpLanes,
            lane_segment,
            ..EncodeOptions::default()
        };
        // Padded columns: 48; the default is clamped to them, a larger segment too.
        for (segment, want, units) in [(None, 48, 1), (Some(4096), 48, 1), (Some(32), 32, 2)] {
            let m = encode(&w, 3, 40, &opts(segment)).unwrap();
            assert_eq!((m.segment(), m.units()), (Some(want), units));
            assert_eq!(m.decode().unwrap(), w);
        }
    }

    #[test]
    fn a_constant_lane_matrix_costs_only_its_states() {
        let opts = EncodeOptions {
            layout: Layout::WarpLanes,
            lane_segment: Some(64),
            ..EncodeOptions::default()
        };
        let m = encode(&[-5; 40 * 100], 40, 100, &opts).unwrap();
        // 2 row groups x 2 segments (64 and 48 columns), 32 words of states each.
        assert_eq!(m.units(), 4);
        assert_eq!(m.offsets(), &[0, 32, 64, 96, 128]);
        // Every state is still 2^16: hi = 1 (the low half), lo = 0.
        assert!(m.stream().iter().all(|&w| w == 1));
        let s = m.entropy_report();
        assert_eq!(
            (s.payload_bytes, s.flushed_state_bytes, s.padding_bytes),
            (0, 512, 0)
        );
        assert_eq!(s.coded_bits, 0.0);
        assert_eq!(m.decode().unwrap(), vec![-5; 4000]);
    }

    #[test]
    fn a_constant_matrix_costs_only_its_states() {
        let m = encode(&[3; 1000], 10, 100, &EncodeOptions::default()).unwrap();
        let s = m.entropy_report();
        assert_eq!(s.payload_bytes, 0);
        assert_eq!(m.stream().len(), 10 * 128);
        assert_eq!(m.decode().unwrap(), vec![3; 1000]);
        // Every state is still 2^32: hi = 1, lo = 0.
        for unit in m.stream().chunks(128) {
            for l in 0..LANES {
                assert_eq!(unit[interleave(2 * l)], 1);
                assert_eq!(unit[interleave(2 * l + 1)], 0);
            }
        }
    }
}

//! [`AnsMatrix`], a compressed matrix in memory, and its [`SizeReport`].

use std::sync::OnceLock;

use ans_kernels::layout::{BLOCK_WORDS, CHUNK, LANES, QUAD, STRIPE_ROWS, interleave};

use crate::model::{self, Model, VALUES};
use crate::{AnsError, Result};

/// Words of a unit's stream that hold the 32 coders' final states (two per coder).
pub(crate) const STATE_WORDS: usize = 2 * LANES;

/// How a matrix is split among coders (`docs/ANS.md`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Layout {
    /// `ans-warp-rows`: one warp per row, 32 coders per row, columns padded to 128.
    #[default]
    WarpRows,
    /// `ans-warp-stripes`: one warp per 32 rows, one coder per row, rows padded to 32 and
    /// columns to 4.
    WarpStripes,
}

impl Layout {
    /// The layout's code in the container header: 0 for rows, 1 for stripes.
    pub const fn code(self) -> u32 {
        match self {
            Layout::WarpRows => 0,
            Layout::WarpStripes => 1,
        }
    }

    /// The layout of a header code.
    ///
    /// # Errors
    /// [`AnsError::LayoutCode`] for an unknown code.
    pub const fn from_code(code: u32) -> Result<Self> {
        match code {
            0 => Ok(Layout::WarpRows),
            1 => Ok(Layout::WarpStripes),
            found => Err(AnsError::LayoutCode { found }),
        }
    }

    /// The layout's name in the docs: `ans-warp-rows` or `ans-warp-stripes`.
    pub const fn name(self) -> &'static str {
        match self {
            Layout::WarpRows => "ans-warp-rows",
            Layout::WarpStripes => "ans-warp-stripes",
        }
    }

    /// What one stream of the layout codes: `"row"` or `"stripe"`.
    pub const fn unit(self) -> &'static str {
        match self {
            Layout::WarpRows => "row",
            Layout::WarpStripes => "stripe",
        }
    }

    /// The padded shape of a `rows x cols` matrix, or [`AnsError::Shape`] for an empty one or
    /// a padded side past `u32::MAX`.
    pub fn padded_shape(self, rows: usize, cols: usize) -> Result<(usize, usize)> {
        let (row_mult, col_mult) = match self {
            Layout::WarpRows => (1, CHUNK),
            Layout::WarpStripes => (STRIPE_ROWS, QUAD),
        };
        let pad = |n: usize, m: usize| n.div_ceil(m).checked_mul(m);
        match (pad(rows, row_mult), pad(cols, col_mult)) {
            (Some(pr), Some(pc))
                if rows > 0
                    && cols > 0
                    && u32::try_from(pr).is_ok()
                    && u32::try_from(pc).is_ok() =>
            {
                Ok((pr, pc))
            }
            _ => Err(AnsError::Shape { rows, cols }),
        }
    }

    /// Streams of a matrix with `padded_rows` rows: one per row, or one per 32 rows.
    pub const fn units(self, padded_rows: usize) -> usize {
        match self {
            Layout::WarpRows => padded_rows,
            Layout::WarpStripes => padded_rows / STRIPE_ROWS,
        }
    }
}

/// What the encoder knew (or a decode found out) about a matrix: words of payload per unit
/// and the counts of the real elements.
#[derive(Clone, Debug)]
pub(crate) struct Stats {
    /// Data words (after the 64 state words, before the zero padding) of each unit.
    pub data_words: Vec<u32>,
    /// Occurrences of each value among the real elements (indexed by `model::index`).
    pub counts: [u64; VALUES],
}

/// A compressed int8 matrix: its model, the offsets of its rows' (or stripes') streams and the
/// streams, interleaved as the kernels load them (`docs/ANS.md`).
///
/// Made by [`crate::encode`] or [`AnsMatrix::from_bytes`], both of which check every invariant
/// ([`AnsMatrix::validate`]); decoded on the CPU by [`AnsMatrix::decode`].
#[derive(Clone, Debug)]
pub struct AnsMatrix {
    pub(crate) layout: Layout,
    pub(crate) model: Model,
    pub(crate) rows: usize,
    pub(crate) cols: usize,
    pub(crate) padded_rows: usize,
    pub(crate) padded_cols: usize,
    pub(crate) offsets: Vec<u32>,
    pub(crate) stream: Vec<u32>,
    /// Known after encoding; computed by a decode on first use for a loaded matrix.
    pub(crate) stats: OnceLock<Stats>,
}

impl PartialEq for AnsMatrix {
    /// Equal when every stored part is (the cached statistics are not compared).
    fn eq(&self, other: &Self) -> bool {
        self.layout == other.layout
            && self.model == other.model
            && self.rows == other.rows
            && self.cols == other.cols
            && self.padded_rows == other.padded_rows
            && self.padded_cols == other.padded_cols
            && self.offsets == other.offsets
            && self.stream == other.stream
    }
}

impl Eq for AnsMatrix {}

impl AnsMatrix {
    /// The layout.
    pub fn layout(&self) -> Layout {
        self.layout
    }

    /// Rows of the matrix (without padding).
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Columns of the matrix (without padding).
    pub fn cols(&self) -> usize {
        self.cols
    }

    /// Rows after padding: `rows` for `WarpRows`, a multiple of 32 for `WarpStripes`.
    pub fn padded_rows(&self) -> usize {
        self.padded_rows
    }

    /// Columns after padding: a multiple of 128 for `WarpRows`, of 4 for `WarpStripes`.
    pub fn padded_cols(&self) -> usize {
        self.padded_cols
    }

    /// Number of streams: rows for `WarpRows`, stripes of 32 rows for `WarpStripes`.
    pub fn units(&self) -> usize {
        self.offsets.len() - 1
    }

    /// The model's precision `P` (7 to 12 bits).
    pub fn precision(&self) -> u32 {
        self.model.precision()
    }

    /// Elements per ANS step: 4 when `P <= 8`, else 2.
    pub fn group(&self) -> usize {
        self.model.group()
    }

    /// Start of each unit's stream, in words, and the total at the end (`units + 1` entries,
    /// multiples of 128).
    pub fn offsets(&self) -> &[u32] {
        &self.offsets
    }

    /// The streams, as stored: every 128-word block interleaved (`layout::interleave`).
    pub fn stream(&self) -> &[u32] {
        &self.stream
    }

    /// The `2^P`-entry lookup table (`layout::pack_entry`).
    pub fn table(&self) -> Vec<u32> {
        self.model.table()
    }

    /// The register tables of the 7-bit path, `None` unless `P == 7`.
    pub fn register_tables(&self) -> Option<[[u32; LANES]; 3]> {
        self.model.register_tables()
    }

    /// The value padding is coded with.
    pub fn padding_value(&self) -> i8 {
        self.model.padding_value()
    }

    /// The model.
    pub fn model(&self) -> &Model {
        &self.model
    }

    /// Checks every in-memory invariant the kernels rely on: precision and group, padded
    /// shape, frequencies, offsets (count, start at 0, multiples of 128, at least 128 words per
    /// unit, increasing, last equal to the stream length, within `u32`).
    ///
    /// # Errors
    /// The first broken invariant, as [`AnsMatrix::from_bytes`] reports it.
    pub fn validate(&self) -> Result<()> {
        Model::new(self.model.precision(), *self.model.freqs())?;
        let (pr, pc) = self.layout.padded_shape(self.rows, self.cols)?;
        check_field("padded_rows", self.padded_rows as u64, pr as u64)?;
        check_field("padded_cols", self.padded_cols as u64, pc as u64)?;
        let units = self.layout.units(pr);
        check_field("offset count", self.offsets.len() as u64, units as u64 + 1)?;
        check_offsets(&self.offsets, self.stream.len() as u64)
    }

    /// Statistics of the matrix, from the encoder or else from one decode.
    pub(crate) fn stats(&self) -> &Stats {
        self.stats.get_or_init(|| self.decode_stats())
    }

    /// Bytes of every part of the compressed matrix, and the model's entropy figures.
    ///
    /// For a matrix read with [`AnsMatrix::from_bytes`] the first call decodes it once to
    /// count the payload words and the values (a unit that does not decode counts all its
    /// non-state words as payload).
    pub fn sizes(&self) -> SizeReport {
        let stats = self.stats();
        let data: usize = stats.data_words.iter().map(|&w| w as usize).sum();
        let stream = self.stream.len() * 4;
        let payload_bytes = data * 4;
        let flushed_state_bytes = self.units() * STATE_WORDS * 4;
        let n: u64 = stats.counts.iter().sum();
        let per = |bits: f64| if n == 0 { 0.0 } else { bits / n as f64 };
        SizeReport {
            elements: self.rows * self.cols,
            padded_elements: self.padded_rows * self.padded_cols,
            precision: self.precision(),
            payload_bytes,
            flushed_state_bytes,
            padding_bytes: stream.saturating_sub(payload_bytes + flushed_state_bytes),
            table_bytes: crate::format::FREQ_BYTES,
            offset_bytes: self.offsets.len() * 4,
            header_bytes: crate::format::HEADER_BYTES,
            coded_bits: per(payload_bytes as f64 * 8.0 + self.state_information_bits()),
            entropy_bits: per(model::entropy_bits(&stats.counts)),
            cross_entropy_bits: per(self.model.cross_entropy_bits(&stats.counts)),
        }
    }

    /// Bits of information in the flushed states: `log2(state / 2^32)` summed over every
    /// coder (a state below `2^32`, only possible in a damaged stream, counts 0).
    fn state_information_bits(&self) -> f64 {
        let mut bits = 0.0;
        for &start in &self.offsets[..self.offsets.len() - 1] {
            let Some(unit) = self
                .stream
                .get(start as usize..start as usize + BLOCK_WORDS)
            else {
                continue;
            };
            for l in 0..LANES {
                let hi = u64::from(unit[interleave(2 * l)]);
                let lo = u64::from(unit[interleave(2 * l + 1)]);
                bits += ((hi << 32 | lo) as f64).log2().max(32.0) - 32.0;
            }
        }
        bits
    }

    /// Bits per element of the whole container (`to_bytes().len() * 8 / (rows * cols)`).
    pub fn bits_per_element(&self) -> f64 {
        self.sizes().bits_per_element()
    }

    /// Bits per element of the payload alone (the data words the coders emitted).
    pub fn payload_bits_per_element(&self) -> f64 {
        self.sizes().payload_bits_per_element()
    }
}

/// The size of a compressed matrix, part by part, in bytes, and the entropy figures of its
/// values (per real element). The parts add up to the container's length.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SizeReport {
    /// Real elements, `rows * cols`.
    pub elements: usize,
    /// Elements coded, padding included.
    pub padded_elements: usize,
    /// The model's precision.
    pub precision: u32,
    /// Data words the coders emitted (the cost of the real elements and the padding).
    pub payload_bytes: usize,
    /// The coders' flushed final states: 64 words per row or stripe.
    pub flushed_state_bytes: usize,
    /// Zero words padding each stream to a multiple of 128 words.
    pub padding_bytes: usize,
    /// The frequency table as stored (256 `u16`).
    pub table_bytes: usize,
    /// The offsets.
    pub offset_bytes: usize,
    /// The container header.
    pub header_bytes: usize,
    /// Information the stream carries, bits per real element: the payload plus what the
    /// flushed states hold beyond their starting value (`log2(state / 2^32)` per coder). It
    /// equals the model's cross-entropy of the coded elements, padding included, up to the
    /// coder's renormalization loss; the payload alone is lower by the states' share.
    pub coded_bits: f64,
    /// Empirical entropy of the real elements, bits per element.
    pub entropy_bits: f64,
    /// Cross-entropy of the real elements under the model, bits per element.
    pub cross_entropy_bits: f64,
}

impl SizeReport {
    /// Bytes of the stream: payload, states and padding.
    pub fn stream_bytes(&self) -> usize {
        self.payload_bytes + self.flushed_state_bytes + self.padding_bytes
    }

    /// Bytes of the whole container.
    pub fn total_bytes(&self) -> usize {
        self.stream_bytes() + self.table_bytes + self.offset_bytes + self.header_bytes
    }

    /// `bytes` in bits per real element.
    pub fn per_element(&self, bytes: usize) -> f64 {
        bytes as f64 * 8.0 / self.elements.max(1) as f64
    }

    /// Bits per real element of the whole container.
    pub fn bits_per_element(&self) -> f64 {
        self.per_element(self.total_bytes())
    }

    /// Bits per real element of the payload.
    pub fn payload_bits_per_element(&self) -> f64 {
        self.per_element(self.payload_bytes)
    }
}

impl std::fmt::Display for SizeReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "P={} entropy {:.4} cross-entropy {:.4} coded {:.4} | bits/element: payload {:.4} \
             states {:.4} padding {:.4} table {:.5} offsets {:.5} header {:.5} total {:.4}",
            self.precision,
            self.entropy_bits,
            self.cross_entropy_bits,
            self.coded_bits,
            self.payload_bits_per_element(),
            self.per_element(self.flushed_state_bytes),
            self.per_element(self.padding_bytes),
            self.per_element(self.table_bytes),
            self.per_element(self.offset_bytes),
            self.per_element(self.header_bytes),
            self.bits_per_element(),
        )
    }
}

/// A header field that must equal what the other fields imply.
pub(crate) fn check_field(field: &'static str, found: u64, expected: u64) -> Result<()> {
    if found == expected {
        Ok(())
    } else {
        Err(AnsError::Header {
            field,
            found,
            expected,
        })
    }
}

/// The offsets' rules: at least two, start at 0, multiples of 128 words, at least 128 words
/// per unit (so increasing), the last equal to the stream length.
pub(crate) fn check_offsets(offsets: &[u32], stream_words: u64) -> Result<()> {
    let err = |index: usize, value: u64, previous: u64, rule: &'static str| AnsError::Offset {
        index,
        value,
        previous,
        stream_words,
        rule,
    };
    let Some(&first) = offsets.first() else {
        return Err(err(0, 0, 0, "there must be at least 2 offsets"));
    };
    if first != 0 {
        return Err(err(0, first.into(), 0, "the first offset must be 0"));
    }
    if offsets.len() < 2 {
        return Err(err(0, 0, 0, "there must be at least 2 offsets"));
    }
    for (i, w) in offsets.windows(2).enumerate() {
        let (prev, cur) = (u64::from(w[0]), u64::from(w[1]));
        if cur % BLOCK_WORDS as u64 != 0 {
            return Err(err(
                i + 1,
                cur,
                prev,
                "offsets must be multiples of 128 words",
            ));
        }
        if cur < prev + BLOCK_WORDS as u64 {
            return Err(err(
                i + 1,
                cur,
                prev,
                "each stream must hold at least 128 words (offsets increase by at least 128)",
            ));
        }
    }
    let last = u64::from(offsets[offsets.len() - 1]);
    if last != stream_words {
        return Err(err(
            offsets.len() - 1,
            last,
            u64::from(offsets[offsets.len() - 2]),
            "the last offset must equal the stream length",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn padded_shapes() {
        assert_eq!(Layout::WarpRows.padded_shape(3, 1).unwrap(), (3, 128));
        assert_eq!(Layout::WarpRows.padded_shape(3, 129).unwrap(), (3, 256));
        assert_eq!(Layout::WarpStripes.padded_shape(33, 5).unwrap(), (64, 8));
        assert_eq!(Layout::WarpStripes.padded_shape(32, 4).unwrap(), (32, 4));
        for l in [Layout::WarpRows, Layout::WarpStripes] {
            assert!(matches!(
                l.padded_shape(0, 5),
                Err(AnsError::Shape { rows: 0, cols: 5 })
            ));
            assert!(l.padded_shape(5, 0).is_err());
            assert!(l.padded_shape(5, u32::MAX as usize).is_err());
            assert!(l.padded_shape(usize::MAX, 1).is_err());
            assert_eq!(Layout::from_code(l.code()).unwrap(), l);
        }
        assert_eq!(
            Layout::WarpRows
                .padded_shape(u32::MAX as usize, 1)
                .unwrap()
                .0,
            u32::MAX as usize
        );
        assert!(
            Layout::WarpStripes
                .padded_shape(u32::MAX as usize, 1)
                .is_err()
        );
        assert!(matches!(
            Layout::from_code(2),
            Err(AnsError::LayoutCode { found: 2 })
        ));
    }

    #[test]
    fn offset_rules() {
        assert!(check_offsets(&[0, 128, 384], 384).is_ok());
        let rule = |o: &[u32], s: u64| match check_offsets(o, s) {
            Err(AnsError::Offset { index, rule, .. }) => (index, rule),
            other => panic!("{other:?}"),
        };
        assert_eq!(rule(&[], 0).0, 0);
        assert_eq!(rule(&[0], 0).0, 0);
        assert!(rule(&[128, 256], 256).1.contains("first"));
        assert!(rule(&[0, 130, 256], 256).1.contains("multiples"));
        assert!(rule(&[0, 0, 128], 128).1.contains("at least 128"));
        assert!(rule(&[0, 256, 128], 128).1.contains("at least 128"));
        assert!(rule(&[0, 128, 256], 384).1.contains("last"));
        assert_eq!(rule(&[0, 128, 256], 384).0, 2);
    }
}

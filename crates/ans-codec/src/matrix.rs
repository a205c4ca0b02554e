//! [`AnsMatrix`], a compressed matrix in memory.

use std::sync::OnceLock;

use ans_kernels::layout::{BLOCK_WORDS, LANES};
use cmv_format::{OffsetRules, PaddedShape, check_field, check_offsets};

use crate::error::Result;
use crate::layout::Layout;
use crate::model::{Model, VALUES};

/// Words of a unit's stream that hold the 32 coders' final states (two per coder).
pub(crate) const STATE_WORDS: usize = 2 * LANES;

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
/// ([`AnsMatrix::validate`]); decoded on the CPU by [`AnsMatrix::decode`]. Its sizes come from
/// [`AnsMatrix::size_breakdown`] (no decode), its entropy figures from
/// [`AnsMatrix::entropy_report`].
#[derive(Clone, Debug)]
pub struct AnsMatrix {
    pub(crate) layout: Layout,
    pub(crate) model: Model,
    pub(crate) shape: PaddedShape,
    pub(crate) offsets: Vec<u32>,
    pub(crate) stream: Vec<u32>,
    /// Known after encoding or loading (a load decodes every unit); else computed by a decode
    /// on first use.
    pub(crate) stats: OnceLock<Stats>,
}

impl PartialEq for AnsMatrix {
    /// Equal when every stored part is (the cached statistics are not compared).
    fn eq(&self, other: &Self) -> bool {
        self.layout == other.layout
            && self.model == other.model
            && self.shape == other.shape
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

    cmv_format::shape_getters!(
        shape,
        "`rows` for `WarpRows`, a multiple of 32 for `WarpStripes`",
        "a multiple of 128 for `WarpRows`, of 4 for `WarpStripes`",
    );

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
    /// The first broken invariant, as [`AnsMatrix::from_bytes`] reports it:
    /// [`AnsError::Precision`](crate::AnsError::Precision),
    /// [`AnsError::FrequencySum`](crate::AnsError::FrequencySum),
    /// [`FormatError::Shape`](cmv_format::FormatError::Shape),
    /// [`FormatError::Header`](cmv_format::FormatError::Header),
    /// [`FormatError::Offset`](cmv_format::FormatError::Offset).
    pub fn validate(&self) -> Result<()> {
        Model::new(self.model.precision(), *self.model.freqs())?;
        let (pr, pc) = self.layout.padded_shape(self.rows(), self.cols())?;
        check_field("padded_rows", self.padded_rows() as u64, pr as u64)?;
        check_field("padded_cols", self.padded_cols() as u64, pc as u64)?;
        let rules = offset_rules(self.layout.units(pr), self.stream.len());
        check_offsets(&self.offsets, &rules)?;
        Ok(())
    }
}

/// The offset rules of a matrix with `units` streams of `stream_words` words in all: `units +
/// 1` offsets, starting at 0, multiples of 128 words, at least 128 words per unit, the last
/// equal to the stream length.
pub(crate) fn offset_rules(units: usize, stream_words: usize) -> OffsetRules {
    OffsetRules {
        table: "stream",
        count: units.saturating_add(1),
        multiple: BLOCK_WORDS as u64,
        min_gap: BLOCK_WORDS as u64,
        words: stream_words as u64,
    }
}

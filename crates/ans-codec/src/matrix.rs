//! [`AnsMatrix`], a compressed matrix in memory.

use std::sync::OnceLock;

use ans_kernels::layout::{BLOCK_WORDS, LANES};
use cmv_format::{OffsetRules, PaddedShape, check_field, check_offsets};

use crate::error::{AnsError, Result};
use crate::lanes::{self, LANE_GROUP, LANE_PRECISION, LaneGeometry, SEGMENT_MULTIPLE};
use crate::layout::Layout;
use crate::model::{Model, VALUES};

/// Words of a unit's stream that hold the 32 coders' final states (two per coder): `u32`
/// words, or 16-bit words for `ans-lanes`.
pub(crate) const STATE_WORDS: usize = 2 * LANES;

/// What the encoder knew (or a decode found out) about a matrix: words of payload per unit
/// and the counts of the real elements.
#[derive(Clone, Debug)]
pub(crate) struct Stats {
    /// Data words (after the 64 state words, before the zero padding) of each unit: `u32`
    /// words, or 16-bit words for `ans-lanes`.
    pub data_words: Vec<u32>,
    /// Occurrences of each value among the real elements (indexed by `model::index`).
    pub counts: [u64; VALUES],
}

/// A compressed int8 matrix: its model, the offsets of its rows' (or stripes', or lane units')
/// streams and the streams, as the kernels load them (`docs/ANS.md`).
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
    /// Columns per unit for `ans-lanes`; `None` for the other layouts.
    pub(crate) segment: Option<usize>,
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
            && self.segment == other.segment
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
        "`rows` for `WarpRows`, a multiple of 32 for `WarpStripes` and `WarpLanes`",
        "a multiple of 128 for `WarpRows`, of 4 for `WarpStripes`, of 16 for `WarpLanes`",
    );

    /// Number of streams: rows for `WarpRows`, stripes of 32 rows for `WarpStripes`, row
    /// groups of 32 rows times segments for `WarpLanes` (unit `u` is row group
    /// `u / segments`, segment `u % segments`).
    pub fn units(&self) -> usize {
        self.offsets.len() - 1
    }

    /// Columns per unit of `ans-lanes` (a multiple of 16, at most the padded columns; the last
    /// segment of a row group may be shorter), `None` for the other layouts.
    pub fn segment(&self) -> Option<usize> {
        self.segment
    }

    /// Column segments per row group: `padded_cols.div_ceil(segment)` for `ans-lanes`, 1 for
    /// the other layouts.
    pub fn segments(&self) -> usize {
        self.segment
            .map_or(1, |s| self.layout.segments(self.shape.padded_cols(), s))
    }

    /// Where the lane units lie (`ans-lanes`), `None` for the other layouts.
    pub(crate) fn lane_geometry(&self) -> Option<LaneGeometry> {
        self.segment
            .map(|s| LaneGeometry::new(self.shape.padded_cols(), s))
    }

    /// The model's precision `P` (7 to 12 bits).
    pub fn precision(&self) -> u32 {
        self.model.precision()
    }

    /// Elements per ANS step: 4 when `P <= 8`, else 2; always 2 (a pair) for `ans-lanes`.
    pub fn group(&self) -> usize {
        match self.layout {
            Layout::WarpLanes | Layout::WarpLanesEsc => LANE_GROUP,
            Layout::WarpRows | Layout::WarpStripes => self.model.group(),
        }
    }

    /// Start of each unit's stream, in `u32` words, and the total at the end (`units + 1`
    /// entries, multiples of 128; of 4 for `ans-lanes`).
    pub fn offsets(&self) -> &[u32] {
        &self.offsets
    }

    /// The streams, as stored: every 128-word block interleaved (`layout::interleave`); for
    /// `ans-lanes`, each unit's 16-bit words two to a `u32`, word `2k` in the low half of `u32`
    /// word `k` and word `2k + 1` in its high half (no interleaving).
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

    /// Checks every in-memory invariant the kernels rely on: precision and group (8 bits for
    /// `ans-lanes`), padded shape, segment (`ans-lanes`: a multiple of 16 from 16 to the padded
    /// columns; none for the other layouts), frequencies, offsets (count, start at 0, multiples
    /// of 128, at least 128 words per unit (`ans-lanes`: multiples of 4, at least 32), increasing,
    /// last equal to the stream length, within `u32`).
    ///
    /// # Errors
    /// The first broken invariant, as [`AnsMatrix::from_bytes`] reports it:
    /// [`AnsError::Precision`](crate::AnsError::Precision),
    /// [`AnsError::FrequencySum`](crate::AnsError::FrequencySum),
    /// [`AnsError::Segment`](crate::AnsError::Segment),
    /// [`FormatError::Shape`](cmv_format::FormatError::Shape),
    /// [`FormatError::Header`](cmv_format::FormatError::Header),
    /// [`FormatError::NonZero`](cmv_format::FormatError::NonZero),
    /// [`FormatError::Offset`](cmv_format::FormatError::Offset).
    pub fn validate(&self) -> Result<()> {
        Model::new(self.model.precision(), *self.model.freqs())?;
        check_lane_precision(self.layout, self.model.precision())?;
        let (pr, pc) = self.layout.padded_shape(self.rows(), self.cols())?;
        check_field("padded_rows", self.padded_rows() as u64, pr as u64)?;
        check_field("padded_cols", self.padded_cols() as u64, pc as u64)?;
        let field = self.segment.map_or(Some(0), |s| u32::try_from(s).ok());
        let segment = check_segment(self.layout, field.unwrap_or(u32::MAX), pc)?;
        let segments = segment.map_or(1, |s| self.layout.segments(pc, s));
        let rules = offset_rules(
            self.layout,
            self.layout.units(pr, segments),
            self.stream.len(),
        );
        check_offsets(&self.offsets, &rules)?;
        Ok(())
    }
}

/// `ans-lanes` codes at 8 bits only: its stored precision must be 8.
///
/// # Errors
/// [`FormatError::Header`](cmv_format::FormatError::Header) (field `precision`) otherwise.
pub(crate) fn check_lane_precision(layout: Layout, precision: u32) -> Result<()> {
    if layout.is_lanes() {
        check_field("precision", precision.into(), LANE_PRECISION.into())?;
    }
    Ok(())
}

/// The container's `group` field for `layout` at `precision`: `layout::group_size(P)`, or 2
/// for `ans-lanes`.
pub(crate) fn group_field(layout: Layout, precision: u32) -> usize {
    match layout {
        Layout::WarpLanes | Layout::WarpLanesEsc => LANE_GROUP,
        Layout::WarpRows | Layout::WarpStripes => ans_kernels::layout::group_size(precision),
    }
}

/// The segment stored in the header field `segment` for `layout`, with `padded_cols` padded
/// columns: `Some(segment)` for `ans-lanes` (a multiple of 16 from 16 to `padded_cols`), `None`
/// for the other layouts, whose field must be zero.
///
/// # Errors
/// [`AnsError::Segment`] for a bad `ans-lanes` segment,
/// [`FormatError::NonZero`](cmv_format::FormatError::NonZero) for a non-zero field of another
/// layout.
pub(crate) fn check_segment(
    layout: Layout,
    segment: u32,
    padded_cols: usize,
) -> Result<Option<usize>> {
    match layout {
        Layout::WarpRows | Layout::WarpStripes if segment != 0 => {
            Err(cmv_format::FormatError::NonZero {
                what: "segment header field (zero for layouts other than ans-lanes)",
                offset: (crate::format::FIELDS_OFFSET
                    + std::mem::offset_of!(crate::format::AnsFields, segment))
                    as u64,
                found: segment.into(),
            }
            .into())
        }
        Layout::WarpRows | Layout::WarpStripes => Ok(None),
        Layout::WarpLanes | Layout::WarpLanesEsc => {
            let s = segment as usize;
            if s >= SEGMENT_MULTIPLE && s.is_multiple_of(SEGMENT_MULTIPLE) && s <= padded_cols {
                Ok(Some(s))
            } else {
                Err(AnsError::Segment {
                    segment,
                    padded_cols,
                })
            }
        }
    }
}

/// The offset rules of a matrix of `layout` with `units` streams of `stream_words` words in
/// all: `units + 1` offsets, starting at 0, multiples of 128 words, at least 128 words per
/// unit (`ans-lanes`: multiples of 4 words, at least 32: the 64 16-bit states), the last equal
/// to the stream length.
pub(crate) fn offset_rules(layout: Layout, units: usize, stream_words: usize) -> OffsetRules {
    let (multiple, min_gap) = match layout {
        Layout::WarpRows | Layout::WarpStripes => (BLOCK_WORDS, BLOCK_WORDS),
        Layout::WarpLanes => (lanes::BLOCK_WORDS, lanes::STATE_WORDS),
        // The states and the exception header word.
        Layout::WarpLanesEsc => (lanes::BLOCK_WORDS, lanes::STATE_WORDS + 1),
    };
    OffsetRules {
        table: "stream",
        count: units.saturating_add(1),
        multiple: multiple as u64,
        min_gap: min_gap as u64,
        words: stream_words as u64,
    }
}

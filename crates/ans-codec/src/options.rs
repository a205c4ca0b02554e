//! [`EncodeOptions`], what the encoder may be told.

use crate::layout::Layout;

/// Options of [`encode`](crate::encode).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct EncodeOptions {
    /// How the matrix is split among coders (default: one warp per row).
    pub layout: Layout,
    /// A forced model precision in `7..=12`, or `None` (the default) to choose the smallest
    /// precision within `max_overhead_bits` of the entropy. `ans-lanes` always codes at 8 bits:
    /// with that layout any other forced precision is
    /// [`AnsError::LanePrecision`](crate::AnsError::LanePrecision).
    pub precision: Option<u32>,
    /// How many bits per element the model's cross-entropy may exceed the empirical entropy
    /// when the precision is chosen automatically (default 0.1, the goal the format is held to).
    pub max_overhead_bits: f64,
    /// `None` (the default): code in `layout` as given. `Some(budget)`: let the encoder choose
    /// the layout ([`EncodeOptions::auto`]): `ans-lanes-esc` (default segment, then longer ones
    /// unless `lane_segment` is given), then `ans-warp-rows`, the first whose
    /// container stays within `budget` bits per element of the values' entropy and within the
    /// int8 limit, else the smaller of `ans-warp-rows` and `ans-warp-stripes`; and never a
    /// container larger than the plain int8 matrix plus [`INT8_ALLOWANCE_BYTES`]
    /// ([`AnsError::Incompressible`](crate::AnsError::Incompressible) otherwise).
    pub layout_budget_bits: Option<f64>,
    /// Columns per unit of `ans-lanes` (used when the layout is, or the encoder tries,
    /// `ans-lanes`; ignored otherwise): `None` (the default) for
    /// [`default_lane_segment`](crate::default_lane_segment), else a positive multiple of 16
    /// ([`AnsError::LaneSegment`](crate::AnsError::LaneSegment) otherwise). A segment larger
    /// than the padded columns (the columns rounded up to a multiple of 16) is clamped to them.
    pub lane_segment: Option<usize>,
}

/// What a container chosen by [`EncodeOptions::auto`] may take beyond the plain int8 matrix
/// (`rows * cols` bytes): the header, the frequency table, offsets and the coders' flushed
/// states of a small matrix.
pub const INT8_ALLOWANCE_BYTES: usize = 4096;

impl EncodeOptions {
    /// The encoder chooses the layout, in this order: `ans-lanes-esc` (the fastest kernel from
    /// 4096 x 4096 on, docs/PERF.md) with its default segment, then with segments twice as
    /// long (fewer flushed states, a slower kernel) up to the row's length, then
    /// `ans-warp-rows`: the first whose container is within `budget_bits` bits per element of
    /// the entropy and no larger than the int8 matrix plus [`INT8_ALLOWANCE_BYTES`];
    /// else the smaller of `ans-warp-rows` and `ans-warp-stripes`, never larger than that
    /// limit. `ans-lanes` is skipped when it cannot code the matrix (a forced precision other
    /// than 8 bits). `ans-lanes-esc` is `ans-lanes` with the rare values escaped, at least
    /// as small but for one word per unit. The layout chosen is recorded in the container
    /// ([`AnsMatrix::layout`](crate::AnsMatrix::layout)).
    pub fn auto(budget_bits: f64) -> Self {
        Self {
            layout_budget_bits: Some(budget_bits),
            ..Self::default()
        }
    }
}

impl Default for EncodeOptions {
    fn default() -> Self {
        Self {
            layout: Layout::WarpRows,
            precision: None,
            max_overhead_bits: 0.1,
            layout_budget_bits: None,
            lane_segment: None,
        }
    }
}

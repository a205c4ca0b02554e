//! [`EncodeOptions`], what the encoder may be told.

use crate::layout::Layout;

/// Options of [`encode`](crate::encode).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct EncodeOptions {
    /// How the matrix is split among coders (default: one warp per row).
    pub layout: Layout,
    /// A forced model precision in `7..=12`, or `None` (the default) to choose the smallest
    /// precision within `max_overhead_bits` of the entropy.
    pub precision: Option<u32>,
    /// How many bits per element the model's cross-entropy may exceed the empirical entropy
    /// when the precision is chosen automatically (default 0.1, the goal the format is held to).
    pub max_overhead_bits: f64,
    /// `None` (the default): code in `layout` as given. `Some(budget)`: let the encoder choose
    /// the layout ([`EncodeOptions::auto`]): the fast `ans-warp-rows` when its container stays
    /// within `budget` bits per element of the values' entropy, else the smaller of
    /// `ans-warp-rows` and `ans-warp-stripes`; and never a container larger than the plain
    /// int8 matrix plus [`INT8_ALLOWANCE_BYTES`] ([`AnsError::Incompressible`](crate::AnsError::Incompressible)
    /// otherwise).
    pub layout_budget_bits: Option<f64>,
}

/// What a container chosen by [`EncodeOptions::auto`] may take beyond the plain int8 matrix
/// (`rows * cols` bytes): the header, the frequency table, offsets and the coders' flushed
/// states of a small matrix.
pub const INT8_ALLOWANCE_BYTES: usize = 4096;

impl EncodeOptions {
    /// The encoder chooses the layout: `ans-warp-rows` (the fast kernels) while its container
    /// is within `budget_bits` bits per element of the entropy, else the smaller layout, never
    /// larger than the int8 matrix plus [`INT8_ALLOWANCE_BYTES`]. The layout chosen is recorded
    /// in the container ([`AnsMatrix::layout`](crate::AnsMatrix::layout)).
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
        }
    }
}

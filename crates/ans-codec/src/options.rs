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
}

impl Default for EncodeOptions {
    fn default() -> Self {
        Self {
            layout: Layout::WarpRows,
            precision: None,
            max_overhead_bits: 0.1,
        }
    }
}

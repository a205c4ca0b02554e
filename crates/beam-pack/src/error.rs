//! [`BeamError`]: the BEAM format's errors.

use cmv_format::FormatError;

/// What can go wrong packing or loading a BEAM matrix: the shared [`FormatError`]s (shapes,
/// lengths, containers, limits) and BEAM's own (widths, values wider than the width).
#[derive(Debug, thiserror::Error)]
pub enum BeamError {
    /// A shared format error.
    #[error(transparent)]
    Format(#[from] FormatError),
    /// A width outside 1..=64 bits.
    #[error("width {bits} bits is not supported: BEAM packs widths from 1 to 64 bits; pick one")]
    Width {
        /// The width asked for.
        bits: u32,
    },
    /// A value that needs more bits than the width: it is refused, never truncated.
    #[error(
        "value {value} at element {index} (row {row}, column {col}) needs {needed} bits but the \
         width is {bits}: pack with at least {needed} bits (or use pack_min_width)"
    )]
    ValueTooWide {
        /// Flat row-major index.
        index: usize,
        /// Its row.
        row: usize,
        /// Its column.
        col: usize,
        /// The value.
        value: u64,
        /// The width asked for.
        bits: u32,
        /// The bits the value needs.
        needed: u32,
    },
    /// `A x B` with `A`'s columns different from `B`'s rows.
    #[error(
        "cannot multiply A ({a_rows} x {a_cols}) by B ({b_rows} x {b_cols}): A's columns must \
         equal B's rows"
    )]
    GemmShape {
        /// Rows of A.
        a_rows: usize,
        /// Columns of A.
        a_cols: usize,
        /// Rows of B.
        b_rows: usize,
        /// Columns of B.
        b_cols: usize,
    },
    /// A GPU kernel asked for operands or an output it does not take.
    #[error("the {kernel} kernel cannot run this product: {reason}")]
    Kernel {
        /// The kernel's name.
        kernel: &'static str,
        /// What it needs, and what to do.
        reason: String,
    },
    /// A gemv with too many vectors.
    #[error("gemv takes B with 1 to 16 columns, got {cols}: use gemm_reference")]
    GemvColumns {
        /// Columns of B.
        cols: usize,
    },
}

#[cfg(feature = "gpu")]
impl From<cmv_runtime::RuntimeError> for BeamError {
    fn from(e: cmv_runtime::RuntimeError) -> Self {
        BeamError::Format(FormatError::Runtime(e))
    }
}

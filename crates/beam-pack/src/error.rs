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
}
